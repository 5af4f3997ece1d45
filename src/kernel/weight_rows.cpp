#include "src/kernel/weight_rows.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "src/kernel/element_mask.hpp"
#include "src/kernel/tile_visibility.hpp"
#include "src/runtime/positional.hpp"

namespace seqattn::detail {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// One row of weights: the row's own stable softmax over the keys it sees (0 for the others,
// and a row with no visible key is all 0). Normalising here rather than with the kernel's lse
// keeps the weights exact when scores are huge: the two passes round a score of 1e30
// differently by ~1e23, and exp(score - lse) would turn that into 0 or inf.
// The structure's rule comes from `visibility` (the kernel's view of it: the row's range once
// per row, key columns from a table), the rest of the mask from `mask`.
void weights_row(const Problem& p, const ElementMask& mask, const TileVisibility& visibility,
                 std::int64_t b, std::int64_t h, std::int64_t i, std::vector<float>& scores) {
  const std::int64_t hk = h / p.group();
  const std::int64_t len = p.key_length(b);
  const KeyRange range = visibility.row_range(i, std::min(len, p.seq_k()));
  const float* q = p.q.ptr(b, h, i);
  const PositionalTables* alibi =
      p.positional && p.positional->has_alibi() ? p.positional.get() : nullptr;
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
    scores[static_cast<size_t>(j)] = s;
    max_score = std::max(max_score, s);
  }
  const bool empty = max_score == kNegInf;
  float sum = 0;
  for (std::int64_t j = 0; j < p.seq_k(); ++j) {
    float& s = scores[static_cast<size_t>(j)];
    s = empty ? 0.0f : std::exp(s - max_score);
    sum += s;
  }
  const float inv = empty ? 0.0f : 1.0f / sum;
  for (std::int64_t j = 0; j < p.seq_k(); ++j) {
    p.weights->at(b, h, i, j) = scores[static_cast<size_t>(j)] * inv;
  }
}

}  // namespace

void weights_forward(const Problem& given, const KeyStructure& keys) {
  // Every row reads every key: rotate q and k once instead of per pair.
  std::vector<float> q_store, k_store;
  const Problem p = with_rotated_inputs(given, q_store, k_store);
  const ElementMask mask(p);
  const TileVisibility visibility(p, keys);
  const std::int64_t rows = p.batch() * p.heads_q() * p.seq_q();
#pragma omp parallel num_threads(p.threads)
  {
    std::vector<float> scores(static_cast<size_t>(p.seq_k()));
#pragma omp for schedule(static)
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t i = r % p.seq_q();
      const std::int64_t h = (r / p.seq_q()) % p.heads_q();
      const std::int64_t b = r / (p.seq_q() * p.heads_q());
      weights_row(p, mask, visibility, b, h, i, scores);
    }
  }
}

}  // namespace seqattn::detail
