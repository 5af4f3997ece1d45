#include "src/kernel/weight_rows.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>

#include "src/kernel/element_mask.hpp"
#include "src/kernel/team_loops.hpp"
#include "src/kernel/tile_visibility.hpp"
#include "src/runtime/positional.hpp"
#include "src/runtime/workspace.hpp"

namespace seqattn::detail {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

std::size_t floats64(std::int64_t floats) {  // bytes of `floats` floats, rounded up to 64
  return (4 * static_cast<std::size_t>(floats) + 63) / 64 * 64;
}
std::int64_t elements(const std::array<std::int64_t, 4>& shape) {
  return shape[0] * shape[1] * shape[2] * shape[3];
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
  std::size_t bytes = static_cast<std::size_t>(p.threads) * floats64(p.seq_k());
  if (rope_of(p.positional.get()) != nullptr) {
    bytes += floats64(elements(p.q.shape)) + floats64(elements(p.k.shape));
  }
  return bytes;
}

void weights_forward(const Problem& given, const KeyStructure& keys) {
  const std::size_t need = weights_workspace_bytes(given);
  const RunScratch scratch(given.workspace, need, need,
                           "AttentionPlan::qkv_workspace_bytes() with QkvDtypes::weights set");
  std::byte* at = scratch.data();
  auto take = [&](std::int64_t floats) {
    const std::span<float> part(reinterpret_cast<float*>(at), static_cast<size_t>(floats));
    at += floats64(floats);
    return part;
  };
  // Every row reads every key: q and k are rotated once instead of per pair. ALiBi stays with
  // the caller's tables.
  const PositionalTables* alibi =
      given.positional && given.positional->has_alibi() ? given.positional.get() : nullptr;
  Problem p = given;
  if (rope_of(given.positional.get()) != nullptr) {
    const std::span<float> q_store = take(elements(given.q.shape));
    const std::span<float> k_store = take(elements(given.k.shape));
    p = with_rotated_inputs(given, q_store, k_store);
  }
  const ElementMask mask(p);
  const TileVisibility visibility(p, keys);
  const std::int64_t rows = p.batch() * p.heads_q() * p.seq_q();
  float* const scores = reinterpret_cast<float*>(at);
  const auto row_floats = static_cast<std::int64_t>(floats64(p.seq_k()) / 4);
  RunOnTeam(p.threads, [&](const auto& team) {
    float* own = scores + team.thread() * row_floats;
    team.for_static(rows, [&](std::int64_t r) {
      const std::int64_t i = r % p.seq_q();
      const std::int64_t h = (r / p.seq_q()) % p.heads_q();
      const std::int64_t b = r / (p.seq_q() * p.heads_q());
      weights_row(p, mask, visibility, alibi, b, h, i, own);
    });
  });
}

}  // namespace seqattn::detail
