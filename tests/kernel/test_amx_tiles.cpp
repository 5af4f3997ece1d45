// The AMX bf16 tile layer (src/kernel/amx/) through EmulatedTiles, which runs on any CPU: the
// VNNI layouts by their index formulas, the tile configuration bytes, TDPBF16PS's DAZ/FTZ, the
// two block products on odd shapes against double-precision products of the bf16-rounded
// inputs, and the permission request. Where the CPU has AMX, AmxTiles must give the emulation's
// results bit for bit; elsewhere that test is skipped and says so.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "seqattn/error.hpp"
#include "seqattn/half.hpp"
#include "src/kernel/amx/amx_micro_kernels.hpp"
#include "src/kernel/amx/amx_permission.hpp"
#include "src/kernel/amx/amx_tiles.hpp"
#include "src/kernel/amx/tile_config.hpp"
#include "src/kernel/amx/tile_ops.hpp"
#include "src/kernel/amx/vnni_packing.hpp"
#include "src/runtime/cpu_features.hpp"

namespace {

using seqattn::bfloat16;
using namespace seqattn::detail::amx;
using seqattn::detail::cpu_features;
using seqattn::detail::CpuFeatures;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<float> Random(std::size_t n, float lo, float hi, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// The oracle's rounding: p to 8 significant bits, ties to even (normal bf16 range only).
float Bf16OfExact(double p) {
  if (p == 0) return 0.0f;
  int e = 0;
  std::frexp(p, &e);  // p = m · 2^e, 0.5 <= |m| < 1
  return static_cast<float>(std::ldexp(std::nearbyint(std::ldexp(p, 8 - e)), e - 8));
}

// ---- Tile configuration ----

TEST(AmxTileConfig, BytesOfPalette1) {
  const TileShape shapes[] = {{16, 64}, {3, 12}};
  const TileConfig config = make_tile_config(shapes);
  std::uint8_t bytes[64];
  std::memcpy(bytes, &config, 64);
  std::uint8_t expected[64] = {};
  expected[0] = 1;                       // palette_id
  expected[16] = 64, expected[18] = 12;  // colsb[0], colsb[1] (uint16 little endian)
  expected[48] = 16, expected[49] = 3;   // rows[0], rows[1]
  for (int i = 0; i < 64; ++i) EXPECT_EQ(bytes[i], expected[i]) << "byte " << i;
}

std::string ArgumentOfError(const std::function<void()>& call) {
  try {
    call();
  } catch (const seqattn::Error& e) {
    return e.argument();
  }
  return "(no error)";
}

TEST(AmxTileConfig, ErrorsNameTheArgument) {
  const TileShape rows17[] = {{16, 64}, {17, 64}};
  EXPECT_EQ(ArgumentOfError([&] { make_tile_config(rows17); }), "shapes[1].rows");
  const TileShape cols65[] = {{16, 65}};
  EXPECT_EQ(ArgumentOfError([&] { make_tile_config(cols65); }), "shapes[0].colsb");
  const TileShape half[] = {{0, 4}};
  EXPECT_EQ(ArgumentOfError([&] { make_tile_config(half); }), "shapes[0]");
  const std::vector<TileShape> nine(9, TileShape{16, 64});
  EXPECT_EQ(ArgumentOfError([&] { make_tile_config(nine); }), "shapes");
  try {
    make_tile_config(rows17);
  } catch (const seqattn::Error& e) {
    EXPECT_EQ(e.actual(), "17");
    EXPECT_NE(e.expected().find("16"), std::string::npos) << e.expected();
  }
}

// ---- VNNI packing ----

TEST(AmxPacking, SmallCasesByHand) {
  // X: 2 keys × depth 3 (row stride 4); V: 3 keys × 2 columns (row stride 3).
  const float x[] = {1, 2, 3, -9, 4, 5, 6, -9};
  std::vector<bfloat16> b(32 * 16, bfloat16(kNaN));
  pack_b_vnni(x, 4, 2, 3, 16, b);
  std::vector<float> expected(32 * 16, 0.0f);
  // Pair row 0 (depth 0, 1): key 0 → (1, 2), key 1 → (4, 5); pair row 1 (depth 2, 3): (3, 0), (6,
  // 0).
  expected[0] = 1, expected[1] = 2, expected[2] = 4, expected[3] = 5;
  expected[32] = 3, expected[34] = 6;
  for (std::size_t i = 0; i < b.size(); ++i) EXPECT_EQ(float(b[i]), expected[i]) << "B " << i;

  const float v[] = {1, 2, -9, 3, 4, -9, 5, 6, -9};
  std::vector<bfloat16> bv(32 * 16, bfloat16(kNaN));
  pack_b_vnni_rows(v, 3, 3, 2, 32, 16, bv);
  std::fill(expected.begin(), expected.end(), 0.0f);
  // Pair row 0 (keys 0, 1): column 0 → (1, 3), column 1 → (2, 4); pair row 1: (5, 0), (6, 0).
  expected[0] = 1, expected[1] = 3, expected[2] = 2, expected[3] = 4;
  expected[32] = 5, expected[34] = 6;
  for (std::size_t i = 0; i < bv.size(); ++i) EXPECT_EQ(float(bv[i]), expected[i]) << "V " << i;
}

// Every element of a VNNI buffer, decoded from its index (the inverse of vnni_index), holds its
// source element or zero.
TEST(AmxPacking, VnniIndexOnOddShapes) {
  std::mt19937 rng(7);
  for (const std::size_t n : {1, 3, 17, 32}) {
    for (const std::size_t depth : {1, 3, 17, 64, 80}) {
      const std::size_t stride = depth + 3, n_pad = round_up(n, 16),
                        depth_pad = padded_depth(depth);
      const std::vector<float> x = Random(n * stride, -1, 1, rng);
      std::vector<bfloat16> out(depth_pad * n_pad, bfloat16(kNaN));
      pack_b_vnni(x.data(), stride, n, depth, n_pad, out);
      for (std::size_t i = 0; i < out.size(); ++i) {
        const std::size_t j = i / 2 % n_pad, k = i / 2 / n_pad * 2 + i % 2;
        const float want = j < n && k < depth ? float(bfloat16(x[j * stride + k])) : 0.0f;
        ASSERT_EQ(float(out[i]), want) << "n " << n << " depth " << depth << " index " << i;
      }
      // The same matrix as V [n keys][depth columns] for P·V.
      const std::size_t keys_pad = round_up(n, 32), cols_pad = round_up(depth, 16);
      std::vector<bfloat16> rows(keys_pad * cols_pad, bfloat16(kNaN));
      pack_b_vnni_rows(x.data(), stride, n, depth, keys_pad, cols_pad, rows);
      for (std::size_t i = 0; i < rows.size(); ++i) {
        const std::size_t c = i / 2 % cols_pad, t = i / 2 / cols_pad * 2 + i % 2;
        const float want = t < n && c < depth ? float(bfloat16(x[t * stride + c])) : 0.0f;
        ASSERT_EQ(float(rows[i]), want) << "keys " << n << " cols " << depth << " index " << i;
      }
    }
  }
  std::vector<bfloat16> small(16);
  EXPECT_THROW(pack_b_vnni(nullptr, 1, 1, 1, 16, small), seqattn::Error);  // needs 32 · 16
  EXPECT_THROW(pack_b_vnni_rows(nullptr, 1, 1, 1, 16, 16, small), seqattn::Error);  // keys_pad
}

TEST(AmxPacking, ARowsRoundTheScaledValueOnce) {
  // fp32(x · s) lands on a bf16 halfway point and would then round to even (0x4024); the
  // exact product lies above it.
  const float x = 0x1.8af6c8p+0f, s = 0x1.aa7d52p+0f;
  ASSERT_EQ(bfloat16(x * s).bits, 0x4024);
  std::vector<bfloat16> one(32);
  pack_a_rows(&x, 1, 1, 1, s, one);
  EXPECT_EQ(one[0].bits, 0x4025);

  std::mt19937 rng(11);
  const std::size_t rows = 3, depth = 17, stride = 20, depth_pad = 32;
  const std::vector<float> q = Random(rows * stride, -4, 4, rng);
  for (const float scale : {1.0f, 0.125f * 1.4426950408889634f, 3.7f}) {
    std::vector<bfloat16> a(rows * depth_pad, bfloat16(kNaN));
    pack_a_rows(q.data(), stride, rows, depth, scale, a);
    for (std::size_t i = 0; i < rows; ++i) {
      for (std::size_t k = 0; k < depth_pad; ++k) {
        const double exact = double(q[i * stride + k]) * scale;
        const float want = k < depth ? Bf16OfExact(exact) : 0.0f;
        EXPECT_EQ(float(a[i * depth_pad + k]), want)
            << "scale " << scale << " row " << i << " k " << k;
      }
    }
  }
}

// ---- Emulated TDPBF16PS ----

void StoreBf16(TileReg& t, std::size_t row, std::size_t i, float value) {
  const bfloat16 h(value);
  std::memcpy(&t.bytes[row][2 * i], &h.bits, 2);
}

TEST(AmxEmulatedTiles, LoadAndStoreMoveOnlyTheShape) {
  TileReg t;
  t.rows = 2, t.colsb = 12;
  std::memset(t.bytes, 0xff, sizeof(t.bytes));
  std::uint8_t memory[3][20];
  for (std::size_t i = 0; i < sizeof(memory); ++i) memory[i / 20][i % 20] = std::uint8_t(i + 1);
  EmulatedTiles::Load(t, memory, 20);
  for (std::size_t r = 0; r < 16; ++r) {
    for (std::size_t byte = 0; byte < 64; ++byte) {
      const int want = r < 2 && byte < 12 ? memory[r][byte] : 0;  // the rest becomes zero
      ASSERT_EQ(t.bytes[r][byte], want) << "row " << r << " byte " << byte;
    }
  }
  std::uint8_t out[3][20];
  std::memset(out, 0xee, sizeof(out));
  EmulatedTiles::Store(t, out, 20);
  for (std::size_t r = 0; r < 3; ++r) {
    for (std::size_t byte = 0; byte < 20; ++byte) {
      const int want = r < 2 && byte < 12 ? memory[r][byte] : 0xee;  // nothing else written
      ASSERT_EQ(out[r][byte], want) << "row " << r << " byte " << byte;
    }
  }
}

TEST(AmxEmulatedTiles, DotBf16ShapesAndZeroing) {
  // C (2 × 2 fp32) += A (2 rows × 2 pairs) · B (2 pair rows × 2 columns), tile shapes 2 × 8 bytes.
  TileReg a, b, c;
  for (TileReg* t : {&a, &b, &c}) t->rows = 2, t->colsb = 8;
  const float av[2][4] = {{1, 2, 3, 4}, {5, 6, 7, 8}};
  const float bm[4][2] = {{1, 0}, {0, 1}, {1, 1}, {2, -1}};  // the reduction × columns matrix
  for (std::size_t m = 0; m < 2; ++m) {
    for (std::size_t i = 0; i < 4; ++i) StoreBf16(a, m, i, av[m][i]);
  }
  for (std::size_t k = 0; k < 2; ++k) {
    for (std::size_t n = 0; n < 2; ++n) {
      StoreBf16(b, k, 2 * n, bm[2 * k][n]);
      StoreBf16(b, k, 2 * n + 1, bm[2 * k + 1][n]);
    }
  }
  const float c_init[2][16] = {{100, 0, 7, 7}, {0, 1}};  // columns 2, 3 beyond colsb
  EmulatedTiles::Load(c, c_init, sizeof(c_init[0]));
  std::memset(c.bytes[5], 0xff, 64);  // a row beyond c.rows: zeroed by the instruction
  EmulatedTiles::DotBf16(c, a, b);
  EXPECT_EQ(c.fp32(0, 0), 112.0f);  // 100 + 1 + 0 + 3 + 8
  EXPECT_EQ(c.fp32(0, 1), 1.0f);    // 0 + 2 + 3 - 4
  EXPECT_EQ(c.fp32(1, 0), 28.0f);   // 5 + 7 + 16
  EXPECT_EQ(c.fp32(1, 1), 6.0f);    // 1 + 6 + 7 - 8
  for (std::size_t r = 0; r < 16; ++r) {
    for (std::size_t byte = r < 2 ? 8 : 0; byte < 64; ++byte) {
      ASSERT_EQ(c.bytes[r][byte], 0) << "row " << r << " byte " << byte;
    }
  }
  TileReg wide = b;
  wide.colsb = 16;  // N differs from C's: #UD on the hardware
  EXPECT_THROW(EmulatedTiles::DotBf16(c, a, wide), std::logic_error);
  EXPECT_THROW(EmulatedTiles::DotBf16(c, c, b), std::logic_error);
  EmulatedTiles::Release();
  EXPECT_THROW(EmulatedTiles::Zero<0>(), std::logic_error);  // no configuration loaded
}

TEST(AmxEmulatedTiles, DenormalsAreZeroInAndOut) {
  TileReg a, b, c;
  for (TileReg* t : {&a, &b, &c}) t->rows = 1, t->colsb = 4;
  // In: a bf16 denormal (2^-127, exponent bits zero) times 2^10 would be the normal 2^-117.
  a.bytes[0][0] = 0x40, a.bytes[0][1] = 0x00;  // bits 0x0040
  StoreBf16(b, 0, 0, 1024.0f);
  ASSERT_GT(float(bfloat16::from_bits(0x0040)) * 1024.0f, 0.0f);
  EmulatedTiles::DotBf16(c, a, b);
  EXPECT_EQ(c.fp32(0, 0), 0.0f) << "denormal input not treated as zero";
  // Out: 2^-70 · 2^-70 = 2^-140 is an fp32 denormal.
  EmulatedTiles::Zero(c);
  StoreBf16(a, 0, 0, 0x1p-70f);
  StoreBf16(b, 0, 0, 0x1p-70f);
  ASSERT_GT(0x1p-70f * 0x1p-70f, 0.0f);
  EmulatedTiles::DotBf16(c, a, b);
  EXPECT_EQ(c.fp32(0, 0), 0.0f) << "denormal product not flushed";
  // Out, after the accumulation: 2^-125 - 0.75 · 2^-125 = 2^-127, from normal operands.
  const float c_init = 0x1p-125f;
  EmulatedTiles::Load(c, &c_init, 4);
  StoreBf16(a, 0, 0, -0.75f);
  StoreBf16(b, 0, 0, 0x1p-125f);
  EmulatedTiles::DotBf16(c, a, b);
  EXPECT_EQ(c.fp32(0, 0), 0.0f) << "denormal sum not flushed";
}

// ---- The block products ----

// Q (rows × depth) scaled, against key block [32, 32 + keys) of K (32 + keys rows).
struct ScoresProblem {
  std::size_t rows, keys, depth;
  float scale;
  std::size_t q_stride, k_stride, depth_pad, n_pad = 64, s_stride = 37;
  std::vector<float> q, k;
  std::vector<bfloat16> a, b;
  ScoresProblem(std::size_t r, std::size_t n, std::size_t d, float s, std::mt19937& rng)
      : rows(r),
        keys(n),
        depth(d),
        scale(s),
        q_stride(d + 1),
        k_stride(d + 2),
        depth_pad(padded_depth(d)),
        q(Random(r * q_stride, -1, 1, rng)),
        k(Random((32 + n) * k_stride, -1, 1, rng)),
        a(kBlockRows * depth_pad),
        b(depth_pad * n_pad) {
    pack_a_rows(q.data(), q_stride, rows, depth, scale, a);  // rows beyond: zeros
    pack_b_vnni(k.data(), k_stride, 32 + keys, depth, n_pad, b);
  }
  template <class Run>
  std::vector<float> Scores(Run run) const {
    std::vector<float> s(kBlockRows * s_stride, kNaN);
    run(a.data(), depth_pad, b.data() + vnni_index(0, 32, n_pad), n_pad, depth_pad, s.data(),
        s_stride);
    return s;
  }
};

void EmulatedScores(const bfloat16* a, std::size_t a_stride, const bfloat16* b, std::size_t n_pad,
                    std::size_t depth_pad, float* s, std::size_t s_stride) {
  configure_tiles<EmulatedTiles>();
  ScoresBlock<EmulatedTiles>(a, a_stride, b, n_pad, depth_pad, s, s_stride);
  release_tiles<EmulatedTiles>();
}

// A block output out[32][stride]: unwritten (NaN) from column `written` on, zero outside the
// valid rows × cols, and elsewhere within the fp32 accumulation bound of its `terms` exact
// products term(i, j, t) in any summation order: (terms + 2) · 2^-24 · Σ|term|.
template <class Term>
void CheckBlock(const std::vector<float>& out, std::size_t stride, std::size_t written,
                std::size_t rows, std::size_t cols, std::size_t terms, Term term,
                const std::string& label) {
  for (std::size_t i = 0; i < kBlockRows; ++i) {
    for (std::size_t j = 0; j < stride; ++j) {
      const auto where = [&] {
        return label + " [" + std::to_string(i) + "][" + std::to_string(j) + "]";
      };
      const float got = out[i * stride + j];
      if (j >= written) {
        ASSERT_TRUE(std::isnan(got)) << where() << " written outside the block";
      } else if (i >= rows || j >= cols) {
        ASSERT_EQ(got, 0.0f) << where() << " (padding)";
      } else {
        double exact = 0, sum_abs = 0;
        for (std::size_t t = 0; t < terms; ++t) {
          const double product = term(i, j, t);
          exact += product, sum_abs += std::abs(product);
        }
        const double bound = double(terms + 2) * 0x1p-24 * sum_abs;
        ASSERT_LE(std::abs(double(got) - exact), bound)
            << where() << ": got " << got << ", want " << exact;
      }
    }
  }
}

TEST(AmxBlocks, ScoresOnOddShapes) {
  std::mt19937 rng(3);
  for (const std::size_t rows : {1, 3, 17, 32}) {
    for (const std::size_t keys : {1, 3, 17, 32}) {
      for (const std::size_t depth : {1, 3, 17, 64, 80, 128, 256}) {
        const ScoresProblem p(rows, keys, depth, 0.125f * 1.4426950408889634f, rng);
        const auto term = [&](std::size_t i, std::size_t j, std::size_t d) {
          return Bf16OfExact(double(p.q[i * p.q_stride + d]) * p.scale) *
                 double(float(bfloat16(p.k[(32 + j) * p.k_stride + d])));
        };
        CheckBlock(p.Scores(EmulatedScores), p.s_stride, kBlockKeys, rows, keys, depth, term,
                   "rows " + std::to_string(rows) + " keys " + std::to_string(keys) + " D " +
                       std::to_string(depth) + " S");
      }
    }
  }
}

// P (rows × keys probabilities) · V block [32, 32 + keys) of V (32 + keys rows × cols), the
// reduction keys_pad: whole 32-key steps, round_up(keys, 32) or more (the flash kernel passes
// the steps holding the keys a block can see, with zeros for masked keys inside them). P's rows are
// 32 bf16 longer than the reduction, NaN there, so a kernel that took its stride for its reduction
// would write NaN.
struct ValuesProblem {
  std::size_t rows, keys, cols, keys_pad, cols_pad, p_stride, pf_stride, v_stride, t_stride;
  std::vector<float> pf, v;
  std::vector<bfloat16> p, vb;
  ValuesProblem(std::size_t r, std::size_t n, std::size_t c, std::mt19937& rng,
                std::size_t reduction = 0)
      : rows(r),
        keys(n),
        cols(c),
        keys_pad(std::max(padded_depth(n), reduction)),
        cols_pad(round_up(c, 16)),
        p_stride(keys_pad + 32),
        pf_stride(n + 1),
        v_stride(c + 3),
        t_stride(cols_pad + 5),
        pf(Random(r * pf_stride, 0, 1, rng)),
        v(Random((32 + n) * v_stride, -1, 1, rng)),
        p(kBlockRows * p_stride),
        vb((32 + keys_pad) * cols_pad) {
    // Zeros up to the reduction (the packed keys, then padding), NaN after it in every row.
    const std::size_t packed_stride = padded_depth(n);
    std::vector<bfloat16> packed(kBlockRows * packed_stride);
    pack_a_rows(pf.data(), pf_stride, rows, keys, 1.0f, packed);
    for (std::size_t i = 0; i < kBlockRows; ++i) {
      bfloat16* row = p.data() + i * p_stride;
      std::copy_n(packed.data() + i * packed_stride, packed_stride, row);
      std::fill(row + keys_pad, row + p_stride, bfloat16(kNaN));
    }
    pack_b_vnni_rows(v.data(), v_stride, 32 + keys, cols, 32 + keys_pad, cols_pad, vb);
  }
  double Term(std::size_t i, std::size_t c, std::size_t k) const {
    return double(float(bfloat16(pf[i * pf_stride + k]))) *
           double(float(bfloat16(v[(32 + k) * v_stride + c])));
  }
  template <class Run>
  std::vector<float> Values(Run run) const {
    std::vector<float> t(kBlockRows * t_stride, kNaN);
    run(p.data(), p_stride, vb.data() + vnni_index(32, 0, cols_pad), keys_pad, cols_pad, t.data(),
        t_stride);
    return t;
  }
  // CheckBlock of a Values output against this problem's float64 terms.
  void Check(const std::vector<float>& t, const std::string& prefix) const {
    const auto term = [this](std::size_t i, std::size_t c, std::size_t k) { return Term(i, c, k); };
    CheckBlock(t, t_stride, cols_pad, rows, cols, keys, term,
               prefix + "rows " + std::to_string(rows) + " keys " + std::to_string(keys) + " of " +
                   std::to_string(keys_pad) + " cols " + std::to_string(cols) + " T");
  }
};

void EmulatedValues(const bfloat16* p, std::size_t p_stride, const bfloat16* v,
                    std::size_t keys_pad, std::size_t cols_pad, float* t, std::size_t t_stride) {
  configure_tiles<EmulatedTiles>();
  ValuesBlock<EmulatedTiles>(p, p_stride, v, keys_pad, cols_pad, t, t_stride);
  release_tiles<EmulatedTiles>();
}

TEST(AmxBlocks, ValuesOnOddShapes) {
  std::mt19937 rng(5);
  for (const std::size_t rows : {1, 3, 17, 32}) {
    for (const std::size_t keys : {1, 3, 17, 32, 33, 64, 80, 100, 128}) {
      for (const std::size_t cols : {1, 3, 17, 64, 80, 128}) {
        for (const std::size_t reduction : {std::size_t{0}, std::size_t{128}}) {
          if (reduction == padded_depth(keys)) continue;  // the first pass ran it
          const ValuesProblem pr(rows, keys, cols, rng, reduction);
          pr.Check(pr.Values(EmulatedValues), "");
        }
      }
    }
  }
}

// ---- Permission ----

std::atomic<int> g_requests{0};
int Grant() { return ++g_requests, 0; }
int RefuseWithEperm() { return ++g_requests, EPERM; }

struct RestoreSystemCall {
  ~RestoreSystemCall() { set_amx_permission_request_for_testing(nullptr); }
};

TEST(AmxPermissionRequest, AskedOnceAndKept) {
  const RestoreSystemCall restore;
  g_requests = 0;
  set_amx_permission_request_for_testing(&Grant);
  EXPECT_EQ(request_amx_permission(false), AmxPermission::kNoAmx);
  EXPECT_EQ(g_requests, 0) << "asked although the CPU has no AMX";
  EXPECT_EQ(request_amx_permission(true), AmxPermission::kGranted);
  EXPECT_EQ(request_amx_permission(true), AmxPermission::kGranted);
  EXPECT_EQ(g_requests, 1);

  g_requests = 0;
  set_amx_permission_request_for_testing(&RefuseWithEperm);
  EXPECT_EQ(request_amx_permission(true), AmxPermission::kRefused);
  EXPECT_EQ(request_amx_permission(true), AmxPermission::kRefused);
  EXPECT_EQ(request_amx_permission(false), AmxPermission::kNoAmx);
  EXPECT_EQ(g_requests, 1);
}

TEST(AmxPermissionRequest, ConcurrentFirstCallsAskOnce) {
  const RestoreSystemCall restore;
  g_requests = 0;
  set_amx_permission_request_for_testing(&Grant);
  std::vector<std::thread> threads;
  std::atomic<int> granted{0};
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back(
        [&] { granted += request_amx_permission(true) == AmxPermission::kGranted; });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(granted, 4);
  EXPECT_EQ(g_requests, 1);
}

// ---- The hardware ----

// AMX-BF16 and AMX-TILE in CPUID, and the tile state enabled by the OS (XCR0 bits 17-18).
bool CpuHasAmxBf16() {
  const CpuFeatures& cpu = cpu_features();
  return cpu.amx_bf16 && cpu.amx_tile && cpu.os_amx;
}

// The instructions on this CPU: against the float64 products within the fp32 accumulation
// bound (the summation order inside TDPBF16PS is not specified tightly enough to require the
// emulation's bits), on the same odd shapes as the emulation; how many elements also match
// the emulation bit for bit is printed.
TEST(AmxBlocks, AmxTilesOnThisCpuWithinTheBoundOfTheEmulation) {
  if (!CpuHasAmxBf16()) {
    GTEST_SKIP()
        << "CPU has no AMX (CPUID.(7,0):EDX bits 22 AMX-BF16 and 24 AMX-TILE, XCR0 bits 17-18): "
           "AmxTiles was compiled but not run, nothing compared";
  }
  if (request_amx_permission(true) != AmxPermission::kGranted) {
    GTEST_SKIP()
        << "CPU has AMX but Linux refused arch_prctl(ARCH_REQ_XCOMP_PERM): AmxTiles not run";
  }
  const auto amx_scores = [](auto... args) {
    amx_configure_tiles();
    amx_scores_block(args...);
    amx_release_tiles();
  };
  const auto amx_values = [](auto... args) {
    amx_configure_tiles();
    amx_values_block(args...);
    amx_release_tiles();
  };
  std::size_t same = 0, total = 0;
  const auto count = [&](const std::vector<float>& x, const std::vector<float>& y) {
    for (std::size_t i = 0; i < x.size(); ++i, ++total) {
      same += std::memcmp(&x[i], &y[i], sizeof(float)) == 0 ? 1 : 0;
    }
  };
  std::mt19937 rng(13);
  for (const std::size_t rows : {1, 17, 32}) {
    for (const std::size_t depth : {3, 80, 128, 256}) {
      const ScoresProblem p(rows, 17, depth, 0.125f * 1.4426950408889634f, rng);
      const auto term = [&](std::size_t i, std::size_t j, std::size_t d) {
        return Bf16OfExact(double(p.q[i * p.q_stride + d]) * p.scale) *
               double(float(bfloat16(p.k[(32 + j) * p.k_stride + d])));
      };
      const std::vector<float> got = p.Scores(amx_scores);
      CheckBlock(got, p.s_stride, kBlockKeys, rows, 17, depth, term,
                 "AMX rows " + std::to_string(rows) + " D " + std::to_string(depth) + " S");
      count(got, p.Scores(EmulatedScores));
    }
    // One 32-key step; four of which three are zeros; three; four.
    for (const auto& [keys, reduction] :
         {std::pair<std::size_t, std::size_t>{17, 0}, {17, 128}, {80, 0}, {100, 0}}) {
      for (const std::size_t cols : {16, 80, 128}) {
        const ValuesProblem pr(rows, keys, cols, rng, reduction);
        const std::vector<float> got = pr.Values(amx_values);
        pr.Check(got, "AMX ");
        count(got, pr.Values(EmulatedValues));
      }
    }
  }
  std::printf("[ AMX ] %zu of %zu elements bit-equal with EmulatedTiles\n", same, total);
}

}  // namespace
