// A steady decode loop allocates nothing on the heap after its first step: append one token,
// run the plan over the cache with a caller workspace, 1000 times. This program replaces the
// global operator new (every C++ allocation: vectors, strings, shared pointers) and, outside
// the sanitizers (whose runtimes own malloc), malloc, calloc, realloc and the aligned
// allocators through glibc's __libc_* entry points (Highway's aligned buffers), and counts
// calls while a step runs.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include "seqattn/seqattn.hpp"
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
  DType dtype;
  bool rope;
  Variant variant;
  int threads;
};

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
  long after_first = 0;
  for (std::int64_t t = kStart; t < kStart + kSteps; ++t) {
    const long n = allocations_of([&] {
      cache.append(tokens(k, t, 1), tokens(v, t, 1));
      const RunRecord record = plan.run(q.cview(), cache, out.view, args);
      ASSERT_EQ(record.variant, c.variant);
    });
    if (t > kStart) after_first += n;
  }
  EXPECT_EQ(after_first, 0) << "heap allocations in steps 2.." << kSteps;
  EXPECT_EQ(cache.length(0), kStart + kSteps);
  // The loop computed something: out holds a convex combination of values (|v| <= 1).
  double largest = 0;
  for (std::int64_t h = 0; h < kHeads; ++h)
    for (std::int64_t d = 0; d < kDim; ++d)
      largest = std::max(largest, std::abs(static_cast<double>(out.view.at(0, h, 0, d))));
  EXPECT_GT(largest, 0.0);
  EXPECT_LE(largest, 1.0);
}

TEST(SteadyDecode, NoHeapAllocationAfterTheFirstStep) {
  for (const LoopCase& c : {LoopCase{"f32", DType::kF32, false, Variant::kDense, 1},
                            LoopCase{"bf16, rope", DType::kBF16, true, Variant::kDense, 1},
                            LoopCase{"i8, rope", DType::kI8, true, Variant::kDense, 1},
                            LoopCase{"f16, window", DType::kF16, false, Variant::kSlidingWindow, 1},
                            LoopCase{"bf16, 2 threads", DType::kBF16, false, Variant::kDense, 2}}) {
    run_loop(c);
  }
}

// A paged batch's runs (the block tables gathered into the workspace) allocate nothing either;
// appends may, when a sequence's block table grows (geometrically: a handful of times).
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

}  // namespace
}  // namespace seqattn
