// SEQATTN_COMPUTE_PATH for the duration of a scope (set before any thread of the test reads it;
// the library reads it at each run whose operands are bf16).
#pragma once

#include <cstdlib>

namespace seqattn::testing {

class ScopedComputePath {
 public:
  explicit ScopedComputePath(const char* value) { setenv("SEQATTN_COMPUTE_PATH", value, 1); }
  ~ScopedComputePath() { unsetenv("SEQATTN_COMPUTE_PATH"); }
  ScopedComputePath(const ScopedComputePath&) = delete;
  ScopedComputePath& operator=(const ScopedComputePath&) = delete;
};

}  // namespace seqattn::testing
