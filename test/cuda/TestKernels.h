// The test kernels' build outputs (test/cuda/kernels/test_kernels.cu):
// PTX for compute_80, cubins and ptxas -v reports for sm_80 and sm_90.
// The build puts them in MSTEP_CUDA_TEST_KERNEL_DIR; the GPU bundle next
// to the test binary (a --kernel_dir flag points at them).
#pragma once

#include <fstream>
#include <sstream>
#include <string>

namespace mstep::cuda::testing {

/// Where the kernels are; set_test_kernel_dir overrides the build's.
inline std::string& test_kernel_dir() {
  static std::string dir = MSTEP_CUDA_TEST_KERNEL_DIR;
  return dir;
}

/// The bytes of `name` under test_kernel_dir() ("test_kernels.sm_90.cubin");
/// empty when it cannot be read.
inline std::string read_test_kernel(const std::string& name) {
  std::ifstream in(test_kernel_dir() + "/" + name, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

} // namespace mstep::cuda::testing
