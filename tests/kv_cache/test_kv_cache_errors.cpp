// Every bad argument to KvCache and to attention over it is an Error naming the argument,
// and leaves the cache (lengths and contents) and out untouched.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "kv_cache_support.hpp"
#include "src/kernel/decode/prefetch_level.hpp"
#include "tests/support/guarded_workspace.hpp"

namespace seqattn {
namespace {

using testing::CacheSequence;
using testing::expect_error;
using testing::make_zeros;
using testing::OwnedTensor;

constexpr float kSentinel = 777.0f;

struct Fixture {
  CacheSequence seq{2, 4, 2, 200, 16, 8, 29};
  KvCache cache{{2, 2, 150, 16, 8}};
  OwnedTensor q = testing::make_tensor(2, 4, 1, 16, testing::Layout::kBHSD, 31);
  OwnedTensor out = make_zeros(2, 4, 1, 8);
  std::vector<float> before;

  Fixture() {
    seq.append(cache, 0, 0, 100);
    seq.append(cache, 1, 0, 30);
    std::fill(out.storage.begin(), out.storage.end(), kSentinel);
    before = run();
  }
  // The cache's observable state: lengths and the attention it gives.
  std::vector<float> run() {
    OwnedTensor o = make_zeros(2, 4, 1, 8);
    attend(q.cview(), cache, o.view);
    o.storage.push_back(static_cast<float>(cache.length(0)));
    o.storage.push_back(static_cast<float>(cache.length(1)));
    return o.storage;
  }
  void expect_untouched() {
    EXPECT_EQ(run(), before) << "the cache changed";
    for (float x : out.storage) ASSERT_EQ(x, kSentinel) << "out was written";
  }
};

TEST(KvCacheErrors, AppendBadShapesAndCapacity) {
  Fixture f;
  const ConstTensor k60 = CacheSequence::rows(f.seq.k, 0, 0, 60);
  const ConstTensor v60 = CacheSequence::rows(f.seq.v, 0, 0, 60);
  expect_error([&] { f.cache.append(0, k60, v60); }, "k.shape[2] (new tokens)",
               ErrorKind::kInvalidArgument);  // 100 + 60 > 150
  expect_error([&] { f.cache.append(2, k60, v60); }, "'batch'", ErrorKind::kInvalidArgument);
  expect_error([&] { f.cache.append(-1, k60, v60); }, "'batch'", ErrorKind::kInvalidArgument);
  expect_error([&] { f.cache.append(1, k60, CacheSequence::rows(f.seq.v, 0, 0, 59)); }, "v.shape",
               ErrorKind::kInvalidArgument);
  expect_error([&] { f.cache.append(k60, v60); }, "k.shape", ErrorKind::kInvalidArgument);
  ConstTensor null_k = k60;
  null_k.data = nullptr;
  expect_error([&] { f.cache.append(1, null_k, v60); }, "k.data", ErrorKind::kInvalidArgument);
  // A dtype outside the enum: once sized as 2-byte elements and read as floats, past the view.
  AnyConstTensor bad_k = k60, bad_v = v60;
  bad_k.dtype = bad_v.dtype = static_cast<DType>(7);
  expect_error([&] { f.cache.append(1, bad_k, bad_v); }, "k.dtype", ErrorKind::kInvalidArgument);
  AnyConstTensor bad_v_only = v60;
  bad_v_only.dtype = static_cast<DType>(-1);
  expect_error([&] { f.cache.append(1, k60, bad_v_only); }, "v.dtype", ErrorKind::kInvalidArgument);
  // All batches: one full sequence refuses the whole append.
  OwnedTensor k2 = testing::make_tensor(2, 2, 60, 16, testing::Layout::kBHSD, 1);
  OwnedTensor v2 = testing::make_tensor(2, 2, 60, 8, testing::Layout::kBHSD, 2);
  expect_error([&] { f.cache.append(k2.cview(), v2.cview()); }, "length(0)",
               ErrorKind::kInvalidArgument);
  f.expect_untouched();
  expect_error(
      [&] {
        KvCache bad({1, 0, 10, 4, 4});
      },
      "shape.heads_kv", ErrorKind::kInvalidArgument);
  expect_error(
      [&] {
        KvCache bad({1 << 20, 1 << 10, 1 << 20, 128, 128});
      },
      "'shape'", ErrorKind::kInvalidArgument);
  expect_error([&] { (void)f.cache.length(5); }, "'batch'", ErrorKind::kInvalidArgument);
}

// The new queries are the last S_q tokens of each sequence: a sequence shorter than S_q would
// put rows at negative positions.
TEST(KvCacheErrors, MoreQueriesThanASequenceHoldsIsAnError) {
  Fixture f;  // lengths 100 and 30
  OwnedTensor q = testing::make_tensor(2, 4, 31, 16, testing::Layout::kBHSD, 5);
  OwnedTensor out = make_zeros(2, 4, 31, 8);
  std::fill(out.storage.begin(), out.storage.end(), kSentinel);
  expect_error([&] { attend(q.cview(), f.cache, out.view); }, "q.shape[2] (S_q)",
               ErrorKind::kInvalidArgument);
  try {
    attend(q.cview(), f.cache, out.view);
    ADD_FAILURE() << "no error for S_q = 31 over a sequence of 30 tokens";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cache.length(1) = 30"), std::string::npos) << e.what();
  }
  for (float x : out.storage) ASSERT_EQ(x, kSentinel) << "out was written";
  OwnedTensor q30 = testing::make_tensor(2, 4, 30, 16, testing::Layout::kBHSD, 5);
  OwnedTensor out30 = make_zeros(2, 4, 30, 8);
  EXPECT_NO_THROW(attend(q30.cview(), f.cache, out30.view));  // S_q = the shorter length
  f.expect_untouched();
}

TEST(KvCacheErrors, AttentionBadArguments) {
  Fixture f;
  auto run_with = [&](const AttentionOptions& options) {
    attend(f.q.cview(), f.cache, f.out.view, options);
  };
  AttentionOptions linear;
  linear.variant = LinearSpec{};
  expect_error([&] { run_with(linear); }, "'variant'", ErrorKind::kUnsupported);
  try {  // the rows whose over_cache is set, from the table
    run_with(linear);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("linear does not run over a KvCache: use one of dense, "
                                         "sliding-window"),
              std::string::npos)
        << e.what();
  }
  AttentionOptions lengths;
  lengths.mask.key_lengths = {1, 1};
  expect_error([&] { run_with(lengths); }, "mask.key_lengths", ErrorKind::kUnsupported);
  OwnedTensor w = make_zeros(2, 4, 1, 150);
  AttentionOptions weights;
  weights.weights = w.view;
  expect_error([&] { run_with(weights); }, "'weights'", ErrorKind::kUnsupported);
  OwnedTensor wrong_out = make_zeros(2, 4, 1, 9);
  expect_error([&] { attend(f.q.cview(), f.cache, wrong_out.view); }, "out.shape",
               ErrorKind::kInvalidArgument);
  OwnedTensor wrong_q = testing::make_tensor(2, 4, 1, 15, testing::Layout::kBHSD, 3);
  expect_error([&] { attend(wrong_q.cview(), f.cache, f.out.view); }, "q.shape",
               ErrorKind::kInvalidArgument);
  Tensor aliased = f.out.view;
  aliased.data = f.q.view.data;  // out over q's memory
  expect_error([&] { attend(f.q.cview(), f.cache, aliased); }, "'out'",
               ErrorKind::kInvalidArgument);
  // A plan for another cache.
  const AttentionPlan plan = make_plan(cache_shape({2, 2, 151, 16, 8}, 4, 1), {});
  expect_error([&] { plan.run(f.q.cview(), f.cache, f.out.view); }, "cache.shape().capacity",
               ErrorKind::kInvalidArgument);
  const AttentionPlan good = make_plan(cache_shape(f.cache.shape(), 4, 1), {});
  std::vector<std::byte> small(good.workspace_bytes() / 2 + 64);
  expect_error([&] { good.run(f.q.cview(), f.cache, f.out.view, {.workspace = small}); },
               "workspace.size()", ErrorKind::kInvalidArgument);
  const testing::GuardedWorkspace big(good.workspace_bytes() + 64);  // room for a misaligned start
  expect_error(
      [&] {
        good.run(f.q.cview(), f.cache, f.out.view,
                 {.workspace = big.bytes().subspan(4, good.workspace_bytes())});
      },
      "workspace.data()", ErrorKind::kInvalidArgument);
  expect_error(  // a null address with a size (0 is "aligned" but no memory)
      [&] {
        good.run(f.q.cview(), f.cache, f.out.view,
                 {.workspace = {static_cast<std::byte*>(nullptr), good.workspace_bytes()}});
      },
      "workspace.data()", ErrorKind::kInvalidArgument);
  f.expect_untouched();
}

TEST(KvCacheErrors, RingLimits) {
  CacheSequence seq(1, 2, 1, 300, 8, 8, 37);
  KvCache ring({1, 1, 64, 8, 8}, KvCacheMode::kRing);
  seq.append(ring, 0, 0, 300);  // a ring takes any number of tokens
  EXPECT_EQ(ring.length(0), 300);
  EXPECT_EQ(ring.stored(0), 64);
  OwnedTensor q = testing::make_tensor(1, 2, 2, 8, testing::Layout::kBHSD, 4);
  OwnedTensor out = make_zeros(1, 2, 2, 8);
  std::fill(out.storage.begin(), out.storage.end(), kSentinel);
  expect_error([&] { attend(q.cview(), ring, out.view); }, "cache.length(0)",
               ErrorKind::kInvalidArgument);  // dense needs every token
  AttentionOptions wide;
  wide.variant = SlidingWindowSpec{63, 0, {}};
  wide.mask.causal = true;
  expect_error([&] { attend(q.cview(), ring, out.view, wide); }, "sliding_window.left",
               ErrorKind::kInvalidArgument);  // 63 + 2 queries > 64
  AttentionOptions globals;
  globals.variant = SlidingWindowSpec{8, 0, {0}};
  expect_error([&] { attend(q.cview(), ring, out.view, globals); }, "global_tokens",
               ErrorKind::kUnsupported);
  for (float x : out.storage) ASSERT_EQ(x, kSentinel);
  AttentionOptions fits;
  fits.variant = SlidingWindowSpec{62, 0, {}};
  fits.mask.causal = true;
  EXPECT_NO_THROW(attend(q.cview(), ring, out.view, fits));
}

TEST(KvCacheErrors, ClearForgetsTokens) {
  Fixture f;
  f.cache.clear(1);
  EXPECT_EQ(f.cache.length(1), 0);
  EXPECT_EQ(f.cache.length(0), 100);
  f.seq.append(f.cache, 1, 0, 30);
  EXPECT_EQ(f.run(), f.before);  // the same tokens again: the same result
  f.cache.clear();
  EXPECT_EQ(f.cache.length(0), 0);
}

// Found by fuzz_attend: extents near 2^63 overflowed the block rounding of the capacity and the
// 16-column padding of D_v (signed overflow under UBSan) instead of failing cleanly.
TEST(KvCacheErrors, ExtentsNearTwoToThe63AreErrors) {
  constexpr std::int64_t kHuge = std::numeric_limits<std::int64_t>::max();
  expect_error(
      [] {
        KvCache c({1, 1, kHuge, 16, 8});
      },
      "shape.capacity", ErrorKind::kInvalidArgument);
  expect_error(
      [] {
        KvCache c({1, 1, 64, 16, kHuge - 15});
      },
      "shape.dim_v", ErrorKind::kInvalidArgument);
  expect_error([] { KvCache c({1, 1, 64, kHuge, 8}); }, "shape.dim", ErrorKind::kInvalidArgument);
  // Each extent fits, but the product of the batch, heads and per-sequence sizes does not.
  expect_error(
      [] {
        KvCache c({std::int64_t{1} << 30, std::int64_t{1} << 30, 64, 64, 64});
      },
      "shape", ErrorKind::kInvalidArgument);
}

// The decode kernel's prefetch choice: the CPU table (Zen 5 measured faster into L1, Zen 3 with
// half the far distance, an Intel Xeon with near and paced requests too), the environment's
// override, and an Error naming the variable for anything else.
TEST(DecodePrefetch, ChoiceFollowsTheCpuTableAndTheEnvironment) {
  using detail::DecodePrefetch;
  using simd::CacheLevel;
  detail::CpuFeatures zen5, zen4, zen3, intel;
  zen5.vendor = zen4.vendor = zen3.vendor = detail::CpuVendor::kAmd;
  zen5.family = 26;
  zen4.family = zen3.family = 25;
  zen4.avx512f = true;  // what tells Zen 4 from Zen 3 in family 25
  intel.vendor = detail::CpuVendor::kIntel;
  intel.family = 6;
  const DecodePrefetch l1{CacheLevel::kL1, 0, false}, l2{CacheLevel::kL2, 0, false};
  EXPECT_EQ(detail::choose_decode_prefetch(nullptr, zen5), l1);
  EXPECT_EQ(detail::choose_decode_prefetch(nullptr, zen4), l2);
  EXPECT_EQ(detail::choose_decode_prefetch(nullptr, zen3),
            (DecodePrefetch{CacheLevel::kL2, 0, false, 128}));
  EXPECT_EQ(detail::choose_decode_prefetch("l2", zen3), l2);   // a set level has the usual reach
  EXPECT_EQ(detail::choose_decode_prefetch("l1", intel), l1);  // a set level has no near rows
  EXPECT_EQ(detail::choose_decode_prefetch("l2", zen5), l2);
  detail::CpuFeatures intel_avx2 = intel;  // the near requests were measured on AVX-512 only
  intel.avx512f = true;
  EXPECT_EQ(detail::choose_decode_prefetch(nullptr, intel),
            (DecodePrefetch{CacheLevel::kL2, 16, true}));
  EXPECT_EQ(detail::choose_decode_prefetch(nullptr, intel_avx2), l2);
  EXPECT_EQ(detail::choose_decode_prefetch("l2+near8", zen4), (DecodePrefetch{CacheLevel::kL2, 8}));
  EXPECT_EQ(detail::choose_decode_prefetch("l2+near1", zen4), (DecodePrefetch{CacheLevel::kL2, 1}));
  EXPECT_EQ(detail::choose_decode_prefetch("l1+near8", zen5), (DecodePrefetch{CacheLevel::kL1, 8}));
  EXPECT_EQ(detail::choose_decode_prefetch("l1+near64", zen4),
            (DecodePrefetch{CacheLevel::kL1, 64}));
  EXPECT_EQ(detail::choose_decode_prefetch("l2+near16+paced", zen4),
            (DecodePrefetch{CacheLevel::kL2, 16, true}));
  EXPECT_EQ(detail::choose_decode_prefetch("l1+paced", intel),
            (DecodePrefetch{CacheLevel::kL1, 0, true}));
  EXPECT_EQ(detail::choose_decode_prefetch("l2+far128", zen5),
            (DecodePrefetch{CacheLevel::kL2, 0, false, 128}));
  EXPECT_EQ(detail::choose_decode_prefetch("l1+far64+near8+paced", zen4),
            (DecodePrefetch{CacheLevel::kL1, 8, true, 64}));
  EXPECT_EQ(detail::choose_decode_prefetch("l2+far1024+paced", intel),
            (DecodePrefetch{CacheLevel::kL2, 0, true, 1024}));
  EXPECT_EQ(detail::choose_decode_prefetch("l1+far256", zen3), l1);  // the default, spelt out
  EXPECT_EQ(detail::choose_decode_prefetch("", zen5), l1);           // as unset
  EXPECT_EQ(detail::choose_decode_prefetch("auto", zen4), l2);
  const char* const bad_near[] = {
      "L1",         "l3",          "l1 ",       "AUTO",     "l2+near",   "l2+near0",
      "l2+near65",  "l2+near016",  "l2+far16",  "l2near16", "l2+near1x", "l",
      "l2+near16 ", "auto+near16", "l2+NEAR16", "+near16",  "l2+near100"};
  const char* const bad_paced[] = {
      "l2+paced+near16", "l2+near16+paced ", "l2+near16paced", "l2+near+paced",
      "l2+PACED",        "l2+paced+paced",   "l2+pace",        "+paced"};
  const char* const bad_far[] = {"l2+far",     "l2+far0",         "l2+far96",   "l2+far2048",
                                 "l2+far0128", "l2+far128 ",      "l2+FAR128",  "l2+far128x",
                                 "l2far128",   "l2+near8+far128", "+far128",    "l2+far-128",
                                 "l2+far32",   "l2+paced+far128", "auto+far128"};
  std::vector<std::string> bad_values(std::begin(bad_near), std::end(bad_near));
  bad_values.insert(bad_values.end(), std::begin(bad_paced), std::end(bad_paced));
  bad_values.insert(bad_values.end(), std::begin(bad_far), std::end(bad_far));
  for (const std::string& bad : bad_values) {
    SCOPED_TRACE(bad);
    expect_error([&] { detail::choose_decode_prefetch(bad.c_str(), zen5); },
                 detail::kDecodePrefetchEnv, ErrorKind::kInvalidArgument);
  }
  EXPECT_EQ(detail::to_string(l1), "l1");
  EXPECT_EQ(detail::to_string(DecodePrefetch{CacheLevel::kL2, 16}), "l2+near16");
  EXPECT_EQ(detail::to_string(DecodePrefetch{CacheLevel::kL2, 16, true}), "l2+near16+paced");
  EXPECT_EQ(detail::to_string(DecodePrefetch{CacheLevel::kL1, 0, true}), "l1+paced");
  EXPECT_EQ(detail::to_string(DecodePrefetch{CacheLevel::kL2, 0, false, 128}), "l2+far128");
  EXPECT_EQ(detail::to_string(DecodePrefetch{CacheLevel::kL1, 8, true, 64}),
            "l1+far64+near8+paced");
  EXPECT_EQ(detail::to_string(DecodePrefetch{CacheLevel::kL2, 0, false, 256}), "l2");
  // Every name parses back to its choice.
  for (const DecodePrefetch& p : {DecodePrefetch{CacheLevel::kL2, 0, false, 128},
                                  DecodePrefetch{CacheLevel::kL1, 8, true, 64},
                                  DecodePrefetch{CacheLevel::kL2, 16, true, 1024}}) {
    EXPECT_EQ(detail::choose_decode_prefetch(detail::to_string(p).c_str(), zen5), p);
  }
}

// The far distance in blocks of each cache dtype: far_row_bytes over a 64-key row's bytes
// (256 of f32, 128 of a 16-bit type, 64 of int8), at least one block.
TEST(DecodePrefetch, FarDistanceInBlocksOfEachDtype) {
  const auto blocks = [](std::uint16_t row_bytes, std::size_t element_bytes) {
    detail::DecodePrefetch p;
    p.far_row_bytes = row_bytes;
    return p.far_blocks(element_bytes);
  };
  EXPECT_EQ(blocks(256, 4), 1);  // the table's usual distance: 32 KiB of K at D = 128
  EXPECT_EQ(blocks(256, 2), 2);
  EXPECT_EQ(blocks(256, 1), 4);
  EXPECT_EQ(blocks(128, 4), 1);  // Zen 3's: half a block of f32 rounds up to one
  EXPECT_EQ(blocks(128, 2), 1);
  EXPECT_EQ(blocks(128, 1), 2);
  EXPECT_EQ(blocks(64, 4), 1);
  EXPECT_EQ(blocks(64, 1), 1);
  EXPECT_EQ(blocks(1024, 4), 4);
  EXPECT_EQ(blocks(1024, 1), 16);
}

// The level a run used is in its record: this process's (the CPU's row of the table, or
// SEQATTN_DECODE_PREFETCH as ctest left it) for a KvCache and a PagedKvCache, none for q/k/v.
TEST(DecodePrefetch, RecordsSayWhatTheirRunPrefetched) {
  const char* setting = std::getenv(detail::kDecodePrefetchEnv);
  const std::string expected =
      detail::to_string(detail::choose_decode_prefetch(setting, detail::cpu_features()));
  constexpr std::int64_t kHeads = 4, kKv = 2, kDim = 16, kLen = 70;
  OwnedTensor q = make_zeros(1, kHeads, 1, kDim), out = make_zeros(1, kHeads, 1, kDim),
              k = make_zeros(1, kKv, kLen, kDim);
  KvCache cache({1, kKv, kLen, kDim, kDim});
  cache.append(k.cview(), k.cview());
  const RunRecord over_cache =
      make_plan(cache_shape(cache.shape(), kHeads, 1), {}).run(q.cview(), cache, out.view);
  EXPECT_EQ(over_cache.decode_prefetch, expected);
  PagedKvCache pool({kKv, kDim, kDim, 2});
  const PagedKvCache::SequenceId id = pool.add();
  pool.append(id, k.cview(), k.cview());
  const std::vector<PagedKvCache::SequenceId> ids{id};
  const RunRecord paged = make_plan(paged_shape(pool.shape(), 1, kHeads, 1, kLen), {})
                              .run(q.cview(), pool, ids, out.view);
  EXPECT_EQ(paged.decode_prefetch, expected);
  const RunRecord dense = attend(q.cview(), k.cview(), k.cview(), out.view);
  EXPECT_TRUE(dense.decode_prefetch.empty()) << dense.decode_prefetch;
}

}  // namespace
}  // namespace seqattn
