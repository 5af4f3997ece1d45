// Options and variant specifications: what to compute, separate from running it.
// A caller changes the algorithm by changing AttentionOptions::variant alone.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "seqattn/policy.hpp"
#include "seqattn/positional.hpp"
#include "seqattn/tensor.hpp"

namespace seqattn {

// Picks a concrete variant (variant_specs.hpp) from the sequence length through a
// SelectionPolicy.
struct AutoSpec {
  SelectionPolicy policy{};
  // Largest acceptable error against exact dense (max |out - dense| / max |dense| on the
  // profile's input family); unset = the profile's budget, if any (see select_variant).
  std::optional<double> max_error{};
};

// Every row of the table (seqattn/variant_list.inc) in order, then AutoSpec.
using VariantSpec = std::variant<
#define SEQATTN_VARIANT(id, name, Spec, stem) Spec,
#include "seqattn/variant_list.inc"
    AutoSpec>;
Variant variant_of(const VariantSpec& spec);
// The same spec as a VariantSpec (the alternatives share their order), and back: nothing for
// an AutoSpec (select_variant resolves it).
VariantSpec as_variant_spec(const ConcreteSpec& spec);
std::optional<ConcreteSpec> as_concrete_spec(const VariantSpec& spec);

// Which keys each query may see. All parts combine: a key is visible when every part allows it.
struct Mask {
  bool causal = false;  // key j visible to query i iff j <= i + (S_k - S_q)
  // Per-batch number of valid keys (padding mask); empty = all S_k keys valid.
  std::vector<std::int64_t> key_lengths;
  // Boolean mask [B or 1, H or 1, S_q, S_k]: nonzero = visible, 0 = hidden (the documents'
  // `masked_fill(mask == 0, ...)`). Size-1 batch/head axes broadcast.
  std::optional<TensorView<const std::uint8_t>> keep;
  // Additive bias [B or 1, H or 1, S_q, S_k] added to the scaled scores (dense only).
  std::optional<ConstTensor> bias;
};

// How fp32 q, k and v are computed with, named after PyTorch's fp32_precision. kIeee (the
// default) keeps exact fp32: results do not change. kBf16 rounds every fp32 q, k and v to
// bfloat16 (to nearest even) before the kernels read them and runs the bf16 compute path
// (RunRecord::compute_path; docs/architecture.md, "Compute paths"): the result is the one
// bf16 tensors of those values would give. bf16 and f16 tensors are not affected; over a
// KvCache it rounds q (K and V are read in the cache's dtype: choose a bf16 cache).
enum class Fp32Precision { kIeee, kBf16 };
std::string_view to_string(Fp32Precision p);  // "ieee", "bf16"
// Inverse of to_string; throws Error naming `argument` for any other name.
Fp32Precision parse_fp32_precision(std::string_view name,
                                   std::string_view argument = "fp32_precision");

struct AttentionOptions {
  VariantSpec variant = DenseSpec{};
  Mask mask;
  std::optional<float> scale;     // finite, > 0; default 1/√D (linear elu1/relu: see LinearSpec)
  std::optional<Tensor> weights;  // optional output [B, H_q, S_q, S_k] (dense, sliding window)
  std::optional<Tensor> lse;      // optional output [B, H_q, S_q, 1]: per-row log-sum-exp
  // Positional encodings inside the kernels (seqattn/positional.hpp). RoPE: dense, sliding
  // window, linear attention (q and k rotated before the feature map), Linformer (keys
  // rotated before the projection) and hierarchical (q and k rotated before they are
  // averaged), over (q, k, v) or a KvCache. ALiBi: dense and sliding window; linear
  // attention, Linformer and hierarchical have no single key distance per score and refuse it
  // (Error kUnsupported). Ring attention refuses both (kNotImplemented).
  std::optional<RotaryEmbedding> rope;
  std::optional<Alibi> alibi;
  int threads = 0;  // 0 = all available cores
  Fp32Precision fp32_precision = Fp32Precision::kIeee;
};

}  // namespace seqattn
