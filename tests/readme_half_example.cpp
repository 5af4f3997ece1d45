// The README's half-precision snippet, compiled and run: bf16 q/k/v/out, then an f16 cache fed
// with fp32 tokens. Exits non-zero when a result is not what the README says.
#include <cmath>
#include <cstdio>
#include <vector>

#include "seqattn/seqattn.hpp"

int main() {
  const int H = 4, H_kv = 2, S = 33, D = 16, capacity = 64;
  std::vector<seqattn::bfloat16> q(H * S * D), k(H * S * D), v(H * S * D), out(H * S * D);
  for (int i = 0; i < H * S * D; ++i) {
    q[i] = seqattn::bfloat16(std::sin(0.1f * i));
    k[i] = seqattn::bfloat16(std::cos(0.07f * i));
    v[i] = seqattn::bfloat16(0.01f * (i % 97));
  }
  seqattn::attend(seqattn::bhsd<const seqattn::bfloat16>(q.data(), 1, H, S, D),
                  seqattn::bhsd<const seqattn::bfloat16>(k.data(), 1, H, S, D),
                  seqattn::bhsd<const seqattn::bfloat16>(v.data(), 1, H, S, D),
                  seqattn::bhsd(out.data(), 1, H, S, D));
  seqattn::KvCache cache({1, H_kv, capacity, D, D, seqattn::DType::kF16});  // f32 or half appends

  // The README's promise: bit for bit the fp32 result on the widened inputs, then rounded.
  std::vector<float> q32(q.begin(), q.end()), k32(k.begin(), k.end()), v32(v.begin(), v.end());
  std::vector<float> out32(out.size());
  seqattn::attend(seqattn::bhsd<const float>(q32.data(), 1, H, S, D),
                  seqattn::bhsd<const float>(k32.data(), 1, H, S, D),
                  seqattn::bhsd<const float>(v32.data(), 1, H, S, D),
                  seqattn::bhsd(out32.data(), 1, H, S, D));
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i].bits != seqattn::bfloat16(out32[i]).bits) {
      std::printf("element %zu: bf16 run %g, rounded fp32 run %g\n", i, static_cast<float>(out[i]),
                  out32[i]);
      return 1;
    }
  }
  // fp32 tokens into the f16 cache: half the bytes of an f32 cache of the same shape.
  cache.append(seqattn::bhsd<const float>(k32.data(), 1, H_kv, S, D),
               seqattn::bhsd<const float>(v32.data(), 1, H_kv, S, D));
  const seqattn::KvCache f32_cache({1, H_kv, capacity, D, D});
  if (cache.length(0) != S || 2 * cache.bytes() != f32_cache.bytes()) return 1;
  std::vector<float> step_out(H * D);
  seqattn::attend(seqattn::bhsd<const float>(q32.data(), 1, H, 1, D), cache,
                  seqattn::bhsd(step_out.data(), 1, H, 1, D));
  std::printf(
      "readme half example: bf16 attention matches the rounded fp32 run; f16 cache holds "
      "%d tokens in %lld bytes; out[0] = %g\n",
      S, static_cast<long long>(cache.bytes()), step_out[0]);
  return std::isfinite(step_out[0]) ? 0 : 1;
}
