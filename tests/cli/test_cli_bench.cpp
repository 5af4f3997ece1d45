// `seqattn bench` end to end: its JSON keys, runs through a KvCache and a PagedKvCache, the
// dtypes it takes and the bytes it counts, and shapes it refuses before sizing anything; and
// the report's time_decodes_in_turns, called in this process.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "src/cli/measure.hpp"
#include "src/kernel/decode/prefetch_level.hpp"
#include "src/runtime/cpu_features.hpp"
#include "tests/cli/cli_fixture.hpp"
#include "tests/support/sanitizers.hpp"

namespace seqattn {
namespace {

TEST_F(CliTest, BenchJsonHasTheKeys) {
  const Result r =
      run("bench --json --batch 1 --heads 2 --kv-heads 1 --seq 32 --dim 16 "
          "--threads 1 --repeat 2 --warmup 0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  for (const char* key : {"variant", "median_ms", "gflops", "threads", "simd_target", "batch",
                          "heads", "kv_heads", "seq", "dim", "dim_v"}) {
    EXPECT_TRUE(j.contains(key)) << key << " missing in " << r.out;
  }
  EXPECT_EQ(j["seq"], 32);
  EXPECT_EQ(j["kv_heads"], 1);
  EXPECT_GT(j["median_ms"].get<double>(), 0.0);
}

TEST_F(CliTest, BenchSeqQRunsThroughAKvCache) {
  const Result r =
      run("bench --json --heads 4 --kv-heads 2 --seq 700 --seq-q 3 --dim 16 --causal "
          "--variant sliding-window --window 64 --window-right 0 --repeat 2 --warmup 0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["kv_cache"], true);
  EXPECT_EQ(j["seq_q"], 3);
  EXPECT_EQ(j["variant"], "sliding-window");
  EXPECT_EQ(j["kv_bytes"].get<double>(), 4.0 * 2 * 700 * 32);
  EXPECT_GT(j["kv_gbps"].get<double>(), 0.0);
  // 3 queries × 4 heads × 65 keys (the window and the query's own key) × 2·(16 + 16) FLOPs.
  EXPECT_EQ(j["flops"].get<double>(), 3.0 * 4 * 65 * 64);
  const Result bad = run("bench --seq 64 --seq-q 0");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--seq-q"), std::string::npos) << bad.err;
}

// time_decodes_in_turns (the report's DRAM rows): every shape timed once per round, each
// over its own cache (the record's compute path says which), and no shapes, no timings.
TEST(DecodeTiming, InTurnsTimesEveryShapeInEveryRound) {
  cli::Shape bf16{1, 4, 2, 200, 16, 16};
  bf16.kv_dtype = DType::kBF16;
  cli::Shape i8 = bf16;
  i8.kv_dtype = DType::kI8;
  const std::vector<cli::Timing> t = cli::time_decodes_in_turns({bf16, i8}, 1, {}, 1, 3);
  ASSERT_EQ(t.size(), 2u);
  for (const cli::Timing& x : t) {
    EXPECT_EQ(x.seconds.size(), 3u);
    EXPECT_GT(x.median_seconds, 0.0);
  }
  EXPECT_EQ(t[0].record.compute_path, "fp32");
  EXPECT_TRUE(t[1].record.compute_path.starts_with("int8")) << t[1].record.compute_path;
  EXPECT_TRUE(cli::time_decodes_in_turns({}, 1, {}, 1, 3).empty());
}

// The decode kernel's prefetch choice can be forced (only the speed differs), and anything but
// the variable's grammar (l1, l2, then +far<N>, +near<N> and/or +paced, auto) stops the run with an
// Error naming it.
TEST_F(CliTest, BenchDecodeTakesAPrefetchLevelFromTheEnvironment) {
  const std::string args =
      "bench --json --heads 4 --kv-heads 2 --seq 700 --seq-q 1 --dim 16 "
      "--kv-dtype i8 --repeat 1 --warmup 0";
  std::vector<std::string> used;  // the level each run's record says
  for (const char* level : {"l1", "l2", "auto", "", "l2+near8", "l1+near4+paced", "l2+far128"}) {
    ::setenv("SEQATTN_DECODE_PREFETCH", level, 1);
    const Result r = run(args);
    ASSERT_EQ(r.exit_code, 0) << level << ": " << r.err;
    used.push_back(nlohmann::json::parse(r.out)["decode_prefetch"].get<std::string>());
  }
  // The one set; this CPU's row of the table for auto and "".
  const std::string cpu_level = seqattn::detail::to_string(
      seqattn::detail::choose_decode_prefetch(nullptr, seqattn::detail::cpu_features()));
  EXPECT_EQ(used[0], "l1");
  EXPECT_EQ(used[1], "l2");
  EXPECT_EQ(used[2], cpu_level);
  EXPECT_EQ(used[3], cpu_level);
  EXPECT_EQ(used[4], "l2+near8");
  EXPECT_EQ(used[5], "l1+near4+paced");
  EXPECT_EQ(used[6], "l2+far128");
  ::setenv("SEQATTN_DECODE_PREFETCH", "l3", 1);
  const Result bad = run(args);
  ::unsetenv("SEQATTN_DECODE_PREFETCH");
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find("SEQATTN_DECODE_PREFETCH"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("l1 or l2, optionally +far<N>"), std::string::npos) << bad.err;
}

// Shapes from the command line are checked before anything is sized from them: an Error (exit
// code 2) naming the flag, never std::bad_alloc or overflow (exit code 1, "unexpected failure").
// The last case passes checked_product (2^60 elements) and fails only when allocated, which
// the real allocator reports as std::bad_alloc; AddressSanitizer's operator new aborts there
// instead (even with allocator_may_return_null=1), so the sanitize flavour runs the first two.
using seqattn::testing::kAddressSanitizer;

TEST_F(CliTest, BenchShapesThatCannotBeAllocatedAreErrors) {
  std::vector<std::string> cases = {"--seq 4611686018427387904", "--batch 0"};
  if (!kAddressSanitizer) cases.push_back("--heads 1048576 --seq 1048576 --dim 1048576");
  for (const std::string& flags : cases) {
    SCOPED_TRACE(flags);
    const Result r = run("bench --json --repeat 1 --warmup 0 " + flags);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("'--"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("unexpected failure"), std::string::npos) << r.err;
  }
}

TEST_F(CliTest, BenchTakesDtypesAndCountsStoredCacheBytes) {
  Result r =
      run("bench --json --heads 4 --kv-heads 2 --seq 300 --seq-q 1 --dim 16 --kv-dtype "
          "bf16 --repeat 2 --warmup 0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["kv_dtype"], "bf16");
  EXPECT_EQ(j["dtype"], "f32");
  EXPECT_EQ(j["kv_bytes"].get<double>(), 2.0 * 2 * 300 * 32);
  r = run("bench --json --heads 2 --seq 64 --dim 16 --dtype f16 --repeat 2 --warmup 0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["dtype"], "f16");
  EXPECT_EQ(j["kv_dtype"], "f16");
  // Dense, B = 1, H = 2, S = 64, D = D_v = 16: 4·B·H·S²·D FLOPs, and GFLOP/s is that over the
  // median time of the same JSON.
  const double flops = 4.0 * 1 * 2 * 64 * 64 * 16;
  EXPECT_EQ(j["flops"].get<double>(), flops);
  const double median_seconds = j["median_ms"].get<double>() * 1e-3;
  ASSERT_GT(median_seconds, 0.0);
  EXPECT_NEAR(j["gflops"].get<double>(), flops / median_seconds * 1e-9,
              1e-12 * j["gflops"].get<double>());
  r = run("bench --seq 64 --kv-dtype int8");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("'--kv-dtype'"), std::string::npos) << r.err;
  // An int8 cache: a byte an element and two 4-byte scales a token and kv head; only over a
  // cache (--seq-q), and --dtype never takes it.
  r =
      run("bench --json --heads 4 --kv-heads 2 --seq 300 --seq-q 1 --dim 16 --kv-dtype i8 "
          "--repeat 2 --warmup 0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["kv_dtype"], "i8");
  EXPECT_EQ(j["kv_bytes"].get<double>(), 2.0 * 300 * (32 + 8));
  r = run("bench --seq 64 --kv-dtype i8");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("'--kv-dtype'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--seq-q"), std::string::npos) << r.err;
  r = run("bench --seq 64 --dtype i8");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("'--dtype'"), std::string::npos) << r.err;
  // Batched decode over a PagedKvCache: lengths spread evenly over A..B (ends included),
  // bytes counted from them, a read probe of the same bytes in the same run.
  r =
      run("bench --json --paged --batch 3 --heads 4 --kv-heads 2 --dim 16 --seq-lens 10:30 "
          "--kv-dtype bf16 --repeat 2 --warmup 0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  std::vector<std::int64_t> lens = j["seq_lens"].get<std::vector<std::int64_t>>();
  std::sort(lens.begin(), lens.end());
  EXPECT_EQ(lens, (std::vector<std::int64_t>{10, 20, 30}));
  EXPECT_EQ(j["kv_bytes"].get<double>(), 2.0 * 2 * 60 * 32);
  EXPECT_GT(j["probe_gbps"].get<double>(), 0.0);
  EXPECT_GT(j["kv_gbps"].get<double>(), 0.0);
  r = run("bench --paged --seq 64");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("'--paged'"), std::string::npos) << r.err;
  r = run("bench --paged --seq-lens 30:10");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("'--seq-lens'"), std::string::npos) << r.err;
  r = run("bench --seq 64 --kv-dtype ''");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("'--kv-dtype'"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace seqattn
