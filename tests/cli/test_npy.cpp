// The .npy reader/writer, staged (all-or-nothing) output files, and the log-log arithmetic
// behind the scaling report.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "seqattn/error.hpp"
#include "src/cli/npy.hpp"
#include "src/cli/scaling_math.hpp"
#include "tests/support/temp_dir_test.hpp"

namespace seqattn {
namespace {

class NpyTest : public testing::TempDirTest {
 protected:
  static std::string read_all(const std::string& file) {
    std::ifstream in(file, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  void write_raw(const std::string& name, const std::string& bytes) const {
    std::ofstream(path(name), std::ios::binary) << bytes;
  }
  // A hand-made .npy file: header dict text and data bytes, in the given format version.
  static std::string npy_bytes(const std::string& dict, const std::string& data, int major = 1) {
    std::string header = dict + "\n";
    std::string out = std::string("\x93NUMPY", 6) + static_cast<char>(major) + '\0';
    const std::size_t len = header.size();
    for (int i = 0; i < (major == 1 ? 2 : 4); ++i)
      out += static_cast<char>((len >> (8 * i)) & 0xff);
    return out + header + data;
  }
  void expect_load_error(const std::string& name, ErrorKind kind, const std::string& phrase) const {
    try {
      npy::load(path(name), "--q");
      FAIL() << "loading " << name << " did not throw";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), kind) << e.what();
      EXPECT_EQ(e.argument(), "--q");
      EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << e.what();
    }
  }
};

TEST_F(NpyTest, RoundTripKeepsShapeAndBits) {
  const std::vector<float> values = {1.5f, -0.0f, 3e-39f, INFINITY, 7.25f, -2.0f};
  for (const std::vector<std::int64_t>& shape :
       {std::vector<std::int64_t>{6}, {3, 2}, {1, 2, 3, 1}, {0, 4}}) {
    std::size_t count = 1;
    for (const auto e : shape) count *= static_cast<std::size_t>(e);
    npy::write_file_atomically(path("a.npy"), npy::encode(shape, values.data()), "--out");
    const npy::Array a = npy::load(path("a.npy"), "--q");
    EXPECT_EQ(a.shape, shape);
    ASSERT_EQ(a.data.size(), count);
    for (std::size_t i = 0; i < count; ++i) {
      EXPECT_EQ(std::signbit(a.data[i]), std::signbit(values[i]));
      EXPECT_EQ(a.data[i], values[i]);
    }
  }
  const std::string bytes = npy::encode({3, 2}, values.data());
  EXPECT_EQ((bytes.size() - 24) % 64, 0u) << "header padded to 64 bytes";
}

TEST_F(NpyTest, ReadsVersion2And3HeadersWithDoubleQuotes) {
  const float x[2] = {4.0f, 5.0f};
  const std::string data(reinterpret_cast<const char*>(x), 8);
  for (const int major : {2, 3}) {
    write_raw("v.npy",
              npy_bytes(R"({"descr": "<f4", "fortran_order": False, "shape": (2,)})", data, major));
    const npy::Array a = npy::load(path("v.npy"), "--q");
    EXPECT_EQ(a.shape, (std::vector<std::int64_t>{2}));
    EXPECT_EQ(a.data[1], 5.0f);
  }
}

TEST_F(NpyTest, ParsesShapeSpellings) {
  const float x[6] = {1, 2, 3, 4, 5, 6};
  const std::string data(reinterpret_cast<const char*>(x), 24);
  write_raw("long.npy",
            npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (3L, 2L), }", data));
  EXPECT_EQ(npy::load(path("long.npy"), "--q").shape, (std::vector<std::int64_t>{3, 2}));
  write_raw("spaced.npy",
            npy_bytes("{'shape': ( 6 , ), 'fortran_order': False, 'descr': '<f4'}", data));
  EXPECT_EQ(npy::load(path("spaced.npy"), "--q").shape, (std::vector<std::int64_t>{6}));
  write_raw("bad.npy",
            npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (3, x), }", data));
  expect_load_error("bad.npy", ErrorKind::kInvalidArgument, "extents");
  write_raw(
      "huge.npy",
      npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }",
                data));
  expect_load_error("huge.npy", ErrorKind::kInvalidArgument, "extents");
  write_raw(
      "big.npy",
      npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }",
                data));
  expect_load_error("big.npy", ErrorKind::kInvalidArgument, "larger than the file");
}

TEST_F(NpyTest, RejectsBadFilesNamingTheArgument) {
  const std::string eight(8, '\0');
  write_raw("magic.npy", "hello, this is not numpy at all");
  write_raw("version.npy",
            npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", eight, 4));
  write_raw("dtype.npy",
            npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", eight));
  write_raw("fortran.npy",
            npy_bytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", eight));
  write_raw("short.npy",
            npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", eight));
  write_raw("long.npy",
            npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", eight));
  write_raw(
      "header.npy",
      npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", "").substr(0, 20));
  write_raw("noshape.npy", npy_bytes("{'descr': '<f4', 'fortran_order': False}", eight));
  expect_load_error("magic.npy", ErrorKind::kInvalidArgument, "bad magic");
  expect_load_error("version.npy", ErrorKind::kInvalidArgument, "version 4.0");
  expect_load_error("dtype.npy", ErrorKind::kInvalidArgument, "'<f8'");
  expect_load_error("fortran.npy", ErrorKind::kInvalidArgument, "Fortran");
  expect_load_error("short.npy", ErrorKind::kInvalidArgument, "truncated");
  expect_load_error("long.npy", ErrorKind::kInvalidArgument, "trailing");
  expect_load_error("header.npy", ErrorKind::kInvalidArgument, "header");
  expect_load_error("noshape.npy", ErrorKind::kInvalidArgument, "'shape'");
  expect_load_error("missing.npy", ErrorKind::kIo, "No such file");
  ::mkdir(path("sub.npy").c_str(), 0700);
  expect_load_error("sub.npy", ErrorKind::kIo, "not a file");
}

// float16 is '<f2'; bfloat16 is its raw bits as '<u2', read as bf16 only when asked.
TEST_F(NpyTest, HalfArraysRoundTripAndU2NeedsTheBf16Flag) {
  const std::vector<std::uint16_t> bits = {0x3c00, 0x0001, 0x7c00, 0xfe00, 0x8000, 0x7bff};
  npy::write_file_atomically(path("h.npy"), npy::encode({2, 3}, DType::kF16, bits.data()), "--out");
  const npy::Array h = npy::load(path("h.npy"), "--q");
  EXPECT_EQ(h.dtype, DType::kF16);
  EXPECT_EQ(h.shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(h.bits, bits);
  EXPECT_NE(read_all(path("h.npy")).find("'descr': '<f2'"), std::string::npos);

  npy::write_file_atomically(path("b.npy"), npy::encode({6}, DType::kBF16, bits.data()), "--out");
  EXPECT_NE(read_all(path("b.npy")).find("'descr': '<u2'"), std::string::npos);
  const npy::Array b = npy::load(path("b.npy"), "--q", /*u2_is_bf16=*/true);
  EXPECT_EQ(b.dtype, DType::kBF16);
  EXPECT_EQ(b.bits, bits);
  expect_load_error("b.npy", ErrorKind::kInvalidArgument, "--dtype bf16");
  // A '<f2' file whose data is cut short names the bytes it expected (2 per element).
  write_raw("short16.npy",
            npy_bytes("{'descr': '<f2', 'fortran_order': False, 'shape': (3,), }", "abcd"));
  expect_load_error("short16.npy", ErrorKind::kInvalidArgument, "6 data bytes");
}

// A commit that cannot publish every output publishes none: existing files keep their bytes.
TEST_F(NpyTest, CommitIsAllOrNothing) {
  write_raw("a.npy", "old a");
  {
    npy::StagedOutputs staged;
    staged.stage(path("a.npy"), "new a", "--out");
    staged.stage(path("b.npy"), "new b", "--lse");
    ::mkdir(path("b.npy").c_str(), 0700);  // b became a directory after staging
    try {
      staged.commit();
      ADD_FAILURE() << "commit over a directory did not throw";
    } catch (const Error& e) {
      EXPECT_EQ(e.argument(), "--lse") << e.what();
    }
  }
  EXPECT_EQ(read_all(path("a.npy")), "old a");
  for (const std::string& name : entries())
    EXPECT_EQ(name.find(".tmp."), std::string::npos) << name;
  // And a commit that can publish everything replaces the old file.
  npy::StagedOutputs staged;
  staged.stage(path("a.npy"), "new a", "--out");
  staged.stage(path("c.npy"), "new c", "--lse");
  staged.commit();
  EXPECT_EQ(read_all(path("a.npy")), "new a");
  EXPECT_EQ(read_all(path("c.npy")), "new c");
  for (const std::string& name : entries()) EXPECT_EQ(name.find(".old"), std::string::npos) << name;
  // Two outputs on one file, a directory, and a missing directory are refused up front.
  EXPECT_THROW(npy::check_output_paths({{"--out", path("x.npy")}, {"--lse", dir_ + "/./x.npy"}}),
               Error);
  EXPECT_THROW(npy::check_output_paths({{"--out", path("b.npy")}}), Error);
  EXPECT_THROW(npy::check_output_paths({{"--out", path("nowhere/x.npy")}}), Error);
  npy::check_output_paths({{"--out", path("x.npy")}, {"--weights", ""}, {"--lse", path("y.npy")}});
}

TEST_F(NpyTest, StagedOutputsAppearOnlyOnCommit) {
  const float x[1] = {1.0f};
  {
    npy::StagedOutputs staged;
    staged.stage_npy(path("one.npy"), {1}, x, "--out");
    staged.stage_npy(path("two.npy"), {1}, x, "--weights");
    EXPECT_EQ(entries().size(), 2u);  // the temporaries
    for (const std::string& name : entries()) EXPECT_EQ(name.rfind(".", 0), 0u) << name;
  }  // abandoned: removed
  EXPECT_TRUE(entries().empty());
  {
    npy::StagedOutputs staged;
    staged.stage_npy(path("one.npy"), {1}, x, "--out");
    EXPECT_THROW(staged.stage_npy(dir_ + "/no/such/dir/two.npy", {1}, x, "--weights"), Error);
  }
  EXPECT_TRUE(entries().empty()) << "a failed second output leaves no first output";
  npy::StagedOutputs staged;
  staged.stage_npy(path("one.npy"), {1}, x, "--out");
  staged.commit();
  EXPECT_EQ(entries(), std::vector<std::string>{"one.npy"});
}

TEST(ScalingMath, FitsThePowerOfAnExactPowerLaw) {
  std::vector<double> n, t;
  for (double s = 128; s <= 8192; s *= 2) {
    n.push_back(s);
    t.push_back(3e-9 * std::pow(s, 1.98));
  }
  const auto fit = cli::fit_power_law(n, t);
  ASSERT_TRUE(fit.has_value());
  EXPECT_NEAR(fit->exponent, 1.98, 1e-9);
  EXPECT_NEAR(fit->coefficient, 3e-9, 1e-15);
  EXPECT_EQ(fit->points, 7);
  EXPECT_FALSE(cli::fit_power_law({100}, {1.0}).has_value());
}

TEST(ScalingMath, CrossoverIsInterpolatedInLogSpace) {
  // candidate/baseline = 2 at S=1000 and 0.5 at S=4000: equal at the geometric midpoint 2000.
  const std::vector<double> n = {500, 1000, 4000, 8000};
  const auto c = cli::find_crossover(n, {4, 4, 4, 4}, {1, 2, 8, 16});
  ASSERT_TRUE(c.n.has_value());
  EXPECT_NEAR(*c.n, 2000, 1e-6);
  EXPECT_FALSE(cli::find_crossover(n, {9, 9, 9, 99}, {1, 2, 8, 16}).n.has_value());
  const auto always = cli::find_crossover(n, {0.1, 0.1, 0.1, 0.1}, {1, 2, 8, 16});
  ASSERT_TRUE(always.n.has_value());
  EXPECT_EQ(*always.n, 500);
  const auto gaps = cli::find_crossover(n, {4, 4, NAN, 4}, {1, 2, 8, 16});
  ASSERT_TRUE(gaps.n.has_value());
  EXPECT_NEAR(*gaps.n, 1000 * std::pow(8.0, 1.0 / 3.0), 1e-6);
}

}  // namespace
}  // namespace seqattn
