// cuDNN backend-API operation graphs, built descriptor by descriptor
// (there is no cudnn-frontend): tensors, pointwise, matmul, reduction and
// reshape operations, the finalized operation graph; then, on a device,
// the engine heuristics, an execution plan and its execution.
//
// What needs what: creating, setting and finalizing tensor, operation and
// operation-graph descriptors needs only the library (cuDNN 9 deprecated
// the operation graph's handle), so a graph is built and finalized
// without a GPU. The engine heuristics and the execution plan need a
// device: a handle's (CudnnHandle: a GPU), or a device described by
// CudnnDeviceProperties, with which the heuristics and the engines'
// kernel compilation run here too (the runtime-compiled engines also need
// a loadable libcuda; only loading the compiled kernels needs the GPU).
// Execution needs the GPU. Library-internal.
#pragma once

#include <cudnn_graph.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/backends/cuda/CudnnApi.h"

namespace mstep::cuda {

/// One backend descriptor, owned (destroyed with the object).
class CudnnDescriptor {
public:
  CudnnDescriptor() = default;
  static absl::StatusOr<CudnnDescriptor>
  create(const CudnnApi& api, cudnnBackendDescriptorType_t type, std::string what);
  CudnnDescriptor(CudnnDescriptor&& other) noexcept { *this = std::move(other); }
  CudnnDescriptor& operator=(CudnnDescriptor&& other) noexcept;
  ~CudnnDescriptor();

  /// cudnnBackendSetAttribute; the error names `what` and the attribute.
  absl::Status set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
                   int64_t count, const void* value);
  template <typename T>
  absl::Status set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
                   const T& value) {
    return set(name, type, 1, &value);
  }
  absl::Status set_ints(cudnnBackendAttributeName_t name, const std::vector<int64_t>& values) {
    return set(name, CUDNN_TYPE_INT64, static_cast<int64_t>(values.size()), values.data());
  }
  absl::Status set_descriptor(cudnnBackendAttributeName_t name, cudnnBackendDescriptor_t value) {
    return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &value);
  }
  absl::Status finalize();

  cudnnBackendDescriptor_t get() const { return descriptor_; }
  const std::string& what() const { return what_; }

private:
  const CudnnApi* api_ = nullptr;
  cudnnBackendDescriptor_t descriptor_ = nullptr;
  std::string what_;
};

/// A tensor of the graph by its index in the builder.
struct CudnnTensorRef {
  int index = -1;
};

enum class CudnnTensorKind : uint8_t {
  io,       ///< bound to a device pointer at execution (its uid in the variant pack)
  by_value, ///< a host scalar bound at execution
  virtual_, ///< an intermediate the engine keeps on chip
};

struct CudnnTensorInfo {
  std::string name;
  int64_t uid = 0;
  std::vector<int64_t> dims, strides;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  CudnnTensorKind kind = CudnnTensorKind::io;
  CudnnDescriptor descriptor;
};

/// A finalized operation graph and every descriptor it refers to.
struct CudnnOperationGraph {
  std::shared_ptr<const CudnnApi> api; ///< first: destroyed after the descriptors
  std::string what;                    ///< "sdpa forward [2, 4, 128, 64] bf16, causal"
  std::vector<std::unique_ptr<CudnnTensorInfo>> tensors;
  std::vector<CudnnDescriptor> op_descriptors; ///< operation settings (pointwise, matmul, ...)
  std::vector<CudnnDescriptor> operations;     ///< the operation nodes, in graph order
  std::vector<std::string> operation_names;    ///< "bmm1 (matmul)", ... in the same order
  CudnnDescriptor graph;

  /// The non-virtual tensor with this name (nullptr if none).
  const CudnnTensorInfo* tensor(absl::string_view name) const;
};

/// Builds an operation graph. Every call checks its arguments and
/// cuDNN's answer; the first error is kept and returned by finalize() (so
/// a graph is written as a straight sequence of calls).
class CudnnGraphBuilder {
public:
  CudnnGraphBuilder(std::shared_ptr<const CudnnApi> api, std::string what);

  /// A tensor with packed (row-major) strides unless `strides` is given.
  /// io and by-value tensors take `uid`; virtual ones get the next free
  /// one from 1000.
  CudnnTensorRef tensor(std::string name, std::vector<int64_t> dims, cudnnDataType_t type,
                        CudnnTensorKind kind, int64_t uid = 0, std::vector<int64_t> strides = {});
  /// A virtual tensor with `like`'s dims and strides (or `dims`).
  CudnnTensorRef virtual_tensor(std::string name, CudnnTensorRef like, cudnnDataType_t type);
  CudnnTensorRef virtual_tensor(std::string name, std::vector<int64_t> dims, cudnnDataType_t type,
                                std::vector<int64_t> strides = {});

  /// y = mode(x[, b[, t]]); `axis` for GEN_INDEX; `compute` the math precision.
  void pointwise(std::string name, cudnnPointwiseMode_t mode, CudnnTensorRef x, CudnnTensorRef y,
                 cudnnDataType_t compute = CUDNN_DATA_FLOAT, CudnnTensorRef b = {},
                 CudnnTensorRef t = {}, int64_t axis = -1);
  /// c = a x b over the last two dims (fp32 accumulation); the overrides
  /// are [B,1,1,1] int32 tensors of per-batch valid m / n / k.
  void matmul(std::string name, CudnnTensorRef a, CudnnTensorRef b, CudnnTensorRef c,
              CudnnTensorRef m_override = {}, CudnnTensorRef n_override = {},
              CudnnTensorRef k_override = {}, bool pad_with_zero = false);
  /// y = reduce(x) over the dims where y's size is 1.
  void reduction(std::string name, cudnnReduceTensorOp_t op, CudnnTensorRef x, CudnnTensorRef y);
  /// y is x with other dims/strides (a transpose, as the SDPA backward uses it).
  void reshape(std::string name, CudnnTensorRef x, CudnnTensorRef y);

  const CudnnTensorInfo& info(CudnnTensorRef t) const { return *graph_.tensors[t.index]; }

  /// The operation graph descriptor over every operation, finalized.
  /// Needs no handle. Errors: the first failed step, named.
  absl::StatusOr<CudnnOperationGraph> finalize();

private:
  bool valid(CudnnTensorRef t) const {
    return t.index >= 0 && t.index < static_cast<int>(graph_.tensors.size());
  }
  void add_operation(std::string name, CudnnDescriptor settings, CudnnDescriptor op);
  void fail(absl::Status status) {
    if (status_.ok()) status_ = std::move(status);
  }
  std::string label(absl::string_view name) const;

  std::shared_ptr<const CudnnApi> api_;
  absl::Status status_;
  CudnnOperationGraph graph_;
  int64_t next_virtual_uid_ = 1000;
};

/// Packed row-major strides of `dims`.
std::vector<int64_t> packed_strides(const std::vector<int64_t>& dims);

/// A device's properties as cuDNN describes them (cuDNN 9.8+'s device
/// property descriptor): read from a handle's device, or from the JSON
/// that to_json() writes, so heuristics and plans can be made for a device
/// that is not in this machine ("deviceless" compilation).
class CudnnDeviceProperties {
public:
  /// The handle's device (needs a GPU).
  static absl::StatusOr<CudnnDeviceProperties> from_handle(const CudnnHandle& handle);
  /// A device described by `json` (no GPU). Errors: cuDNN's, naming the
  /// first missing or bad key.
  static absl::StatusOr<CudnnDeviceProperties> from_json(std::shared_ptr<const CudnnApi> api,
                                                         absl::string_view json);
  absl::StatusOr<std::string> to_json() const;
  cudnnBackendDescriptor_t get() const { return descriptor_.get(); }

private:
  std::shared_ptr<const CudnnApi> api_; // first: destroyed after the descriptor
  CudnnDescriptor descriptor_;
};

/// An execution plan for a finalized graph: the engine heuristics (mode
/// A, then the fallback list) and the first engine configuration whose
/// plan finalizes.
class CudnnExecutionPlan {
public:
  /// For the handle's device (needs a GPU).
  static absl::StatusOr<std::unique_ptr<CudnnExecutionPlan>>
  create(const CudnnHandle& handle, const CudnnOperationGraph& graph);
  /// For the device `properties` describe, without it: the heuristics
  /// and the engine's kernel compilation run here; loading the compiled
  /// kernels needs the device (and libcuda), so without one this returns
  /// the error of that last step.
  static absl::StatusOr<std::unique_ptr<CudnnExecutionPlan>>
  create(const CudnnDeviceProperties& properties, const CudnnOperationGraph& graph);
  /// cuDNN's workspace for this plan, in bytes.
  int64_t workspace_size() const { return workspace_size_; }
  /// Which engine the heuristics gave (its global index), for reports.
  int64_t engine_index() const { return engine_index_; }
  /// Queues the plan on the handle's stream: `bindings` are (uid, pointer)
  /// for every io tensor (device pointers) and by-value tensor (host
  /// pointers); `workspace` has at least workspace_size() bytes.
  absl::Status execute(const CudnnHandle& handle,
                       const std::vector<std::pair<int64_t, void*>>& bindings,
                       void* workspace) const;

private:
  static absl::StatusOr<std::unique_ptr<CudnnExecutionPlan>>
  make(const CudnnApi& api, const CudnnHandle* handle, const CudnnDeviceProperties* properties,
       const CudnnOperationGraph& graph);
  std::string what_;
  CudnnDescriptor engine_config_;
  CudnnDescriptor plan_;
  // The device's properties the plan was made for, kept as long as the
  // plan (like engine_config_): descriptors set on a plan stay its inputs.
  std::optional<CudnnDeviceProperties> device_properties_;
  int64_t workspace_size_ = 0;
  int64_t engine_index_ = -1;
};

} // namespace mstep::cuda
