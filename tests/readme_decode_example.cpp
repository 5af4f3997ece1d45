// The decode loop shown in README.md (kept in sync by hand; this file is what compiles).
#include <seqattn/seqattn.hpp>

#include <cmath>
#include <cstdio>
#include <vector>

int main() {
  const int H = 32, H_kv = 8, D = 128, prompt = 500, steps = 20;
  seqattn::KvCache cache({/*batch=*/1, H_kv, /*capacity=*/prompt + steps, D, D});
  seqattn::AttentionOptions opt;
  opt.mask.causal = true;  // query i sits at position length - S_q + i of the cache
  const seqattn::AttentionPlan plan = seqattn::make_plan(
      seqattn::cache_shape(cache.shape(), H, /*S_q=*/1), opt);  // once, outside the loop

  std::vector<float> k(prompt * H_kv * D, 0.5f), v(k), q(H * D, 0.1f), out(H * D);
  cache.append(seqattn::bshd<const float>(k.data(), 1, prompt, H_kv, D),  // the prompt's K/V
               seqattn::bshd<const float>(v.data(), 1, prompt, H_kv, D));
  for (int step = 0; step < steps; ++step) {
    // … project the new token into q [1, H, 1, D] and k, v [1, H_kv, 1, D] …
    cache.append(seqattn::bshd<const float>(k.data(), 1, 1, H_kv, D),
                 seqattn::bshd<const float>(v.data(), 1, 1, H_kv, D));
    plan.run(seqattn::bshd<const float>(q.data(), 1, 1, H, D), cache,
             seqattn::bshd(out.data(), 1, 1, H, D));
  }
  std::printf("%lld tokens cached, out[0] = %g\n", static_cast<long long>(cache.length(0)), out[0]);
  return std::abs(out[0] - 0.5f) < 1e-6f ? 0 : 1;  // every value is 0.5
}
