# Fails when any C++ source under include/ src/ variants/ tests/ bench/ python/src/ is not clang-formatted.
file(GLOB_RECURSE sources
     ${SOURCE_DIR}/include/*.hpp ${SOURCE_DIR}/include/*.inc ${SOURCE_DIR}/src/*.inc ${SOURCE_DIR}/src/*.cpp ${SOURCE_DIR}/src/*.hpp ${SOURCE_DIR}/src/*.h
     ${SOURCE_DIR}/src/*.cc ${SOURCE_DIR}/variants/*.cpp ${SOURCE_DIR}/variants/*.hpp
     ${SOURCE_DIR}/variants/*.h ${SOURCE_DIR}/variants/*.cc ${SOURCE_DIR}/tests/*.cpp
     ${SOURCE_DIR}/tests/*.hpp ${SOURCE_DIR}/bench/*.cpp ${SOURCE_DIR}/python/src/*.cpp
     ${SOURCE_DIR}/python/src/*.hpp)
execute_process(COMMAND ${CLANG_FORMAT} --dry-run -Werror ${sources}
                RESULT_VARIABLE rc ERROR_VARIABLE diagnostics)
if(rc)
  message(FATAL_ERROR "clang-format differences (run clang-format -i on these files):\n${diagnostics}")
endif()
list(LENGTH sources count)
message(STATUS "${count} files are clang-formatted")
