// The softmax variants' run over the tile kernel: out and lse from the flash kernel, then the
// weights from the row path when they are asked for.
#include "src/kernel/flash_attention.hpp"

#include <algorithm>

#include "src/kernel/weight_rows.hpp"

namespace seqattn::detail {

// The weights come from a second pass over the scores, after the kernel has computed out and
// lse exactly as it does without them (asking for weights changes neither, bit for bit).
void softmax_forward(const Problem& p, const KeyStructure& keys) {
  flash_forward(p, keys);  // never reads or writes p.weights
  if (p.weights) weights_forward(p, keys);
}

std::size_t softmax_workspace_bytes(const Problem& planned, const KeyStructure& keys) {
  return flash_workspace_bytes(planned, keys);  // on planned.compute_path
}

std::size_t softmax_weights_workspace_bytes(const Problem& planned, const KeyStructure& keys) {
  return std::max(softmax_workspace_bytes(planned, keys), weights_workspace_bytes(planned));
}

}  // namespace seqattn::detail
