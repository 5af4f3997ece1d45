// ThreadSanitizer settings for the tsan flavour's tests (read by the TSan runtime at start-up).
// ignore_noninstrumented_modules: libomp is not built with TSan, and its own thread-pool
// bookkeeping (memset in __kmp_free and the task allocator, called from the runtime itself)
// is reported as racing unless TSan ignores accesses from uninstrumented libraries; libarcher
// asks for exactly this setting. Every access from seqattn's code is still checked.
extern "C" const char* __tsan_default_options() {
  return "halt_on_error=1:second_deadlock_stack=1:ignore_noninstrumented_modules=1:"
         "suppressions=" SEQATTN_TSAN_SUPPRESSIONS;
}
