// The validated problem and its cost: the vocabulary shared by the runtime (which builds a
// Problem), the tile kernel (which computes one) and the variants (which run one). Below all
// three, so none of them reaches up or sideways for it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "seqattn/options.hpp"
#include "seqattn/tensor.hpp"

namespace seqattn::detail {

struct PositionalTables;  // runtime/positional.hpp

// What the tile kernel's two products run on (chosen by kernel/compute_path.hpp): fp32 (bf16
// operands widened exactly), AMX tiles, vdpbf16ps, or the AMX tile layer's scalar emulation
// (tests only: the same packing, tiling and rounding as AMX on any CPU).
enum class ComputePath { kFp32, kAmxBf16, kAvx512Bf16, kAmxEmulated };

// Rules on single keys for a problem whose rows and keys the variant reordered (LSH
// attention's slots sorted by bucket), so that the causal rule, which compares indices, cannot
// express them. Per call data, as the key lengths are: the structure (block_mask.hpp) keeps only
// what every call of its shape shares, so that its tables are built once.
// - excluded_offset >= 0: row i never sees key i + excluded_offset (its own position: LSH's
//   shared-QK keys are the queries). One key per row, hidden after the tile's masking, so
//   full tiles stay on the vector path.
// - positions (query, key non-null): row i of query head h sees key j of kv head h / group
//   only where key[hk·S_k + j] <= query[h·S_q + i] (causal over the original positions).
//   Every tile then takes the element path.
struct SlotRule {
  std::int64_t excluded_offset = -1;
  const std::int32_t* query = nullptr;  // [H_q · S_q] positions of the rows
  const std::int32_t* key = nullptr;    // [H_kv · S_k] positions of the keys
};

// Which keys each query of one call may see: the plan's causal flag and the run's key
// lengths, keep mask and bias (RunArgs), referenced for the call's duration; a variant's
// sub-problem may add slot rules.
struct ProblemMask {
  bool causal = false;
  std::span<const std::int64_t> key_lengths;  // empty = all S_k keys
  std::optional<TensorView<const std::uint8_t>> keep;
  std::optional<ConstTensor> bias;
  const SlotRule* slots = nullptr;  // none unless a variant reordered rows and keys
};

// A fully validated problem. Shapes are consistent, out overlaps no input, key lengths are
// within [0, S_k], mask/bias broadcast correctly. Variants may rely on all of it.
struct Problem {
  ConstTensor q, k, v;
  Tensor out;
  ProblemMask mask;
  float scale = 1.0f;        // the caller's, or the default 1/√D
  bool scale_given = false;  // the caller set AttentionOptions::scale (linear's maps differ)
  std::optional<Tensor> weights;
  std::optional<Tensor> lse;
  int threads = 1;
  // The caller's scratch for the top-level call (RunArgs::workspace), or empty: the variant
  // allocates its own. A variant's sub-problems (copies of the problem) clear it or hand on a
  // carved part of it (Linformer's dense run, hierarchical attention's kernel calls).
  std::span<std::byte> workspace;
  ComputePath compute_path = ComputePath::kFp32;  // the tile kernel's products
  // RoPE tables and ALiBi slopes (validated, built once per plan); null without either.
  std::shared_ptr<const PositionalTables> positional;

  std::int64_t batch() const { return q.shape[0]; }
  std::int64_t heads_q() const { return q.shape[1]; }
  std::int64_t heads_kv() const { return k.shape[1]; }
  std::int64_t seq_q() const { return q.shape[2]; }
  std::int64_t seq_k() const { return k.shape[2]; }
  std::int64_t dim() const { return q.shape[3]; }
  std::int64_t dim_v() const { return v.shape[3]; }
  std::int64_t group() const { return heads_q() / heads_kv(); }  // query heads per kv head
  // Number of visible keys for batch b from the padding mask alone.
  std::int64_t key_length(std::int64_t b) const {
    return mask.key_lengths.empty() ? seq_k() : mask.key_lengths[static_cast<size_t>(b)];
  }
};

struct Cost {
  double flops = 0;
  double bytes = 0;
};

}  // namespace seqattn::detail
