// A caller's workspace (RunArgs::workspace): the one check every run applies to it, and the
// scratch of a run that got none. The library's own callers of plans (MultiHeadAttention, the
// MPI ring, the CLI's bench, the Python plans) hold theirs in a seqattn::WorkspaceBuffer.
#pragma once

#include <hwy/aligned_allocator.h>

#include <cstddef>
#include <span>
#include <string_view>

#include "seqattn/workspace.hpp"

namespace seqattn::detail {

// A caller's workspace for a run that needs `need` bytes: at least that large, not null and
// 64-byte aligned, else an Error naming workspace.size() or workspace.data(). `sized_by` names
// what gives the size (e.g. "AttentionPlan::workspace_bytes()"); a view, so a run that passes
// the check allocates nothing.
void check_workspace(std::span<const std::byte> workspace, std::size_t need,
                     std::string_view sized_by);

// The bytes a run carves its scratch from: the caller's workspace, checked to hold `need`
// bytes (check_workspace; `sized_by` says what sizes it), or, when the caller gave none, `own`
// bytes allocated here and held for the run (std::bad_alloc if that fails, before any thread
// team starts). `own` may be less than `need` where a part of the scratch allocates its own
// without a workspace (Linformer's dense run over the projections).
class RunScratch {
 public:
  RunScratch(std::span<std::byte> workspace, std::size_t need, std::size_t own,
             std::string_view sized_by);
  std::byte* data() const { return bytes_.data(); }
  std::size_t size() const { return bytes_.size(); }
  std::span<std::byte> bytes() const { return bytes_; }

 private:
  hwy::AlignedFreeUniquePtr<std::byte[]> owned_;
  std::span<std::byte> bytes_;
};

}  // namespace seqattn::detail
