// The pieces of the _seqattn extension module, one registration function per file.
#pragma once
#include <pybind11/pybind11.h>

#include <optional>
#include <string>

#include "errors.hpp"
#include "seqattn/options.hpp"

namespace seqattn::python {

namespace py = pybind11;

void register_errors(py::module_& m);     // module.cpp: seqattn::Error → Python exceptions
void register_attention(py::module_& m);  // bind_attention.cpp: Options, RunRecord, attend, Plan
void register_cache(py::module_& m);      // bind_cache.cpp: KvCache
void register_mha(py::module_& m);        // bind_mha.cpp: MultiHeadAttention

// The mask views of one call: keep ([B|1, H|1, S_q|1, S_k|1] bool) and bias (float32), both
// optional (None), bound to the library's Mask of `options` for scores of shape `scores`.
AttentionOptions with_masks(const AttentionOptions& options, py::handle keep, py::handle bias,
                            const std::array<std::int64_t, 4>& scores);

// rope=: None, a theta, or a dict of RotaryEmbedding's fields ("layout": "halves" |
// "interleaved"); alibi=: None/False, True (the published slopes), slopes, or a dict
// {"slopes", "form": "causal" | "symmetric"}. TypeError/ValueError naming the argument.
std::optional<RotaryEmbedding> parse_rope(py::handle rope, const std::string& name = "rope");
std::optional<Alibi> parse_alibi(py::handle alibi);

}  // namespace seqattn::python
