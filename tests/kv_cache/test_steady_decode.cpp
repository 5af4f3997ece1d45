// A steady decode loop allocates nothing on the heap after its first step: append one token,
// run the plan over the cache with a caller workspace, 1000 times; so do paged batches over a
// pool. Allocations are counted by counting_allocator.hpp (every operator new; malloc and the
// aligned allocators outside the sanitizers) while a step runs. Steady loops over q, k, v:
// test_steady_prefill.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "seqattn/seqattn.hpp"
#include "tests/half/half_support.hpp"
#include "tests/kv_cache/counting_allocator.hpp"
#include "tests/kv_cache/kv_cache_support.hpp"
#include "tests/support/guarded_workspace.hpp"
#include "tests/support/sanitizers.hpp"
#include "tests/support/test_tensors.hpp"

namespace seqattn {
namespace {

using testing::allocations_of;
using testing::expect_error;
using testing::kCountsMalloc;
using testing::make_tensor;
using testing::make_zeros;
using testing::OwnedTensor;

struct LoopCase {
  const char* name;
  DType dtype;  // the cache's
  bool rope;
  Variant variant;
  int threads;
  DType io = DType::kF32;  // q's and out's (a half q and out are staged in the workspace)
};

// A contiguous [B, H, S, D] view of `data` in dtype `io` (AnyConstTensor or AnyTensor).
template <class View>
View view_of(DType io, void* data, const std::array<std::int64_t, 4>& n) {
  View view;
  view.dtype = io;
  view.data = data;
  view.shape = n;
  view.strides = {n[1] * n[2] * n[3], n[2] * n[3], n[3], 1};
  return view;
}
// `values` (contiguous) rounded to io (bf16 or f16) in `bits`; a view of them.
AnyConstTensor half_copy(DType io, const ConstTensor& values, std::vector<std::uint16_t>& bits) {
  const auto& n = values.shape;
  bits.resize(static_cast<std::size_t>(n[0] * n[1] * n[2] * n[3]));
  for (std::size_t i = 0; i < bits.size(); ++i) {
    const float x = values.data[i];
    bits[i] = io == DType::kBF16 ? bfloat16(x).bits : float16(x).bits;
  }
  return view_of<AnyConstTensor>(io, bits.data(), n);
}
float widen(DType io, std::uint16_t bits) {
  return io == DType::kBF16 ? static_cast<float>(bfloat16::from_bits(bits))
                            : static_cast<float>(float16::from_bits(bits));
}

// 1000 steps over a KvCache of 4 kv heads, GQA group 4, D = 64, starting from 300 tokens.
void run_loop(const LoopCase& c) {
  SCOPED_TRACE(c.name);
  if (!kCountsMalloc) {
    std::printf("note: under a sanitizer only operator new is counted (its runtime owns malloc)\n");
  }
  constexpr std::int64_t kHeads = 16, kKv = 4, kDim = 64, kSteps = 1000, kStart = 300;
  KvCacheShape shape{1, kKv, kStart + kSteps, kDim, kDim, c.dtype};
  AttentionOptions options;
  if (c.rope) {
    shape.rope = RotaryEmbedding{};
    options.rope = RotaryEmbedding{};
  }
  if (c.variant == Variant::kSlidingWindow) {
    SlidingWindowSpec window;
    window.left = 128;
    window.right = 0;
    options.variant = window;
  }
  options.threads = c.threads;
  KvCache cache(shape);
  const OwnedTensor k = make_tensor(1, kKv, kStart + kSteps, kDim, testing::Layout::kBHSD, 7);
  const OwnedTensor v = make_tensor(1, kKv, kStart + kSteps, kDim, testing::Layout::kBHSD, 8);
  const OwnedTensor q = make_tensor(1, kHeads, 1, kDim, testing::Layout::kBHSD, 9);
  OwnedTensor out = make_zeros(1, kHeads, 1, kDim);
  auto tokens = [&](const OwnedTensor& t, std::int64_t first, std::int64_t n) {
    ConstTensor view = t.view;
    view.data = t.view.ptr(0, 0, first);
    view.shape[2] = n;
    return view;
  };
  cache.append(tokens(k, 0, kStart), tokens(v, 0, kStart));
  const AttentionPlan plan = make_plan(cache_shape(shape, kHeads, 1), options);
  testing::GuardedWorkspace ws(plan.workspace_bytes());
  const RunArgs args{.workspace = ws.bytes()};
  std::vector<std::uint16_t> q_bits, out_bits(static_cast<std::size_t>(kHeads * kDim));
  const AnyConstTensor q_io = c.io == DType::kF32 ? q.cview() : half_copy(c.io, q.view, q_bits);
  const AnyTensor out_io = c.io == DType::kF32
                               ? AnyTensor(out.view)
                               : view_of<AnyTensor>(c.io, out_bits.data(), out.view.shape);
  long after_first = 0;
  for (std::int64_t t = kStart; t < kStart + kSteps; ++t) {
    const long n = allocations_of([&] {
      cache.append(tokens(k, t, 1), tokens(v, t, 1));
      const RunRecord record = plan.run(q_io, cache, out_io, args);
      ASSERT_EQ(record.variant, c.variant);
    });
    if (t > kStart) after_first += n;
  }
  EXPECT_EQ(after_first, 0) << "heap allocations in steps 2.." << kSteps;
  EXPECT_EQ(cache.length(0), kStart + kSteps);
  // The loop computed something: out holds a convex combination of values (|v| <= 1).
  double largest = 0;
  for (std::int64_t h = 0; h < kHeads; ++h)
    for (std::int64_t d = 0; d < kDim; ++d) {
      const auto i = static_cast<std::size_t>(h * kDim + d);
      const float o = c.io == DType::kF32 ? out.view.at(0, h, 0, d) : widen(c.io, out_bits[i]);
      largest = std::max(largest, std::abs(static_cast<double>(o)));
    }
  EXPECT_GT(largest, 0.0);
  EXPECT_LE(largest, 1.0);
  EXPECT_TRUE(ws.guard_intact()) << "a run wrote past its workspace";
}

TEST(SteadyDecode, NoHeapAllocationAfterTheFirstStep) {
  for (const LoopCase& c : {LoopCase{"f32", DType::kF32, false, Variant::kDense, 1},
                            LoopCase{"bf16, rope, bf16 q and out", DType::kBF16, true,
                                     Variant::kDense, 1, DType::kBF16},
                            LoopCase{"i8, rope", DType::kI8, true, Variant::kDense, 1},
                            LoopCase{"f16, window, f16 q and out", DType::kF16, false,
                                     Variant::kSlidingWindow, 1, DType::kF16},
                            LoopCase{"bf16, 2 threads", DType::kBF16, false, Variant::kDense, 2}}) {
    run_loop(c);
  }
}

// A paged batch's runs (the block tables gathered into the workspace) allocate nothing either.
TEST(SteadyDecode, PagedRunsAllocateNothing) {
  constexpr std::int64_t kHeads = 8, kKv = 2, kDim = 32;
  PagedKvCache pool({kKv, kDim, kDim, 256, DType::kBF16});
  std::vector<PagedKvCache::SequenceId> ids;
  const OwnedTensor k = make_tensor(1, kKv, 700, kDim, testing::Layout::kBHSD, 3);
  const OwnedTensor v = make_tensor(1, kKv, 700, kDim, testing::Layout::kBHSD, 4);
  for (const std::int64_t length : {700, 65, 1, 300}) {
    ids.push_back(pool.add());
    ConstTensor kt = k.view, vt = v.view;
    kt.shape[2] = vt.shape[2] = length;
    pool.append(ids.back(), kt, vt);
  }
  const AttentionPlan plan = make_plan(paged_shape(pool.shape(), 4, kHeads, 1, 1024), {});
  testing::GuardedWorkspace ws(plan.workspace_bytes());
  const RunArgs args{.workspace = ws.bytes()};
  const OwnedTensor q = make_tensor(4, kHeads, 1, kDim, testing::Layout::kBHSD, 5);
  OwnedTensor out = make_zeros(4, kHeads, 1, kDim);
  // The counter sees what a run allocates: without a workspace, the view's tables (operator
  // new, counted under every build).
  EXPECT_GE(allocations_of([&] { plan.run(q.cview(), pool, ids, out.view); }), 1);
  long total = 0;
  for (int step = 0; step < 100; ++step) {
    const long n = allocations_of([&] { plan.run(q.cview(), pool, ids, out.view, args); });
    if (step > 0) total += n;
  }
  EXPECT_EQ(total, 0) << "heap allocations in paged runs 2..100";
  EXPECT_TRUE(ws.guard_intact()) << "a run wrote past its workspace";
}

// A paged decode loop: every step appends one token to each of 4 sequences and runs the batch
// (bf16 q and out). With each sequence's table reserved for its budget, nothing is allocated
// after the first step, over a bf16 and an i8 pool.
TEST(SteadyDecode, PagedLoopWithReservedTablesAllocatesNothing) {
  constexpr std::int64_t kHeads = 8, kKv = 2, kDim = 32, kSteps = 1000, kLongest = 700;
  for (const DType dtype : {DType::kBF16, DType::kI8}) {
    SCOPED_TRACE(std::string(to_string(dtype)));
    PagedKvCache pool({kKv, kDim, kDim, 128, dtype});
    const OwnedTensor k = make_tensor(1, kKv, kLongest + kSteps, kDim, testing::Layout::kBHSD, 3);
    const OwnedTensor v = make_tensor(1, kKv, kLongest + kSteps, kDim, testing::Layout::kBHSD, 4);
    auto tokens = [](const OwnedTensor& t, std::int64_t first, std::int64_t n) {
      ConstTensor view = t.view;
      view.data = t.view.ptr(0, 0, first);
      view.shape[2] = n;
      return view;
    };
    std::vector<PagedKvCache::SequenceId> ids;
    for (const std::int64_t length :
         {kLongest, std::int64_t{65}, std::int64_t{1}, std::int64_t{300}}) {
      ids.push_back(pool.add());
      pool.reserve(ids.back(), length + kSteps);
      pool.append(ids.back(), tokens(k, 0, length), tokens(v, 0, length));
    }
    const AttentionPlan plan =
        make_plan(paged_shape(pool.shape(), 4, kHeads, 1, kLongest + kSteps), {});
    testing::GuardedWorkspace ws(plan.workspace_bytes());
    const RunArgs args{.workspace = ws.bytes()};
    const OwnedTensor q = make_tensor(4, kHeads, 1, kDim, testing::Layout::kBHSD, 5);
    std::vector<std::uint16_t> q_bits, out_bits(static_cast<std::size_t>(4 * kHeads * kDim));
    const AnyConstTensor q16 = half_copy(DType::kBF16, q.view, q_bits);
    const AnyTensor out16 = view_of<AnyTensor>(DType::kBF16, out_bits.data(), {4, kHeads, 1, kDim});
    long after_first = 0;
    for (std::int64_t step = 0; step < kSteps; ++step) {
      const long n = allocations_of([&] {
        for (const PagedKvCache::SequenceId id : ids) {
          const std::int64_t at = pool.length(id);
          pool.append(id, tokens(k, at, 1), tokens(v, at, 1));
        }
        plan.run(q16, pool, ids, out16, args);
      });
      if (step > 0) after_first += n;
    }
    EXPECT_EQ(after_first, 0) << "heap allocations in steps 2.." << kSteps;
    EXPECT_EQ(pool.length(ids[0]), kLongest + kSteps);
    double largest = 0;  // a convex combination of values (|v| <= 1), not all zero
    for (const std::uint16_t bits : out_bits)
      largest = std::max(largest, std::abs(static_cast<double>(widen(DType::kBF16, bits))));
    EXPECT_GT(largest, 0.0);
    EXPECT_LE(largest, 1.0);
    EXPECT_TRUE(ws.guard_intact()) << "a run wrote past its workspace";
  }
}

// A half q and out staged in the workspace give the bits they give staged in allocations
// (and so does a workspace without the staging part): a paged ragged batch, D 17 / D_v 80
// (copies not a multiple of 16 floats), bf16 and f16 q/out; and an f32 q rounded to bf16.
TEST(SteadyDecode, StagingInTheWorkspaceGivesTheSameBits) {
  constexpr std::int64_t kHeads = 4, kKv = 2, kDim = 17, kDimV = 80, kSeqQ = 3;
  PagedKvCache pool({kKv, kDim, kDimV, 16, DType::kBF16});
  std::vector<PagedKvCache::SequenceId> ids;
  for (const std::int64_t length : {40, 5, 90}) {
    const OwnedTensor k = make_tensor(1, kKv, length, kDim, testing::Layout::kBHSD, 11 + length);
    const OwnedTensor v = make_tensor(1, kKv, length, kDimV, testing::Layout::kBHSD, 12 + length);
    ids.push_back(pool.add());
    pool.append(ids.back(), k.view, v.view);
  }
  const std::array<std::int64_t, 3> counts{3, 1, 2};
  const OwnedTensor q = make_tensor(3, kHeads, kSeqQ, kDim, testing::Layout::kBHSD, 13);
  for (const Fp32Precision precision : {Fp32Precision::kIeee, Fp32Precision::kBf16}) {
    AttentionOptions options;
    options.mask.causal = true;
    options.fp32_precision = precision;
    const AttentionPlan plan = make_plan(paged_shape(pool.shape(), 3, kHeads, kSeqQ, 128), options);
    testing::GuardedWorkspace ws(plan.workspace_bytes());
    const std::size_t short_bytes = plan.workspace_bytes() - 4 * 3 * kHeads * kSeqQ * (16 + 80);
    const testing::GuardedWorkspace short_ws(short_bytes);  // its own guard, right past it
    for (const DType io : {DType::kBF16, DType::kF16, DType::kF32}) {
      SCOPED_TRACE(std::string(to_string(io)) +
                   (precision == Fp32Precision::kBf16 ? ", q rounded to bf16" : ""));
      std::vector<std::uint16_t> q_bits;
      const OwnedTensor zeros = make_zeros(3, kHeads, kSeqQ, kDimV);
      const AnyConstTensor qv = io == DType::kF32 ? q.cview() : half_copy(io, q.view, q_bits);
      std::vector<std::vector<std::uint16_t>> halves(3);
      std::vector<OwnedTensor> floats;
      for (int run = 0; run < 3; ++run) {  // no workspace, the whole one, the short one
        floats.push_back(make_zeros(3, kHeads, kSeqQ, kDimV));
        AnyConstTensor out_init =
            io == DType::kF32 ? zeros.cview() : half_copy(io, zeros.view, halves[run]);
        const AnyTensor out = io == DType::kF32
                                  ? AnyTensor(floats.back().view)
                                  : view_of<AnyTensor>(io, halves[run].data(), out_init.shape);
        RunArgs args{.query_lengths = counts};
        if (run > 0) args.workspace = run == 1 ? ws.bytes() : short_ws.bytes();
        plan.run(qv, pool, ids, out, args);
      }
      EXPECT_EQ(halves[0], halves[1]);
      EXPECT_EQ(halves[0], halves[2]);
      for (int run = 1; run < 3; ++run) {
        EXPECT_EQ(std::memcmp(floats[0].view.data, floats[run].view.data,
                              sizeof(float) * 3 * kHeads * kSeqQ * kDimV),
                  0);
      }
      if (io != DType::kF32) {  // the run wrote something: not every output bit is zero
        EXPECT_TRUE(std::any_of(halves[1].begin(), halves[1].end(),
                                [](std::uint16_t b) { return (b & 0x7fff) != 0; }));
      }
    }
    EXPECT_TRUE(ws.guard_intact()) << "a run wrote past its workspace";
    EXPECT_TRUE(short_ws.guard_intact()) << "a run wrote past the short workspace";
  }
}

// reserve() refuses an unknown sequence and a length the pool cannot hold, changing nothing.
TEST(SteadyDecode, ReserveNamesItsArguments) {
  PagedKvCache pool({2, 16, 16, 4, DType::kBF16});
  const PagedKvCache::SequenceId id = pool.add();
  auto reserve = [&](PagedKvCache::SequenceId s, std::int64_t tokens) {
    return [&pool, s, tokens] { pool.reserve(s, tokens); };
  };
  expect_error(reserve(id + 7, 10), "'sequence'", ErrorKind::kInvalidArgument);
  expect_error(reserve(id, -1), "'tokens'", ErrorKind::kInvalidArgument);
  expect_error(reserve(id, 4 * 64 + 1), "got 257", ErrorKind::kInvalidArgument);
  pool.reserve(id, 4 * 64);  // the whole pool: allowed, no block taken
  EXPECT_EQ(pool.length(id), 0);
  EXPECT_EQ(pool.free_blocks(), 4);
}

}  // namespace
}  // namespace seqattn
