// A caller's workspace (RunArgs::workspace): the one check every run applies to it, and the
// grow-only buffer the library's own callers of plans (MultiHeadAttention, the MPI ring, the
// CLI's bench) hold one in.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>
#include <vector>

namespace seqattn::detail {

// A caller's workspace for a run that needs `need` bytes: at least that large, not null and
// 64-byte aligned, else an Error naming workspace.size() or workspace.data(). `sized_by` names
// what gives the size (e.g. "AttentionPlan::workspace_bytes()"); a view, so a run that passes
// the check allocates nothing.
void check_workspace(std::span<const std::byte> workspace, std::size_t need,
                     std::string_view sized_by);

// A workspace grown to the largest size asked for, 64-byte aligned; a growth that throws
// std::bad_alloc keeps the old buffer. One per concurrent run.
class WorkspaceBuffer {
 public:
  std::span<std::byte> get(std::size_t bytes);

 private:
  std::vector<std::byte> storage_;  // 64 bytes more than the largest asked: aligned inside
};

}  // namespace seqattn::detail
