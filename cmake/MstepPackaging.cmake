# Install rules and the CMake / pkg-config package of mstep (included from
# the top-level CMakeLists.txt after every target exists).
#
#   cmake --install <build> --prefix P
#
# installs the public headers, libmstep (C++ API), libmstep_c (C API, when
# the target exists), mstep-opt, the CMake package under
# lib/cmake/mstep (find_package(mstep CONFIG) -> mstep::mstep,
# mstep::mstep_c, mstep::mstep-opt) and mstep.pc / mstep-c.pc. See
# docs/packaging.md.
include(CMakePackageConfigHelpers)

set(MSTEP_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/mstep
    CACHE STRING "Where the mstep CMake package files are installed (relative to the prefix)")
set(MSTEP_INSTALL_PKGCONFIGDIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig
    CACHE STRING "Where mstep.pc and mstep-c.pc are installed (relative to the prefix)")

# --- Headers ------------------------------------------------------------------
# The C++ API headers. Left out, because a consumer could not include them:
#  - include/mstep/ir/dialect/ and include/mstep/passes/ include MLIR headers
#    and the TableGen-generated .inc files, which live in the build tree;
#  - include/mstep/ir/MlirImport.h includes MLIR headers.
# MLIR stays a private dependency of libmstep (no installed header includes
# these three; the umbrella mstep/mstep.h does not either).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/mstep/
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/mstep
  COMPONENT mstep_development
  FILES_MATCHING
  PATTERN "*.h"
  PATTERN "*.def"
  REGEX "/include/mstep/ir/dialect$" EXCLUDE
  REGEX "/include/mstep/passes$" EXCLUDE
  REGEX "/include/mstep/ir/MlirImport\\.h$" EXCLUDE)
# The C API header(s): plain C, no dependency.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/mstep-c/
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/mstep-c
  COMPONENT mstep_development
  FILES_MATCHING PATTERN "*.h")

# --- Libraries and tools ------------------------------------------------------
# Installed binaries find libmstep next to them ($ORIGIN) and the shared
# libMLIR/libLLVM where they were linked from (/usr/lib/llvm-19/lib is not on
# the loader's default path): INSTALL_RPATH_USE_LINK_PATH keeps every linked
# directory outside the project and outside the system defaults.
file(RELATIVE_PATH mstep_bin_to_lib
  /prefix/${CMAKE_INSTALL_BINDIR} /prefix/${CMAKE_INSTALL_LIBDIR})

# A consumer of the C++ API compiles the public headers, which need C++20.
set_property(TARGET mstep APPEND PROPERTY INTERFACE_COMPILE_FEATURES cxx_std_20)
set_target_properties(mstep mstep_runtime mstep_compiler PROPERTIES
  INSTALL_RPATH "\$ORIGIN" INSTALL_RPATH_USE_LINK_PATH ON)
set(mstep_install_targets mstep_runtime mstep_compiler mstep)
if(TARGET mstep_c)
  set_target_properties(mstep_c PROPERTIES
    INSTALL_RPATH "\$ORIGIN" INSTALL_RPATH_USE_LINK_PATH ON)
  list(APPEND mstep_install_targets mstep_c)
endif()
set_target_properties(mstep-opt mstep-run PROPERTIES
  INSTALL_RPATH "\$ORIGIN/${mstep_bin_to_lib}" INSTALL_RPATH_USE_LINK_PATH ON)
list(APPEND mstep_install_targets mstep-opt mstep-run)

# libmstep_compiler holds the dialect and passes (object files) and links
# MLIR, LLVM, oneDNN and OpenMP PRIVATE; libmstep links LLVM PRIVATE. For a
# SHARED library CMake exports no private dependency, so the export set holds
# only these targets and its interface names absl and the three libraries
# (checked by test/package/run_consumer_test.sh).
install(TARGETS ${mstep_install_targets} EXPORT mstepTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT mstep_runtime
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT mstep_development
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT mstep_runtime)

# --- CMake package ------------------------------------------------------------
install(EXPORT mstepTargets
  NAMESPACE mstep::
  FILE mstepTargets.cmake
  DESTINATION ${MSTEP_INSTALL_CMAKEDIR}
  COMPONENT mstep_development)
configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/mstepConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/mstepConfig.cmake
  INSTALL_DESTINATION ${MSTEP_INSTALL_CMAKEDIR})
# 0.x: a minor version may break the API, so only the same minor matches.
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/cmake/mstepConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/cmake/mstepConfig.cmake
  ${PROJECT_BINARY_DIR}/cmake/mstepConfigVersion.cmake
  DESTINATION ${MSTEP_INSTALL_CMAKEDIR}
  COMPONENT mstep_development)

# --- pkg-config ---------------------------------------------------------------
# The .pc files locate the prefix from their own directory (${pcfiledir}),
# so `cmake --install --prefix P` into any P gives working files.
if(IS_ABSOLUTE "${MSTEP_INSTALL_PKGCONFIGDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}"
   OR IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  message(FATAL_ERROR "mstep's pkg-config files need relative install dirs "
                      "(CMAKE_INSTALL_LIBDIR, CMAKE_INSTALL_INCLUDEDIR, MSTEP_INSTALL_PKGCONFIGDIR)")
endif()
file(RELATIVE_PATH MSTEP_PC_PKGCONFIG_TO_PREFIX /prefix/${MSTEP_INSTALL_PKGCONFIGDIR} /prefix)
string(REGEX REPLACE "/$" "" MSTEP_PC_PKGCONFIG_TO_PREFIX "${MSTEP_PC_PKGCONFIG_TO_PREFIX}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/mstep.pc.in
  ${PROJECT_BINARY_DIR}/cmake/mstep.pc @ONLY)
set(mstep_pc_files ${PROJECT_BINARY_DIR}/cmake/mstep.pc)
if(TARGET mstep_c)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/mstep-c.pc.in
    ${PROJECT_BINARY_DIR}/cmake/mstep-c.pc @ONLY)
  list(APPEND mstep_pc_files ${PROJECT_BINARY_DIR}/cmake/mstep-c.pc)
endif()
install(FILES ${mstep_pc_files}
  DESTINATION ${MSTEP_INSTALL_PKGCONFIGDIR}
  COMPONENT mstep_development)
