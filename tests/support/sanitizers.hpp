// Whether this test program runs under AddressSanitizer (g++ defines __SANITIZE_ADDRESS__,
// clang answers __has_feature; SEQATTN_TEST_PROGRAM_ASAN says so for the sanitize flavour's
// test programs, which link ASan's runtime but are compiled without instrumentation, see
// tests/CMakeLists.txt), for the few tests that do less under it and say why.
#pragma once

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SEQATTN_TEST_ASAN 1
#endif
#endif

namespace seqattn::testing {

#if defined(__SANITIZE_ADDRESS__) || defined(SEQATTN_TEST_ASAN) || \
    defined(SEQATTN_TEST_PROGRAM_ASAN)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif

}  // namespace seqattn::testing
