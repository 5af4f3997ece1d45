#include "src/runtime/workspace.hpp"

#include <cstdint>
#include <new>
#include <string>

#include "src/runtime/validate.hpp"

namespace seqattn::detail {

void check_workspace(std::span<const std::byte> workspace, std::size_t need,
                     std::string_view sized_by) {
  if (workspace.size() < need) {
    fail("workspace.size()",
         ">= " + std::to_string(need) + " bytes (" + std::string(sized_by) + ")",
         std::to_string(workspace.size()));
  }
  if (workspace.data() == nullptr) fail("workspace.data()", "a 64-byte aligned address", "null");
  const auto misaligned = reinterpret_cast<std::uintptr_t>(workspace.data()) % 64;
  if (misaligned != 0) {
    fail("workspace.data()", "a 64-byte aligned address",
         "an address misaligned by " + std::to_string(misaligned));
  }
}

RunScratch::RunScratch(std::span<std::byte> workspace, std::size_t need, std::size_t own,
                       std::string_view sized_by) {
  if (!workspace.empty()) {
    check_workspace(workspace, need, sized_by);
    bytes_ = workspace;
    return;
  }
  owned_ = hwy::AllocateAligned<std::byte>(own);
  if (owned_ == nullptr) throw std::bad_alloc();
  bytes_ = {owned_.get(), own};
}

}  // namespace seqattn::detail

namespace seqattn {

std::span<std::byte> WorkspaceBuffer::get(std::size_t bytes) {
  if (bytes > storage_.max_size() - 64) throw std::bad_alloc();  // bytes + 64 would wrap
  if (storage_.size() < bytes + 64) {
    std::vector<std::byte> grown(bytes + 64);  // may throw: storage_ stays as it was
    storage_.swap(grown);
  }
  const auto misaligned = reinterpret_cast<std::uintptr_t>(storage_.data()) % 64;
  return {storage_.data() + (64 - misaligned) % 64, bytes};
}

std::size_t WorkspaceBuffer::release() {
  const std::size_t freed = capacity();
  std::vector<std::byte>().swap(storage_);  // clear() would keep the allocation
  return freed;
}

}  // namespace seqattn
