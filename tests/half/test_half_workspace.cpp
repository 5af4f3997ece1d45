// Half q, k, v and out (and f32 views that fp32_precision rounds) in a caller's workspace: the
// fp32 copies go at its end, after the variant's scratch. For every case of the variant table,
// qkv_workspace_bytes(dtypes) is the f32 count plus each staged copy (4 bytes an element,
// rounded up to 64), a run in it equals the run without it bit for bit, and a workspace one
// line short is an Error naming workspace.size() that writes nothing. Steady loops of such runs
// allocate nothing: tests/kv_cache/test_steady_prefill.cpp counts.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "half_support.hpp"
#include "seqattn/seqattn.hpp"
#include "tests/kv_cache/kv_cache_support.hpp"
#include "tests/support/guarded_workspace.hpp"
#include "tests/support/variant_test_rows.hpp"

namespace seqattn {
namespace {

using testing::GuardedWorkspace;
using testing::Layout;
using testing::make_tensor;
using testing::make_zeros;
using testing::OwnedHalf;
using testing::OwnedTensor;
using testing::rounded;

struct Shape {
  std::int64_t b, hq, hkv, sq, sk, d, dv;
};
constexpr Shape kShape{2, 4, 2, 37, 37, 24, 40};

std::size_t copy_bytes(std::int64_t b, std::int64_t h, std::int64_t s, std::int64_t d) {
  return (4 * static_cast<std::size_t>(b * h * s * d) + 63) / 64 * 64;
}

// The plan's options for case c with its per-call parts (key lengths) moved to `args`.
AttentionOptions plan_options(const testing::VariantTestCase& c, RunArgs& args,
                              std::vector<std::int64_t>& lengths) {
  AttentionOptions options = c.options(kShape.b, kShape.sk);
  lengths = options.mask.key_lengths;
  options.mask.key_lengths = {};
  args.key_lengths = lengths;
  return options;
}

// q of TQ, k and v of TKV, out of TOut; `extra` bytes past the count (the copies still start
// right after the variant's part).
template <class TQ, class TKV, class TOut>
void check_case(const testing::VariantTestCase& c, Fp32Precision precision, std::size_t extra = 0) {
  const Shape& s = kShape;
  const OwnedTensor q32 = make_tensor(s.b, s.hq, s.sq, s.d, Layout::kBSHD, 31, 3);
  const OwnedTensor k32 = make_tensor(s.b, s.hkv, s.sk, s.d, Layout::kBHSD, 32);
  const OwnedTensor v32 = make_tensor(s.b, s.hkv, s.sk, s.dv, Layout::kBHSD, 33);
  const auto q = rounded<TQ>(q32);
  const auto k = rounded<TKV>(k32);
  const auto v = rounded<TKV>(v32);
  auto out = rounded<TOut>(make_zeros(s.b, s.hq, s.sq, s.dv, Layout::kBHSD, 1));
  auto alone = rounded<TOut>(make_zeros(s.b, s.hq, s.sq, s.dv, Layout::kBHSD, 1));
  RunArgs args;
  std::vector<std::int64_t> lengths;
  AttentionOptions options = plan_options(c, args, lengths);
  options.fp32_precision = precision;
  const AttentionPlan plan = make_plan({s.b, s.hq, s.hkv, s.sq, s.sk, s.d, s.dv}, options);
  const QkvDtypes dtypes{dtype_of<TQ>(), dtype_of<TKV>(), dtype_of<TKV>(), dtype_of<TOut>()};
  AttentionOptions ieee = options;  // the variant's own scratch: an f32 run's count
  ieee.fp32_precision = Fp32Precision::kIeee;
  const std::optional<std::size_t> f32 =
      make_plan({s.b, s.hq, s.hkv, s.sq, s.sk, s.d, s.dv}, ieee).qkv_workspace_bytes();
  const std::optional<std::size_t> need = plan.qkv_workspace_bytes(dtypes);
  ASSERT_TRUE(f32.has_value() && need.has_value());
  const bool rounds = precision == Fp32Precision::kBf16;
  auto staged = [&](DType t) { return t != DType::kF32 || rounds; };
  const std::size_t copies =
      (staged(dtypes.q) ? copy_bytes(s.b, s.hq, s.sq, s.d) : 0) +
      (staged(dtypes.k) ? copy_bytes(s.b, s.hkv, s.sk, s.d) + copy_bytes(s.b, s.hkv, s.sk, s.dv)
                        : 0) +
      (dtypes.out != DType::kF32 ? copy_bytes(s.b, s.hq, s.sq, s.dv) : 0);
  ASSERT_GT(copies, 0u);
  EXPECT_EQ(*need, (*f32 + 63) / 64 * 64 + copies);
  // One line short: refused before anything is written.
  GuardedWorkspace short_ws(*need - 64);
  args.workspace = short_ws.bytes();
  testing::expect_error([&] { plan.run(q.cview(), k.cview(), v.cview(), out.view, args); },
                        "workspace.size()", ErrorKind::kInvalidArgument);
  const std::vector<TOut> zeros(out.storage.size(), TOut(0.0f));
  ASSERT_EQ(std::memcmp(out.storage.data(), zeros.data(), sizeof(TOut) * zeros.size()), 0)
      << "a refused run wrote to out";
  GuardedWorkspace ws(*need + extra);
  args.workspace = ws.bytes();
  plan.run(q.cview(), k.cview(), v.cview(), out.view, args);
  args.workspace = {};
  plan.run(q.cview(), k.cview(), v.cview(), alone.view, args);
  EXPECT_EQ(
      std::memcmp(out.storage.data(), alone.storage.data(), sizeof(TOut) * out.storage.size()), 0)
      << "the workspace changed the result";
  const std::size_t staged_from = (*f32 + 63) / 64 * 64;
  bool wrote = false;
  for (std::size_t i = staged_from; i < *need; ++i)
    wrote = wrote || ws.bytes()[i] != GuardedWorkspace::kUnwritten;
  EXPECT_TRUE(wrote) << "the copies were not staged in the workspace";
  EXPECT_TRUE(ws.guard_intact()) << "a run wrote past its workspace";
}

TEST(HalfWorkspace, EveryVariantRunsHalfViewsInAWorkspace) {
  for (const testing::VariantTestCase& c : testing::every_variant_case()) {
    SCOPED_TRACE(c.name);
    check_case<bfloat16, bfloat16, bfloat16>(c, Fp32Precision::kIeee);
    check_case<float16, float16, float>(c, Fp32Precision::kIeee, 4096);
    check_case<float, float, float16>(c, Fp32Precision::kIeee);
    check_case<bfloat16, float, float>(c, Fp32Precision::kIeee);  // q alone staged
    check_case<float, float16, bfloat16>(c, Fp32Precision::kIeee);
    check_case<float, float, float>(c, Fp32Precision::kBf16);  // q, k, v rounded: staged
  }
}

// The query names a view's dtype that no run takes. Runs that ask for weights take a
// workspace too (tests/reliability/test_weights_out.cpp); with half views their count holds
// the copies after the weights pass's part, and the run equals the run without one.
TEST(HalfWorkspace, BadDtypesAreRefusedAndWeightsRunsTakeTheirCount) {
  const AttentionPlan plan = make_plan({1, 2, 2, 9, 9, 8, 8}, {});
  testing::expect_error(
      [&] {
        (void)plan.qkv_workspace_bytes({DType::kF32, DType::kI8});
      },
      "k.dtype", ErrorKind::kInvalidArgument);
  testing::expect_error(
      [&] {
        (void)plan.qkv_workspace_bytes({DType::kF32, DType::kF32, DType::kF32, DType{9}});
      },
      "out.dtype", ErrorKind::kInvalidArgument);
  const OwnedTensor q32 = make_tensor(1, 2, 9, 8, Layout::kBHSD, 9);
  const auto q = rounded<bfloat16>(q32);
  auto out = rounded<bfloat16>(make_zeros(1, 2, 9, 8, Layout::kBHSD, 1));
  auto alone = rounded<bfloat16>(make_zeros(1, 2, 9, 8, Layout::kBHSD, 1));
  OwnedTensor weights = make_zeros(1, 2, 9, 9), weights_alone = make_zeros(1, 2, 9, 9);
  const QkvDtypes half{DType::kBF16, DType::kBF16, DType::kBF16, DType::kBF16};
  QkvDtypes half_weights = half;
  half_weights.weights = true;
  const std::size_t need = *plan.qkv_workspace_bytes(half_weights);
  EXPECT_GE(need, *plan.qkv_workspace_bytes(half));
  GuardedWorkspace short_ws(need - 64);
  testing::expect_error(
      [&] {
        plan.run(q.cview(), q.cview(), q.cview(), out.view,
                 {.weights = weights.view, .workspace = short_ws.bytes()});
      },
      "workspace.size()", ErrorKind::kInvalidArgument);
  for (const bfloat16 x : out.storage) ASSERT_EQ(x.bits, 0) << "a refused run wrote to out";
  for (const float x : weights.storage) ASSERT_EQ(x, 0.0f) << "a refused run wrote weights";
  GuardedWorkspace ws(need);
  plan.run(q.cview(), q.cview(), q.cview(), out.view,
           {.weights = weights.view, .workspace = ws.bytes()});
  plan.run(q.cview(), q.cview(), q.cview(), alone.view, {.weights = weights_alone.view});
  EXPECT_EQ(std::memcmp(out.storage.data(), alone.storage.data(), 2 * out.storage.size()), 0);
  EXPECT_EQ(weights.storage, weights_alone.storage);
}

}  // namespace
}  // namespace seqattn
