// Runs whose bf16 operands take the tile path, in a caller workspace. SEQATTN_COMPUTE_PATH=
// amx-emulated runs the tile kernel's products on any CPU; amx-bf16 shares their blocking, so
// the same count serves it. qkv_workspace_bytes() counts the path the run takes: the tile
// products pack K and V in tiles of their own shape, so the fp32 path's count is not theirs.
// In that count every variant on the tile kernel runs bitwise as without a workspace, writes
// nothing past it, refuses one line less before writing anything, and allocates nothing after
// its first run (counting_allocator.hpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "seqattn/seqattn.hpp"
#include "src/kernel/compute_path.hpp"
#include "tests/half/half_support.hpp"
#include "tests/kv_cache/counting_allocator.hpp"
#include "tests/kv_cache/kv_cache_support.hpp"
#include "tests/support/guarded_workspace.hpp"
#include "tests/support/sanitizers.hpp"
#include "tests/support/scoped_compute_path.hpp"
#include "tests/support/test_tensors.hpp"

namespace seqattn {
namespace {

using testing::allocations_of;
using testing::expect_error;
using testing::GuardedWorkspace;
using testing::make_tensor;
using testing::make_zeros;
using testing::OwnedTensor;

struct Case {
  const char* name;
  VariantSpec variant;
  bool causal;
  int threads;
  std::int64_t seq;
  std::int64_t dim = 64;
  bool rope = false;
};

AttentionOptions options_of(const Case& c) {
  AttentionOptions options;
  options.variant = c.variant;
  options.mask.causal = c.causal;
  options.threads = c.threads;
  if (c.rope) options.rope = RotaryEmbedding{};
  return options;
}

// run(workspace) one line short of `ws` is refused (workspace.size()) before any of `outs`
// (filled with 7s, which no run writes everywhere) changes; then four runs in `ws`, refilled
// with NaN bytes before each (stale scratch would show), take the tile path and runs 2..4
// allocate nothing.
template <class Run>
void ExpectSteadyTileRuns(const GuardedWorkspace& ws, std::initializer_list<OwnedTensor*> outs,
                          const Run& run) {
  const std::span<std::byte> bytes = ws.bytes();
  for (OwnedTensor* t : outs) std::fill(t->storage.begin(), t->storage.end(), 7.0f);
  expect_error([&] { run(bytes.first(bytes.size() - 64)); }, "workspace.size()",
               ErrorKind::kInvalidArgument);
  for (const OwnedTensor* t : outs) {
    ASSERT_TRUE(std::all_of(t->storage.begin(), t->storage.end(), [](float x) {
      return x == 7.0f;
    })) << "a refused run wrote an output";
  }
  long after_first = 0;
  for (int r = 0; r < 4; ++r) {
    ws.refill();
    RunRecord record;
    const long n = allocations_of([&] { record = run(bytes); });
    if (r > 0) after_first += n;
    EXPECT_EQ(record.compute_path, "amx-emulated");
  }
  EXPECT_EQ(after_first, 0) << "heap allocations in runs 2..4";
  EXPECT_TRUE(ws.guard_intact()) << "a run wrote past its workspace";
}

// Every row on the tile kernel: dense, sliding window with a global token, Linformer,
// hierarchical (coarse levels' calls in each pair's share) and LSH (calls over chunks, pairs
// shared out over two threads); GQA, causal or not, one and two threads, RoPE. A pair takes
// (D + D_v) / 2 floats a key on the tile path (bf16 pairs) and the packing budget is 2^19
// floats: outside the sanitizers the window's 4200 keys at D 128 and LSH's largest call (2112
// keys) at D 256 pass it, so both stream bands (the LSH count's bisection runs). Under the
// sanitizers those two take 100 s of the emulated tile products, so smaller shapes run there
// (packed whole; the banded path's memory is checked by the fp32 tests).
std::vector<Case> cases() {
  SlidingWindowSpec window;
  window.left = 64;
  window.global_tokens = {5};
  LinformerSpec linformer;
  linformer.proj_len = 48;
  LshSpec lsh;
  lsh.hashes = 2;
  lsh.chunk_length = 32;
  lsh.shared_qk = false;
  LshSpec lsh_long = lsh;
  lsh_long.hashes = 1;
  lsh_long.chunk_length = 64;
  const bool full = !testing::kSanitized;
  return {Case{"dense, causal, rope, 2 threads", {}, true, 2, 257, 64, true},
          full ? Case{"window, banded, global token, 2 threads", window, true, 2, 4200, 128}
               : Case{"window, global token", window, true, 1, 600, 64},
          Case{"linformer, 2 threads", linformer, false, 2, 300},
          Case{"hierarchical, causal, 2 threads", HierarchicalSpec{.block = 32}, true, 2, 400},
          Case{"lsh, causal", lsh, true, 1, 300},
          full ? Case{"lsh, 2 threads, long, D 256", lsh_long, false, 2, 2200, 256}
               : Case{"lsh, 2 threads", lsh, false, 2, 300, 64}};
}

TEST(TileWorkspace, EveryTileVariantRunsInItsCountBitForBitAndAllocatesNothing) {
  constexpr std::int64_t kHeads = 4, kKv = 2;
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const AttentionPlan plan =
        make_plan({1, kHeads, kKv, c.seq, c.seq, c.dim, c.dim}, options_of(c));
    const auto q = testing::rounded<bfloat16>(
        make_tensor(1, kHeads, c.seq, c.dim, testing::Layout::kBSHD, 11));
    const auto k =
        testing::rounded<bfloat16>(make_tensor(1, kKv, c.seq, c.dim, testing::Layout::kBHSD, 12));
    const auto v =
        testing::rounded<bfloat16>(make_tensor(1, kKv, c.seq, c.dim, testing::Layout::kBHSD, 13));
    const QkvDtypes dtypes{DType::kBF16, DType::kBF16, DType::kBF16, DType::kF32};
    std::optional<std::size_t> fp32_bytes;
    {
      const testing::ScopedComputePath fp32("fp32");
      fp32_bytes = plan.qkv_workspace_bytes(dtypes);
    }
    const testing::ScopedComputePath forced("amx-emulated");
    const std::optional<std::size_t> bytes = plan.qkv_workspace_bytes(dtypes);
    ASSERT_TRUE(bytes.has_value() && fp32_bytes.has_value());
    std::printf("[ tile workspace ] %s: %zu bytes (fp32 path %zu)\n", c.name, *bytes, *fp32_bytes);
    // The tile products pack K and V in tiles of their own shape: a plan that counted the fp32
    // path for every run would give the same number.
    if (variant_of(c.variant) == Variant::kDense) {
      EXPECT_NE(*bytes, *fp32_bytes);
    }
    const GuardedWorkspace ws(*bytes);
    OwnedTensor out = make_zeros(1, kHeads, c.seq, c.dim),
                alone = make_zeros(1, kHeads, c.seq, c.dim);
    ASSERT_NO_FATAL_FAILURE(ExpectSteadyTileRuns(ws, {&out}, [&](std::span<std::byte> given) {
      return plan.run(q.cview(), k.cview(), v.cview(), out.view, {.workspace = given});
    }));
    plan.run(q.cview(), k.cview(), v.cview(), alone.view);
    EXPECT_EQ(std::memcmp(out.storage.data(), alone.storage.data(), out.storage.size() * 4), 0)
        << "the workspace changed the result";
    double largest = 0;  // a convex combination of values (|v| <= 1), not all zero
    for (const float x : out.storage) largest = std::max(largest, std::abs(static_cast<double>(x)));
    EXPECT_GT(largest, 0.0);
    if (!std::holds_alternative<LinformerSpec>(c.variant)) {
      EXPECT_LE(largest, 1.0);
    }
  }
}

// Runs that ask for weights (dense and sliding window) on the tile path: the count holds the
// weights pass too; one line less is refused with out untouched, guard bytes past it stay,
// runs 2..4 allocate nothing, and out and the weights equal the run without a workspace.
TEST(TileWorkspace, WeightsRunsTakeTheirCountOnTheTilePath) {
  constexpr std::int64_t kHeads = 4, kKv = 2, kSeq = 90, kDim = 32;
  SlidingWindowSpec window;
  window.left = 20;
  for (const VariantSpec& variant : {VariantSpec{}, VariantSpec{window}}) {
    AttentionOptions options;
    options.variant = variant;
    options.mask.causal = true;
    options.threads = 2;
    const AttentionPlan plan = make_plan({1, kHeads, kKv, kSeq, kSeq, kDim, kDim}, options);
    const auto q =
        testing::rounded<bfloat16>(make_tensor(1, kHeads, kSeq, kDim, testing::Layout::kBHSD, 21));
    const auto k =
        testing::rounded<bfloat16>(make_tensor(1, kKv, kSeq, kDim, testing::Layout::kBHSD, 22));
    const testing::ScopedComputePath forced("amx-emulated");
    const std::optional<std::size_t> bytes = plan.qkv_workspace_bytes(
        {DType::kBF16, DType::kBF16, DType::kBF16, DType::kF32, /*weights=*/true});
    ASSERT_TRUE(bytes.has_value());
    const GuardedWorkspace ws(*bytes);
    OwnedTensor out = make_zeros(1, kHeads, kSeq, kDim), alone = make_zeros(1, kHeads, kSeq, kDim);
    OwnedTensor w = make_zeros(1, kHeads, kSeq, kSeq), w_alone = make_zeros(1, kHeads, kSeq, kSeq);
    ASSERT_NO_FATAL_FAILURE(ExpectSteadyTileRuns(ws, {&out, &w}, [&](std::span<std::byte> given) {
      return plan.run(q.cview(), k.cview(), k.cview(), out.view,
                      {.weights = w.view, .workspace = given});
    }));
    plan.run(q.cview(), k.cview(), k.cview(), alone.view, {.weights = w_alone.view});
    EXPECT_EQ(std::memcmp(out.storage.data(), alone.storage.data(), out.storage.size() * 4), 0);
    EXPECT_EQ(std::memcmp(w.storage.data(), w_alone.storage.data(), w.storage.size() * 4), 0);
    double row = 0;  // the last row's weights: a softmax
    for (std::int64_t j = 0; j < kSeq; ++j) row += w.storage[(kSeq - 1) * kSeq + j];
    EXPECT_NEAR(row, 1.0, 1e-5);
  }
}

}  // namespace
}  // namespace seqattn
