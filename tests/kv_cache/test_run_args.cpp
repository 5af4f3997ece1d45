// Per-call arguments (RunArgs): one plan serves any key lengths, keep masks and biases, each run
// equal to attend() with the same data; a plan refuses the per-call parts in its options; a
// q/k/v run in a caller workspace, and the workspaces it refuses.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <span>
#include <variant>
#include <vector>

#include "seqattn/seqattn.hpp"
#include "src/kernel/compute_path.hpp"
#include "tests/kv_cache/kv_cache_support.hpp"
#include "tests/reference/reference.hpp"
#include "tests/support/guarded_workspace.hpp"
#include "tests/support/scoped_compute_path.hpp"
#include "tests/support/test_tensors.hpp"
#include "tests/support/variant_test_rows.hpp"

namespace seqattn {
namespace {

using testing::expect_error;
using testing::make_tensor;
using testing::make_zeros;
using testing::OwnedTensor;

constexpr std::int64_t kB = 3, kHq = 4, kHkv = 2, kS = 70, kD = 16;

bool same_bits(const OwnedTensor& a, const OwnedTensor& b) {
  return std::memcmp(a.storage.data(), b.storage.data(), a.storage.size() * sizeof(float)) == 0;
}

// Runs `plan` in args.workspace (filled with 0xff bytes, NaN floats) into out and without it
// (plain) into ref: the run wrote to its workspace, and out and lse equal the plain run's bits.
void expect_workspace_run_is_plain(const AttentionPlan& plan, const OwnedTensor& q,
                                   const OwnedTensor& k, const OwnedTensor& v, OwnedTensor& out,
                                   OwnedTensor& ref, const RunArgs& args, const RunArgs& plain,
                                   const OwnedTensor& lse, const OwnedTensor& ref_lse) {
  plan.run(q.cview(), k.cview(), v.cview(), out.view, args);
  EXPECT_TRUE(std::any_of(args.workspace.begin(), args.workspace.end(), [](std::byte b) {
    return b != std::byte{0xff};
  })) << "the run left its workspace untouched";
  plan.run(q.cview(), k.cview(), v.cview(), ref.view, plain);
  EXPECT_TRUE(same_bits(out, ref));
  EXPECT_TRUE(same_bits(lse, ref_lse));
}

// A run in a caller workspace, checked whole: inputs of the plan's shape (q strided, BSHD;
// seeds seed, seed + 1, seed + 2), key lengths {first_length, S_k} when B = 2, and lse when
// `with_lse`. A workspace one line short is refused first (workspace.size()), out (filled with
// 7s) untouched; then a run in a workspace of qkv_workspace_bytes() (0xff bytes first) writes
// to it and equals the run without one bit for bit (out and lse). Returns the inputs and out
// for the comparison with the reference.
struct WorkspaceRun {
  OwnedTensor q, k, v, out;
  std::vector<std::int64_t> lengths;
};
WorkspaceRun expect_workspace_run(const AttentionPlan& plan, std::uint32_t seed,
                                  std::int64_t first_length, bool with_lse) {
  const AttentionShape& s = plan.shape();
  WorkspaceRun r{
      make_tensor(s.batch, s.heads_q, s.seq_q, s.dim, testing::Layout::kBSHD, seed),
      make_tensor(s.batch, s.heads_kv, s.seq_k, s.dim, testing::Layout::kBHSD, seed + 1),
      make_tensor(s.batch, s.heads_kv, s.seq_k, s.dim_v, testing::Layout::kBHSD, seed + 2),
      make_zeros(s.batch, s.heads_q, s.seq_q, s.dim_v),
      {}};
  if (s.batch == 2) r.lengths = {first_length, s.seq_k};
  EXPECT_TRUE(plan.qkv_workspace_bytes().has_value());
  if (!plan.qkv_workspace_bytes()) return r;
  const std::size_t bytes = *plan.qkv_workspace_bytes();
  OwnedTensor ref = make_zeros(s.batch, s.heads_q, s.seq_q, s.dim_v);
  OwnedTensor lse = make_zeros(s.batch, s.heads_q, s.seq_q, 1),
              ref_lse = make_zeros(s.batch, s.heads_q, s.seq_q, 1);
  testing::GuardedWorkspace ws(bytes);
  RunArgs args{.key_lengths = r.lengths, .workspace = ws.bytes()};
  RunArgs plain{.key_lengths = r.lengths};
  if (with_lse) {
    args.lse = lse.view;
    plain.lse = ref_lse.view;
  }
  RunArgs short_args = args;
  short_args.workspace = ws.bytes().first(bytes - 64);
  std::fill(r.out.storage.begin(), r.out.storage.end(), 7.0f);  // no run writes 7 everywhere
  expect_error([&] { plan.run(r.q.cview(), r.k.cview(), r.v.cview(), r.out.view, short_args); },
               "workspace.size()", ErrorKind::kInvalidArgument);
  for (const float x : r.out.storage) {
    if (x != 7.0f) {
      ADD_FAILURE() << "a refused run wrote to out";
      break;
    }
  }
  expect_workspace_run_is_plain(plan, r.q, r.k, r.v, r.out, ref, args, plain, lse, ref_lse);
  EXPECT_TRUE(ws.guard_intact()) << "a run wrote past its workspace";
  return r;
}

// Every row that takes key lengths: one plan, three sets of lengths (and none), each run
// bitwise equal to attend() with those lengths, and its record's FLOPs equal attend()'s.
TEST(RunArgs, OnePlanServesAnyKeyLengths) {
  const OwnedTensor q = make_tensor(kB, kHq, kS, kD, testing::Layout::kBSHD, 1);
  const OwnedTensor k = make_tensor(kB, kHkv, kS, kD, testing::Layout::kBHSD, 2);
  const OwnedTensor v = make_tensor(kB, kHkv, kS, kD, testing::Layout::kBHSD, 3);
  const std::vector<std::vector<std::int64_t>> lengths{{70, 1, 33}, {0, 70, 17}, {}, {5, 5, 5}};
  for (const testing::VariantTestCase& c : testing::every_variant_case()) {
    SCOPED_TRACE(c.name);
    AttentionOptions options = c.options(kB, kS);
    options.mask.key_lengths.clear();
    const AttentionPlan plan = make_plan({kB, kHq, kHkv, kS, kS, kD, kD}, options);
    for (const std::vector<std::int64_t>& l : lengths) {
      SCOPED_TRACE(l.empty() ? std::string("no key lengths")
                             : "key_lengths[1] = " + std::to_string(l[1]));
      OwnedTensor by_plan = make_zeros(kB, kHq, kS, kD), by_attend = make_zeros(kB, kHq, kS, kD);
      const RunRecord r =
          plan.run(q.cview(), k.cview(), v.cview(), by_plan.view, {.key_lengths = l});
      AttentionOptions once = options;
      once.mask.key_lengths = l;
      const RunRecord a = attend(q.cview(), k.cview(), v.cview(), by_attend.view, once);
      EXPECT_TRUE(same_bits(by_plan, by_attend));
      EXPECT_EQ(r.flops, a.flops);  // the record counts this run's keys, as attend()'s does
    }
  }
}

// Independently of attend(): dense with key lengths L_b equals dense over keys 0..L_b-1 only, for
// each of several length sets run through one plan.
TEST(RunArgs, KeyLengthsEqualTruncatedKeys) {
  const OwnedTensor q = make_tensor(kB, kHq, kS, kD, testing::Layout::kBSHD, 11);
  const OwnedTensor k = make_tensor(kB, kHkv, kS, kD, testing::Layout::kBHSD, 12);
  const OwnedTensor v = make_tensor(kB, kHkv, kS, kD, testing::Layout::kBHSD, 13);
  const AttentionPlan plan = make_plan({kB, kHq, kHkv, kS, kS, kD, kD}, {});
  OwnedTensor full = make_zeros(kB, kHq, kS, kD);
  plan.run(q.cview(), k.cview(), v.cview(), full.view);
  for (const std::vector<std::int64_t>& lengths :
       {std::vector<std::int64_t>{70, 1, 33}, std::vector<std::int64_t>{9, 64, 2}}) {
    OwnedTensor out = make_zeros(kB, kHq, kS, kD);
    plan.run(q.cview(), k.cview(), v.cview(), out.view, {.key_lengths = lengths});
    for (std::int64_t b = 0; b < kB; ++b) {
      const std::int64_t n = lengths[static_cast<std::size_t>(b)];
      auto rows = [&](const OwnedTensor& t, std::int64_t count) {
        ConstTensor view = t.view;
        view.data = t.view.ptr(b, 0, 0);
        view.shape = {1, view.shape[1], count, view.shape[3]};
        return view;
      };
      OwnedTensor want = make_zeros(1, kHq, kS, kD);
      attend(rows(q, kS), rows(k, n), rows(v, n), want.view);
      double err = 0, differs = 0;
      for (std::int64_t h = 0; h < kHq; ++h)
        for (std::int64_t i = 0; i < kS; ++i)
          for (std::int64_t d = 0; d < kD; ++d) {
            err =
                std::max<double>(err, std::abs(out.view.at(b, h, i, d) - want.view.at(0, h, i, d)));
            differs = std::max<double>(
                differs, std::abs(out.view.at(b, h, i, d) - full.view.at(b, h, i, d)));
          }
      EXPECT_LE(err, 1e-6) << "batch " << b << ", " << n << " keys";
      if (n < kS) {
        EXPECT_GT(differs, 1e-3) << "batch " << b << ": the lengths changed nothing";
      }
    }
  }
}

// Dense: keep masks and biases per run, each equal to attend() with them.
TEST(RunArgs, KeepAndBiasPerRun) {
  const OwnedTensor q = make_tensor(kB, kHq, kS, kD, testing::Layout::kBHSD, 4);
  const OwnedTensor k = make_tensor(kB, kHkv, kS, kD, testing::Layout::kBHSD, 5);
  const OwnedTensor v = make_tensor(kB, kHkv, kS, kD, testing::Layout::kBHSD, 6);
  const OwnedTensor bias = make_tensor(1, kHq, kS, kS, testing::Layout::kBHSD, 7);
  std::vector<std::uint8_t> keep(static_cast<std::size_t>(kB * kS * kS));
  for (std::size_t i = 0; i < keep.size(); ++i) keep[i] = (i * 7919 % 5) != 0;
  const TensorView<const std::uint8_t> keep_view{keep.data(), {kB, 1, kS, kS}, {kS * kS, 0, kS, 1}};
  const AttentionPlan plan = make_plan({kB, kHq, kHkv, kS, kS, kD, kD}, {});
  OwnedTensor without = make_zeros(kB, kHq, kS, kD);
  plan.run(q.cview(), k.cview(), v.cview(), without.view);
  for (int which = 0; which < 2; ++which) {
    RunArgs args;
    AttentionOptions once;
    if (which == 0) args.keep = once.mask.keep = keep_view;
    if (which == 1) args.bias = once.mask.bias = bias.cview();
    OwnedTensor by_plan = make_zeros(kB, kHq, kS, kD), by_attend = make_zeros(kB, kHq, kS, kD);
    plan.run(q.cview(), k.cview(), v.cview(), by_plan.view, args);
    attend(q.cview(), k.cview(), v.cview(), by_attend.view, once);
    EXPECT_TRUE(same_bits(by_plan, by_attend)) << (which == 0 ? "keep" : "bias");
    EXPECT_FALSE(same_bits(by_plan, without)) << "the mask changed nothing";
  }
  // A variant that cannot take a keep mask says so at the run.
  AttentionOptions linear_options;
  linear_options.variant = LinearSpec{};
  const AttentionPlan linear = make_plan({kB, kHq, kHkv, kS, kS, kD, kD}, linear_options);
  OwnedTensor out = make_zeros(kB, kHq, kS, kD);
  expect_error([&] { linear.run(q.cview(), k.cview(), v.cview(), out.view, {.keep = keep_view}); },
               "mask.keep", ErrorKind::kUnsupported);
  expect_error(
      [&] {
        plan.run(q.cview(), k.cview(), v.cview(), out.view,
                 {.key_lengths = std::vector<std::int64_t>{1, 2}});
      },
      "mask.key_lengths.size()", ErrorKind::kInvalidArgument);
  const std::vector<std::int64_t> too_long{1, 71, 2};
  expect_error(
      [&] { plan.run(q.cview(), k.cview(), v.cview(), out.view, {.key_lengths = too_long}); },
      "mask.key_lengths[1]", ErrorKind::kInvalidArgument);
  for (const float x : out.storage) ASSERT_EQ(x, 0.0f) << "a refused run wrote to out";
}

TEST(RunArgs, PlanRefusesPerCallOptions) {
  const OwnedTensor bias = make_tensor(1, 1, kS, kS, testing::Layout::kBHSD, 8);
  std::vector<std::uint8_t> keep(static_cast<std::size_t>(kS * kS), 1);
  OwnedTensor lse = make_zeros(kB, kHq, kS, 1);
  const AttentionShape shape{kB, kHq, kHkv, kS, kS, kD, kD};
  AttentionOptions o;
  o.mask.key_lengths = {1, 2, 3};
  expect_error([&] { make_plan(shape, o); }, "options.mask.key_lengths",
               ErrorKind::kInvalidArgument);
  o = {};
  o.mask.keep = TensorView<const std::uint8_t>{keep.data(), {1, 1, kS, kS}, {0, 0, kS, 1}};
  expect_error([&] { make_plan(shape, o); }, "options.mask.keep", ErrorKind::kInvalidArgument);
  o = {};
  o.mask.bias = bias.cview();
  expect_error([&] { make_plan(shape, o); }, "options.mask.bias", ErrorKind::kInvalidArgument);
  o = {};
  o.lse = lse.view;
  expect_error([&] { make_plan(shape, o); }, "options.lse", ErrorKind::kInvalidArgument);
}

// A q/k/v run in a caller workspace (filled with NaN bytes first, so stale scratch would show)
// gives the bits of a run without one and matches the float64 reference: odd shapes (S 1, 17,
// 80; D 3, D_v 17), GQA, strided q, key lengths, lse, causal, and a window with a global token.
TEST(RunArgs, QkvRunInAWorkspace) {
  struct Shape {
    std::int64_t b, hq, hkv, sq, sk, d, dv;
  };
  for (const Shape& n :
       {Shape{1, 1, 1, 1, 1, 3, 3}, Shape{2, 4, 2, 17, 80, 16, 17}, Shape{2, 3, 1, 80, 17, 3, 8}}) {
    for (const bool window : {false, true}) {
      SCOPED_TRACE(::testing::Message()
                   << "S_q " << n.sq << " S_k " << n.sk << " window " << window);
      AttentionOptions options;
      options.mask.causal = n.sq <= n.sk;
      if (window) {
        SlidingWindowSpec w;
        w.left = 5;
        w.right = 2;
        w.global_tokens = {0};
        options.variant = w;
      }
      const AttentionPlan plan = make_plan({n.b, n.hq, n.hkv, n.sq, n.sk, n.d, n.dv}, options);
      const OwnedTensor q = make_tensor(n.b, n.hq, n.sq, n.d, testing::Layout::kBSHD, 31);
      const OwnedTensor k = make_tensor(n.b, n.hkv, n.sk, n.d, testing::Layout::kBHSD, 32);
      const OwnedTensor v = make_tensor(n.b, n.hkv, n.sk, n.dv, testing::Layout::kBHSD, 33);
      OwnedTensor out = make_zeros(n.b, n.hq, n.sq, n.dv), ref = make_zeros(n.b, n.hq, n.sq, n.dv);
      OwnedTensor lse = make_zeros(n.b, n.hq, n.sq, 1), ref_lse = make_zeros(n.b, n.hq, n.sq, 1);
      testing::GuardedWorkspace ws(*plan.qkv_workspace_bytes());
      RunArgs args{.lse = lse.view, .workspace = ws.bytes()};
      RunArgs plain{.lse = ref_lse.view};
      const std::vector<std::int64_t> lengths{1, n.sk};
      if (n.b == 2) args.key_lengths = plain.key_lengths = lengths;
      expect_workspace_run_is_plain(plan, q, k, v, out, ref, args, plain, lse, ref_lse);
      EXPECT_TRUE(ws.guard_intact()) << "a run wrote past its workspace";
      Mask mask;
      mask.causal = options.mask.causal;
      if (n.b == 2) mask.key_lengths = lengths;
      const double scale = 1.0 / std::sqrt(static_cast<double>(n.d));
      const reference::Result expected =
          window
              ? reference::sliding_window(q.cview(), k.cview(), v.cview(),
                                          std::get<SlidingWindowSpec>(options.variant), mask, scale)
              : reference::dense(q.cview(), k.cview(), v.cview(), mask, scale);
      EXPECT_LE(reference::max_relative_error(out.view, expected), 1e-5);
    }
  }
}

// A Linformer run in a caller workspace (the projected K and V, the row copies and the dense
// kernel's scratch; NaN bytes first) gives the bits of a run without one and matches the
// float64 reference: odd shapes (S 1, 17, 80; D 3; D_v 17), GQA, strided q, key lengths, lse,
// RoPE (rotated row copies), projections on two threads (S_k 300, D 64); a workspace one line
// short is an Error.
TEST(RunArgs, LinformerRunInAWorkspace) {
  struct Shape {
    std::int64_t b, hq, hkv, sq, sk, d, dv, proj;
  };
  // The last shape passes the ~1 MFLOP threshold below which the projections run on one thread.
  for (const Shape& n : {Shape{1, 1, 1, 1, 1, 3, 3, 1}, Shape{2, 4, 2, 17, 80, 16, 17, 33},
                         Shape{2, 3, 1, 80, 17, 3, 8, 5}, Shape{2, 4, 2, 40, 300, 64, 64, 64}}) {
    for (const bool rope : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "S_q " << n.sq << " S_k " << n.sk << " rope " << rope);
      LinformerSpec spec;
      spec.proj_len = n.proj;
      spec.seed = 5;
      AttentionOptions options;
      options.variant = spec;
      options.threads = 2;
      RotaryEmbedding rotary;
      rotary.dims = n.d % 2 == 0 ? 0 : n.d - 1;  // an odd D rotates its first D - 1
      if (rope) options.rope = rotary;
      const AttentionPlan plan = make_plan({n.b, n.hq, n.hkv, n.sq, n.sk, n.d, n.dv}, options);
      const WorkspaceRun r = expect_workspace_run(plan, 41, 1, true);
      const std::vector<float> e = linformer_random_projection(n.proj, n.sk, 5);
      const std::vector<float> f = linformer_random_projection(n.proj, n.sk, 6);
      Mask mask;
      mask.key_lengths = r.lengths;
      const reference::Result expected =
          reference::linformer(r.q.cview(), r.k.cview(), r.v.cview(),
                               {e.data(), n.proj, n.sk, n.sk}, {f.data(), n.proj, n.sk, n.sk}, mask,
                               1.0 / std::sqrt(static_cast<double>(n.d)), options.rope);
      EXPECT_LE(reference::max_relative_error(r.out.view, expected), 1e-5);
    }
  }
}

// A linear-attention run in a caller workspace (each thread's buffers and query group, the
// heads' states or the causal segments; 0xff bytes first) gives the bits of a run without one
// and matches the float64 reference, on each of its three paths: non-causal (states, then
// query blocks), causal elu1/relu (segments in waves) and causal FAVOR+ (a state per thread);
// odd shapes (S 1, 17, 80; D 3; D_v 17), GQA, strided q, key lengths, RoPE, two threads.
TEST(RunArgs, LinearRunInAWorkspace) {
  struct Case {
    FeatureMap map;
    bool causal, rope;
    std::int64_t b, hq, hkv, sq, sk, d, dv;
  };
  // The last two pass the ~1 MFLOP threshold below which a run takes one thread: FAVOR+ causal
  // with a state per thread, elu1 causal with two segments per head in one wave.
  for (const Case& c : {Case{FeatureMap::kElu1, false, false, 1, 1, 1, 1, 1, 3, 3},
                        Case{FeatureMap::kRelu, false, true, 2, 3, 1, 80, 17, 4, 8},
                        Case{FeatureMap::kElu1, true, true, 2, 4, 2, 17, 80, 16, 17},
                        Case{FeatureMap::kFavor, true, false, 2, 3, 1, 33, 33, 3, 8},
                        Case{FeatureMap::kFavor, true, false, 2, 4, 2, 300, 300, 64, 64},
                        Case{FeatureMap::kElu1, true, true, 2, 2, 1, 600, 600, 32, 32}}) {
    SCOPED_TRACE(::testing::Message() << "map " << static_cast<int>(c.map) << " causal " << c.causal
                                      << " S_q " << c.sq << " S_k " << c.sk);
    LinearSpec spec;
    spec.feature_map = c.map;
    spec.seed = 9;
    AttentionOptions options;
    options.variant = spec;
    options.mask.causal = c.causal;
    options.threads = 2;
    if (c.rope) options.rope = RotaryEmbedding{};
    const AttentionPlan plan = make_plan({c.b, c.hq, c.hkv, c.sq, c.sk, c.d, c.dv}, options);
    const WorkspaceRun r = expect_workspace_run(plan, 51, 1, false);
    Mask mask;
    mask.causal = c.causal;
    mask.key_lengths = r.lengths;
    const std::vector<float> favor =
        c.map == FeatureMap::kFavor ? favor_random_matrix(c.d, c.d, 9) : std::vector<float>{};
    const reference::Result expected =
        reference::linear(r.q.cview(), r.k.cview(), r.v.cview(), c.map, favor, c.d, spec.epsilon,
                          mask, std::nullopt, options.rope);
    EXPECT_LE(reference::max_relative_error(r.out.view, expected), 1e-5);
  }
}

// A hierarchical run in a caller workspace (the level-0 lse, each pair thread's coarse tokens
// and its kernel calls' workspace; 0xff bytes first) gives the bits of a run without one and
// matches the float64 reference: causal and not, RoPE, GQA, key lengths, lse, one and two
// threads (fewer pairs than threads splits each call; more runs whole pairs per thread), and
// a length one block covers (level 0 alone, one kernel call in the caller's workspace).
TEST(RunArgs, HierarchicalRunInAWorkspace) {
  struct Case {
    bool causal, rope;
    int threads;
    std::int64_t b, hq, hkv, s, d, block;
  };
  for (const Case& c :
       {Case{false, false, 2, 2, 4, 2, 80, 16, 8}, Case{true, true, 2, 1, 3, 1, 77, 4, 4},
        Case{true, false, 1, 2, 2, 2, 130, 3, 16}, Case{false, true, 2, 1, 2, 1, 6, 8, 8}}) {
    SCOPED_TRACE(::testing::Message() << "causal " << c.causal << " S " << c.s << " block "
                                      << c.block << " threads " << c.threads);
    const HierarchicalSpec spec{.block = c.block};
    AttentionOptions options;
    options.variant = spec;
    options.mask.causal = c.causal;
    options.threads = c.threads;
    if (c.rope) options.rope = RotaryEmbedding{};
    const AttentionPlan plan = make_plan({c.b, c.hq, c.hkv, c.s, c.s, c.d, c.d}, options);
    const WorkspaceRun r = expect_workspace_run(plan, 61, c.s - 7, true);
    Mask mask;
    mask.causal = c.causal;
    mask.key_lengths = r.lengths;
    const reference::Result expected =
        reference::hierarchical(r.q.cview(), r.k.cview(), r.v.cview(), spec, mask,
                                1.0 / std::sqrt(static_cast<double>(c.d)), options.rope);
    EXPECT_LE(reference::max_relative_error(r.out.view, expected), 1e-5);
  }
}

// An LSH run in a caller workspace (each pair thread's hashes, sorted slots, accumulators and
// its kernel calls' workspace; 0xff bytes first) gives the bits of a run without one and
// matches the float64 reference: shared and separate QK (GQA), causal, key lengths, lse, odd
// shapes (S 1, 17, 80; D 3, 4), one and two threads (one pair splits each call over both), and
// a length needing two kernel calls per round (S 2100: 2048 slots per call).
TEST(RunArgs, LshRunInAWorkspace) {
  struct Case {
    bool shared, causal;
    int threads;
    std::int64_t b, hq, hkv, s, d, chunk, hashes, buckets, first_length;
    std::uint32_t seed = 71;  // of the inputs: far enough from bucket boundaries (below)
  };
  // S 2100 and 4096 take 4 buckets: with the automatic 64, some of their rows fall within the
  // hash margin below, where float32 and float64 may choose different buckets. The last case
  // (D 128, chunk 64) has calls of both kernel paths: a full call (2112 keys) passes the
  // kernel's packing budget and carves a ring of tiles, while the one call of key length 1600
  // (1664 keys) packs them all, which takes more (the plan once counted full calls only, and
  // this run threw).
  for (const Case& c : {Case{true, false, 2, 2, 2, 2, 17, 3, 4, 2, 0, 9},
                        Case{false, true, 2, 2, 4, 2, 80, 16, 8, 3, 0, 41},
                        Case{true, true, 1, 1, 1, 1, 1, 4, 1, 1, 0, 1},
                        Case{false, true, 2, 1, 2, 1, 2100, 16, 64, 2, 4, 0},
                        Case{false, false, 1, 2, 2, 1, 4096, 128, 64, 1, 4, 1600, 131}}) {
    SCOPED_TRACE(::testing::Message() << "shared " << c.shared << " causal " << c.causal << " S "
                                      << c.s << " threads " << c.threads);
    LshSpec spec;
    spec.hashes = c.hashes;
    spec.buckets = c.buckets;
    spec.chunk_length = c.chunk;
    spec.shared_qk = c.shared;
    spec.seed = 3;
    AttentionOptions options;
    options.variant = spec;
    options.mask.causal = c.causal;
    options.threads = c.threads;
    const AttentionPlan plan = make_plan({c.b, c.hq, c.hkv, c.s, c.s, c.d, c.d}, options);
    const WorkspaceRun r = expect_workspace_run(plan, c.seed, c.first_length, true);
    // Inputs far enough from a bucket boundary that float32 and float64 hash alike.
    EXPECT_GE(reference::lsh_hash_margin(r.q.cview(), spec), 1e-6);
    if (!c.shared) {
      EXPECT_GE(reference::lsh_hash_margin(r.k.cview(), spec), 1e-6);
    }
    Mask mask;
    mask.causal = c.causal;
    mask.key_lengths = r.lengths;
    const reference::Result expected =
        reference::lsh(r.q.cview(), r.k.cview(), r.v.cview(), spec, mask,
                       1.0 / std::sqrt(static_cast<double>(c.d)));
    EXPECT_LE(reference::max_relative_error(r.out.view, expected), 1e-5);
  }
}

// WorkspaceBuffer: 64-byte aligned bytes that grow to the largest size asked for and stay
// until release(): a smaller or equal request returns the same bytes (a steady loop reuses
// them), a larger one grows; the bytes serve a plan's runs; release() frees them.
TEST(RunArgs, WorkspaceBufferGrowsAndKeepsItsBytes) {
  WorkspaceBuffer ws;
  EXPECT_EQ(ws.capacity(), 0u);
  const std::span<std::byte> first = ws.get(1000);
  EXPECT_EQ(first.size(), 1000u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(first.data()) % 64, 0u);
  EXPECT_EQ(ws.capacity(), 1000u);
  EXPECT_EQ(ws.get(10).data(), first.data());
  EXPECT_EQ(ws.get(1000).data(), first.data());
  const std::span<std::byte> grown = ws.get(100000);
  EXPECT_EQ(grown.size(), 100000u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(grown.data()) % 64, 0u);
  EXPECT_EQ(ws.capacity(), 100000u);
  EXPECT_THROW(ws.get(std::numeric_limits<std::size_t>::max()), std::bad_alloc);
  EXPECT_EQ(ws.get(100000).data(), grown.data());  // a refused size keeps the bytes
  const AttentionPlan plan = make_plan({1, 2, 2, 9, 9, 8, 8}, {});
  const OwnedTensor q = make_tensor(1, 2, 9, 8, testing::Layout::kBHSD, 7);
  OwnedTensor out = make_zeros(1, 2, 9, 8), alone = make_zeros(1, 2, 9, 8);
  plan.run(q.cview(), q.cview(), q.cview(), out.view,
           {.workspace = ws.get(*plan.qkv_workspace_bytes())});
  plan.run(q.cview(), q.cview(), q.cview(), alone.view);
  EXPECT_TRUE(same_bits(out, alone));
  EXPECT_EQ(ws.release(), 100000u);  // freed: nothing held until the next get()
  EXPECT_EQ(ws.capacity(), 0u);
  EXPECT_EQ(ws.release(), 0u);
  const std::span<std::byte> again = ws.get(64);
  EXPECT_EQ(again.size(), 64u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(again.data()) % 64, 0u);
  EXPECT_EQ(ws.capacity(), 64u);
}

// A short or misaligned workspace is an Error naming it, also one sized for f32 views given to
// half ones or to a plan rounding them (their copies do not fit), and on a tile path one sized
// for the fp32 path's tiles (test_tile_workspace.cpp runs in the tile path's count); out is
// never written.
TEST(RunArgs, QkvWorkspaceRefusals) {
  const OwnedTensor q = make_tensor(1, 2, 9, 8, testing::Layout::kBHSD, 9);
  const OwnedTensor k = make_tensor(1, 2, 9, 8, testing::Layout::kBHSD, 10);
  OwnedTensor out = make_zeros(1, 2, 9, 8);
  const AttentionPlan plan = make_plan({1, 2, 2, 9, 9, 8, 8}, {});
  const std::size_t need = *plan.qkv_workspace_bytes();
  testing::GuardedWorkspace ws(need + 64);  // room for a misaligned start
  auto run_with = [&](std::span<std::byte> ws) {
    return [&, ws] { plan.run(q.cview(), k.cview(), k.cview(), out.view, {.workspace = ws}); };
  };
  expect_error(run_with(ws.bytes().first(64)), "workspace.size()", ErrorKind::kInvalidArgument);
  expect_error(run_with(ws.bytes().subspan(4, need)), "workspace.data()",
               ErrorKind::kInvalidArgument);
  std::vector<std::uint16_t> bits(q.storage.size());
  for (std::size_t i = 0; i < bits.size(); ++i) bits[i] = bfloat16(q.storage[i]).bits;
  AnyConstTensor q16 = q.cview();
  q16.dtype = DType::kBF16;
  q16.data = bits.data();
  expect_error(
      [&] { plan.run(q16, k.cview(), k.cview(), out.view, {.workspace = ws.bytes().first(need)}); },
      "workspace.size()", ErrorKind::kInvalidArgument);
  AttentionOptions rounded;
  rounded.fp32_precision = Fp32Precision::kBf16;
  const AttentionPlan rounding = make_plan({1, 2, 2, 9, 9, 8, 8}, rounded);
  EXPECT_GT(*rounding.qkv_workspace_bytes(), need);  // with the copies of q, k and v
  expect_error(
      [&] {
        rounding.run(q.cview(), k.cview(), k.cview(), out.view,
                     {.workspace = ws.bytes().first(need)});
      },
      "workspace.size()", ErrorKind::kInvalidArgument);
  if (detail::path_built(detail::ComputePath::kAmxEmulated)) {  // not in the xsimd backend
    // The count is the path's: the tile products pack tiles of their own shape (D 8 pads to a
    // depth of 32 there), so a workspace sized on the fp32 path is refused on the tile path.
    const QkvDtypes f32;
    std::size_t fp32_bytes = 0;
    {
      const testing::ScopedComputePath fp32("fp32");
      fp32_bytes = *rounding.qkv_workspace_bytes(f32);
    }
    const testing::ScopedComputePath forced("amx-emulated");
    ASSERT_GT(*rounding.qkv_workspace_bytes(f32), fp32_bytes);
    const testing::GuardedWorkspace larger(fp32_bytes);
    expect_error(
        [&] {
          rounding.run(q.cview(), k.cview(), k.cview(), out.view, {.workspace = larger.bytes()});
        },
        "workspace.size()", ErrorKind::kInvalidArgument);
  }
  // A variant that writes no weights counts no workspace for them, and its run refuses the
  // weights (kUnsupported naming them), not the workspace.
  AttentionOptions lsh;
  lsh.variant = LshSpec{};
  const AttentionPlan hashed = make_plan({1, 2, 2, 9, 9, 8, 8}, lsh);
  EXPECT_FALSE(hashed.qkv_workspace_bytes({.weights = true}).has_value());
  OwnedTensor weights = make_zeros(1, 2, 9, 9);
  testing::GuardedWorkspace lsh_ws(*hashed.qkv_workspace_bytes());
  expect_error(
      [&] {
        hashed.run(q.cview(), k.cview(), k.cview(), out.view,
                   {.weights = weights.view, .workspace = lsh_ws.bytes()});
      },
      "weights", ErrorKind::kUnsupported);
  for (const float x : out.storage) ASSERT_EQ(x, 0.0f) << "a refused run wrote to out";
  for (const float x : weights.storage) ASSERT_EQ(x, 0.0f) << "a refused run wrote weights";
}

}  // namespace
}  // namespace seqattn
