// Umbrella header: the whole public API. Includes only the C++ standard library.
#pragma once

#include "seqattn/attention.hpp"
#include "seqattn/error.hpp"
#include "seqattn/half.hpp"
#include "seqattn/kv_cache.hpp"
#include "seqattn/linear_state.hpp"
#include "seqattn/mha.hpp"
#include "seqattn/options.hpp"
#include "seqattn/paged_kv_cache.hpp"
#include "seqattn/plan.hpp"
#include "seqattn/policy.hpp"
#include "seqattn/tensor.hpp"
#include "seqattn/variant_params.hpp"
#include "seqattn/variant_specs.hpp"
#include "seqattn/workspace.hpp"
