// Runs a check once per compiled Highway target the CPU supports, by restricting runtime
// dispatch to that target (hwy::SetSupportedTargetsForTest), so that every per-target kernel
// of the library is exercised, not only the best one.
#pragma once

#include <gtest/gtest.h>
// The loop visits the targets this file's HWY_TARGETS lists: without the library's
// HWY_WANT_AVX3_DL (seqattn_add_test) it would skip AVX3_DL, the target an AVX-512 CPU runs.
#ifndef HWY_WANT_AVX3_DL
#error \
    "tests/variants/target_loop.hpp: compile the test with HWY_WANT_AVX3_DL=1 (seqattn_add_test in tests/CMakeLists.txt defines it) so that it visits every target the library compiles"
#endif
#include <hwy/highway.h>
#include <hwy/targets.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "seqattn/attention.hpp"

namespace seqattn::testing {

// The worst error each test executable saw against the reference, printed at exit so that
// the figure can be quoted (the assertions hold the tolerance).
struct WorstError {
  double value = 0;
  long comparisons = 0;
  void add(double e) {
    value = e > value ? e : value;
    ++comparisons;
  }
  ~WorstError() {
    if (comparisons > 0) {
      std::printf("worst max_relative_error vs reference: %.3g over %ld comparisons\n", value,
                  comparisons);
    }
  }
};
inline WorstError worst_error;

// A program linked against seqattn_xsimd (an "xsimd." twin, tests/CMakeLists.txt, or any test
// of the `scripts/build xsimd` flavour) is there for the xsimd flash kernel, which Highway's
// targets do not change; its other kernels are the per-target code the Highway build visits on
// every target. So it visits the best target only (the twins took 22 s of the release suite
// when each of them visited all of them).
inline bool flash_kernel_ignores_highway_targets() { return simd_target().starts_with("xsimd:"); }

template <class Fn>
void for_each_target(const Fn& fn) {
  std::vector<std::int64_t> targets = hwy::SupportedAndGeneratedTargets();
  ASSERT_FALSE(targets.empty());
  if (flash_kernel_ignores_highway_targets()) targets.resize(1);  // the best: listed first
  for (std::int64_t target : targets) {
    hwy::SetSupportedTargetsForTest(target);
    const std::string name = hwy::TargetName(target);
    SCOPED_TRACE("target " + name);
    // The library dispatches to the restricted target (its simd_target() says which; the
    // xsimd build puts the flash kernel's arch first, "xsimd:<arch>+highway:<target>").
    const std::string reported = simd_target(), expected = "highway:" + name;
    EXPECT_TRUE(reported == expected || reported.ends_with("+" + expected)) << reported;
    fn();
  }
  hwy::SetSupportedTargetsForTest(0);
}

}  // namespace seqattn::testing
