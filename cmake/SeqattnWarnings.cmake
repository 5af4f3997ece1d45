# Strict warnings for the project's own targets only (never for dependencies' headers).
add_library(seqattn_warnings INTERFACE)
target_compile_options(seqattn_warnings INTERFACE -Wall -Wextra -Werror)
install(TARGETS seqattn_warnings EXPORT seqattnTargets)
