// The usage example shown in README.md (kept in sync by hand; this file is what compiles).
#include <seqattn/seqattn.hpp>

#include <cstdio>
#include <vector>

int main() {
  const int B = 1, H = 8, S = 1024, D = 64;  // one sequence, 8 heads, [B, S, H, D] memory
  std::vector<float> q(B * S * H * D, 0.1f), k(q), v(q), out(q.size());

  seqattn::AttentionOptions opt;
  opt.mask.causal = true;
  opt.variant = seqattn::DenseSpec{};  // or SlidingWindowSpec{128, 0}, LinearSpec{}, AutoSpec{}
  auto run = seqattn::attend(seqattn::bshd<const float>(q.data(), B, S, H, D),
                             seqattn::bshd<const float>(k.data(), B, S, H, D),
                             seqattn::bshd<const float>(v.data(), B, S, H, D),
                             seqattn::bshd(out.data(), B, S, H, D), opt);
  std::printf("%s: %.2f ms, %.1f GFLOP/s on %s\n",
              std::string(seqattn::to_string(run.variant)).c_str(), run.seconds * 1e3,
              run.flops / run.seconds * 1e-9, std::string(run.simd_target).c_str());
  return out[0] == 0.1f ? 0 : 1;  // every value is 0.1, so attention returns 0.1
}
