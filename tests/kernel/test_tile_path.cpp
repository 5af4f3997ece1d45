// The tile kernel's bf16 products end to end: SEQATTN_COMPUTE_PATH=amx-emulated runs the AMX
// path's packing, 32 × 128 blocking and roundings (q, K, V, P to bf16) through the scalar tile
// emulation on any CPU, so every variant on the tile kernel, every mask part, RoPE and ALiBi,
// odd shapes and every compiled Highway target are checked against the float64 reference of
// the same bf16 inputs (bound 1e-2 of max|ref|, issue 31). Where the CPU has AMX, the
// instructions run the same problems; elsewhere that test says it skipped.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "seqattn/seqattn.hpp"
#include "src/kernel/amx/amx_permission.hpp"
#include "src/kernel/compute_path.hpp"
#include "src/runtime/cpu_features.hpp"
#include "tests/half/half_support.hpp"
#include "tests/reference/reference.hpp"
#include "tests/support/padding_check.hpp"
#include "tests/support/scoped_compute_path.hpp"
#include "tests/support/variant_test_rows.hpp"
#include "tests/variants/target_loop.hpp"
#include "variants/variant_row.hpp"

namespace seqattn {
namespace {

using testing::for_each_target;
using testing::Layout;
using testing::make_tensor;
using testing::make_zeros;
using testing::OwnedTensor;

constexpr double kBound = 1e-2;  // of max|ref|, against float64 on the same bf16 inputs
// Under the sanitizers (tests/tsan, the sanitize flavour) the library's scalar tile emulation
// is instrumented and 30-50x slower: the odd-shapes test keeps its small shapes there (the
// release flavour runs them all; the sanitizers are there for the memory and the threads).
#if defined(SEQATTN_TSAN_SUPPRESSIONS) || defined(SEQATTN_TEST_PROGRAM_ASAN)
[[maybe_unused]] constexpr bool kSanitized = true;
#else
[[maybe_unused]] constexpr bool kSanitized = false;
#endif

using testing::ScopedComputePath;

// The xsimd backend's flash kernel has no tile products (compute_path.cpp refuses them).
#define SKIP_WITHOUT_TILE_PATHS()                                                     \
  if (!detail::path_built(detail::ComputePath::kAmxEmulated)) {                       \
    GTEST_SKIP() << "this build's flash kernel (the xsimd backend) has no tile path"; \
  }

struct Shape {
  std::int64_t b, hq, hkv, sq, sk, d, dv;
};

// bf16-valued fp32 inputs (so the reference and the kernel see the same numbers).
struct Inputs {
  OwnedTensor q, k, v;
};
Inputs make_inputs(const Shape& s, Layout layout, std::uint32_t seed) {
  const std::int64_t pad = layout == Layout::kBSHD ? 3 : 0;
  Inputs in{make_tensor(s.b, s.hq, s.sq, s.d, layout, seed, pad, -2.0f, 2.0f),
            make_tensor(s.b, s.hkv, s.sk, s.d, layout, seed + 1, pad, -2.0f, 2.0f),
            make_tensor(s.b, s.hkv, s.sk, s.dv, layout, seed + 2, pad)};
  testing::round_in_place<bfloat16>(in.q);
  testing::round_in_place<bfloat16>(in.k);
  testing::round_in_place<bfloat16>(in.v);
  return in;
}

testing::WorstError worst;

// out through the forced path, its record's path, and the error against `ref`.
double run_and_compare(const Inputs& in, const Shape& s, const AttentionOptions& options,
                       const reference::Result& ref, const std::string& want_path) {
  OwnedTensor out = make_zeros(s.b, s.hq, s.sq, s.dv, Layout::kBHSD, 0);
  const RunRecord r = attend(in.q.cview(), in.k.cview(), in.v.cview(), out.view, options);
  EXPECT_EQ(r.compute_path, want_path);
  const double err = reference::max_relative_error(out.view, ref);
  worst.add(err);
  return err;
}

TEST(TilePath, EveryVariantAgainstFloat64OnEveryTarget) {
  SKIP_WITHOUT_TILE_PATHS();
  const ScopedComputePath forced("amx-emulated");
  const Shape s{2, 2, 2, 45, 45, 24, 40};
  const Inputs in = make_inputs(s, Layout::kBSHD, 7);
  for_each_target([&] {
    for (const testing::VariantTestCase& c : testing::every_variant_case()) {
      SCOPED_TRACE(c.name);
      if (const auto* lsh = std::get_if<LshSpec>(&c.spec)) {
        if (reference::lsh_hash_margin(in.q.cview(), *lsh) < 1e-6) continue;  // a tie: any
      }
      AttentionOptions options = c.options(s.b, s.sk);
      options.fp32_precision = Fp32Precision::kBf16;  // the inputs are bf16 numbers already
      const reference::Result ref = reference::variant(in.q.cview(), in.k.cview(), in.v.cview(),
                                                       c.spec, options.mask, std::nullopt);
      const bool tiles = detail::row_of(c.variant).tile_kernel;
      EXPECT_LE(run_and_compare(in, s, options, ref, tiles ? "amx-emulated" : "fp32"), kBound);
    }
  });
}

// Dense and sliding window on odd shapes (D not a multiple of 32, S_q != S_k, decode rows),
// GQA, strided views, causal, key lengths, keep and bias masks, RoPE and ALiBi.
TEST(TilePath, OddShapesMasksAndPositionsAgainstFloat64) {
  SKIP_WITHOUT_TILE_PATHS();
  const ScopedComputePath forced("amx-emulated");
  const Shape shapes[] = {{1, 1, 1, 1, 1, 17, 17},      {1, 2, 1, 3, 3, 64, 80},
                          {2, 4, 2, 17, 80, 80, 64},    {1, 3, 3, 80, 17, 128, 128},
                          {1, 4, 2, 1, 300, 128, 128},  {1, 2, 1, 300, 300, 256, 48},
                          {1, 1, 1, 1000, 1000, 64, 64}};
  const size_t count = kSanitized ? 3 : std::size(shapes);
  for (const Shape& s : std::span(shapes, count)) {
    SCOPED_TRACE("S_q " + std::to_string(s.sq) + " S_k " + std::to_string(s.sk) + " D " +
                 std::to_string(s.d));
    const Inputs in = make_inputs(s, s.b == 2 ? Layout::kBSHD : Layout::kBHSD, 11);
    std::vector<std::uint8_t> keep(static_cast<size_t>(s.sq * s.sk));
    for (size_t i = 0; i < keep.size(); ++i) keep[i] = (i * 7 + 3) % 5 != 0;
    std::vector<float> bias(keep.size());
    for (size_t i = 0; i < bias.size(); ++i) bias[i] = 0.25f * static_cast<float>(i % 9) - 1.0f;
    for (int form = kSanitized ? 1 : 0; form < (kSanitized ? 3 : 5); ++form) {
      AttentionOptions options;
      options.fp32_precision = Fp32Precision::kBf16;  // the inputs are bf16 numbers already
      options.mask.causal = form % 2 == 1;
      if (s.b == 2) options.mask.key_lengths = {s.sk, s.sk / 2};
      reference::Positional positional;
      if (form == 2) {
        options.mask.keep =
            TensorView<const std::uint8_t>{keep.data(), {1, 1, s.sq, s.sk}, {0, 0, s.sk, 1}};
        options.mask.bias = ConstTensor{bias.data(), {1, 1, s.sq, s.sk}, {0, 0, s.sk, 1}};
      }
      if (form == 3 && s.d % 2 == 0) {
        options.rope = RotaryEmbedding{};
        positional.rope = options.rope;
      }
      if (form == 4) {
        options.alibi = Alibi{};
        for (const float slope : alibi_slopes(s.hq)) positional.alibi_slopes.push_back(slope);
        positional.alibi_symmetric = true;
      }
      const double scale = 1.0 / std::sqrt(static_cast<double>(s.d));
      const reference::Result dense = reference::dense(in.q.cview(), in.k.cview(), in.v.cview(),
                                                       options.mask, scale, {}, positional);
      EXPECT_LE(run_and_compare(in, s, options, dense, "amx-emulated"), kBound) << "form " << form;
      if (form == 2) continue;  // the bias is dense attention's only
      // Late global tokens on the long square shapes: their key columns lie past the band of
      // most rows (kEdge tiles), in 32-key steps the rows' ranges alone would skip.
      std::vector<std::int64_t> globals;
      if (std::max(s.sq, s.sk) > 2) globals = {1};
      if (s.sq == s.sk && s.sq > 100) globals = {1, 100, s.sq - 3};
      const SlidingWindowSpec window{9, 4, globals};
      options.variant = window;
      const reference::Result banded = reference::sliding_window(
          in.q.cview(), in.k.cview(), in.v.cview(), window, options.mask, scale, positional);
      EXPECT_LE(run_and_compare(in, s, options, banded, "amx-emulated"), kBound) << "form " << form;
    }
  }
}

TEST(TilePath, OneAndTwoThreadsGiveTheSameBits) {
  SKIP_WITHOUT_TILE_PATHS();
  const ScopedComputePath forced("amx-emulated");
  const Shape s{1, 4, 2, 300, 300, 64, 64};
  const Inputs in = make_inputs(s, Layout::kBHSD, 13);
  for (const VariantSpec& spec :
       {VariantSpec{DenseSpec{}}, VariantSpec{SlidingWindowSpec{40, 0, {}}}}) {
    std::vector<std::vector<float>> results;
    for (const int threads : {1, 2}) {
      AttentionOptions options;
      options.variant = spec;
      options.mask.causal = true;
      options.threads = threads;
      options.fp32_precision = Fp32Precision::kBf16;
      OwnedTensor out = make_zeros(s.b, s.hq, s.sq, s.dv, Layout::kBHSD, 0);
      const RunRecord r = attend(in.q.cview(), in.k.cview(), in.v.cview(), out.view, options);
      EXPECT_EQ(r.compute_path, "amx-emulated");
      EXPECT_EQ(r.threads, threads);
      results.push_back(out.storage);
    }
    EXPECT_EQ(results[0], results[1]);
  }
}

// The tile products' packing puts zeros past the key lengths too: NaN values and infinite keys
// there change no bit (padding_check.hpp), dense and a causal window.
TEST(TilePath, PaddingPastKeyLengthsIsNeverRead) {
  SKIP_WITHOUT_TILE_PATHS();
  const ScopedComputePath forced("amx-emulated");
  for (const bool window : {false, true}) {
    AttentionOptions options;
    options.fp32_precision = Fp32Precision::kBf16;
    options.mask.causal = window;
    if (window) options.variant = SlidingWindowSpec{5, 0, {}};
    EXPECT_EQ(testing::expect_padding_never_read(options), "amx-emulated");
  }
}

// One plan run from three threads at once, each with a team of two: the tile configuration
// and scratch are per thread, so every run gives the bits of a lone run.
TEST(TilePath, ThreadsSharingAPlanGiveTheBitsOfALoneRun) {
  SKIP_WITHOUT_TILE_PATHS();
  const ScopedComputePath forced("amx-emulated");
  const Shape s{2, 4, 2, 100, 100, 48, 40};
  const Inputs in = make_inputs(s, Layout::kBHSD, 29);
  AttentionOptions options;
  options.mask.causal = true;
  options.threads = 2;
  options.fp32_precision = Fp32Precision::kBf16;
  const AttentionPlan plan = make_plan({s.b, s.hq, s.hkv, s.sq, s.sk, s.d, s.dv}, options);
  OwnedTensor alone = make_zeros(s.b, s.hq, s.sq, s.dv, Layout::kBHSD, 0);
  EXPECT_EQ(plan.run(in.q.cview(), in.k.cview(), in.v.cview(), alone.view).compute_path,
            "amx-emulated");
  std::vector<OwnedTensor> outs;
  for (int t = 0; t < 3; ++t) outs.push_back(make_zeros(s.b, s.hq, s.sq, s.dv, Layout::kBHSD, 0));
  std::vector<std::thread> threads;
  for (OwnedTensor& out : outs) {
    threads.emplace_back([&] { plan.run(in.q.cview(), in.k.cview(), in.v.cview(), out.view); });
  }
  for (std::thread& t : threads) t.join();
  for (const OwnedTensor& out : outs) EXPECT_EQ(out.storage, alone.storage);
}

// bf16 tensors and fp32 tensors under fp32_precision = bf16 take the tile path alike; a KvCache
// run stays fp32 (the decode kernel has no tile products yet) and says so.
TEST(TilePath, Bf16TensorsAndFp32PrecisionAgreeAndCachesSayFp32) {
  SKIP_WITHOUT_TILE_PATHS();
  const ScopedComputePath forced("amx-emulated");
  const Shape s{1, 2, 2, 33, 33, 40, 40};
  const Inputs in = make_inputs(s, Layout::kBHSD, 17);
  AttentionOptions options;
  options.mask.causal = true;
  const auto q = testing::rounded<bfloat16>(in.q), k = testing::rounded<bfloat16>(in.k),
             v = testing::rounded<bfloat16>(in.v);
  OwnedTensor from_bf16 = make_zeros(s.b, s.hq, s.sq, s.dv, Layout::kBHSD, 0);
  EXPECT_EQ(attend(q.cview(), k.cview(), v.cview(), from_bf16.view, options).compute_path,
            "amx-emulated");
  options.fp32_precision = Fp32Precision::kBf16;
  OwnedTensor from_f32 = make_zeros(s.b, s.hq, s.sq, s.dv, Layout::kBHSD, 0);
  EXPECT_EQ(attend(in.q.cview(), in.k.cview(), in.v.cview(), from_f32.view, options).compute_path,
            "amx-emulated");
  EXPECT_EQ(from_bf16.storage, from_f32.storage);
  // fp32 operands with the default precision never take it.
  options.fp32_precision = Fp32Precision::kIeee;
  OwnedTensor exact = make_zeros(s.b, s.hq, s.sq, s.dv, Layout::kBHSD, 0);
  EXPECT_EQ(attend(in.q.cview(), in.k.cview(), in.v.cview(), exact.view, options).compute_path,
            "fp32");
  EXPECT_NE(exact.storage, from_f32.storage);  // P was rounded to bf16 on the tile path

  KvCache cache({1, 2, 64, 40, 40, DType::kBF16});
  cache.append(in.k.cview(), in.v.cview());
  OwnedTensor decoded = make_zeros(s.b, s.hq, 1, s.dv, Layout::kBHSD, 0);
  const ConstTensor last_query =
      ConstTensor{in.q.view.data + 32 * s.d, {1, 2, 1, s.d}, in.q.view.strides};
  EXPECT_EQ(attend(last_query, cache, decoded.view).compute_path, "fp32");
}

struct RestoreRequest {
  ~RestoreRequest() { detail::amx::set_amx_permission_request_for_testing(nullptr); }
};
int refuse() { return EPERM; }

TEST(TilePath, ForcedAmxThatCannotRunIsAnErrorThatWritesNothing) {
  SKIP_WITHOUT_TILE_PATHS();
  const RestoreRequest restore;
  detail::amx::set_amx_permission_request_for_testing(&refuse);
  const ScopedComputePath forced("amx-bf16");
  const Shape s{1, 1, 1, 5, 5, 8, 8};
  const Inputs in = make_inputs(s, Layout::kBHSD, 19);
  OwnedTensor out = make_zeros(s.b, s.hq, s.sq, s.dv, Layout::kBHSD, 0);
  std::fill(out.storage.begin(), out.storage.end(), 3.0f);
  AttentionOptions options;
  options.fp32_precision = Fp32Precision::kBf16;
  try {
    attend(in.q.cview(), in.k.cview(), in.v.cview(), out.view, options);
    ADD_FAILURE() << "expected an Error: no AMX, or the permission refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "SEQATTN_COMPUTE_PATH");
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    const detail::CpuFeatures& cpu = detail::cpu_features();
    const bool amx = cpu.amx_tile && cpu.amx_bf16 && cpu.os_amx;
    EXPECT_NE(std::string(e.what()).find(amx ? "refused" : "no AMX"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(out.storage, std::vector<float>(out.storage.size(), 3.0f));
}

TEST(TilePath, AmxInstructionsOnThisCpu) {
  SKIP_WITHOUT_TILE_PATHS();
  const detail::CpuFeatures& cpu = detail::cpu_features();
  if (!(cpu.amx_tile && cpu.amx_bf16 && cpu.os_amx)) {
    GTEST_SKIP() << cpu.describe() << " has no AMX: the amx-bf16 path was not run here";
  }
  if (detail::amx::request_amx_permission(true) != detail::amx::AmxPermission::kGranted) {
    GTEST_SKIP() << "Linux refused the AMX tile-data permission: the amx-bf16 path was not run";
  }
  const Shape s{2, 4, 2, 300, 300, 80, 64};
  const Inputs in = make_inputs(s, Layout::kBSHD, 23);
  for (const bool causal : {false, true}) {
    AttentionOptions options;
    options.mask.causal = causal;
    options.fp32_precision = Fp32Precision::kBf16;
    const reference::Result ref =
        reference::dense(in.q.cview(), in.k.cview(), in.v.cview(), options.mask,
                         1.0 / std::sqrt(static_cast<double>(s.d)));
    std::vector<float> emulated;
    {
      const ScopedComputePath forced("amx-emulated");
      OwnedTensor out = make_zeros(s.b, s.hq, s.sq, s.dv, Layout::kBHSD, 0);
      attend(in.q.cview(), in.k.cview(), in.v.cview(), out.view, options);
      emulated = out.storage;
    }
    const ScopedComputePath forced("amx-bf16");
    OwnedTensor out = make_zeros(s.b, s.hq, s.sq, s.dv, Layout::kBHSD, 0);
    EXPECT_LE(run_and_compare(in, s, options, ref, "amx-bf16"), kBound);
    attend(in.q.cview(), in.k.cview(), in.v.cview(), out.view, options);
    // Not the emulation's bits: the instruction's summation order may move a score by an ulp,
    // and that can flip the bf16 rounding of a probability (2^-9 of it). A layout or blocking
    // error moves outputs by their own size.
    std::vector<double> emulated64(emulated.begin(), emulated.end());
    EXPECT_LE(reference::max_relative_error(out.storage, emulated64), 1e-3);
  }
}

}  // namespace
}  // namespace seqattn
