// libFuzzer target: the .npy reader. Every input either decodes or throws seqattn::Error (any
// other exception escapes and is reported as a crash); whatever decodes must survive a round
// trip through the writer unchanged, read with and without '<u2' as bfloat16.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "seqattn/error.hpp"
#include "src/cli/npy.hpp"

namespace {

std::size_t payload_bytes(const seqattn::npy::Array& a) {
  return a.dtype == seqattn::DType::kF32 ? a.data.size() * 4 : a.bits.size() * 2;
}

void check_round_trip(const seqattn::npy::Array& a, bool u2_is_bf16) {
  std::uint64_t count = 1;
  for (const std::int64_t e : a.shape) count *= static_cast<std::uint64_t>(e);
  if (count * seqattn::dtype_size(a.dtype) != payload_bytes(a)) std::abort();
  const std::string again = seqattn::npy::encode(a.shape, a.dtype, a.raw());
  const seqattn::npy::Array b = seqattn::npy::decode(again, "round trip", u2_is_bf16);
  if (b.shape != a.shape || b.dtype != a.dtype || payload_bytes(b) != payload_bytes(a)) {
    std::abort();
  }
  if (payload_bytes(a) > 0 && std::memcmp(a.raw(), b.raw(), payload_bytes(a)) != 0) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  for (const bool u2_is_bf16 : {false, true}) {
    try {
      check_round_trip(seqattn::npy::decode(bytes, "--q", u2_is_bf16), u2_is_bf16);
    } catch (const seqattn::Error&) {
      // A clean refusal: the only acceptable failure.
    }
  }
  return 0;
}
