// A fake CUDA driver for tests without a GPU: a CudaDriverApi whose
// functions record every call (name, stream, arguments) and act on host
// memory (device pointers are host pointers, so copies really copy). It
// models one device (sm_90 unless told otherwise) that loads cubins built
// for its own architecture and any PTX, and knows the kernels of
// test/cuda/kernels/test_kernels.cu (saxpy, empty_kernel) with their
// parameter layouts. Stream capture (thread-local) records launches and
// copies as the nodes of a graph instead of running them; launching an
// instantiated graph appends its nodes to `calls` again (marked with the
// launch) and does their copies; a graph's nodes can be read
// (cuGraphGetNodes, cuGraphKernelNodeGetParams, ...) and an instantiated
// graph's patched (cuGraphExecKernelNodeSetParams and
// cuGraphExecMemcpyNodeSetParams, logged with the node's new arguments or
// ends); the time between two events is 1 ms per kernel launch between
// their records; calls that CUDA refuses inside a capture
// (allocation, synchronization, queries) fail with
// CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidate it, as the driver
// does. One fake at a time (the functions reach it through a
// global, as C function pointers have no state).
#pragma once

#include <map>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lib/backends/cuda/CudaDriverApi.h"
#include "lib/backends/cuda/CudaModule.h"

namespace mstep::cuda::testing {

/// One recorded driver call.
struct FakeCall {
  std::string name;              ///< "cuMemcpyHtoDAsync"
  CUstream stream = nullptr;     ///< for calls on a stream
  uintptr_t target = 0;          ///< copies: the destination
  uintptr_t source = 0;          ///< copies: the source
  size_t bytes = 0;              ///< copies: the size
  std::string kernel;            ///< launches: the kernel
  const void* function = nullptr; ///< launches: the fake's handle of that kernel
  unsigned grid[3] = {0, 0, 0};  ///< launches
  unsigned block[3] = {0, 0, 0}; ///< launches
  unsigned shared_bytes = 0;     ///< launches
  std::vector<std::string> args; ///< launches: each argument's bytes
  /// A node run by cuGraphLaunch: that launch's number (1, 2, ...); 0 for
  /// a call made directly.
  int graph_launch = 0;
};

class FakeCudaDriver {
public:
  FakeCudaDriver();
  ~FakeCudaDriver();

  /// The table, every function filled.
  CudaDriverApi api() const;
  /// A loaded driver over api(), as load_cuda_driver would return.
  std::shared_ptr<const CudaDriver> driver() const;

  // What the fake reports; tests change these before using it.
  int driver_version = 13000;
  CUresult init_result = CUDA_SUCCESS;
  int device_count = 1;
  int compute_major = 9;
  int compute_minor = 0;
  /// Set: every PTX fails to JIT with CUDA_ERROR_INVALID_PTX and this in
  /// the JIT's error log.
  std::string ptx_error;
  /// Set: each PTX loaded (cuLibraryLoadData) makes its `.entry`
  /// functions known to that library, a parameter per `.param` (.u64: 8
  /// bytes, else 4), so that steps compiled inside the process (the
  /// registry's cuda backend) need no add_kernel. A device with no cubin in
  /// the plans (compute_major 10) makes every kernel load its PTX.
  bool kernels_from_ptx = false;
  /// Unset: a cuGraphLaunch neither runs its nodes (no copy is done) nor
  /// records them: only the launch call is left, for a bench that times
  /// the host's side of a launch.
  bool run_graph_nodes = true;
  /// Set: the next cuLaunchKernel fails with it.
  CUresult launch_result = CUDA_SUCCESS;
  /// Set: the next launch (a kernel's or a graph's) "faults" on the device: it is accepted, and from
  /// then on every synchronizing call, query and copy returns this result,
  /// as a sticky error (CUDA_ERROR_ILLEGAL_ADDRESS) does.
  CUresult device_fault = CUDA_SUCCESS;
  /// Set: queued work never completes (cuEventQuery says not ready), as
  /// when a collective waits for a rank that never comes.
  bool work_hangs = false;
  /// Device memory the fake has: cuMemAlloc beyond it is out of memory.
  size_t device_memory = size_t{80} << 30;
  /// Device memory allocated and not freed, in bytes.
  size_t device_bytes = 0;

  /// Every call so far, in order.
  std::vector<FakeCall> calls;
  /// The calls named `name`.
  std::vector<FakeCall> calls_named(const std::string& name) const;
  /// Pinned buffers and device memory not freed yet.
  int live_pinned = 0;
  int live_device = 0;
  int retained_contexts = 0;
  /// Graphs and instantiated graphs not destroyed yet.
  int live_graphs = 0;
  int live_graph_execs = 0;
  /// The nodes of the last graph captured (cuStreamEndCapture).
  std::vector<FakeCall> last_captured;
  /// Set: called for each kernel that "runs" (a cuLaunchKernel not being
  /// captured, or a kernel node of a launched graph), in stream order with
  /// the copies, to stand in for what the kernel writes (device pointers
  /// are host pointers: FakeCall::args holds each parameter's bytes).
  std::function<void(const FakeCall&)> on_kernel;

  static FakeCudaDriver& current();

  /// Records a stand-in library's call queued on `stream` (fake_libnccl's
  /// collectives, through its hook) as the driver records its own: a node
  /// of the graph being captured when `stream` is capturing, else a call.
  /// `detail` is its one argument. Its node is a memset node to
  /// cuGraphNodeGetType (not a kernel or a copy).
  FakeCall& record_stream_call(const std::string& name, CUstream stream, std::string detail);

  /// Makes kernel `name` known (any module "has" it), taking
  /// `pointer_params` device pointers: the compiled steps' kernels.
  /// Forgotten when this fake goes.
  void add_kernel(const std::string& name, size_t pointer_params);
  /// Makes kernel `name` known with this parameter layout (a custom op's
  /// kernel: pointers and scalars).
  void add_kernel(const std::string& name, std::vector<CudaKernelParam> params);
};

} // namespace mstep::cuda::testing
