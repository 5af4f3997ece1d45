// Linformer against the double reference on every compiled Highway target, and the options it
// must refuse.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <vector>

#include "seqattn/seqattn.hpp"
#include "target_loop.hpp"
#include "tests/reference/reference.hpp"
#include "tests/support/test_tensors.hpp"

namespace seqattn::testing {
namespace {

constexpr double kTolerance = 1e-5;

struct LinformerCase {
  std::int64_t batch = 1, heads_q = 1, heads_kv = 1, seq_q = 17, seq_k = 17, dim = 17, dim_v = 17;
  std::int64_t proj_len = 5;
  Layout layout = Layout::kBHSD;
  std::int64_t pad = 0;
  std::vector<std::int64_t> key_lengths;
  std::int64_t given_cols = 0;  // > 0: pass E and F with this many columns and a padded stride
};

std::string describe(const LinformerCase& c) {
  std::ostringstream s;
  s << "B=" << c.batch << " H=" << c.heads_q << "/" << c.heads_kv << " S=" << c.seq_q << "/"
    << c.seq_k << " D=" << c.dim << "/" << c.dim_v << " k=" << c.proj_len << " pad=" << c.pad
    << " given_cols=" << c.given_cols << " lengths=" << c.key_lengths.size();
  return s.str();
}

void expect_matches_reference(const LinformerCase& c, std::uint32_t seed) {
  const OwnedTensor q = make_tensor(c.batch, c.heads_q, c.seq_q, c.dim, c.layout, seed, c.pad);
  const OwnedTensor k = make_tensor(c.batch, c.heads_kv, c.seq_k, c.dim, c.layout, seed + 1, c.pad);
  const OwnedTensor v =
      make_tensor(c.batch, c.heads_kv, c.seq_k, c.dim_v, c.layout, seed + 2, c.pad);
  LinformerSpec spec;
  spec.proj_len = c.proj_len;
  spec.seed = seed;
  // Without E/F the kernel draws E from seed and F from seed + 1, over S_k columns.
  std::vector<float> e = linformer_random_projection(c.proj_len, c.seq_k, seed);
  std::vector<float> f = linformer_random_projection(c.proj_len, c.seq_k, seed + 1);
  MatrixView<const float> ev{e.data(), c.proj_len, c.seq_k, c.seq_k};
  MatrixView<const float> fv{f.data(), c.proj_len, c.seq_k, c.seq_k};
  if (c.given_cols > 0) {
    const std::int64_t stride = c.given_cols + 2;
    e = linformer_random_projection(c.proj_len, stride, seed + 7);
    f = linformer_random_projection(c.proj_len, stride, seed + 8);
    spec.e = ev = {e.data(), c.proj_len, c.given_cols, stride};
    spec.f = fv = {f.data(), c.proj_len, c.given_cols, stride};
  }
  Mask mask;
  mask.key_lengths = c.key_lengths;
  const double scale = 1.0f / std::sqrt(static_cast<float>(c.dim));
  const reference::Result ref =
      reference::linformer(q.cview(), k.cview(), v.cview(), ev, fv, mask, scale);
  for_each_target([&] {
    OwnedTensor out = make_zeros(c.batch, c.heads_q, c.seq_q, c.dim_v, c.layout, c.pad);
    OwnedTensor lse = make_zeros(c.batch, c.heads_q, c.seq_q, 1);
    AttentionOptions opt;
    opt.variant = spec;
    opt.mask = mask;
    opt.lse = lse.view;
    const RunRecord record = attend(q.cview(), k.cview(), v.cview(), out.view, opt);
    EXPECT_EQ(record.variant, Variant::kLinformer);
    const double error = reference::max_relative_error(out.view, ref);
    worst_error.add(error);
    EXPECT_LE(error, kTolerance) << describe(c);
    std::vector<double> ref_lse(ref.lse.begin(), ref.lse.end());
    EXPECT_LE(reference::max_relative_error(lse.storage, ref_lse), kTolerance) << describe(c);
  });
}

TEST(Linformer, MatchesReferenceOnOddShapes) {
  for (std::int64_t s : {1, 3, 17, 80, 257}) {
    for (std::int64_t k : {1, 5, 64}) {
      LinformerCase c;
      c.seq_q = c.seq_k = s;
      c.proj_len = k;
      c.dim = s == 80 ? 64 : 3;
      c.dim_v = s == 80 ? 17 : 1;
      expect_matches_reference(c, static_cast<std::uint32_t>(s * 100 + k));
    }
  }
}

TEST(Linformer, KeyLengthsGqaCrossAttentionAndLayouts) {
  LinformerCase c;
  c.batch = 3;
  c.heads_q = 4;
  c.heads_kv = 2;
  c.seq_q = 80;
  c.seq_k = 257;
  c.dim = 64;
  c.dim_v = 17;
  c.proj_len = 32;
  c.key_lengths = {0, 100, 257};
  expect_matches_reference(c, 1);
  c.layout = Layout::kBSHD;
  c.pad = 3;
  c.heads_kv = 1;
  c.seq_q = 257;
  c.seq_k = 17;
  c.key_lengths = {17, 1, 0};
  expect_matches_reference(c, 2);
  c.given_cols = 40;  // E, F wider than S_k: the first S_k columns are used
  c.layout = Layout::kBHSD;
  c.dim = 1;
  c.dim_v = 3;
  expect_matches_reference(c, 3);
}

struct ErrorFixture {
  OwnedTensor q = make_tensor(1, 1, 17, 8, Layout::kBHSD, 1);
  OwnedTensor k = make_tensor(1, 1, 17, 8, Layout::kBHSD, 2);
  OwnedTensor v = make_tensor(1, 1, 17, 8, Layout::kBHSD, 3);
  OwnedTensor out = make_zeros(1, 1, 17, 8);
  AttentionOptions opt;
  ErrorFixture() {
    std::fill(out.storage.begin(), out.storage.end(), 42.0f);
    opt.variant = LinformerSpec{4, 0, {}, {}};
  }
  Error call() {
    try {
      attend(q.cview(), k.cview(), v.cview(), out.view, opt);
    } catch (const Error& e) {
      EXPECT_TRUE(
          std::all_of(out.storage.begin(), out.storage.end(), [](float x) { return x == 42.0f; }));
      return e;
    }
    ADD_FAILURE() << "no error";
    return Error(ErrorKind::kIo, "", "", "");
  }
};

void expect_unsupported(ErrorFixture& f, const std::string& option) {
  const Error e = f.call();
  EXPECT_EQ(e.kind(), ErrorKind::kUnsupported) << e.what();
  EXPECT_EQ(e.argument(), option);
  EXPECT_NE(std::string(e.what()).find("variant 'linformer' cannot honour option '" + option + "'"),
            std::string::npos)
      << e.what();
}

TEST(Linformer, UnsupportedOptions) {
  {
    ErrorFixture f;
    f.opt.mask.causal = true;
    expect_unsupported(f, "mask.causal");
  }
  {
    ErrorFixture f;
    std::vector<std::uint8_t> keep(17 * 17, 1);
    f.opt.mask.keep = bhsd<const std::uint8_t>(keep.data(), 1, 1, 17, 17);
    expect_unsupported(f, "mask.keep");
  }
  {
    ErrorFixture f;
    const OwnedTensor bias = make_zeros(1, 1, 17, 17);
    f.opt.mask.bias = bias.cview();
    expect_unsupported(f, "mask.bias");
  }
  {
    ErrorFixture f;
    const OwnedTensor weights = make_zeros(1, 1, 17, 17);
    f.opt.weights = weights.view;
    expect_unsupported(f, "weights");
  }
}

TEST(Linformer, InvalidProjections) {
  const std::vector<float> e(4 * 20, 0.1f);
  auto expect_invalid = [](ErrorFixture& f, const std::string& argument) {
    const Error err = f.call();
    EXPECT_EQ(err.kind(), ErrorKind::kInvalidArgument) << err.what();
    EXPECT_EQ(err.argument(), argument) << err.what();
  };
  ErrorFixture f;
  f.opt.variant = LinformerSpec{0, 0, {}, {}};
  expect_invalid(f, "spec.proj_len");
  f.opt.variant = LinformerSpec{4, 0, {e.data(), 4, 16, 16}, {}};  // 16 columns < S_k = 17
  expect_invalid(f, "spec.e.cols");
  f.opt.variant = LinformerSpec{4, 0, {}, {e.data(), 3, 20, 20}};  // 3 rows != proj_len
  expect_invalid(f, "spec.f.rows");
  f.opt.variant = LinformerSpec{4, 0, {e.data(), 4, 20, 10}, {}};
  expect_invalid(f, "spec.e.row_stride");
  f.opt.variant = LinformerSpec{4, 0, {nullptr, 4, 20, 20}, {}};
  expect_invalid(f, "spec.e.data");
}

}  // namespace
}  // namespace seqattn::testing
