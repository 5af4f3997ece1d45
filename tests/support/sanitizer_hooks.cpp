// Linked into every test program and fuzzer (tests/CMakeLists.txt). LeakSanitizer reads these
// suppressions at start-up; they matter only in the sanitize flavour.
//
// libomp (LLVM's OpenMP runtime, which clang links) keeps per-thread allocations of its
// thread pool alive at exit when a program has run teams of different sizes (3 blocks,
// 4320 bytes, allocated by libomp itself, with no seqattn frame on the stack). That is the
// runtime's own memory, not a leak of seqattn's: exactly that library is suppressed.
extern "C" const char* __lsan_default_suppressions() { return "leak:libomp.so\n"; }
