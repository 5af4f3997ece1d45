// The seqattn executable end to end: inputs are written from the test, the binary (path from
// the build, SEQATTN_CLI_PATH) is run, and its files, output and exit code are checked.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "seqattn/attention.hpp"
#include "seqattn/half.hpp"
#include "seqattn/policy.hpp"
#include "src/cli/npy.hpp"
#include "src/kernel/decode/prefetch_level.hpp"
#include "tests/cli/cli_fixture.hpp"
#include "tests/support/sanitizers.hpp"
#include "tests/support/temp_dir_test.hpp"

namespace seqattn {
namespace {

// The document's numbers in double: X, the projections, softmax(Q Kᵀ/√2) and its product with V.
struct Expected {
  double out[3][2], weights[3][3], lse[3];
};

Expected document_expected() {
  const double x[3][2] = {{1, 0}, {1, 1}, {0.1, 1}};
  double q[3][2], k[3][2], v[3][2];
  for (int i = 0; i < 3; ++i) {
    q[i][0] = x[i][0];  // W_Q = I
    q[i][1] = x[i][1];
    k[i][0] = k[i][1] = x[i][0] + x[i][1];  // W_K = all ones
    v[i][0] = x[i][0] + x[i][1];            // W_V = [[1, 0], [1, 1]]
    v[i][1] = x[i][1];
  }
  Expected e{};
  for (int i = 0; i < 3; ++i) {
    double s[3], m = -1e300, sum = 0;
    for (int j = 0; j < 3; ++j) {
      s[j] = (q[i][0] * k[j][0] + q[i][1] * k[j][1]) / std::sqrt(2.0);
      m = std::max(m, s[j]);
    }
    for (double& score : s) sum += (score = std::exp(score - m));
    e.lse[i] = m + std::log(sum);
    for (int j = 0; j < 3; ++j) e.weights[i][j] = s[j] / sum;
    for (int d = 0; d < 2; ++d) {
      for (int j = 0; j < 3; ++j) e.out[i][d] += e.weights[i][j] * v[j][d];
    }
  }
  return e;
}

TEST_F(CliTest, RunReproducesTheDocumentExample) {
  write_document_example();
  const Result r = run("run --q " + path("q.npy") + " --k " + path("k.npy") + " --v " +
                       path("v.npy") + " --out " + path("out.npy") + " --weights " + path("w.npy") +
                       " --lse " + path("lse.npy"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("dense"), std::string::npos) << r.err;

  const Expected e = document_expected();
  const npy::Array out = npy::load(path("out.npy"), "out");
  const npy::Array w = npy::load(path("w.npy"), "weights");
  const npy::Array lse = npy::load(path("lse.npy"), "lse");
  ASSERT_EQ(out.shape, (std::vector<std::int64_t>{3, 2}));
  ASSERT_EQ(w.shape, (std::vector<std::int64_t>{3, 3}));
  ASSERT_EQ(lse.shape, (std::vector<std::int64_t>{3}));
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(lse.data[i], e.lse[i], 1e-4);
    for (int d = 0; d < 2; ++d) EXPECT_NEAR(out.data[i * 2 + d], e.out[i][d], 1e-4) << "row " << i;
    for (int j = 0; j < 3; ++j) EXPECT_NEAR(w.data[i * 3 + j], e.weights[i][j], 1e-4);
  }
  // The document prints the weights rounded to 4 places: first row 0.2438 0.4945 0.2617.
  EXPECT_NEAR(w.data[0], 0.2438, 1e-4);
  EXPECT_NEAR(out.data[0], 1.5207, 1e-4);
}

TEST_F(CliTest, RunJsonPrintsTheRunRecord) {
  write_document_example();
  const Result r = run("run --json --threads 1 --q " + path("q.npy") + " --k " + path("k.npy") +
                       " --v " + path("v.npy") + " --out " + path("out.npy"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  for (const char* key : {"variant", "reason", "ms", "gflops", "flops", "threads", "simd_target"}) {
    EXPECT_TRUE(j.contains(key)) << key << " missing in " << r.out;
  }
  EXPECT_EQ(j["variant"], "dense");
  EXPECT_EQ(j["threads"], 1);
  EXPECT_EQ(j["reason"], "requested explicitly");
}

TEST_F(CliTest, BshdLayoutMatchesBhsd) {
  // [B=1, H=2, S=3, D=2] in BHSD and the same numbers transposed to [B, S, H, D].
  std::vector<float> bhsd(12), bshd(12);
  for (int i = 0; i < 12; ++i) bhsd[i] = std::sin(1.7f * i);
  for (int h = 0; h < 2; ++h) {
    for (int s = 0; s < 3; ++s) {
      for (int d = 0; d < 2; ++d) bshd[(s * 2 + h) * 2 + d] = bhsd[(h * 3 + s) * 2 + d];
    }
  }
  save("a.npy", {1, 2, 3, 2}, bhsd);
  save("b.npy", {1, 3, 2, 2}, bshd);
  const std::string a = path("a.npy"), b = path("b.npy");
  ASSERT_EQ(run("run --q " + a + " --k " + a + " --v " + a + " --out " + path("oa.npy")).exit_code,
            0);
  ASSERT_EQ(
      run("run --layout bshd --q " + b + " --k " + b + " --v " + b + " --out " + path("ob.npy"))
          .exit_code,
      0);
  const npy::Array oa = npy::load(path("oa.npy"), "oa"), ob = npy::load(path("ob.npy"), "ob");
  ASSERT_EQ(ob.shape, (std::vector<std::int64_t>{1, 3, 2, 2}));
  for (int h = 0; h < 2; ++h) {
    for (int s = 0; s < 3; ++s) {
      for (int d = 0; d < 2; ++d) {
        EXPECT_FLOAT_EQ(ob.data[(s * 2 + h) * 2 + d], oa.data[(h * 3 + s) * 2 + d]);
      }
    }
  }
}

TEST_F(CliTest, BadInputFilesFailCleanlyWithoutOutput) {
  write_document_example();
  const std::string eight(8, '\0');
  auto raw = [&](const std::string& name, const std::string& dict, const std::string& data) {
    const std::string header = dict + "\n";
    std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
    bytes += static_cast<char>(header.size() & 0xff);
    bytes += static_cast<char>(header.size() >> 8);
    std::ofstream(path(name), std::ios::binary) << bytes + header + data;
  };
  std::ofstream(path("magic.npy")) << "not an npy file";
  raw("dtype.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 1), }", eight);
  raw("fortran.npy", "{'descr': '<f4', 'fortran_order': True, 'shape': (1, 2), }", eight);
  raw("rank3.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 2), }", eight);
  raw("short.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }", eight);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"magic.npy", "bad magic"}, {"dtype.npy", "'<f8'"},     {"fortran.npy", "Fortran"},
      {"rank3.npy", "rank 3"},    {"short.npy", "truncated"}, {"missing.npy", "No such file"}};
  for (const auto& [file, phrase] : cases) {
    const Result r =
        run("run --q " + path(file) + " --k " + path("k.npy") + " --v " + path("v.npy") +
            " --out " + path("out.npy") + " --weights " + path("w.npy"));
    EXPECT_EQ(r.exit_code, 2) << file;
    EXPECT_NE(r.err.find("'--q'"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(phrase), std::string::npos) << file << ": " << r.err;
    EXPECT_EQ(r.err.find("terminate"), std::string::npos) << r.err;
    EXPECT_FALSE(exists("out.npy")) << file;
    EXPECT_FALSE(exists("w.npy")) << file;
  }
  for (const std::string& name : entries()) EXPECT_NE(name[0], '.') << "left a temporary " << name;
}

TEST_F(CliTest, BadOptionsFailWithoutOutput) {
  write_document_example();
  const std::string io = " --q " + path("q.npy") + " --k " + path("k.npy") + " --v " +
                         path("v.npy") + " --out " + path("out.npy");
  Result r = run("run --variant dense --window 2" + io);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unsupported option '--window'"), std::string::npos) << r.err;
  r = run("run --variant nonsense" + io);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("'--variant'"), std::string::npos) << r.err;
  r = run("run --key-lengths 9" + io);  // more keys than S_k = 3
  EXPECT_EQ(r.exit_code, 2) << r.err;
  r = run("run --out " + path("out.npy"));  // missing required inputs: CLI11's message
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--q"), std::string::npos) << r.err;
  r = run("run --weights " + dir_ + "/no/dir/w.npy" + io);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("'--weights'"), std::string::npos) << r.err;
  EXPECT_FALSE(exists("out.npy")) << "no output when another output cannot be written";
}

// The report's sizes are checked before anything runs: each bad one names its flag, no
// section starts (no progress line) and the output directory is not created.
TEST_F(CliTest, BadReportSizesFailWithoutOutput) {
  for (const std::string bad :
       {"--paged-batch 0", "--half-seqs 256,0", "--decode-seqs 0", "--dim 0", "--ring-seq 2"}) {
    const Result r = run("report --seqs 64 " + bad + " --out-dir " + path("report"));
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.err;
    EXPECT_NE(r.err.find(bad.substr(0, bad.find(' '))), std::string::npos) << bad << ": " << r.err;
    EXPECT_EQ(r.err.find("report ["), std::string::npos) << bad << ": the sweep ran";
    EXPECT_EQ(r.err.find("report decode"), std::string::npos) << bad << ": decode ran";
    EXPECT_EQ(r.err.find("report dense"), std::string::npos) << bad << ": half rows ran";
    EXPECT_FALSE(exists("report")) << bad;
  }
}

// The parameter flags come from the variant table: each reaches the variants that take it and
// is refused by the others, naming the flag.
TEST_F(CliTest, ParameterFlagsFollowTheVariantTable) {
  write_document_example();
  const std::string io = " --q " + path("q.npy") + " --k " + path("k.npy") + " --v " +
                         path("v.npy") + " --out " + path("out.npy");
  for (const std::string bad :
       {"--variant auto --block 8", "--variant linear --features 4",
        "--variant sliding-window --window 1 2", "--variant hierarchical --levels x",
        "--variant dense --epsilon 0"}) {
    const Result r = run("run " + bad + io);
    EXPECT_EQ(r.exit_code, 2) << bad;
    const std::string flag =
        bad.substr(bad.rfind("--"), bad.find(' ', bad.rfind("--")) - bad.rfind("--"));
    const std::string parameter = flag.substr(2);
    EXPECT_TRUE(r.err.find(flag) != std::string::npos || r.err.find(parameter) != std::string::npos)
        << bad << ": " << r.err;
    EXPECT_FALSE(exists("out.npy")) << bad;
  }
  Result r = run("run --variant sliding-window --window 1 --global 0 2 --json" + io);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = run("run --variant linear --feature-map relu --epsilon 1e-3 --json" + io);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // auto: --window reaches the policy's sliding-window rule.
  r = run("run --variant auto --dense-max-seq 0 --window 1 --json" + io);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("window 1+1"), std::string::npos) << r.out;
}

// --rotations gives LSH attention its R from a file, in either accepted shape: the seed's own
// rotations written out reproduce the seeded run bit for bit; a file that does not fit is an
// error naming it, with no output written.
TEST_F(CliTest, LshRotationsComeFromAnNpyFile) {
  const std::int64_t s = 40, d = 8, hashes = 2, buckets = 6;
  std::vector<float> x(static_cast<size_t>(s * d));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.7f * static_cast<float>(i * i % 97));
  save("q.npy", {1, 1, s, d}, x);
  save("v.npy", {1, 1, s, d}, std::vector<float>(x.rbegin(), x.rend()));
  const std::vector<float> r = lsh_random_rotations(hashes, d, buckets, 5);
  save("r3.npy", {hashes, d, buckets / 2}, r);
  save("r2.npy", {hashes * d, buckets / 2}, r);
  save("bad.npy", {hashes * d + 1, buckets / 2}, std::vector<float>(r.size() + 3, 1.0f));
  const std::string io = " --q " + path("q.npy") + " --k " + path("q.npy") + " --v " +
                         path("v.npy") + " --variant lsh --chunk-length 4";
  Result seeded = run("run" + io + " --hashes 2 --buckets 6 --seed 5 --out " + path("seeded.npy"));
  ASSERT_EQ(seeded.exit_code, 0) << seeded.err;
  for (const char* file : {"r3.npy", "r2.npy"}) {
    const Result given = run("run" + io + " --hashes 2 --rotations " + path(file) + " --out " +
                             path(std::string("given_") + file));
    ASSERT_EQ(given.exit_code, 0) << given.err;
    EXPECT_EQ(read(path("seeded.npy")), read(path(std::string("given_") + file))) << file;
  }
  Result bad =
      run("run" + io + " --hashes 2 --rotations " + path("bad.npy") + " --out " + path("o.npy"));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("lsh.rotations"), std::string::npos) << bad.err;
  bad = run("run" + io + " --hashes 3 --rotations " + path("r3.npy") + " --out " + path("o.npy"));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--rotations"), std::string::npos) << bad.err;
  bad = run("run --variant dense --rotations " + path("r2.npy") + " --q " + path("q.npy") +
            " --k " + path("q.npy") + " --v " + path("v.npy") + " --out " + path("o.npy"));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--rotations"), std::string::npos) << bad.err;
  EXPECT_FALSE(exists("o.npy"));
}

TEST_F(CliTest, MhaReproducesTheDocumentExample) {
  save("x.npy", {3, 2}, {1, 0, 1, 1, 0.1f, 1});
  save("wq.npy", {2, 2}, {1, 0, 0, 1});
  save("wk.npy", {2, 2}, {1, 1, 1, 1});
  save("wv.npy", {2, 2}, {1, 0, 1, 1});
  save("wo.npy", {2, 2}, {1, 0, 0, 1});
  const std::string w = " --x " + path("x.npy") + " --wq " + path("wq.npy") + " --wk " +
                        path("wk.npy") + " --wv " + path("wv.npy") + " --heads 1";
  Result r = run("mha" + w + " --wo " + path("wo.npy") + " --out " + path("o1.npy") +
                 " --weights " + path("a.npy"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run("mha --json" + w + " --out " + path("o2.npy"));  // no W_O: concat(heads)
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(nlohmann::json::parse(r.out).contains("projection_ms")) << r.out;
  const Expected e = document_expected();
  const npy::Array a = npy::load(path("a.npy"), "weights");
  ASSERT_EQ(a.shape, (std::vector<std::int64_t>{1, 1, 3, 3}));
  for (const char* name : {"o1.npy", "o2.npy"}) {
    const npy::Array out = npy::load(path(name), name);
    ASSERT_EQ(out.shape, (std::vector<std::int64_t>{3, 2}));
    for (int i = 0; i < 3; ++i) {
      for (int d = 0; d < 2; ++d) EXPECT_NEAR(out.data[i * 2 + d], e.out[i][d], 1e-4) << name;
      for (int j = 0; j < 3; ++j) EXPECT_NEAR(a.data[i * 3 + j], e.weights[i][j], 1e-4);
    }
  }
  r = run("mha" + w + " --bias-q " + path("wq.npy") + " --out " + path("o3.npy"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("bias"), std::string::npos) << r.err;
  EXPECT_FALSE(exists("o3.npy"));
}

// --fp32-precision on run, bench and mha: bf16 rounds fp32 q/k/v (here the values of three
// tokens, 1.1 and 0.3 of which are not bf16 numbers) and the record names the compute path.
TEST_F(CliTest, Fp32PrecisionRoundsAndTheRecordNamesThePath) {
  save("q.npy", {3, 2}, {1.1f, 0.3f, -0.7f, 1.0f, 0.5f, 2.0f});
  save("k.npy", {3, 2}, {0.3f, 1.1f, 1.0f, -1.3f, 0.1f, 0.25f});
  save("v.npy", {3, 2}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f});
  save("qr.npy", {3, 2}, {1.1015625f, 0.30078125f, -0.69921875f, 1.0f, 0.5f, 2.0f});
  save("kr.npy", {3, 2}, {0.30078125f, 1.1015625f, 1.0f, -1.296875f, 0.10009765625f, 0.25f});
  const std::string kv = " --v " + path("v.npy");
  Result r = run("run --json --fp32-precision bf16 --q " + path("q.npy") + " --k " + path("k.npy") +
                 kv + " --out " + path("o_bf16.npy"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["compute_path"], bf16_compute_path().path) << r.out;
  r = run("run --json --q " + path("qr.npy") + " --k " + path("kr.npy") + kv + " --out " +
          path("o_rounded.npy"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["compute_path"], "fp32") << r.out;
  const npy::Array got = npy::load(path("o_bf16.npy"), "got");
  const npy::Array want = npy::load(path("o_rounded.npy"), "want");
  EXPECT_EQ(got.data, want.data);

  r = run("run --fp32-precision tf32 --q " + path("q.npy") + " --k " + path("k.npy") + kv +
          " --out " + path("o_bad.npy"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("'--fp32-precision'"), std::string::npos) << r.err;
  EXPECT_FALSE(exists("o_bad.npy"));

  r = run("bench --json --fp32-precision bf16 --heads 2 --seq 40 --dim 16 --repeat 1 --warmup 0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["compute_path"], bf16_compute_path().path) << r.out;
  save("w.npy", {2, 2}, {1.1f, 0.3f, -0.7f, 1.0f});
  r = run("mha --json --fp32-precision bf16 --x " + path("q.npy") + " --wq " + path("w.npy") +
          " --wk " + path("w.npy") + " --wv " + path("w.npy") + " --heads 1 --out " +
          path("o_mha.npy"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["compute_path"], bf16_compute_path().path) << r.out;
  EXPECT_EQ(j["projection_path"], "fp32") << r.out;
}

// f16 files ('<f2') give an f16 output; --dtype bf16 reads '<u2' as bfloat16 bits and writes
// '<u2'; both agree with the f32 run to their precision. Bad dtypes fail without output.
TEST_F(CliTest, RunReadsAndWritesHalfPrecisionFiles) {
  write_document_example();
  ASSERT_EQ(run("run --q " + path("q.npy") + " --k " + path("k.npy") + " --v " + path("v.npy") +
                " --out " + path("out.npy"))
                .exit_code,
            0);
  const npy::Array ref = npy::load(path("out.npy"), "out");
  for (const DType dtype : {DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(std::string(to_string(dtype)));
    for (const char* name : {"q", "k", "v"}) {
      const npy::Array a = npy::load(path(std::string(name) + ".npy"), name);
      std::vector<std::uint16_t> bits;
      for (const float x : a.data)
        bits.push_back(dtype == DType::kF16 ? float16(x).bits : bfloat16(x).bits);
      npy::write_file_atomically(path(std::string(name) + "16.npy"),
                                 npy::encode(a.shape, dtype, bits.data()), "test");
    }
    const std::string flag = dtype == DType::kBF16 ? " --dtype bf16" : "";
    const Result r = run("run --q " + path("q16.npy") + " --k " + path("k16.npy") + " --v " +
                         path("v16.npy") + " --out " + path("out16.npy") + flag);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const npy::Array out = npy::load(path("out16.npy"), "out", dtype == DType::kBF16);
    ASSERT_EQ(out.dtype, dtype);
    ASSERT_EQ(out.shape, ref.shape);
    for (std::size_t i = 0; i < ref.data.size(); ++i) {
      const float x = dtype == DType::kF16 ? static_cast<float>(float16::from_bits(out.bits[i]))
                                           : static_cast<float>(bfloat16::from_bits(out.bits[i]));
      EXPECT_NEAR(x, ref.data[i], (dtype == DType::kF16 ? 2e-3 : 1.6e-2) * 2.0) << i;
    }
    std::remove(path("out16.npy").c_str());
  }
  // '<u2' without --dtype bf16, and an unknown --dtype: errors naming the argument, no output.
  Result r = run("run --q " + path("q16.npy") + " --k " + path("k16.npy") + " --v " +
                 path("v16.npy") + " --out " + path("out16.npy"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("'--q'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--dtype bf16"), std::string::npos) << r.err;
  r = run("run --q " + path("q.npy") + " --k " + path("k.npy") + " --v " + path("v.npy") +
          " --out " + path("out16.npy") + " --dtype fp8");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("'--dtype'"), std::string::npos) << r.err;
  EXPECT_FALSE(exists("out16.npy"));
  // An empty --dtype is refused too (it used to be taken for "not given": q's dtype).
  r = run("run --q " + path("q.npy") + " --k " + path("k.npy") + " --v " + path("v.npy") +
          " --out " + path("out16.npy") + " --dtype ''");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("'--dtype'"), std::string::npos) << r.err;
  EXPECT_FALSE(exists("out16.npy"));
}

// Output paths are checked before anything is computed, two outputs may not share a file, and
// a failure changes no existing file; a huge --threads is clamped, not fatal.
TEST_F(CliTest, OutputsAreAllOrNothingAndThreadsAreClamped) {
  write_document_example();
  const std::string inputs =
      "run --q " + path("q.npy") + " --k " + path("k.npy") + " --v " + path("v.npy");
  const std::string old_out = "previous contents";
  std::ofstream(path("o.npy"), std::ios::binary) << old_out;
  ::mkdir(path("dir.npy").c_str(), 0700);
  Result r = run(inputs + " --out " + path("o.npy") + " --weights " + path("dir.npy"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("'--weights'"), std::string::npos) << r.err;
  EXPECT_EQ(read(path("o.npy")), old_out);
  r = run(inputs + " --out " + path("o.npy") + " --lse " + dir_ + "/./o.npy");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("'--lse'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("different from --out"), std::string::npos) << r.err;
  EXPECT_EQ(read(path("o.npy")), old_out);
  r = run(inputs + " --out " + path("missing/o.npy"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("'--out'"), std::string::npos) << r.err;
  // Nothing staged is left behind in the directory.
  for (const std::string& name : entries())
    EXPECT_EQ(name.find(".tmp."), std::string::npos) << name;
  r = run(inputs + " --out " + path("o.npy") + " --threads 100000 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_LE(j["threads"].get<int>(), 4 * 4096);
  EXPECT_EQ(npy::load(path("o.npy"), "out").shape, (std::vector<std::int64_t>{3, 2}));
}

// fuzz_cli, 2aeb110 (the input was regression-out-equals-value): `--out=-xnpy` names the file
// -xnpy in the working directory, and run writes exactly that (CLI11's --option=value form),
// which the fuzzer's oracle had taken for a stray file. Every output given as --flag=value is
// written where it says, and nothing else appears.
TEST_F(CliTest, OptionEqualsValueNamesTheFileItWrites) {
  write_document_example();
  const std::string command = "cd '" + dir_ + "' && '" + SEQATTN_CLI_PATH +
                              "' run --q q.npy --k=k.npy --v v.npy --out=-xnpy --lse=l.npy "
                              ">/dev/null 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0);
  EXPECT_EQ(npy::load(path("-xnpy"), "out").shape, (std::vector<std::int64_t>{3, 2}));
  EXPECT_EQ(npy::load(path("l.npy"), "lse").shape, (std::vector<std::int64_t>{3}));
  std::vector<std::string> names = entries();
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"-xnpy", "k.npy", "l.npy", "q.npy", "v.npy"}));
}

// The decode lengths are 512 and 1024: the paged section (32 sequences over 512 .. the longest)
// filled with 2048 took 18 s of the test's 28 under ASan, 55 s beside the other tests. With
// 1024 the paged rows were still 14 of its 30 s, and the dense half rows at S = 4096 another 3:
// 4 sequences and S = 256, 512 run the same code.
TEST_F(CliTest, ReportWritesJsonMarkdownAndPng) {
  const Result r =
      run("report --seqs 64,128 --threads-list 1 --heads 1 --dim 16 --decode-seqs 512,1024 "
          "--paged-batch 4 --half-seqs 256,512 --ring-seq 64 --out-dir " +
          path("report"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(read(path("report/scaling.json")));
  const auto variants = j["meta"]["variants"].get<std::vector<std::string>>();
  ASSERT_FALSE(variants.empty());
  EXPECT_EQ(variants.front(), "dense");
  for (const std::string& v : variants) {
    for (const int seq : {64, 128}) {
      int rows = 0;
      for (const auto& p : j["points"]) {
        if (p["variant"] == v && p["seq"] == seq && p["threads"] == 1) {
          ++rows;
          EXPECT_EQ(p["status"], "measured");
          EXPECT_GT(p["median_ms"].get<double>(), 0.0);
          if (v != "dense") {
            EXPECT_TRUE(p["relative_error"].is_number()) << v;
          }
        }
      }
      EXPECT_EQ(rows, 1) << v << " S=" << seq;
    }
  }
  EXPECT_EQ(j["fits"].size(), variants.size());
  EXPECT_NE(j["fits"][0]["label"].get<std::string>().find("O(N^"), std::string::npos);
  ASSERT_TRUE(j.contains("decode"));
  const nlohmann::json& decode = j["decode"];
  EXPECT_EQ(decode["seq_q"], 1);
  EXPECT_EQ(decode["kv_heads"], 8);
  // S_k = 512, 1024 × f32, bf16, f16, i8 caches × 1 and 2 threads. Every decode and paged row
  // says what the kernel prefetched: the CLI process's one choice (the CPU's row of the table,
  // or SEQATTN_DECODE_PREFETCH as ctest left it).
  ASSERT_EQ(decode["points"].size(), 16u);
  const nlohmann::json level = decode["points"][0]["decode_prefetch"];
  EXPECT_EQ(level, seqattn::detail::to_string(seqattn::detail::choose_decode_prefetch(
                       std::getenv(seqattn::detail::kDecodePrefetchEnv),
                       seqattn::detail::cpu_features())));
  for (const auto& p : decode["points"]) {
    EXPECT_EQ(p["decode_prefetch"], level) << p;
    EXPECT_GT(p["median_ms"].get<double>(), 0.0);
    EXPECT_GT(p["kv_gbps"].get<double>(), 0.0);
    EXPECT_TRUE(p["percent_of_bandwidth"].is_number());
  }
  EXPECT_EQ(decode["points"][0]["kv_dtype"], "f32");
  EXPECT_EQ(decode["points"][0]["kv_mb"].get<double>(), 4.0 * 8 * 512 * 256 / 1048576.0);
  EXPECT_EQ(decode["points"][2]["kv_dtype"], "bf16");
  EXPECT_EQ(decode["points"][2]["kv_mb"].get<double>(), 2.0 * 8 * 512 * 256 / 1048576.0);
  // int8: a byte an element plus a 4-byte scale per token and kv head for K and for V.
  EXPECT_EQ(decode["points"][6]["kv_dtype"], "i8");
  EXPECT_EQ(decode["points"][6]["kv_mb"].get<double>(), 8.0 * 512 * (256 + 8) / 1048576.0);
  // Batched paged decode: bf16 and i8 pools of 4 sequences over 512..1024 (the longest decode
  // length), two threads, each with its read probe.
  ASSERT_EQ(decode["paged"].size(), 2u);
  EXPECT_EQ(decode["paged"][0]["kv_dtype"], "bf16");
  EXPECT_EQ(decode["paged"][1]["kv_dtype"], "i8");
  for (const auto& p : decode["paged"]) {
    EXPECT_EQ(p["decode_prefetch"], level) << p;
    EXPECT_EQ(p["sequences"], 4);
    EXPECT_EQ(p["min_len"], 512);
    EXPECT_EQ(p["max_len"], 1024);
    EXPECT_GT(p["kv_gbps"].get<double>(), 0.0);
    EXPECT_GT(p["probe_gbps"].get<double>(), 0.0);
  }
  // Ring attention: strong (S = 64) and weak (16 per process) scaling, non-causal and causal,
  // P = 1, 2, 4 through mpirun; or, in a build without MPI, the reason it is skipped.
  ASSERT_TRUE(j.contains("ring"));
  if (j["ring"]["skipped"].get<std::string>().empty()) {
    ASSERT_EQ(j["ring"]["runs"].size(), 12u) << j["ring"];
    for (const auto& run : j["ring"]["runs"]) {
      EXPECT_GT(run["median_ms"].get<double>(), 0.0) << run;
      EXPECT_EQ(run["seq"].get<int>(),
                run["scaling"] == "strong" ? 64 : 16 * run["ranks"].get<int>());
    }
  } else {
    EXPECT_NE(j["ring"]["skipped"].get<std::string>().find("MPI"), std::string::npos);
    EXPECT_TRUE(j["ring"]["runs"].empty());
  }
  // Every approximate variant on every input family at every S; sliding window is exact while
  // S <= 2·window + 1 (window 256), whatever the inputs.
  ASSERT_TRUE(j.contains("accuracy_by_family"));
  for (const std::string family : {"uniform", "decaying", "anchors", "lowrank"}) {
    int found = 0;
    for (const auto& p : j["accuracy_by_family"]) {
      if (p["family"] != family) continue;
      ++found;
      ASSERT_TRUE(p["relative_error"].is_number()) << p;
      if (p["variant"] == "sliding-window") {
        EXPECT_LE(p["relative_error"].get<double>(), 1e-5) << p;
      }
    }
    EXPECT_EQ(found, 2 * (static_cast<int>(variants.size()) - 1)) << family;
  }
  ASSERT_TRUE(j.contains("half_precision"));
  const nlohmann::json& half = j["half_precision"]["points"];
  // S = 256, 512 (--half-seqs) × f32, bf16, f16, f32 under fp32_precision = bf16, at 1 thread
  ASSERT_EQ(half.size(), 8u);
  EXPECT_EQ(half[0]["seq"], 256);
  EXPECT_EQ(half[7]["seq"], 512);
  const nlohmann::json& hp = j["half_precision"];
  for (const auto& p : half) {
    // Dense, non-causal, D_v = D: 4·B·H·S²·D FLOPs over the median time.
    const double s = p["seq"].get<double>();
    const double flops = 4.0 * hp["batch"].get<double>() * hp["heads"].get<double>() * s * s *
                         hp["dim"].get<double>();
    const double median_seconds = p["median_ms"].get<double>() * 1e-3;
    ASSERT_GT(median_seconds, 0.0) << p;
    EXPECT_NEAR(p["gflops"].get<double>(), flops / median_seconds * 1e-9,
                1e-12 * p["gflops"].get<double>())
        << p;
    const bool bf16 = p["dtype"] == "bf16" || p["fp32_precision"] == "bf16";
    EXPECT_EQ(p["compute_path"], bf16 ? bf16_compute_path().path : "fp32") << p;
    if (p["dtype"] == "f32" && !bf16) continue;
    // The end-to-end error of bf16/f16 inputs and output against the f32 run.
    EXPECT_LT(p["error_vs_f32"].get<double>(), bf16 ? 1e-2 : 2e-3) << p;
  }
  ASSERT_EQ(decode["bandwidth"].size(), 4u);  // cache-resident and DRAM at 1 and 2 threads
  for (const auto& b : decode["bandwidth"]) EXPECT_GT(b["gbps"].get<double>(), 0.0);
  const std::string md = read(path("report/scaling.md"));
  EXPECT_NE(md.find("(decode_prefetch " + level.get<std::string>() + " in the JSON"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| 128 |"), std::string::npos) << md;
  EXPECT_NE(md.find("O(N^"), std::string::npos) << md;
  EXPECT_NE(md.find("Decode against a KV cache"), std::string::npos) << md;
  EXPECT_NE(md.find("over a PagedKvCache (4 sequences"), std::string::npos) << md;
  EXPECT_NE(md.find("| 512 | bf16 | 1 |"), std::string::npos) << md;
  EXPECT_NE(md.find("Half precision and the bf16 compute path (dense)"), std::string::npos) << md;
  EXPECT_NE(md.find("| 512 | f32, fp32_precision=bf16 | 1 |"), std::string::npos) << md;
  EXPECT_NE(md.find("### decaying"), std::string::npos) << md;
  const std::string png = read(path("report/scaling.png"));
  ASSERT_GE(png.size(), 8u);
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_NE(r.err.find("left"), std::string::npos) << "progress lines with an estimate";
}

}  // namespace
}  // namespace seqattn
