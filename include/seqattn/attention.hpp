// attend(): the single entry point over every attention variant.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "seqattn/options.hpp"
#include "seqattn/tensor.hpp"

namespace seqattn {

// What ran, what it cost, and how long it took. Its text fields view strings that never change
// (the reason is the plan's, kept alive by the record itself), so returning or copying a record
// allocates nothing: a steady decode loop stays off the heap.
struct RunRecord {
  Variant variant = Variant::kDense;  // the variant that actually ran (never kAuto)
  std::string_view reason;            // why this variant (explicit, or the policy's decision)
  double flops = 0;                   // the variant's own FLOP count (see docs/architecture.md)
  double bytes = 0;                   // bytes of inputs read plus outputs written, at least once
  double seconds = 0;                 // wall time of the whole call, validation included
  int threads = 1;                    // threads the kernel ran with
  std::string_view simd_target;       // e.g. "highway:AVX3", "xsimd:avx512f"
  // What the products ran on: "fp32" (fp32 operands, or bf16 ones widened exactly to fp32),
  // "amx-bf16" or "avx512-bf16"; over an int8 KV cache "int8-vnni" or "int8", Q·Kᵀ in
  // integers (docs/architecture.md, "Compute paths" and "int8 KV").
  std::string_view compute_path = "fp32";
  // Over a KV cache (KvCache or PagedKvCache): the cache the decode kernel's software
  // prefetches filled, "l1" or "l2", "+far<N>" when its requests for the next blocks reached N
  // bytes of each key row ahead instead of 256, "+near<N>" when its passes also asked for the row N
  // on into L1, and "+paced" when an int8 tile's requests were spread over its four passes (the
  // choice is the process's, so an fp32/bf16/f16 cache's record says it too, unused:
  // "l2+near16+paced"; chosen per CPU, or SEQATTN_DECODE_PREFETCH; docs/architecture.md, "Attention
  // over a KV cache"). It changes no result, only the speed. Empty for a run over q, k and v.
  std::string_view decode_prefetch;
  // Owns the text `reason` views (shared with the plan that ran); null for a default record.
  std::shared_ptr<const std::string> reason_storage;
};

// The compute path bf16 operands (bf16 tensors, or fp32 ones under Fp32Precision::kBf16)
// take on this CPU and build, and why; SEQATTN_COMPUTE_PATH=auto|fp32|amx-bf16|avx512-bf16
// forces one (for tests and benchmarks). Throws Error naming SEQATTN_COMPUTE_PATH for another
// value, or for a path this CPU or build cannot run (kNotImplemented when only the kernels are
// missing).
struct ComputePathChoice {
  std::string path;    // "fp32", "amx-bf16" or "avx512-bf16"
  std::string reason;  // e.g. "bf16 widened exactly to fp32: this CPU has no AMX (...); ..."
};
ComputePathChoice bf16_compute_path();

// out[b, h, i, :] = Σ_j softmax_j(q_i·k_j·scale + mask) v_j for the chosen variant.
// Shapes: q [B, H_q, S_q, D], k [B, H_kv, S_k, D], v [B, H_kv, S_k, D_v], out [B, H_q, S_q, D_v],
// with H_q a multiple of H_kv (GQA/MQA). Any strides, as long as out overlaps no input.
// Each of q, k, v and out may be float, bfloat16 or float16 (see docs/architecture.md,
// "Half precision", for where values are rounded). Throws Error (and leaves out untouched) on
// any bad argument.
RunRecord attend(const AnyConstTensor& q, const AnyConstTensor& k, const AnyConstTensor& v,
                 const AnyTensor& out, const AttentionOptions& options = {});

// Merges two partial results computed over disjoint key sets into the exact result over
// their union: out = (e^{lse1} out1 + e^{lse2} out2) / (e^{lse1} + e^{lse2}), lse likewise.
// out/lse may alias out1/lse1. lse views are [B, H, S, 1]. A row with lse = -inf (no visible
// key) contributes nothing.
void merge_partials(const ConstTensor& out1, const ConstTensor& lse1, const ConstTensor& out2,
                    const ConstTensor& lse2, const Tensor& out, const Tensor& lse);

// The SIMD target the runtime dispatches to on this CPU, e.g. "highway:AVX3".
std::string simd_target();

// Deterministic random matrices used when the caller gives none (reproducible from the seed
// on every platform): FAVOR+'s [m, D] block-orthogonal Gaussian matrix with row norms drawn
// from chi(D), and Linformer's [k, S] projection with N(0, 1/k) entries. Row-major, contiguous.
std::vector<float> favor_random_matrix(std::int64_t m, std::int64_t d, std::uint64_t seed);
std::vector<float> linformer_random_projection(std::int64_t k, std::int64_t s, std::uint64_t seed);
// LSH attention's rotations R [hashes, D, buckets/2] (row r·D + d holds R[r, d, :]): exactly
// linformer_random_projection(1, hashes·D·buckets/2, seed), i.e. that many consecutive N(0, 1)
// draws of the seed's stream scaled by 1 (the 1/√k of a one-row projection). buckets even >= 2.
std::vector<float> lsh_random_rotations(std::int64_t hashes, std::int64_t d, std::int64_t buckets,
                                        std::uint64_t seed);

}  // namespace seqattn
