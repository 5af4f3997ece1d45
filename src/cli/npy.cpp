// .npy format: https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html
// magic "\x93NUMPY", version (major, minor), header length (uint16 for 1.0, uint32 for 2.0/3.0,
// little endian), then a Python dict literal padded with spaces to a multiple of 64 bytes.
#include "src/cli/npy.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>

#include "seqattn/error.hpp"

namespace seqattn::npy {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicSize = 6;

[[noreturn]] void bad_file(const std::string& argument, const std::string& path,
                           const std::string& expected, const std::string& actual) {
  throw Error(ErrorKind::kInvalidArgument, argument, expected, "'" + path + "': " + actual);
}

// The position just after `key`'s ':' in the header dict, or npos.
std::size_t value_position(const std::string& header, const std::string& key) {
  for (const char quote : {'\'', '"'}) {
    const std::string quoted = std::string(1, quote) + key + quote;
    std::size_t at = header.find(quoted);
    if (at == std::string::npos) continue;
    at = header.find(':', at + quoted.size());
    if (at != std::string::npos) return at + 1;
  }
  return std::string::npos;
}

std::size_t skip_spaces(const std::string& s, std::size_t at) {
  while (at < s.size() && std::isspace(static_cast<unsigned char>(s[at]))) ++at;
  return at;
}

// The extents between '(' and ')' of "(3, 2)" / "(3,)" / "()"; Python 2's "3L" is accepted.
std::vector<std::int64_t> parse_shape(const std::string& text, std::size_t pos, std::size_t close,
                                      const std::string& path, const std::string& arg) {
  std::vector<std::int64_t> shape;
  while ((pos = skip_spaces(text, pos)) < close) {
    std::int64_t extent = 0;
    const auto [end, error] = std::from_chars(text.data() + pos, text.data() + close, extent);
    if (error != std::errc() || extent < 0) {
      bad_file(arg, path, "non-negative integer extents", "shape text '" + text + "'");
    }
    pos = static_cast<std::size_t>(end - text.data());
    if (pos < close && text[pos] == 'L') ++pos;
    pos = skip_spaces(text, pos);
    if (pos < close && text[pos] != ',') {
      bad_file(arg, path, "comma-separated extents", "shape text '" + text + "'");
    }
    ++pos;
    shape.push_back(extent);
  }
  return shape;
}

struct Header {
  std::string descr;
  bool fortran_order = false;
  std::vector<std::int64_t> shape;
};

Header parse_header(const std::string& text, const std::string& path, const std::string& arg) {
  const auto missing = [&](const char* key) {
    bad_file(arg, path, std::string("an .npy header with a '") + key + "' entry", "none found");
  };
  Header h;
  std::size_t at = value_position(text, "descr");
  if (at == std::string::npos) missing("descr");
  at = skip_spaces(text, at);
  const char quote = at < text.size() ? text[at] : '\0';
  const std::size_t end =
      (quote == '\'' || quote == '"') ? text.find(quote, at + 1) : std::string::npos;
  if (end == std::string::npos)
    bad_file(arg, path, "a quoted dtype in the header", "'" + text + "'");
  h.descr = text.substr(at + 1, end - at - 1);

  at = value_position(text, "fortran_order");
  if (at == std::string::npos) missing("fortran_order");
  at = skip_spaces(text, at);
  h.fortran_order = text.compare(at, 4, "True") == 0;
  if (!h.fortran_order && text.compare(at, 5, "False") != 0) {
    bad_file(arg, path, "fortran_order True or False", "'" + text + "'");
  }

  at = value_position(text, "shape");
  if (at == std::string::npos) missing("shape");
  at = skip_spaces(text, at);
  const std::size_t close = text.find(')', at);
  if (at >= text.size() || text[at] != '(' || close == std::string::npos) {
    bad_file(arg, path, "a shape tuple in the header", "'" + text + "'");
  }
  h.shape = parse_shape(text, at + 1, close, path, arg);
  return h;
}

std::uint64_t read_le(const unsigned char* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Elements of `width` bytes (4 or 2) from little endian to native, or back.
void swap_if_big_endian(void* data, std::size_t n, std::size_t width) {
  if constexpr (std::endian::native == std::endian::big) {
    auto* bytes = static_cast<unsigned char*>(data);
    for (std::size_t i = 0; i < n; ++i) std::reverse(bytes + i * width, bytes + (i + 1) * width);
  }
}

// The file dtype of an element type, and back.
const char* descr_of(DType dtype) {
  return dtype == DType::kF32 ? "<f4" : dtype == DType::kF16 ? "<f2" : "<u2";
}

std::string io_reason() { return std::strerror(errno); }

}  // namespace

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

namespace {

// Copies up to `n` bytes at `offset` of the input into `to` and returns how many it copied.
using ReadBytes = std::function<std::uint64_t(std::uint64_t offset, std::uint64_t n, char* to)>;

// Where an array's elements are and what they are: the header, checked against the input's size.
struct Layout {
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;
  std::uint64_t data_offset = 0;
  std::uint64_t count = 0;  // elements
};

DType dtype_of_descr(const std::string& descr, bool u2_is_bf16, const std::string& path,
                     const std::string& argument) {
  if (descr == "<f4") return DType::kF32;
  if (descr == "<f2") return DType::kF16;
  if (descr == "<u2" && u2_is_bf16) return DType::kBF16;
  bad_file(argument, path,
           "dtype '<f4' (float32), '<f2' (float16) or, with --dtype bf16, '<u2' (bfloat16 bits)",
           "dtype '" + descr + "'" +
               (descr == "<u2" ? " (pass --dtype bf16 to read it as bfloat16 bits)" : ""));
}

// The element count of `shape`, refusing a product that exceeds what `size` bytes can hold
// (and so never overflowing).
std::uint64_t element_count(const std::vector<std::int64_t>& shape, std::uint64_t size,
                            const std::string& path, const std::string& argument) {
  std::uint64_t count = 1;
  for (const std::int64_t extent : shape) {
    const auto e = static_cast<std::uint64_t>(extent);
    if (e != 0 && count > size / e) {
      bad_file(argument, path, "a data section matching the shape",
               "shape " + shape_text(shape) + " larger than the file");
    }
    count *= e;
  }
  return count;
}

Layout parse_layout(const ReadBytes& read, std::uint64_t size, const std::string& path,
                    const std::string& argument, bool u2_is_bf16) {
  unsigned char prefix[12] = {};
  const std::uint64_t got = read(0, sizeof prefix, reinterpret_cast<char*>(prefix));
  if (got < 10 || std::memcmp(prefix, kMagic, kMagicSize) != 0) {
    bad_file(argument, path, "an .npy file (magic \\x93NUMPY)", "not an .npy file (bad magic)");
  }
  const int major = prefix[6];
  if (major < 1 || major > 3) {
    bad_file(argument, path, ".npy format version 1.0, 2.0 or 3.0",
             "version " + std::to_string(major) + "." + std::to_string(prefix[7]));
  }
  const int length_bytes = major == 1 ? 2 : 4;
  const std::uint64_t header_len = read_le(prefix + 8, length_bytes);
  Layout layout;
  layout.data_offset = 8 + length_bytes + header_len;
  if (got < static_cast<std::uint64_t>(8 + length_bytes) || layout.data_offset > size) {
    bad_file(argument, path, "a complete .npy header", "the file ends inside the header");
  }
  std::string header_text(header_len, '\0');
  if (read(8 + length_bytes, header_len, header_text.data()) != header_len) {
    throw Error(ErrorKind::kIo, argument, "a readable .npy file", "'" + path + "': read failed");
  }
  const Header h = parse_header(header_text, path, argument);
  layout.dtype = dtype_of_descr(h.descr, u2_is_bf16, path, argument);
  if (h.fortran_order) {
    bad_file(argument, path, "C order (fortran_order False)", "a Fortran-order array");
  }
  layout.shape = h.shape;
  layout.count = element_count(h.shape, size, path, argument);
  const std::uint64_t width = dtype_size(layout.dtype);
  const std::uint64_t data_bytes = size - layout.data_offset;
  if (data_bytes != layout.count * width) {
    bad_file(argument, path,
             std::to_string(layout.count * width) + " data bytes for shape " + shape_text(h.shape),
             std::to_string(data_bytes) +
                 (data_bytes < layout.count * width ? " (truncated)" : " (trailing bytes)"));
  }
  return layout;
}

Array read_array(const ReadBytes& read, std::uint64_t size, const std::string& path,
                 const std::string& argument, bool u2_is_bf16) {
  const Layout layout = parse_layout(read, size, path, argument, u2_is_bf16);
  Array a;
  a.shape = layout.shape;
  a.dtype = layout.dtype;
  char* target = nullptr;
  if (layout.dtype == DType::kF32) {
    a.data.resize(layout.count);
    target = reinterpret_cast<char*>(a.data.data());
  } else {
    a.bits.resize(layout.count);
    target = reinterpret_cast<char*>(a.bits.data());
  }
  const std::uint64_t width = dtype_size(layout.dtype);
  if (read(layout.data_offset, layout.count * width, target) != layout.count * width) {
    throw Error(ErrorKind::kIo, argument, "a readable .npy file", "'" + path + "': read failed");
  }
  swap_if_big_endian(target, layout.count, width);
  return a;
}

}  // namespace

Array load(const std::string& path, const std::string& argument, bool u2_is_bf16) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    throw Error(ErrorKind::kIo, argument, "a readable .npy file", "'" + path + "': " + io_reason());
  }
  if (!S_ISREG(info.st_mode)) {
    throw Error(ErrorKind::kIo, argument, "a regular .npy file", "'" + path + "' is not a file");
  }
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) {
    throw Error(ErrorKind::kIo, argument, "a readable .npy file", "'" + path + "': " + io_reason());
  }
  const auto size = static_cast<std::uint64_t>(in.tellg());
  const ReadBytes read = [&in](std::uint64_t offset, std::uint64_t n, char* to) {
    in.clear();
    in.seekg(static_cast<std::streamoff>(offset));
    in.read(to, static_cast<std::streamsize>(n));
    return static_cast<std::uint64_t>(in.gcount());
  };
  return read_array(read, size, path, argument, u2_is_bf16);
}

Array decode(std::string_view bytes, const std::string& argument, bool u2_is_bf16) {
  const ReadBytes read = [bytes](std::uint64_t offset, std::uint64_t n, char* to) {
    const std::uint64_t copied = offset >= bytes.size() ? 0 : std::min(n, bytes.size() - offset);
    if (copied > 0) std::memcpy(to, bytes.data() + offset, copied);
    return copied;
  };
  return read_array(read, bytes.size(), "<memory>", argument, u2_is_bf16);
}

std::string encode(const std::vector<std::int64_t>& shape, DType dtype, const void* data) {
  std::string dict = "{'descr': '";
  dict += descr_of(dtype);
  dict += "', 'fortran_order': False, 'shape': " + shape_text(shape) + ", }";
  const std::size_t width = dtype_size(dtype);
  std::size_t count = 1;
  for (const std::int64_t e : shape) count *= static_cast<std::size_t>(e);
  // Version 1.0 stores the header length in 16 bits; larger headers need 2.0.
  const bool v2 = dict.size() + 1 + 10 > 65535;
  const std::size_t prefix = v2 ? 12 : 10;
  const std::size_t padded = (prefix + dict.size() + 1 + 63) / 64 * 64;
  dict.append(padded - prefix - dict.size() - 1, ' ');
  dict += '\n';
  std::string bytes(kMagic, kMagicSize);
  bytes += static_cast<char>(v2 ? 2 : 1);
  bytes += '\0';
  const std::size_t len = dict.size();
  for (std::size_t i = 0; i < (v2 ? 4u : 2u); ++i)
    bytes += static_cast<char>((len >> (8 * i)) & 0xff);
  bytes += dict;
  const std::size_t data_at = bytes.size();
  bytes.resize(data_at + count * width);
  if (count > 0) std::memcpy(bytes.data() + data_at, data, count * width);
  swap_if_big_endian(bytes.data() + data_at, count, width);
  return bytes;
}

StagedOutputs::~StagedOutputs() {
  for (const Pending& p : pending_) {
    if (!p.temp_path.empty()) std::remove(p.temp_path.c_str());
  }
}

void StagedOutputs::stage(const std::string& path, const std::string& bytes,
                          const std::string& argument) {
  const std::size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  if (base.empty())
    throw Error(ErrorKind::kInvalidArgument, argument, "a file path", "'" + path + "'");
  std::string temp = dir + "/." + base + ".tmp.XXXXXX";
  const int fd = ::mkstemp(temp.data());
  if (fd < 0) {
    throw Error(ErrorKind::kIo, argument, "a writable path", "'" + path + "': " + io_reason());
  }
  pending_.push_back({temp, path, argument});
  const mode_t mask = ::umask(0);
  ::umask(mask);
  bool ok = ::fchmod(fd, 0666 & ~mask) == 0;
  std::size_t done = 0;
  while (ok && done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<std::size_t>(n);
  }
  const std::string reason = ok ? std::string() : io_reason();
  if (::close(fd) != 0 && ok) {
    throw Error(ErrorKind::kIo, argument, "a writable path", "'" + path + "': " + io_reason());
  }
  if (!ok) throw Error(ErrorKind::kIo, argument, "a writable path", "'" + path + "': " + reason);
}

void StagedOutputs::stage_npy(const std::string& path, const std::vector<std::int64_t>& shape,
                              const float* data, const std::string& argument) {
  stage(path, encode(shape, data), argument);
}

void StagedOutputs::stage_npy(const std::string& path, const std::vector<std::int64_t>& shape,
                              DType dtype, const void* data, const std::string& argument) {
  stage(path, encode(shape, dtype, data), argument);
}

void StagedOutputs::commit() {
  struct stat st {};
  for (const Pending& p : pending_) {
    if (::stat(p.final_path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      throw Error(ErrorKind::kInvalidArgument, p.argument, "a file path",
                  "'" + p.final_path + "', a directory");
    }
  }
  // Existing targets move aside first (to their temp name + ".old"), so that a failed rename
  // can restore every one of them.
  std::vector<std::string> backups(pending_.size());
  auto roll_back = [&](std::size_t published, const std::string& argument,
                       const std::string& path) {
    const std::string reason = io_reason();
    for (std::size_t j = 0; j < published; ++j) std::remove(pending_[j].final_path.c_str());
    for (std::size_t j = 0; j < pending_.size(); ++j) {
      if (!backups[j].empty()) std::rename(backups[j].c_str(), pending_[j].final_path.c_str());
    }
    throw Error(ErrorKind::kIo, argument, "a writable path", "'" + path + "': " + reason,
                "no output was changed");
  };
  for (std::size_t i = 0; i < pending_.size(); ++i) {
    const Pending& p = pending_[i];
    if (::access(p.final_path.c_str(), F_OK) != 0) continue;
    const std::string backup = p.temp_path + ".old";
    if (std::rename(p.final_path.c_str(), backup.c_str()) != 0) {
      roll_back(0, p.argument, p.final_path);
    }
    backups[i] = backup;
  }
  for (std::size_t i = 0; i < pending_.size(); ++i) {
    const Pending& p = pending_[i];
    if (std::rename(p.temp_path.c_str(), p.final_path.c_str()) != 0) {
      roll_back(i, p.argument, p.final_path);
    }
    pending_[i].temp_path.clear();
  }
  for (const std::string& b : backups) {
    if (!b.empty()) std::remove(b.c_str());
  }
  pending_.clear();
}

void check_output_paths(const std::vector<std::pair<std::string, std::string>>& outputs) {
  std::vector<std::pair<std::string, std::string>> seen;  // (canonical path, argument)
  for (const auto& [argument, path] : outputs) {
    if (path.empty()) continue;  // not requested
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      throw Error(ErrorKind::kInvalidArgument, argument, "a file path",
                  "'" + path + "', a directory");
    }
    const std::size_t slash = path.rfind('/');
    const std::string dir =
        slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
    const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
    char resolved[PATH_MAX];
    if (base.empty() || ::realpath(dir.c_str(), resolved) == nullptr) {
      throw Error(ErrorKind::kIo, argument, "a file in an existing directory",
                  "'" + path + "'" + (base.empty() ? "" : ": " + io_reason()));
    }
    const std::string canonical = std::string(resolved) + "/" + base;
    for (const auto& [other_path, other_argument] : seen) {
      if (other_path == canonical) {
        throw Error(ErrorKind::kInvalidArgument, argument,
                    "a path different from " + other_argument, "'" + path + "'",
                    "two outputs on one file would leave only the last one");
      }
    }
    seen.emplace_back(canonical, argument);
  }
}

void write_file_atomically(const std::string& path, const std::string& bytes,
                           const std::string& argument) {
  StagedOutputs out;
  out.stage(path, bytes, argument);
  out.commit();
}

}  // namespace seqattn::npy
