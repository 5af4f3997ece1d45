// Large uninitialised float scratch that a call allocates and frees (hierarchical attention's
// coarse tokens: ~70 MB per call at S = 65536, D = 64). Blocks from 2 MiB on are mapped
// directly, 2 MiB-aligned, with transparent huge pages asked for (madvise): a fresh mapping
// costs a page fault and a page clear per page touched, and with 4 KiB pages that was ~19k
// faults per call, 10-20% of the call under a VM (the kernel's THP mode here is "madvise").
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace seqattn::detail {

struct ScratchRelease {
  void* base = nullptr;  // the mapping (nullptr: the block came from new[])
  std::size_t bytes = 0;
  void operator()(float* p) const;
};

class ScratchFloats {
 public:
  ScratchFloats() = default;
  float* data() const { return owned_.get(); }
  float& operator[](std::size_t i) const { return owned_.get()[i]; }

 private:
  friend ScratchFloats scratch_floats(std::int64_t count, const std::string& argument);
  std::unique_ptr<float[], ScratchRelease> owned_;
};

// `count` floats left uninitialised (every element must be written before it is read), or an
// Error naming `argument` when they do not fit in memory.
ScratchFloats scratch_floats(std::int64_t count, const std::string& argument);

}  // namespace seqattn::detail
