# Fails when a binary loads LLVM or MLIR (ldd): libmstep_runtime and
# mstep-run must run where neither is installed. Nor libcuda: the cuda
# driver layer dlopens it, so they also run where no NVIDIA driver is.
#   cmake -DBINARIES="a;b" -P CheckNoLlvm.cmake
foreach(binary IN LISTS BINARIES)
  execute_process(COMMAND ldd ${binary} RESULT_VARIABLE status OUTPUT_VARIABLE libs ERROR_VARIABLE err)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "ldd ${binary} failed: ${err}")
  endif()
  string(REGEX MATCHALL "lib(LLVM|MLIR)[^ ]*\\.so[^ ]*|libmstep(_compiler)?\\.so[^ ]*|libcuda\\.so[^ ]*" found "${libs}")
  if(found)
    message(FATAL_ERROR "${binary} loads ${found}; it may load neither LLVM, MLIR, the "
                        "compiler nor libcuda:\n${libs}")
  endif()
  message(STATUS "${binary}: no LLVM, MLIR, compiler or libcuda among\n${libs}")
endforeach()
