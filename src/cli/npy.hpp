// Reading and writing NumPy .npy files holding float32 little-endian C-order arrays, and
// all-or-nothing output: files are staged under temporary names in their target directory and
// renamed only once every output of a command is ready, so an error never leaves a partial file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace seqattn::npy {

struct Array {
  std::vector<std::int64_t> shape;
  std::vector<float> data;  // C order

  std::int64_t rank() const { return static_cast<std::int64_t>(shape.size()); }
};

// Loads a format 1.0/2.0/3.0 .npy file with dtype '<f4' in C order. `argument` names the file
// in error messages (e.g. "--q"). Throws Error(kIo) when the file cannot be read, or
// Error(kInvalidArgument) for a bad magic, an unsupported version, dtype or order, or a
// truncated data section.
Array load(const std::string& path, const std::string& argument);

// The bytes of an .npy file (format 1.0, or 2.0 when the header needs it) for `shape`/`data`.
std::string encode(const std::vector<std::int64_t>& shape, const float* data);

// "(3, 2)" style text for messages.
std::string shape_text(const std::vector<std::int64_t>& shape);

// Collects output files and publishes them together. stage() writes the bytes to a temporary
// file next to the target; commit() renames every staged file into place. Staged files that
// were not committed (an exception in between) are removed by the destructor.
class StagedOutputs {
 public:
  StagedOutputs() = default;
  StagedOutputs(const StagedOutputs&) = delete;
  StagedOutputs& operator=(const StagedOutputs&) = delete;
  ~StagedOutputs();

  void stage(const std::string& path, const std::string& bytes, const std::string& argument);
  void stage_npy(const std::string& path, const std::vector<std::int64_t>& shape, const float* data,
                 const std::string& argument);
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
