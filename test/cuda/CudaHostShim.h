// Runs CUDA C++ kernel source on the host, for checking a custom op's
// kernel arithmetic here (no GPU): include this, then the .cu file, then
// launch with emulate_launch. __global__/__device__ vanish (plain
// functions), __shared__ a static (one block runs at a time, so the block's
// threads share it), threadIdx/blockIdx/blockDim/gridDim thread-locals, and
// __syncthreads a barrier over the block's threads, each a std::thread.
// Enough for kernels that use those and arithmetic (no warp intrinsics,
// atomics or textures). Test-only.
#pragma once

#include <barrier>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
};

namespace mstep::cuda::testing::shim {
inline thread_local dim3 thread_index, block_index;
inline dim3 block_dim, grid_dim;
inline std::barrier<>* block_barrier = nullptr;
} // namespace mstep::cuda::testing::shim

#define __global__
#define __device__
#define __shared__ static
#define threadIdx (::mstep::cuda::testing::shim::thread_index)
#define blockIdx (::mstep::cuda::testing::shim::block_index)
#define blockDim (::mstep::cuda::testing::shim::block_dim)
#define gridDim (::mstep::cuda::testing::shim::grid_dim)
inline void __syncthreads() { ::mstep::cuda::testing::shim::block_barrier->arrive_and_wait(); }

namespace mstep::cuda::testing {

/// Runs `kernel` (a call of the kernel with its arguments bound) over
/// `grid` x `block`: blocks one after another, each block's threads at once.
inline void emulate_launch(dim3 grid, dim3 block, const std::function<void()>& kernel) {
  shim::grid_dim = grid;
  shim::block_dim = block;
  const unsigned threads = block.x * block.y * block.z;
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        std::barrier<> barrier(threads);
        shim::block_barrier = &barrier;
        std::vector<std::thread> pool;
        for (unsigned t = 0; t < threads; ++t)
          pool.emplace_back([&, t] {
            shim::block_index = {bx, by, bz};
            shim::thread_index = {t % block.x, t / block.x % block.y, t / (block.x * block.y)};
            kernel();
          });
        for (std::thread& th : pool) th.join();
        shim::block_barrier = nullptr;
      }
}

} // namespace mstep::cuda::testing
