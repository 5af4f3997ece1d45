// A steady decode loop allocates nothing on the heap after its first step: append one token,
// run the plan over the cache with a caller workspace, 1000 times; nor does a steady loop of
// runs over q, k, v (every variant that takes a workspace) in a caller workspace. This program
// replaces the global operator new (every C++ allocation: vectors, strings, shared pointers) and,
// outside the sanitizers (whose runtimes own malloc), malloc, calloc, realloc and the aligned
// allocators through glibc's __libc_* entry points (Highway's aligned buffers), and counts
// calls while a step runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "seqattn/seqattn.hpp"
#include "tests/half/half_support.hpp"
#include "tests/kv_cache/kv_cache_support.hpp"
#include "tests/support/sanitizers.hpp"
#include "tests/support/test_tensors.hpp"

// This program's operator new is malloc, so its operator delete is free: g++ cannot see that
// the two are paired and warns at every inlined delete.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

namespace {
std::atomic<bool> counting{false};
std::atomic<long> allocations{0};
void note() {
  if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1);
}
}  // namespace

void* operator new(std::size_t n) {
  note();
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new(std::size_t n, std::align_val_t a) {
  note();
  const std::size_t align = static_cast<std::size_t>(a);
  if (void* p = std::aligned_alloc(align, (n + align - 1) / align * align)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n, std::align_val_t a) { return operator new(n, a); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

#if !defined(SEQATTN_TEST_PROGRAM_ASAN) && !defined(__SANITIZE_ADDRESS__) && \
    !defined(__SANITIZE_THREAD__)
extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);
void* malloc(std::size_t n) {
  note();
  return __libc_malloc(n);
}
void* calloc(std::size_t n, std::size_t size) {
  note();
  return __libc_calloc(n, size);
}
void* realloc(void* p, std::size_t n) {
  note();
  return __libc_realloc(p, n);
}
void* aligned_alloc(std::size_t align, std::size_t n) {
  note();
  return __libc_memalign(align, n);
}
void* memalign(std::size_t align, std::size_t n) {
  note();
  return __libc_memalign(align, n);
}
int posix_memalign(void** out, std::size_t align, std::size_t n) {
  note();
  *out = __libc_memalign(align, n);
  return *out == nullptr ? 12 /* ENOMEM */ : 0;
}
}
constexpr bool kCountsMalloc = true;
#else
constexpr bool kCountsMalloc = false;
#endif

namespace seqattn {
namespace {

using testing::expect_error;
using testing::make_tensor;
using testing::make_zeros;
using testing::OwnedTensor;

// Counts the allocations of `step` (a decode step: append + run).
template <class Step>
long allocations_of(const Step& step) {
  allocations = 0;
  counting = true;
  step();
  counting = false;
  return allocations.load();
}

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
  std::vector<std::byte> storage(plan.workspace_bytes() + 64);
  std::byte* aligned =
      storage.data() + (64 - reinterpret_cast<std::uintptr_t>(storage.data()) % 64);
  const RunArgs args{.workspace = {aligned, plan.workspace_bytes()}};
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
    std::vector<std::byte> storage(bytes + 64);
    std::byte* aligned =
        storage.data() + (64 - reinterpret_cast<std::uintptr_t>(storage.data()) % 64);
    const std::vector<std::int64_t> lengths{c.key_length};
    RunArgs args{.workspace = {aligned, bytes}}, plain;
    if (c.key_length > 0) args.key_lengths = plain.key_lengths = lengths;
    OwnedTensor out = make_zeros(1, kHeads, c.seq, kDim),
                alone = make_zeros(1, kHeads, c.seq, kDim);
    long after_first = 0;
    for (std::int64_t run = 0; run < kRuns; ++run) {  // new data each run
      const OwnedTensor q = make_tensor(1, kHeads, c.seq, kDim, testing::Layout::kBSHD, 20 + run);
      const OwnedTensor k = make_tensor(1, kKv, c.seq, kDim, testing::Layout::kBHSD, 40 + run);
      const OwnedTensor v = make_tensor(1, kKv, c.seq, kDim, testing::Layout::kBHSD, 60 + run);
      std::fill(aligned, aligned + bytes, std::byte{0xff});  // NaN floats
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
    std::vector<std::byte> storage(*bytes + 64);
    const std::span<std::byte> ws{
        storage.data() + (64 - reinterpret_cast<std::uintptr_t>(storage.data()) % 64) % 64, *bytes};
    long after_first = 0;
    for (int run = 0; run < 4; ++run) {
      const long n = allocations_of([&] { plan.run(c.q, c.k, c.k, c.out, {.workspace = ws}); });
      if (run > 0) after_first += n;
    }
    EXPECT_EQ(after_first, 0) << "heap allocations in runs 2..4";
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
    std::vector<std::byte> storage(*bytes + 64);
    const std::span<std::byte> ws{
        storage.data() + (64 - reinterpret_cast<std::uintptr_t>(storage.data()) % 64) % 64, *bytes};
    const RunArgs args{.weights = weights.view, .workspace = ws};
    long after_first = 0;
    for (int run = 0; run < 4; ++run) {
      const long n = allocations_of([&] { plan.run(qv, k.cview(), k.cview(), out.view, args); });
      if (run > 0) after_first += n;
    }
    EXPECT_EQ(after_first, 0) << "heap allocations in runs 2..4";
    if (kCountsMalloc) {
      EXPECT_GE(allocations_of([&] {
                  plan.run(qv, k.cview(), k.cview(), out.view, {.weights = weights.view});
                }),
                1)
          << "a run without a workspace allocates the weights pass's scratch";
    }
    double row = 0;  // the last row's weights: a softmax
    for (std::int64_t j = 0; j < kSeq; ++j) row += weights.storage[(kSeq - 1) * kSeq + j];
    EXPECT_NEAR(row, 1.0, 1e-5);
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
  std::vector<std::byte> storage(plan.workspace_bytes() + 64);
  std::byte* aligned =
      storage.data() + (64 - reinterpret_cast<std::uintptr_t>(storage.data()) % 64);
  const RunArgs args{.workspace = {aligned, plan.workspace_bytes()}};
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
    std::vector<std::byte> storage(plan.workspace_bytes() + 64);
    std::byte* aligned =
        storage.data() + (64 - reinterpret_cast<std::uintptr_t>(storage.data()) % 64);
    const RunArgs args{.workspace = {aligned, plan.workspace_bytes()}};
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
    std::vector<std::byte> storage(plan.workspace_bytes() + 64);
    std::byte* aligned =
        storage.data() + (64 - reinterpret_cast<std::uintptr_t>(storage.data()) % 64);
    const std::size_t short_bytes = plan.workspace_bytes() - 4 * 3 * kHeads * kSeqQ * (16 + 80);
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
        if (run > 0) args.workspace = {aligned, run == 1 ? plan.workspace_bytes() : short_bytes};
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
