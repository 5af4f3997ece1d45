// Whether this test program is built with AddressSanitizer (g++ defines __SANITIZE_ADDRESS__,
// clang answers __has_feature), for the few tests that do less under it and say why.
#pragma once

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SEQATTN_TEST_ASAN 1
#endif
#endif

namespace seqattn::testing {

#if defined(__SANITIZE_ADDRESS__) || defined(SEQATTN_TEST_ASAN)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif

}  // namespace seqattn::testing
