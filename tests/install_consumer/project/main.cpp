// A downstream project: links seqattn through find_package and runs one attention.
#include <seqattn/seqattn.hpp>

#include <cstdio>
#include <vector>

int main() {
  std::vector<float> x(4 * 2, 1.0f), out(x.size());
  x[0] = 3.0f;
  auto view = seqattn::matrix<const float>(x.data(), 4, 2);
  seqattn::attend(view, view, view, seqattn::matrix(out.data(), 4, 2));
  try {
    seqattn::attend(view, view, view, seqattn::matrix(x.data(), 4, 2));  // in place: rejected
    return 1;
  } catch (const seqattn::Error& e) {
    std::printf("consumer ok: %s\n", e.what());
  }
  return out[0] > 1.0f && out[1] == 1.0f ? 0 : 1;
}
