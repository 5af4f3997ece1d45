// One accessor per variant folder; each returns a process-wide immutable instance.
#pragma once

#include "seqattn/error.hpp"
#include "variants/attention_variant.hpp"

namespace seqattn::detail {

const AttentionVariant& dense_variant();           // variants/dense/
const AttentionVariant& sliding_window_variant();  // variants/sliding_window/
const AttentionVariant& linear_variant();          // variants/linear/
const AttentionVariant& linformer_variant();       // variants/linformer/
const AttentionVariant& hierarchical_variant();    // variants/hierarchical/

}  // namespace seqattn::detail
