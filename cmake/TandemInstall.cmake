# Install rules: the `tandem` executable, the headers a plugin needs (under
# include/tandem/, keeping the repo-relative layout, so "runtime/core/status.h" resolves the
# same way in and out of the tree) and the CMake package `tandem` with its INTERFACE target
# tandem::plugin (see cmake/tandemConfig.cmake.in and examples/custom_actor/).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(TANDEM_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/tandem)

# Public headers: runtime/ except the control plane and test helpers, plus the types a plugin
# meets in the demo and tensor APIs. runtime/control is left out: its headers include Boost.Asio
# (control/asio.h) and a plugin never talks to the control plane. No installed header includes
# a third-party header other than fmt.
file(GLOB_RECURSE TANDEM_PUBLIC_HEADERS RELATIVE ${PROJECT_SOURCE_DIR}
     ${PROJECT_SOURCE_DIR}/runtime/*.h)
list(FILTER TANDEM_PUBLIC_HEADERS EXCLUDE REGEX "(_test[_a-z]*|_for_test|test_util)\\.h$")
list(FILTER TANDEM_PUBLIC_HEADERS EXCLUDE REGEX "/testdata/")
list(FILTER TANDEM_PUBLIC_HEADERS EXCLUDE REGEX "^runtime/control/")
list(APPEND TANDEM_PUBLIC_HEADERS actors/demo/pingpong.h kernels/core/dtype.h kernels/core/tensor.h)
foreach(header IN LISTS TANDEM_PUBLIC_HEADERS)
  get_filename_component(header_dir ${header} DIRECTORY)
  install(FILES ${PROJECT_SOURCE_DIR}/${header}
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tandem/${header_dir})
endforeach()

add_library(tandem_plugin INTERFACE)
set_target_properties(tandem_plugin PROPERTIES EXPORT_NAME plugin)
target_include_directories(tandem_plugin INTERFACE
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/tandem>)
target_compile_features(tandem_plugin INTERFACE cxx_std_20)
target_link_libraries(tandem_plugin INTERFACE fmt::fmt)
install(TARGETS tandem_plugin EXPORT tandemTargets)
install(EXPORT tandemTargets NAMESPACE tandem:: DESTINATION ${TANDEM_INSTALL_CMAKEDIR})

if(TARGET tandem)
  # Keep the paths of shared libraries outside the system ones (e.g. CUDA's) after install.
  set_target_properties(tandem PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
  install(TARGETS tandem RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/tandemConfig.cmake.in
  ${PROJECT_BINARY_DIR}/tandemConfig.cmake
  INSTALL_DESTINATION ${TANDEM_INSTALL_CMAKEDIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR CMAKE_INSTALL_BINDIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/tandemConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/tandemConfig.cmake
              ${PROJECT_BINARY_DIR}/tandemConfigVersion.cmake
        DESTINATION ${TANDEM_INSTALL_CMAKEDIR})
