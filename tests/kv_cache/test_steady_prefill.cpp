// A steady loop of runs over q, k, v (every variant that takes a workspace; half views; runs
// that ask for weights) in a caller workspace allocates nothing on the heap after its first
// run. Allocations are counted by counting_allocator.hpp (every operator new; malloc and the
// aligned allocators outside the sanitizers) while a run runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "seqattn/seqattn.hpp"
#include "tests/half/half_support.hpp"
#include "tests/kv_cache/counting_allocator.hpp"
#include "tests/kv_cache/kv_cache_support.hpp"
#include "tests/support/guarded_workspace.hpp"
#include "tests/support/sanitizers.hpp"
#include "tests/support/test_tensors.hpp"
#include "tests/variants/target_loop.hpp"

namespace seqattn {
namespace {

using testing::allocations_of;
using testing::kCountsMalloc;
using testing::make_tensor;
using testing::make_zeros;
using testing::OwnedTensor;

// A steady prefill loop over q, k, v (one plan run again and again, as for equal prefill chunks)
// allocates nothing after its first run, given qkv_workspace_bytes(): dense, and a sliding
// window long enough to take the banded path (S 5000, D 64: a pair packs at least
// 5000·(64 + 64) = 640000 floats, past the 2^19 budget, on every target) with a global token
// (a wide row, run on a fully packed copy); causal, GQA, RoPE or ALiBi (whose work items
// reorder their tiles), key lengths, one and two threads; Linformer (its projections and the
// dense run over them in one workspace), with RoPE and two threads; linear attention on its
// three paths (non-causal, causal segments in waves, causal FAVOR+); and hierarchical
// attention (its coarse levels' kernel calls in the pair's share); LSH attention (each pair
// thread's hashes, slots and accumulators, its calls' windows kept by the plan; S 2500 takes two
// kernel calls per round). The workspace is refilled
// with NaN bytes before every run (stale scratch would show); every run equals the same run without
// a workspace, bit for bit, and the run without one allocates (the counter sees it where it counts
// malloc).
TEST(SteadyPrefill, QkvRunsInAWorkspaceAllocateNothing) {
  struct Case {
    const char* name;
    Variant variant;
    bool causal;
    int threads;
    bool rope, alibi;
    std::int64_t seq;
    std::int64_t key_length = 0;  // > 0: RunArgs::key_lengths
    bool favor = false;           // linear attention's FAVOR+ map (else elu1)
  };
  // Under the sanitizers three runs (a second allocation would show in run 2 or 3): the eight
  // of the release flavour took 38 s of the sanitize flavour's tests.
  constexpr std::int64_t kHeads = 4, kKv = 2, kDim = 64, kRuns = testing::kSanitized ? 3 : 8;
  for (const Case& c :
       {Case{"dense, causal, rope", Variant::kDense, true, 1, true, false, 300},
        Case{"dense, alibi, 2 threads", Variant::kDense, false, 2, false, true, 257},
        Case{"window, banded, causal, key length", Variant::kSlidingWindow, true, 1, false, false,
             5000, 4321},
        Case{"dense, key length", Variant::kDense, false, 1, false, false, 200, 77},
        Case{"window, banded, alibi, 2 threads", Variant::kSlidingWindow, false, 2, false, true,
             5000},
        Case{"linformer, rope, key length", Variant::kLinformer, false, 1, true, false, 300, 211},
        Case{"linformer, 2 threads", Variant::kLinformer, false, 2, false, false, 517},
        Case{"linear, 2 threads, key length", Variant::kLinear, false, 2, false, false, 300, 177},
        Case{"linear elu1 causal segments, rope, 2 threads", Variant::kLinear, true, 2, true, false,
             1200},
        Case{"linear favor causal", Variant::kLinear, true, 1, false, false, 200, 0, true},
        Case{"hierarchical, rope, key length, 2 threads", Variant::kHierarchical, false, 2, true,
             false, 700, 650},
        Case{"hierarchical causal", Variant::kHierarchical, true, 1, false, false, 1000},
        Case{"lsh, causal, key length, 2 threads", Variant::kLsh, true, 2, false, false, 2500,
             2300},
        Case{"lsh", Variant::kLsh, false, 1, false, false, 300}}) {
    SCOPED_TRACE(c.name);
    AttentionOptions options;
    options.mask.causal = c.causal;
    options.threads = c.threads;
    if (c.rope) options.rope = RotaryEmbedding{};
    if (c.alibi) options.alibi = Alibi{};
    if (c.variant == Variant::kSlidingWindow) {
      SlidingWindowSpec window;
      window.left = 100;
      window.right = c.causal ? 0 : 30;
      window.global_tokens = {7};
      options.variant = window;
    }
    if (c.variant == Variant::kLinear) {
      LinearSpec linear;
      if (c.favor) linear.feature_map = FeatureMap::kFavor;
      options.variant = linear;
    }
    if (c.variant == Variant::kHierarchical) options.variant = HierarchicalSpec{.block = 32};
    if (c.variant == Variant::kLsh) {
      LshSpec lsh;  // separate keys: GQA (4 query heads over 2 kv heads)
      lsh.hashes = 2;
      lsh.chunk_length = 64;
      lsh.shared_qk = false;
      options.variant = lsh;
    }
    if (c.variant == Variant::kLinformer) {
      LinformerSpec projection;
      projection.proj_len = 96;
      options.variant = projection;
    }
    const AttentionPlan plan = make_plan({1, kHeads, kKv, c.seq, c.seq, kDim, kDim}, options);
    ASSERT_TRUE(plan.qkv_workspace_bytes().has_value());
    const std::size_t bytes = *plan.qkv_workspace_bytes();
    testing::GuardedWorkspace ws(bytes);
    const std::vector<std::int64_t> lengths{c.key_length};
    RunArgs args{.workspace = ws.bytes()}, plain;
    if (c.key_length > 0) args.key_lengths = plain.key_lengths = lengths;
    OwnedTensor out = make_zeros(1, kHeads, c.seq, kDim),
                alone = make_zeros(1, kHeads, c.seq, kDim);
    long after_first = 0;
    for (std::int64_t run = 0; run < kRuns; ++run) {  // new data each run
      const OwnedTensor q = make_tensor(1, kHeads, c.seq, kDim, testing::Layout::kBSHD, 20 + run);
      const OwnedTensor k = make_tensor(1, kKv, c.seq, kDim, testing::Layout::kBHSD, 40 + run);
      const OwnedTensor v = make_tensor(1, kKv, c.seq, kDim, testing::Layout::kBHSD, 60 + run);
      ws.refill();  // NaN floats
      const long n =
          allocations_of([&] { plan.run(q.cview(), k.cview(), v.cview(), out.view, args); });
      if (run > 0) after_first += n;
      const long own =
          allocations_of([&] { plan.run(q.cview(), k.cview(), v.cview(), alone.view, plain); });
      if (kCountsMalloc) {
        EXPECT_GE(own, 1) << "a run without a workspace allocates its scratch";
      }
      ASSERT_EQ(
          std::memcmp(out.storage.data(), alone.storage.data(), out.storage.size() * sizeof(float)),
          0)
          << "run " << run << ": the workspace changed the result";
    }
    EXPECT_EQ(after_first, 0) << "heap allocations in runs 2.." << kRuns;
    EXPECT_TRUE(ws.guard_intact()) << "a run wrote past its workspace";
    double largest = 0;  // not all zero; softmax's is a convex combination of values (|v| <= 1)
    for (const float x : out.storage) largest = std::max(largest, std::abs(static_cast<double>(x)));
    EXPECT_GT(largest, 0.0);
    if (c.variant != Variant::kLinformer && c.variant != Variant::kLinear) {  // softmax
      EXPECT_LE(largest, 1.0);
    }
  }
}

// Half views (their fp32 copies at the workspace's end) and f32 views rounded by fp32_precision
// bf16: runs in qkv_workspace_bytes(dtypes) allocate nothing after the first either.
TEST(SteadyPrefill, HalfViewsInAWorkspaceAllocateNothing) {
  constexpr std::int64_t kHeads = 4, kKv = 2, kSeq = 300, kDim = 64;
  const OwnedTensor q32 = make_tensor(1, kHeads, kSeq, kDim, testing::Layout::kBSHD, 5);
  const OwnedTensor k32 = make_tensor(1, kKv, kSeq, kDim, testing::Layout::kBHSD, 6);
  const auto q16 = testing::rounded<bfloat16>(q32), k16 = testing::rounded<bfloat16>(k32);
  const auto qh = testing::rounded<float16>(q32);
  auto out16 = testing::rounded<float16>(make_zeros(1, kHeads, kSeq, kDim));
  OwnedTensor out32 = make_zeros(1, kHeads, kSeq, kDim);
  struct Case {
    const char* name;
    AnyConstTensor q, k;
    AnyTensor out;
    bool rounds;
    VariantSpec variant;
  };
  SlidingWindowSpec window;
  window.left = 40;
  for (const Case& c :
       {Case{"bf16 q/k/v, f16 out, dense", q16.cview(), k16.cview(), out16.view, false, {}},
        Case{"f16 q, bf16 k/v, f32 out, window", qh.cview(), k16.cview(), out32.view, false,
             window},
        Case{"f32 views rounded to bf16", q32.cview(), k32.cview(), out32.view, true, {}}}) {
    SCOPED_TRACE(c.name);
    AttentionOptions options;
    options.mask.causal = true;
    options.variant = c.variant;
    if (c.rounds) options.fp32_precision = Fp32Precision::kBf16;
    const AttentionPlan plan = make_plan({1, kHeads, kKv, kSeq, kSeq, kDim, kDim}, options);
    const std::optional<std::size_t> bytes =
        plan.qkv_workspace_bytes({c.q.dtype, c.k.dtype, c.k.dtype, c.out.dtype});
    ASSERT_TRUE(bytes.has_value());
    testing::GuardedWorkspace guarded(*bytes);
    const std::span<std::byte> ws = guarded.bytes();
    long after_first = 0;
    for (int run = 0; run < 4; ++run) {
      const long n = allocations_of([&] { plan.run(c.q, c.k, c.k, c.out, {.workspace = ws}); });
      if (run > 0) after_first += n;
    }
    EXPECT_EQ(after_first, 0) << "heap allocations in runs 2..4";
    EXPECT_TRUE(guarded.guard_intact()) << "a run wrote past its workspace";
    if (kCountsMalloc) {
      EXPECT_GE(allocations_of([&] { plan.run(c.q, c.k, c.k, c.out); }), 1)
          << "a run without a workspace allocates its copies";
    }
  }
}

// Runs that ask for the attention weights, in qkv_workspace_bytes({..., .weights = true}): the
// weights pass's score rows (and with RoPE its rotated q and k) come from the workspace too.
TEST(SteadyPrefill, WeightsRunsInAWorkspaceAllocateNothing) {
  constexpr std::int64_t kHeads = 4, kKv = 2, kSeq = 200, kDim = 32;
  const OwnedTensor q = make_tensor(1, kHeads, kSeq, kDim, testing::Layout::kBSHD, 7);
  const OwnedTensor k = make_tensor(1, kKv, kSeq, kDim, testing::Layout::kBHSD, 8);
  const auto q16 = testing::rounded<bfloat16>(q);
  OwnedTensor out = make_zeros(1, kHeads, kSeq, kDim), weights = make_zeros(1, kHeads, kSeq, kSeq);
  SlidingWindowSpec window;
  window.left = 30;
  window.global_tokens = {3};
  struct Case {
    const char* name;
    VariantSpec variant;
    bool rope, alibi, half;
    int threads;
  };
  for (const Case& c : {Case{"dense, rope, causal", {}, true, false, false, 1},
                        Case{"window, alibi, 2 threads", window, false, true, false, 2},
                        Case{"dense, rope, bf16 q, 2 threads", {}, true, false, true, 2}}) {
    SCOPED_TRACE(c.name);
    AttentionOptions options;
    options.mask.causal = true;
    options.variant = c.variant;
    options.threads = c.threads;
    if (c.rope) options.rope = RotaryEmbedding{};
    if (c.alibi) options.alibi = Alibi{};
    const AttentionPlan plan = make_plan({1, kHeads, kKv, kSeq, kSeq, kDim, kDim}, options);
    const AnyConstTensor qv = c.half ? AnyConstTensor(q16.cview()) : AnyConstTensor(q.cview());
    const std::optional<std::size_t> bytes = plan.qkv_workspace_bytes(
        {.q = qv.dtype, .k = DType::kF32, .v = DType::kF32, .out = DType::kF32, .weights = true});
    ASSERT_TRUE(bytes.has_value());
    testing::GuardedWorkspace guarded(*bytes);
    const std::span<std::byte> ws = guarded.bytes();
    const RunArgs args{.weights = weights.view, .workspace = ws};
    long after_first = 0;
    for (int run = 0; run < 4; ++run) {
      const long n = allocations_of([&] { plan.run(qv, k.cview(), k.cview(), out.view, args); });
      if (run > 0) after_first += n;
    }
    EXPECT_EQ(after_first, 0) << "heap allocations in runs 2..4";
    EXPECT_TRUE(guarded.guard_intact()) << "a run wrote past its workspace";
    if (kCountsMalloc) {  // the pass's scratch is allocated on top of the kernel's
      const long plain = allocations_of([&] { plan.run(qv, k.cview(), k.cview(), out.view); });
      const long with_weights = allocations_of(
          [&] { plan.run(qv, k.cview(), k.cview(), out.view, {.weights = weights.view}); });
      EXPECT_GT(with_weights, plain) << "a weights run without a workspace allocates its rows";
    }
    double row = 0;  // the last row's weights: a softmax
    for (std::int64_t j = 0; j < kSeq; ++j) row += weights.storage[(kSeq - 1) * kSeq + j];
    EXPECT_NEAR(row, 1.0, 1e-5);
  }
}

// One plan run on every compiled target: qkv_workspace_bytes() answers for the target runs
// dispatch to now, not the plan's (each target blocks its tiles its own way), so a workspace of
// that count serves the run bitwise, one line less is refused naming workspace.size() with out
// untouched (the count is the run's need, not a bound), and the second run on the target
// allocates nothing. Dense (S 257), a banded sliding window (S 5000, a global token), Linformer
// and LSH (whose GEMM packing follows the target's blocking too), all on 2 threads: their
// counts differ between targets, which a count kept from the plan's target got wrong.
TEST(SteadyPrefill, OnePlanCountsTheTargetItRunsOn) {
  constexpr std::int64_t kHeads = 4, kKv = 2, kDim = 64;
  struct Case {
    const char* name;
    VariantSpec variant;
    std::int64_t seq;
  };
  SlidingWindowSpec window;
  window.left = window.right = 64;
  window.global_tokens = {0};
  LinformerSpec linformer;
  linformer.proj_len = 96;
  LshSpec lsh;  // separate keys: GQA
  lsh.hashes = 2;
  lsh.chunk_length = 64;
  lsh.shared_qk = false;
  for (const Case& c : {Case{"dense", DenseSpec{}, 257}, Case{"window", window, 5000},
                        Case{"linformer", linformer, 300}, Case{"lsh", lsh, 600}}) {
    SCOPED_TRACE(c.name);
    AttentionOptions options;
    options.variant = c.variant;
    options.threads = 2;
    const AttentionPlan plan = make_plan({1, kHeads, kKv, c.seq, c.seq, kDim, kDim}, options);
    const OwnedTensor q = make_tensor(1, kHeads, c.seq, kDim, testing::Layout::kBHSD, 31);
    const OwnedTensor k = make_tensor(1, kKv, c.seq, kDim, testing::Layout::kBHSD, 32);
    const OwnedTensor v = make_tensor(1, kKv, c.seq, kDim, testing::Layout::kBHSD, 33);
    std::set<std::size_t> counts;
    testing::for_each_target([&] {
      const std::size_t bytes = *plan.qkv_workspace_bytes();
      counts.insert(bytes);
      std::printf("%s on %s: %zu bytes\n", c.name, simd_target().c_str(), bytes);
      testing::GuardedWorkspace ws(bytes);
      OwnedTensor out = make_zeros(1, kHeads, c.seq, kDim),
                  alone = make_zeros(1, kHeads, c.seq, kDim);
      testing::expect_error(
          [&] {
            plan.run(q.cview(), k.cview(), v.cview(), out.view,
                     {.workspace = ws.bytes().first(bytes - 64)});
          },
          "workspace.size()", ErrorKind::kInvalidArgument);
      ASSERT_TRUE(std::all_of(out.storage.begin(), out.storage.end(), [](float x) {
        return x == 0;
      })) << "a refused run wrote out";
      const RunArgs args{.workspace = ws.bytes()};
      plan.run(q.cview(), k.cview(), v.cview(), out.view, args);
      EXPECT_EQ(allocations_of([&] { plan.run(q.cview(), k.cview(), v.cview(), out.view, args); }),
                0);
      plan.run(q.cview(), k.cview(), v.cview(), alone.view);
      EXPECT_EQ(
          std::memcmp(out.storage.data(), alone.storage.data(), out.storage.size() * sizeof(float)),
          0);
      EXPECT_TRUE(ws.guard_intact()) << "a run wrote past its workspace";
    });
    // Every x86-64 CPU with AVX2 compiles and runs a narrower target (SSE4) besides it, and
    // their counts differ. (The xsimd build's flash kernel follows its own arch instead.)
    if (hwy::SupportedAndGeneratedTargets().size() >= 2 &&
        !testing::flash_kernel_ignores_highway_targets()) {
      EXPECT_GE(counts.size(), 2u) << "the same count on every target: the test shows nothing";
    }
  }
}

// Random weights for the four projections of `layer` (seeded by `seed` + the columns), and
// with `bias` each projection's bias from its weights' first row.
void set_every_weight(MultiHeadAttention& layer, std::int64_t model, std::uint32_t seed,
                      bool bias) {
  for (const Projection which :
       {Projection::kQuery, Projection::kKey, Projection::kValue, Projection::kOutput}) {
    const std::int64_t cols = layer.out_features(which);
    const OwnedTensor w = make_tensor(1, 1, model, cols, testing::Layout::kBHSD,
                                      seed + static_cast<std::uint32_t>(cols));
    layer.set_weights(which, w.storage.data(), model, cols);
    if (bias) layer.set_bias(which, w.storage.data(), cols);
  }
}

// A steady MultiHeadAttention forward (self and cross attention, fp32 projections on 1 and 2
// threads, with and without biases, GQA, an output projection; no mask) allocates nothing after
// its first and gives the same bits every time: the projections' GEMM packing is the layer's
// own scratch (sgemm's pack), the attention runs in the layer's workspace, and the biases add
// without a one-thread OpenMP region. (Under the sanitizers only operator new is counted, so a
// GEMM allocating its own pack, through malloc, shows in the other flavours only.)
TEST(SteadyPrefill, MultiHeadAttentionForwardsAllocateNothing) {
  constexpr std::int64_t kBatch = 2, kSeq = 300, kModel = 128;
  for (const int threads : {1, 2}) {
    for (const bool bias : {false, true}) {
      SCOPED_TRACE(::testing::Message() << threads << " threads, bias " << bias);
      MhaConfig config;
      config.d_model = kModel;
      config.num_heads = 4;
      config.num_kv_heads = 2;
      config.threads = threads;
      config.bias = bias;
      MultiHeadAttention layer(config);
      set_every_weight(layer, kModel, 70, bias);
      const OwnedTensor x = make_tensor(1, kBatch, kSeq, kModel, testing::Layout::kBHSD, 81);
      const OwnedTensor memory =
          make_tensor(1, kBatch, 2 * kSeq, kModel, testing::Layout::kBHSD, 82);
      OwnedTensor out = make_zeros(1, kBatch, kSeq, kModel);
      const SequenceView<const float> xs{x.storage.data(), kBatch, kSeq, kModel};
      const SequenceView<const float> ms{memory.storage.data(), kBatch, 2 * kSeq, kModel};
      const SequenceView<float> os{out.storage.data(), kBatch, kSeq, kModel};
      for (const bool cross : {false, true}) {
        SCOPED_TRACE(cross ? "cross attention" : "self-attention");
        auto forward = [&] { cross ? layer.forward(xs, ms, os) : layer.forward(xs, os); };
        forward();  // the first sizes the layer's scratch (and a new shape plans anew)
        const std::vector<float> first = out.storage;
        long after_first = 0;
        for (int step = 0; step < 3; ++step) after_first += allocations_of(forward);
        EXPECT_EQ(after_first, 0) << "heap allocations in forwards after the first";
        EXPECT_EQ(std::memcmp(first.data(), out.storage.data(), first.size() * sizeof(float)), 0);
      }
    }
  }
}

// The forwards whose per-call parts the layer once copied (a mask's key lengths; a sliding
// window's global tokens, in the variant; sinusoidal positions added to copies of x; bf16
// activations widened to fp32 and out staged in fp32) allocate nothing after their first
// either, and give the same bits every time: self- and cross-attention, 2 threads, GQA.
TEST(SteadyPrefill, MultiHeadAttentionPerCallPartsAllocateNothing) {
  constexpr std::int64_t kBatch = 2, kSeq = 200, kModel = 64;
  struct Case {
    const char* name;
    VariantSpec variant;
    bool key_lengths, sinusoidal, bf16;
  };
  const Case cases[] = {
      {"causal mask with key lengths", DenseSpec{}, true, false, false},
      {"sliding window with global tokens", SlidingWindowSpec{32, 32, {0, 7, 150}}, false, false,
       false},
      {"sinusoidal positions", DenseSpec{}, false, true, false},
      {"bf16 activations, key lengths and positions", DenseSpec{}, true, true, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    MhaConfig config;
    config.d_model = kModel;
    config.num_heads = 4;
    config.num_kv_heads = 2;
    config.threads = 2;
    config.variant = c.variant;
    config.sinusoidal_positions = c.sinusoidal;
    MultiHeadAttention layer(config);
    set_every_weight(layer, kModel, 90, false);
    const OwnedTensor x = make_tensor(1, kBatch, kSeq, kModel, testing::Layout::kBHSD, 91);
    const OwnedTensor memory = make_tensor(1, kBatch, 2 * kSeq, kModel, testing::Layout::kBHSD, 92);
    const std::vector<bfloat16> x16 = testing::rounded<bfloat16>(x).storage;
    const std::vector<bfloat16> memory16 = testing::rounded<bfloat16>(memory).storage;
    std::vector<float> out(kBatch * kSeq * kModel);
    std::vector<bfloat16> out16(out.size());
    for (const bool cross : {false, true}) {
      SCOPED_TRACE(cross ? "cross attention" : "self-attention");
      Mask mask;
      mask.causal = !cross && c.key_lengths;
      if (c.key_lengths)
        mask.key_lengths =
            cross ? std::vector<std::int64_t>{300, 400} : std::vector<std::int64_t>{150, 200};
      auto forward = [&] {
        if (c.bf16) {
          const SequenceView<const bfloat16> xs{x16.data(), kBatch, kSeq, kModel};
          const SequenceView<const bfloat16> ms{memory16.data(), kBatch, 2 * kSeq, kModel};
          const SequenceView<bfloat16> os{out16.data(), kBatch, kSeq, kModel};
          cross ? layer.forward(xs, ms, os, mask) : layer.forward(xs, os, mask);
        } else {
          const SequenceView<const float> xs{x.storage.data(), kBatch, kSeq, kModel};
          const SequenceView<const float> ms{memory.storage.data(), kBatch, 2 * kSeq, kModel};
          const SequenceView<float> os{out.data(), kBatch, kSeq, kModel};
          cross ? layer.forward(xs, ms, os, mask) : layer.forward(xs, os, mask);
        }
      };
      forward();  // the first sizes the layer's copies and scratch, and plans
      const std::vector<float> first = out;
      const std::vector<bfloat16> first16 = out16;
      long after_first = 0;
      for (int step = 0; step < 3; ++step) after_first += allocations_of(forward);
      EXPECT_EQ(after_first, 0) << "heap allocations in forwards after the first";
      if (c.bf16) {
        EXPECT_EQ(std::memcmp(first16.data(), out16.data(), first16.size() * sizeof(bfloat16)), 0);
      } else {
        EXPECT_EQ(std::memcmp(first.data(), out.data(), first.size() * sizeof(float)), 0);
      }
    }
  }
}

}  // namespace
}  // namespace seqattn
