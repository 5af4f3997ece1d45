#include "src/kernel/weight_rows.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <span>

#include "src/kernel/element_mask.hpp"
#include "src/kernel/scratch_arena.hpp"
#include "src/kernel/team_loops.hpp"
#include "src/kernel/tile_visibility.hpp"
#include "src/runtime/positional.hpp"
#include "src/runtime/workspace.hpp"

namespace seqattn::detail {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

std::int64_t elements(const std::array<std::int64_t, 4>& shape) {
  return shape[0] * shape[1] * shape[2] * shape[3];
}

// Floats from one thread's score row to the next: S_k rounded up to a 64-byte line, so the
// threads' rows share no line.
std::int64_t row_stride(const Problem& p) { return (p.seq_k() + 15) / 16 * 16; }

// The pass's scratch, in carving order: with RoPE the rotated q and k, then a score row per
// thread. The same takes count the workspace (a counting arena) and carve it, so the two
// cannot disagree.
struct WeightsScratch {
  float* q = nullptr;  // null without RoPE, and while counting
  float* k = nullptr;
  float* scores = nullptr;
};
WeightsScratch carve_weights_scratch(ScratchArena& arena, const Problem& p) {
  WeightsScratch s;
  if (rope_of(p.positional.get()) != nullptr) {
    s.q = arena.take<float>(elements(p.q.shape));
    s.k = arena.take<float>(elements(p.k.shape));
  }
  s.scores = arena.take<float>(p.threads * row_stride(p));
  return s;
}

// One row of weights: the row's own stable softmax over the keys it sees (0 for the others,
// and a row with no visible key is all 0). Normalising here rather than with the kernel's lse
// keeps the weights exact when scores are huge: the two passes round a score of 1e30
// differently by ~1e23, and exp(score - lse) would turn that into 0 or inf.
// The structure's rule comes from `visibility` (the kernel's view of it: the row's range once
// per row, key columns from a table), the rest of the mask from `mask`; q and k are rotated
// already, and `alibi` (null for none) gives the slopes.
void weights_row(const Problem& p, const ElementMask& mask, const TileVisibility& visibility,
                 const PositionalTables* alibi, std::int64_t b, std::int64_t h, std::int64_t i,
                 float* scores) {
  const std::int64_t hk = h / p.group();
  const std::int64_t len = p.key_length(b);
  const KeyRange range = visibility.row_range(i, std::min(len, p.seq_k()));
  const float* q = p.q.ptr(b, h, i);
  float max_score = kNegInf;
  for (std::int64_t j = 0; j < p.seq_k(); ++j) {
    float s = kNegInf;
    const bool structural = (j >= range.lo && j < range.hi) || visibility.is_column(j);
    if (structural && mask.visible(b, h, i, j, len)) {
      const float* k = p.k.ptr(b, hk, j);
      float dot = 0;
      for (std::int64_t d = 0; d < p.dim(); ++d)
        dot += q[d * p.q.strides[3]] * k[d * p.k.strides[3]];
      s = dot * p.scale;
      if (mask.has_bias()) s += mask.bias(b, h, i, j);
      if (alibi != nullptr) {
        s += static_cast<float>(alibi_bias(*alibi, h, j - (i + p.seq_k() - p.seq_q())));
      }
    }
    scores[j] = s;
    max_score = std::max(max_score, s);
  }
  const bool empty = max_score == kNegInf;
  float sum = 0;
  for (std::int64_t j = 0; j < p.seq_k(); ++j) {
    float& s = scores[j];
    s = empty ? 0.0f : std::exp(s - max_score);
    sum += s;
  }
  const float inv = empty ? 0.0f : 1.0f / sum;
  for (std::int64_t j = 0; j < p.seq_k(); ++j) {
    p.weights->at(b, h, i, j) = scores[j] * inv;
  }
}

}  // namespace

std::size_t weights_workspace_bytes(const Problem& p) {
  ScratchArena counter;
  carve_weights_scratch(counter, p);
  return counter.used();
}

void weights_forward(const Problem& given, const KeyStructure& keys) {
  const std::size_t need = weights_workspace_bytes(given);
  const RunScratch scratch(given.workspace, need, need,
                           "AttentionPlan::qkv_workspace_bytes() with QkvDtypes::weights set");
  ScratchArena arena(scratch.data(), scratch.size());
  const WeightsScratch carved = carve_weights_scratch(arena, given);
  // Every row reads every key: q and k are rotated once instead of per pair. ALiBi stays with
  // the caller's tables.
  const PositionalTables* alibi =
      given.positional && given.positional->has_alibi() ? given.positional.get() : nullptr;
  Problem p = given;
  if (carved.q != nullptr) {
    p = with_rotated_inputs(given, {carved.q, static_cast<size_t>(elements(given.q.shape))},
                            {carved.k, static_cast<size_t>(elements(given.k.shape))});
  }
  const ElementMask mask(p);
  const TileVisibility visibility(p, keys);
  const std::int64_t rows = p.batch() * p.heads_q() * p.seq_q();
  RunOnTeam(p.threads, [&](const auto& team) {
    float* own = carved.scores + team.thread() * row_stride(p);
    team.for_static(rows, [&](std::int64_t r) {
      const std::int64_t i = r % p.seq_q();
      const std::int64_t h = (r / p.seq_q()) % p.heads_q();
      const std::int64_t b = r / (p.seq_q() * p.heads_q());
      weights_row(p, mask, visibility, alibi, b, h, i, own);
    });
  });
}

}  // namespace seqattn::detail
