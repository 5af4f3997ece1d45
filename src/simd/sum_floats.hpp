// The read-bandwidth probe shared by bench_read_bandwidth and `seqattn report` (not part of
// the public API).
#pragma once

#include <cstdint>

namespace seqattn::detail {

// Σ data[0, count), read with the dispatched target's widest loads.
float sum_floats(const float* data, std::int64_t count);

}  // namespace seqattn::detail
