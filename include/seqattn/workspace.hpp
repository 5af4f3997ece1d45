// WorkspaceBuffer: a caller's workspace for AttentionPlan::run (RunArgs::workspace), kept
// between runs.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace seqattn {

// Bytes for RunArgs::workspace, grown to the largest size asked for and kept (until release()),
// 64-byte aligned: a loop that asks each run for plan.workspace_bytes() (over a cache) or
// *plan.qkv_workspace_bytes(dtypes) (over q, k, v; the views' dtypes, f32 by default)
// allocates on its first run only.
//
//   WorkspaceBuffer ws;
//   const auto bytes = plan.qkv_workspace_bytes({q.dtype, k.dtype, v.dtype, out.dtype});
//   for (...) plan.run(q, k, v, out, {.workspace = ws.get(*bytes)});
//
// A growth that fails throws std::bad_alloc (also for a size no buffer can hold) and keeps
// the old buffer. Not thread-safe: one per concurrent run (a run reads and writes its
// workspace throughout).
class WorkspaceBuffer {
 public:
  // `bytes` bytes, 64-byte aligned; the same bytes as the last call unless it asks for more
  // than any call before.
  std::span<std::byte> get(std::size_t bytes);

  // The most bytes get() can return without growing.
  std::size_t capacity() const { return storage_.size() < 64 ? 0 : storage_.size() - 64; }

  // Frees the bytes (capacity() becomes 0; the next get() allocates) and returns how many
  // get() could have returned. Spans from earlier get() calls dangle after it.
  std::size_t release();

 private:
  std::vector<std::byte> storage_;  // 64 bytes more than the largest asked: aligned inside
};

}  // namespace seqattn
