// Kernels for the cuda driver layer's tests: built here into PTX
// (compute_80) and cubins (sm_80, sm_90) with ptxas -v, loaded by the fake-
// driver tests (as bytes) and run by cuda_driver_gpu_test on a GPU.
// extern "C": the driver finds them by these names.

/// y[i] = a * x[i] + y[i] for i < n.
extern "C" __global__ void saxpy(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

/// Does nothing: its launch measures the launch overhead.
extern "C" __global__ void empty_kernel() {}

/// Writes one float to `p`: launched with a null (or any unmapped) `p`, it
/// faults with CUDA_ERROR_ILLEGAL_ADDRESS, which the GPU tests turn into an
/// error naming the kernel. Run last: the fault leaves the context unusable.
extern "C" __global__ void write_out_of_bounds(float* p) {
  if (threadIdx.x == 0) p[blockIdx.x] = 1.0f;
}
