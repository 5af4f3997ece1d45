include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS seqattn EXPORT seqattnTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY include/seqattn DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT seqattnTargets NAMESPACE seqattn:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/seqattn)
configure_package_config_file(cmake/seqattnConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/seqattnConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/seqattn)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/seqattnConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/seqattnConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/seqattnConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/seqattn)
