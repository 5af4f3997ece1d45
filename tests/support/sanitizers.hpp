// Whether this test program runs under AddressSanitizer (g++ defines __SANITIZE_ADDRESS__,
// clang answers __has_feature; SEQATTN_TEST_PROGRAM_ASAN says so for the sanitize flavour's
// test programs, which link ASan's runtime but are compiled without instrumentation, see
// tests/CMakeLists.txt) or ThreadSanitizer (the tsan flavour's programs, tests/tsan, define
// SEQATTN_TSAN_SUPPRESSIONS), for the few tests that do less under them and say why.
#pragma once

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SEQATTN_TEST_ASAN 1
#endif
#if __has_feature(thread_sanitizer)
#define SEQATTN_TEST_TSAN 1
#endif
#endif

namespace seqattn::testing {

#if defined(__SANITIZE_ADDRESS__) || defined(SEQATTN_TEST_ASAN) || \
    defined(SEQATTN_TEST_PROGRAM_ASAN)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif

#if defined(__SANITIZE_THREAD__) || defined(SEQATTN_TEST_TSAN) || defined(SEQATTN_TSAN_SUPPRESSIONS)
inline constexpr bool kThreadSanitizer = true;
#else
inline constexpr bool kThreadSanitizer = false;
#endif

// Under either: the library runs 5-50x slower (instrumented, or on the tile emulation), and the
// flavour is there for memory and thread errors, which a shorter loop over the same code finds.
inline constexpr bool kSanitized = kAddressSanitizer || kThreadSanitizer;

}  // namespace seqattn::testing
