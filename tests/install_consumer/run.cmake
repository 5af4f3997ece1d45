# Installs the already-built seqattn into a scratch prefix, then configures, builds and runs a
# separate project that finds it with find_package(seqattn CONFIG REQUIRED).
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "cmake --install failed: ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install_consumer/project
                        -B ${WORK_DIR}/build -G ${GENERATOR} -DCMAKE_BUILD_TYPE=Release
                        -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "configuring the consumer failed: ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/build RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "building the consumer failed: ${rc}")
endif()
execute_process(COMMAND ${WORK_DIR}/build/consumer RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "the consumer exited with ${rc}")
endif()
# The Python package, when built, is installed into the prefix's site-packages and imports
# from there (with the interpreter it was built for).
if(PYTHON_EXECUTABLE)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env PYTHONPATH=${WORK_DIR}/prefix/${PYTHON_INSTALL_DIR}
                          ${PYTHON_EXECUTABLE} -c
                          "import seqattn, numpy; q = numpy.ones((4, 8), numpy.float32); print(seqattn.__file__, seqattn.attention(q, q, q).sum())"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE printed)
  if(rc OR NOT printed MATCHES "${WORK_DIR}/prefix/.*seqattn/__init__.py 32")
    message(FATAL_ERROR "the installed Python package did not import from the prefix: ${rc} ${printed}")
  endif()
  message(STATUS "installed Python package: ${printed}")
endif()
