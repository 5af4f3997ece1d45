// Reading and writing NumPy .npy files holding little-endian C-order float32 ('<f4'), float16
// ('<f2') or bfloat16 arrays, and
// all-or-nothing output: files are staged under temporary names in their target directory and
// renamed only once every output of a command is ready, so an error never leaves a partial file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "seqattn/half.hpp"

namespace seqattn::npy {

// bfloat16 has no numpy dtype: seqattn stores it as its raw bits, '<u2' (uint16 little
// endian), and reads '<u2' as bfloat16 only when asked to (the CLI's --dtype bf16), so an
// ordinary integer array is never taken for floats.
struct Array {
  std::vector<std::int64_t> shape;
  DType dtype = DType::kF32;
  std::vector<float> data;          // C order, when dtype is f32
  std::vector<std::uint16_t> bits;  // C order, the raw bf16/f16 bits otherwise

  std::int64_t rank() const { return static_cast<std::int64_t>(shape.size()); }
  const void* raw() const {
    return dtype == DType::kF32 ? static_cast<const void*>(data.data()) : bits.data();
  }
  void* raw() { return dtype == DType::kF32 ? static_cast<void*>(data.data()) : bits.data(); }
};

// Loads a format 1.0/2.0/3.0 .npy file in C order with dtype '<f4' (f32), '<f2' (f16) or,
// when u2_is_bf16, '<u2' (bf16 bits). `argument` names the file in error messages (e.g.
// "--q"). Throws Error(kIo) when the file cannot be read, or Error(kInvalidArgument) for a bad
// magic, an unsupported version, dtype or order, or a truncated data section.
Array load(const std::string& path, const std::string& argument, bool u2_is_bf16 = false);
// The same for the bytes of a whole .npy file in memory (messages name the path '<memory>').
Array decode(std::string_view bytes, const std::string& argument, bool u2_is_bf16 = false);

// The bytes of an .npy file (format 1.0, or 2.0 when the header needs it) for `shape`/`data`:
// '<f4', '<f2' or, for bf16, '<u2'.
std::string encode(const std::vector<std::int64_t>& shape, DType dtype, const void* data);
inline std::string encode(const std::vector<std::int64_t>& shape, const float* data) {
  return encode(shape, DType::kF32, data);
}

// "(3, 2)" style text for messages.
std::string shape_text(const std::vector<std::int64_t>& shape);

// Checks a command's output paths before it computes anything: each (argument, path) must name
// a file (not a directory) in an existing directory, and no two may be the same file. Throws
// Error naming the argument.
void check_output_paths(const std::vector<std::pair<std::string, std::string>>& outputs);

// Collects output files and publishes them together. stage() writes the bytes to a temporary
// file next to the target; commit() moves every existing target aside, renames every staged
// file into place, and on any failure puts every target back as it was (all or nothing).
// Staged files that were not committed (an exception in between) are removed by the
// destructor.
class StagedOutputs {
 public:
  StagedOutputs() = default;
  StagedOutputs(const StagedOutputs&) = delete;
  StagedOutputs& operator=(const StagedOutputs&) = delete;
  ~StagedOutputs();

  void stage(const std::string& path, const std::string& bytes, const std::string& argument);
  void stage_npy(const std::string& path, const std::vector<std::int64_t>& shape, const float* data,
                 const std::string& argument);
  void stage_npy(const std::string& path, const std::vector<std::int64_t>& shape, DType dtype,
                 const void* data, const std::string& argument);
  void commit();

 private:
  struct Pending {
    std::string temp_path;
    std::string final_path;
    std::string argument;
  };
  std::vector<Pending> pending_;
};

// Writes one file atomically (stage + commit).
void write_file_atomically(const std::string& path, const std::string& bytes,
                           const std::string& argument);

}  // namespace seqattn::npy
