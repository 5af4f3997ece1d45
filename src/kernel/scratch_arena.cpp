#include "src/kernel/scratch_arena.hpp"

#include <cstdint>
#include <string>

#include "src/runtime/validate.hpp"

namespace seqattn::detail {

void check_flash_workspace(std::span<const std::byte> workspace, std::size_t need) {
  if (workspace.size() < need) {
    fail("workspace.size()",
         ">= " + std::to_string(need) +
             " bytes, what this run carves on this SIMD target (size it with "
             "AttentionPlan::qkv_workspace_bytes() of the plan that runs it)",
         std::to_string(workspace.size()));
  }
  if (workspace.data() == nullptr) {
    fail("workspace.data()", "a 64-byte aligned address (not null)", "null");
  }
  if (reinterpret_cast<std::uintptr_t>(workspace.data()) % 64 != 0) {
    fail("workspace.data()", "a 64-byte aligned address",
         "an address 64·n + " +
             std::to_string(reinterpret_cast<std::uintptr_t>(workspace.data()) % 64));
  }
}

}  // namespace seqattn::detail
