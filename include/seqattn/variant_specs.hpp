// The attention variants and their parameters. The variants are the rows of
// seqattn/variant_list.inc; Variant, ConcreteSpec and the name functions are expanded from it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "seqattn/tensor.hpp"

namespace seqattn {

// One enumerator per row of variant_list.inc, then kAuto (choose by a SelectionPolicy).
enum class Variant {
#define SEQATTN_VARIANT(id, name, Spec, stem) id,
#include "seqattn/variant_list.inc"
  kAuto
};

// The row's name ("dense", "sliding-window", ...), or "auto".
std::string_view to_string(Variant v);
// Inverse of to_string; throws Error naming `argument` for an unknown name, listing the names.
Variant parse_variant(std::string_view name, std::string_view argument = "variant");
// Every concrete variant (every row of the table, without kAuto), in table order.
std::span<const Variant> concrete_variants();

// Exact softmax(Q Kᵀ·scale + mask) V, flash-style.
struct DenseSpec {};

// Exact softmax restricted to keys j in [i - left, i + right] (Longformer). Positions listed
// in global_tokens attend to every key, and every query attends to them. right = 0 is causal.
// Query i and key j are aligned at the end when S_q != S_k (query i sits at key position
// i + S_k - S_q), the same convention as the causal mask.
struct SlidingWindowSpec {
  std::int64_t left = 256;
  std::int64_t right = 256;
  std::vector<std::int64_t> global_tokens;
};

enum class FeatureMap {
  kElu1,   // φ(x) = elu(x) + 1
  kRelu,   // φ(x) = relu(x) (denominator guarded by LinearSpec::epsilon)
  kFavor,  // Performer FAVOR+: φ(x) = exp(w·x - |x|²/2) / √m, w orthogonal random features
};
std::string_view to_string(FeatureMap f);
FeatureMap parse_feature_map(std::string_view name, std::string_view argument = "feature_map");

// out_i = φ(q_i)ᵀ (Σ_j φ(k_j) v_jᵀ) / g_i over the visible keys j (causal: j <= i + S_k - S_q;
// keys past key_lengths are invisible). The guard g_i: elu1 and relu add epsilon to the
// denominator φ(q_i)ᵀ Σ_j φ(k_j); FAVOR+ adds nothing (its kernel rescales the features by
// stabilisers that cancel in the ratio, so an additive epsilon would not be scale-invariant).
// A row whose g_i is 0 (no visible key, or epsilon = 0 with all-zero features) is zeros; a NaN
// in a visible key, value or the query makes the row NaN, as in dense attention.
// Scale: elu1 and relu apply φ to the raw q and k by default, as Katharopoulos et al. (2020)
// and fast-transformers define it; FAVOR+ approximates softmax(Q Kᵀ·scale) V with softmax's
// default scale 1/√D. An explicit AttentionOptions::scale (finite, > 0) multiplies q and k by
// scale^(1/2) each before φ, for every map. The recurrent form is LinearAttentionState.
struct LinearSpec {
  FeatureMap feature_map = FeatureMap::kElu1;
  std::int64_t num_features = 0;  // FAVOR+ m; 0 means m = D (elu1/relu: 0 or D)
  std::uint64_t seed = 0;         // FAVOR+ random matrix seed (see favor_random_matrix)
  float epsilon = 1e-6f;          // elu1/relu denominator guard (finite, >= 0)
  // Optional caller-given FAVOR+ matrix [m, D]; when empty it is drawn from `seed`.
  MatrixView<const float> favor_matrix{};
};

// Dense attention over K and V projected along the sequence: K' = E K, V' = F V with
// E, F of shape [proj_len, >= S_k] (the first S_k columns are used; keys past key_lengths are
// zeroed before projecting). An empty E is linformer_random_projection(proj_len, S_k, seed)
// and an empty F the same with seed + 1, N(0, 1/proj_len). causal, mask.keep, mask.bias and
// weights are unsupported (they are defined over S_k keys); lse is that of the projected rows.
struct LinformerSpec {
  std::int64_t proj_len = 256;
  std::uint64_t seed = 0;
  MatrixView<const float> e{};
  MatrixView<const float> f{};
};

// Hierarchical attention (H-Transformer-1D, Zhu & Soricut 2021): the document's "aggregate the
// sequence in blocks, then attend" as a hierarchical matrix. Self-attention only (S_q = S_k).
// Level 0: query block I (block positions [I·b, (I+1)·b)) sees key blocks I-1, I, I+1
// exactly. Level l >= 1: tokens are grouped by 2^l (group t = positions [t·2^l, (t+1)·2^l)
// clipped to S); a coarse key is the mean of its group's valid keys (positions < key_length),
// its value the mean of their values, and it counts c = (number of valid keys) times in the
// normaliser; a coarse query is the mean of its group's queries. Coarse query t sees coarse
// key u when their level-l blocks (of b coarse tokens) are adjacent, |t/b - u/b| <= 1, and no
// finer level covers the pair, |t/(b/2) - u/(b/2)| >= 2 (integer division); its result
// applies to every token of group t. Every level shares one softmax normaliser:
//   out_i = Σ_(l,u) c_u·exp(s_lu)·v̄_u / Σ_(l,u) c_u·exp(s_lu),  s_lu = scale·q̃_l·k̄_u.
// The last group of a length that is not a multiple of 2^l averages the tokens it has.
// Causal: level 0 is causal inside the diagonal block, levels >= 1 see only the previous
// block (all of whose tokens precede the query), and q̃_l is the query itself rather than its
// group's mean, so no output depends on a later token (a group's mean query would hold
// later tokens); this costs O(S·b·D·levels) instead of O(S·b·D). Every pair (i, j) is seen at
// exactly one level up to `levels`; pairs farther apart than the top level reaches are not
// seen when `levels` is smaller than the length needs. RoPE (AttentionOptions::rope) rotates q
// and k at their positions before any mean.
struct HierarchicalSpec {
  std::int64_t block = 64;  // b: even, in [2, 2^20]
  std::int64_t levels = 0;  // coarse levels above level 0; 0 = as many as the length needs
};

// Reformer's LSH attention (Kitaev, Kaiser & Levskaya 2020), self-attention only (S_q = S_k).
// Per round r of `hashes`: every position gets a bucket h_r(x) = argmax [x·R_r, -x·R_r] (ties
// and NaN: the first index wins), from q (shared) or from q for queries and k for keys
// (separate); the positions sorted by (bucket, position) are cut into chunks of chunk_length
// slots, and a query in chunk t sees the keys of chunks t and t-1 (mod the chunk count, inside
// the round), j <= i when causal, j != i when shared. Shared keys are q RMS-normalised:
// q_j / sqrt(mean(q_j²) + 1e-6). A shared row with nothing else visible in a round attends to
// itself alone there; the rounds combine by their log-normalisers (a key counted once per
// round holding it). R is [hashes, D, buckets/2]: `rotations` (rows r·D + d) or
// lsh_random_rotations(hashes, D, buckets, seed). buckets = 0: min(128, 2·max(1, S/c)).
// docs/architecture.md, "LSH attention", has the whole definition and where it departs from
// trax and HuggingFace.
struct LshSpec {
  std::int64_t hashes = 4;              // n_hashes (rounds), in [1, 64]
  std::int64_t buckets = 0;             // n_buckets: even, in [2, 65536]; 0 = auto
  std::int64_t chunk_length = 64;       // c, in [1, 2^20]
  bool shared_qk = true;                // the paper's shared-QK attention (k is not read)
  std::uint64_t seed = 0;               // draws the rotations when none are given
  MatrixView<const float> rotations{};  // optional, [hashes * D, buckets / 2]
};

namespace detail {
template <class List>
struct DropLast;
template <class... Ts>
struct DropLast<std::variant<Ts...>> {
  template <std::size_t... I>
  static std::variant<std::variant_alternative_t<I, std::variant<Ts...>>...> take(
      std::index_sequence<I...>);
  using type = decltype(take(std::make_index_sequence<sizeof...(Ts) - 1>{}));
};
struct EndOfVariantList {};
}  // namespace detail

// One alternative per row of the table, in table order: a variant that runs as given (what a
// SelectionPolicy rule names). VariantSpec (options.hpp) adds AutoSpec.
using ConcreteSpec = detail::DropLast<std::variant<
#define SEQATTN_VARIANT(id, name, Spec, stem) Spec,
#include "seqattn/variant_list.inc"
    detail::EndOfVariantList>>::type;

Variant variant_of(const ConcreteSpec& spec);

}  // namespace seqattn
