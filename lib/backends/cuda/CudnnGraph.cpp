// cuDNN backend descriptors: the owner, the graph builder, the plan.
#include "lib/backends/cuda/CudnnGraph.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "mstep/core/Error.h"

namespace mstep::cuda {

// ---- CudnnDescriptor --------------------------------------------------------

absl::StatusOr<CudnnDescriptor>
CudnnDescriptor::create(const CudnnApi& api, cudnnBackendDescriptorType_t type, std::string what) {
  CudnnDescriptor d;
  d.api_ = &api;
  d.what_ = std::move(what);
  MSTEP_RETURN_IF_ERROR(check_cudnn(api, api.cudnnBackendCreateDescriptor(type, &d.descriptor_),
                                    absl::StrCat("cudnnBackendCreateDescriptor(type ", type, ")"),
                                    d.what_));
  return d;
}

CudnnDescriptor& CudnnDescriptor::operator=(CudnnDescriptor&& other) noexcept {
  if (this != &other) {
    if (descriptor_ != nullptr) api_->cudnnBackendDestroyDescriptor(descriptor_);
    api_ = other.api_;
    descriptor_ = std::exchange(other.descriptor_, nullptr);
    what_ = std::move(other.what_);
  }
  return *this;
}

CudnnDescriptor::~CudnnDescriptor() {
  if (descriptor_ != nullptr) api_->cudnnBackendDestroyDescriptor(descriptor_);
}

absl::Status CudnnDescriptor::set(cudnnBackendAttributeName_t name,
                                  cudnnBackendAttributeType_t type, int64_t count,
                                  const void* value) {
  return check_cudnn(*api_, api_->cudnnBackendSetAttribute(descriptor_, name, type, count, value),
                     absl::StrCat("cudnnBackendSetAttribute(attribute ", name, ")"), what_);
}

absl::Status CudnnDescriptor::finalize() {
  return check_cudnn(*api_, api_->cudnnBackendFinalize(descriptor_), "cudnnBackendFinalize", what_);
}

// ---- the builder ------------------------------------------------------------

std::vector<int64_t> packed_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * dims[i + 1];
  return strides;
}

const CudnnTensorInfo* CudnnOperationGraph::tensor(absl::string_view name) const {
  for (const auto& t : tensors)
    if (t->name == name && t->kind != CudnnTensorKind::virtual_) return t.get();
  return nullptr;
}

CudnnGraphBuilder::CudnnGraphBuilder(std::shared_ptr<const CudnnApi> api, std::string what)
    : api_(std::move(api)) {
  graph_.what = std::move(what);
}

std::string CudnnGraphBuilder::label(absl::string_view name) const {
  return absl::StrCat(graph_.what, ": ", name);
}

CudnnTensorRef CudnnGraphBuilder::tensor(std::string name, std::vector<int64_t> dims,
                                         cudnnDataType_t type, CudnnTensorKind kind, int64_t uid,
                                         std::vector<int64_t> strides) {
  if (!status_.ok()) return {};
  if (strides.empty()) strides = packed_strides(dims);
  if (dims.empty() || strides.size() != dims.size()) {
    fail(absl::InvalidArgumentError(label(absl::StrCat("tensor ", name, ": ", dims.size(),
                                                       " dims and ", strides.size(), " strides"))));
    return {};
  }
  for (int64_t d : dims)
    if (d < 1) {
      fail(absl::InvalidArgumentError(label(absl::StrCat(
          "tensor ", name, " [", absl::StrJoin(dims, ", "), "]: every dim must be at least 1"))));
      return {};
    }
  if (kind == CudnnTensorKind::virtual_) {
    uid = next_virtual_uid_++;
  } else {
    for (const auto& t : graph_.tensors)
      if (t->uid == uid) {
        fail(absl::InternalError(
            label(absl::StrCat("tensors ", t->name, " and ", name, " share uid ", uid))));
        return {};
      }
  }
  auto info = std::make_unique<CudnnTensorInfo>();
  info->name = name;
  info->uid = uid;
  info->dims = std::move(dims);
  info->strides = std::move(strides);
  info->type = type;
  info->kind = kind;
  auto d = CudnnDescriptor::create(*api_, CUDNN_BACKEND_TENSOR_DESCRIPTOR,
                                   label(absl::StrCat("tensor ", name)));
  if (!d.ok()) {
    fail(d.status());
    return {};
  }
  info->descriptor = std::move(*d);
  CudnnDescriptor& t = info->descriptor;
  const bool is_virtual = kind == CudnnTensorKind::virtual_,
             by_value = kind == CudnnTensorKind::by_value;
  const int64_t alignment = 16;
  absl::Status s = t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, info->type);
  if (s.ok()) s = t.set_ints(CUDNN_ATTR_TENSOR_DIMENSIONS, info->dims);
  if (s.ok()) s = t.set_ints(CUDNN_ATTR_TENSOR_STRIDES, info->strides);
  if (s.ok()) s = t.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, info->uid);
  if (s.ok()) s = t.set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, alignment);
  if (s.ok()) s = t.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, is_virtual);
  if (s.ok() && by_value) s = t.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, by_value);
  if (s.ok()) s = t.finalize();
  if (!s.ok()) {
    fail(s);
    return {};
  }
  graph_.tensors.push_back(std::move(info));
  return {static_cast<int>(graph_.tensors.size()) - 1};
}

CudnnTensorRef CudnnGraphBuilder::virtual_tensor(std::string name, CudnnTensorRef like,
                                                 cudnnDataType_t type) {
  if (!status_.ok() || !valid(like)) return {};
  return tensor(std::move(name), info(like).dims, type, CudnnTensorKind::virtual_, 0,
                info(like).strides);
}

CudnnTensorRef CudnnGraphBuilder::virtual_tensor(std::string name, std::vector<int64_t> dims,
                                                 cudnnDataType_t type,
                                                 std::vector<int64_t> strides) {
  return tensor(std::move(name), std::move(dims), type, CudnnTensorKind::virtual_, 0,
                std::move(strides));
}

void CudnnGraphBuilder::add_operation(std::string name, CudnnDescriptor settings,
                                      CudnnDescriptor op) {
  if (absl::Status s = op.finalize(); !s.ok()) return fail(s);
  if (settings.get() != nullptr) graph_.op_descriptors.push_back(std::move(settings));
  graph_.operations.push_back(std::move(op));
  graph_.operation_names.push_back(std::move(name));
}

void CudnnGraphBuilder::pointwise(std::string name, cudnnPointwiseMode_t mode, CudnnTensorRef x,
                                  CudnnTensorRef y, cudnnDataType_t compute, CudnnTensorRef b,
                                  CudnnTensorRef t, int64_t axis) {
  if (!status_.ok()) return;
  if (!valid(x) || !valid(y))
    return fail(absl::InternalError(label(absl::StrCat(name, ": a missing tensor"))));
  const std::string what = label(absl::StrCat(name, " (pointwise ", mode, ")"));
  auto settings = CudnnDescriptor::create(*api_, CUDNN_BACKEND_POINTWISE_DESCRIPTOR, what);
  if (!settings.ok()) return fail(settings.status());
  absl::Status s = settings->set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, mode);
  if (s.ok()) s = settings->set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, compute);
  if (s.ok() && axis >= 0) s = settings->set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, axis);
  if (s.ok()) s = settings->finalize();
  if (!s.ok()) return fail(s);
  auto op = CudnnDescriptor::create(*api_, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, what);
  if (!op.ok()) return fail(op.status());
  s = op->set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, settings->get());
  if (s.ok())
    s = op->set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, info(x).descriptor.get());
  if (s.ok() && valid(b))
    s = op->set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, info(b).descriptor.get());
  if (s.ok() && valid(t))
    s = op->set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, info(t).descriptor.get());
  if (s.ok())
    s = op->set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, info(y).descriptor.get());
  if (!s.ok()) return fail(s);
  add_operation(absl::StrCat(name, " (pointwise)"), std::move(*settings), std::move(*op));
}

void CudnnGraphBuilder::matmul(std::string name, CudnnTensorRef a, CudnnTensorRef b,
                               CudnnTensorRef c, CudnnTensorRef m_override,
                               CudnnTensorRef n_override, CudnnTensorRef k_override,
                               bool pad_with_zero) {
  if (!status_.ok()) return;
  if (!valid(a) || !valid(b) || !valid(c))
    return fail(absl::InternalError(label(absl::StrCat(name, ": a missing tensor"))));
  const std::string what = label(absl::StrCat(name, " (matmul)"));
  auto settings = CudnnDescriptor::create(*api_, CUDNN_BACKEND_MATMUL_DESCRIPTOR, what);
  if (!settings.ok()) return fail(settings.status());
  absl::Status s =
      settings->set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, CUDNN_DATA_FLOAT);
  const double zero = 0.0;
  if (s.ok() && pad_with_zero)
    s = settings->set(CUDNN_ATTR_MATMUL_PADDING_VALUE, CUDNN_TYPE_DOUBLE, zero);
  if (s.ok()) s = settings->finalize();
  if (!s.ok()) return fail(s);
  auto op = CudnnDescriptor::create(*api_, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, what);
  if (!op.ok()) return fail(op.status());
  s = op->set_descriptor(CUDNN_ATTR_OPERATION_MATMUL_ADESC, info(a).descriptor.get());
  if (s.ok()) s = op->set_descriptor(CUDNN_ATTR_OPERATION_MATMUL_BDESC, info(b).descriptor.get());
  if (s.ok()) s = op->set_descriptor(CUDNN_ATTR_OPERATION_MATMUL_CDESC, info(c).descriptor.get());
  if (s.ok()) s = op->set_descriptor(CUDNN_ATTR_OPERATION_MATMUL_DESC, settings->get());
  if (s.ok() && valid(m_override))
    s = op->set_descriptor(CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC,
                           info(m_override).descriptor.get());
  if (s.ok() && valid(n_override))
    s = op->set_descriptor(CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC,
                           info(n_override).descriptor.get());
  if (s.ok() && valid(k_override))
    s = op->set_descriptor(CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC,
                           info(k_override).descriptor.get());
  if (!s.ok()) return fail(s);
  add_operation(absl::StrCat(name, " (matmul)"), std::move(*settings), std::move(*op));
}

void CudnnGraphBuilder::reduction(std::string name, cudnnReduceTensorOp_t reduce, CudnnTensorRef x,
                                  CudnnTensorRef y) {
  if (!status_.ok()) return;
  if (!valid(x) || !valid(y))
    return fail(absl::InternalError(label(absl::StrCat(name, ": a missing tensor"))));
  const std::string what = label(absl::StrCat(name, " (reduction)"));
  auto settings = CudnnDescriptor::create(*api_, CUDNN_BACKEND_REDUCTION_DESCRIPTOR, what);
  if (!settings.ok()) return fail(settings.status());
  absl::Status s =
      settings->set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, reduce);
  if (s.ok())
    s = settings->set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, CUDNN_DATA_FLOAT);
  if (s.ok()) s = settings->finalize();
  if (!s.ok()) return fail(s);
  auto op = CudnnDescriptor::create(*api_, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, what);
  if (!op.ok()) return fail(op.status());
  s = op->set_descriptor(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, info(x).descriptor.get());
  if (s.ok())
    s = op->set_descriptor(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, info(y).descriptor.get());
  if (s.ok()) s = op->set_descriptor(CUDNN_ATTR_OPERATION_REDUCTION_DESC, settings->get());
  if (!s.ok()) return fail(s);
  add_operation(absl::StrCat(name, " (reduction)"), std::move(*settings), std::move(*op));
}

void CudnnGraphBuilder::reshape(std::string name, CudnnTensorRef x, CudnnTensorRef y) {
  if (!status_.ok()) return;
  if (!valid(x) || !valid(y))
    return fail(absl::InternalError(label(absl::StrCat(name, ": a missing tensor"))));
  auto op = CudnnDescriptor::create(*api_, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR,
                                    label(absl::StrCat(name, " (reshape)")));
  if (!op.ok()) return fail(op.status());
  absl::Status s = op->set_descriptor(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, info(x).descriptor.get());
  if (s.ok()) s = op->set_descriptor(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, info(y).descriptor.get());
  if (!s.ok()) return fail(s);
  add_operation(absl::StrCat(name, " (reshape)"), CudnnDescriptor(), std::move(*op));
}

absl::StatusOr<CudnnOperationGraph> CudnnGraphBuilder::finalize() {
  MSTEP_RETURN_IF_ERROR(status_);
  MSTEP_ASSIGN_OR_RETURN(graph_.graph,
                         CudnnDescriptor::create(*api_, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR,
                                                 label("the operation graph")));
  std::vector<cudnnBackendDescriptor_t> ops;
  for (const CudnnDescriptor& op : graph_.operations) ops.push_back(op.get());
  MSTEP_RETURN_IF_ERROR(graph_.graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS,
                                         CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                         static_cast<int64_t>(ops.size()), ops.data()));
  MSTEP_RETURN_IF_ERROR(graph_.graph.finalize());
  graph_.api = api_;
  return std::move(graph_);
}

// ---- the plan ---------------------------------------------------------------

absl::StatusOr<CudnnDeviceProperties>
CudnnDeviceProperties::from_handle(const CudnnHandle& handle) {
  CudnnDeviceProperties p;
  p.api_ = handle.shared_api();
  MSTEP_ASSIGN_OR_RETURN(p.descriptor_,
                         CudnnDescriptor::create(*p.api_, CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR,
                                                 "the device's properties"));
  const cudnnHandle_t h = handle.get();
  MSTEP_RETURN_IF_ERROR(p.descriptor_.set(CUDNN_ATTR_DEVICEPROP_HANDLE, CUDNN_TYPE_HANDLE, h));
  MSTEP_RETURN_IF_ERROR(p.descriptor_.finalize());
  return p;
}

absl::StatusOr<CudnnDeviceProperties>
CudnnDeviceProperties::from_json(std::shared_ptr<const CudnnApi> api, absl::string_view json) {
  CudnnDeviceProperties p;
  p.api_ = std::move(api);
  MSTEP_ASSIGN_OR_RETURN(p.descriptor_,
                         CudnnDescriptor::create(*p.api_, CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR,
                                                 "device properties from JSON"));
  MSTEP_RETURN_IF_ERROR(p.descriptor_.set(CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION,
                                          CUDNN_TYPE_CHAR, static_cast<int64_t>(json.size()),
                                          json.data()));
  MSTEP_RETURN_IF_ERROR(p.descriptor_.finalize());
  return p;
}

absl::StatusOr<std::string> CudnnDeviceProperties::to_json() const {
  int64_t size = 0;
  MSTEP_RETURN_IF_ERROR(check_cudnn(
      *api_,
      api_->cudnnBackendGetAttribute(descriptor_.get(), CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION,
                                     CUDNN_TYPE_CHAR, 0, &size, nullptr),
      "cudnnBackendGetAttribute(DEVICEPROP_JSON_REPRESENTATION size)", descriptor_.what()));
  std::string json(static_cast<size_t>(size), '\0');
  MSTEP_RETURN_IF_ERROR(check_cudnn(
      *api_,
      api_->cudnnBackendGetAttribute(descriptor_.get(), CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION,
                                     CUDNN_TYPE_CHAR, size, &size, json.data()),
      "cudnnBackendGetAttribute(DEVICEPROP_JSON_REPRESENTATION)", descriptor_.what()));
  while (!json.empty() && json.back() == '\0') json.pop_back();
  return json;
}

namespace {

/// The global index of an engine configuration's engine (-1 if cuDNN
/// does not say), for messages and reports.
int64_t engine_of(const CudnnApi& api, const CudnnDescriptor& config) {
  auto engine = CudnnDescriptor::create(api, CUDNN_BACKEND_ENGINE_DESCRIPTOR, "engine");
  if (!engine.ok()) return -1;
  cudnnBackendDescriptor_t e = engine->get();
  int64_t n = 0, index = -1;
  if (api.cudnnBackendGetAttribute(config.get(), CUDNN_ATTR_ENGINECFG_ENGINE,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n,
                                   &e) != CUDNN_STATUS_SUCCESS ||
      api.cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n,
                                   &index) != CUDNN_STATUS_SUCCESS)
    return -1;
  return index;
}

} // namespace

absl::StatusOr<std::unique_ptr<CudnnExecutionPlan>>
CudnnExecutionPlan::create(const CudnnHandle& handle, const CudnnOperationGraph& graph) {
  // The operation graph is finalized without a handle, so the heuristics
  // and the plan learn the device from its properties: without them cuDNN
  // 9.14-9.19 sees device version 0 and refuses every attention engine
  // ("only Ampere or above"; seen on an H200, 2026-11-26).
  MSTEP_ASSIGN_OR_RETURN(CudnnDeviceProperties properties,
                         CudnnDeviceProperties::from_handle(handle));
  MSTEP_ASSIGN_OR_RETURN(std::unique_ptr<CudnnExecutionPlan> plan,
                         make(handle.api(), &handle, &properties, graph));
  plan->device_properties_ = std::move(properties);
  return plan;
}

absl::StatusOr<std::unique_ptr<CudnnExecutionPlan>>
CudnnExecutionPlan::create(const CudnnDeviceProperties& properties,
                           const CudnnOperationGraph& graph) {
  return make(*graph.api, nullptr, &properties, graph);
}

absl::StatusOr<std::unique_ptr<CudnnExecutionPlan>>
CudnnExecutionPlan::make(const CudnnApi& api, const CudnnHandle* handle,
                         const CudnnDeviceProperties* properties,
                         const CudnnOperationGraph& graph) {
  auto plan = std::unique_ptr<CudnnExecutionPlan>(new CudnnExecutionPlan());
  plan->what_ = graph.what;
  std::vector<std::string> refused;
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    const std::string mode_name =
        mode == CUDNN_HEUR_MODE_A ? "heuristics mode A" : "fallback heuristics";
    MSTEP_ASSIGN_OR_RETURN(CudnnDescriptor heur,
                           CudnnDescriptor::create(api, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR,
                                                   absl::StrCat(graph.what, ": ", mode_name)));
    MSTEP_RETURN_IF_ERROR(
        heur.set_descriptor(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph.graph.get()));
    MSTEP_RETURN_IF_ERROR(heur.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, mode));
    if (properties != nullptr)
      MSTEP_RETURN_IF_ERROR(
          heur.set_descriptor(CUDNN_ATTR_ENGINEHEUR_DEVICEPROP, properties->get()));
    if (absl::Status s = heur.finalize(); !s.ok()) {
      refused.push_back(std::string(s.message()));
      continue;
    }
    int64_t count = 0;
    MSTEP_RETURN_IF_ERROR(
        check_cudnn(api,
                    api.cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr),
                    "cudnnBackendGetAttribute(ENGINEHEUR_RESULTS count)", heur.what()));
    std::vector<CudnnDescriptor> configs;
    std::vector<cudnnBackendDescriptor_t> raw;
    for (int64_t i = 0; i < count; ++i) {
      MSTEP_ASSIGN_OR_RETURN(
          CudnnDescriptor c,
          CudnnDescriptor::create(api, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR,
                                  absl::StrCat(graph.what, ": engine config ", i)));
      raw.push_back(c.get());
      configs.push_back(std::move(c));
    }
    int64_t returned = 0;
    if (count > 0)
      MSTEP_RETURN_IF_ERROR(check_cudnn(
          api,
          api.cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                       CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &returned, raw.data()),
          "cudnnBackendGetAttribute(ENGINEHEUR_RESULTS)", heur.what()));
    if (returned == 0) refused.push_back(absl::StrCat(mode_name, " found no engine"));
    for (int64_t i = 0; i < returned; ++i) {
      const int64_t engine_index = engine_of(api, configs[i]);
      MSTEP_ASSIGN_OR_RETURN(CudnnDescriptor p,
                             CudnnDescriptor::create(api, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR,
                                                     absl::StrCat(graph.what, ": execution plan")));
      // The plan's handle is deprecated in cuDNN 9 but still accepted;
      // set it for the 9.x releases that want it (by number, to avoid
      // the deprecation warning).
      if (handle != nullptr) {
        const cudnnHandle_t h = handle->get();
        (void)p.set(static_cast<cudnnBackendAttributeName_t>(400), CUDNN_TYPE_HANDLE, h);
      }
      if (properties != nullptr)
        MSTEP_RETURN_IF_ERROR(
            p.set_descriptor(CUDNN_ATTR_EXECUTION_PLAN_DEVICEPROP, properties->get()));
      MSTEP_RETURN_IF_ERROR(
          p.set_descriptor(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, configs[i].get()));
      if (absl::Status s = p.finalize(); !s.ok()) {
        refused.push_back(absl::StrCat(mode_name, " engine config ", i, " (engine ", engine_index,
                                       "): ", s.message()));
        continue;
      }
      int64_t workspace = 0, n = 0;
      MSTEP_RETURN_IF_ERROR(check_cudnn(
          api,
          api.cudnnBackendGetAttribute(p.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                       CUDNN_TYPE_INT64, 1, &n, &workspace),
          "cudnnBackendGetAttribute(EXECUTION_PLAN_WORKSPACE_SIZE)", p.what()));
      plan->engine_index_ = engine_index;
      plan->engine_config_ = std::move(configs[i]);
      plan->plan_ = std::move(p);
      plan->workspace_size_ = workspace;
      return plan;
    }
  }
  return absl::UnimplementedError(absl::StrCat("cudnn: ", graph.what,
                                               ": no engine on this device runs the graph (",
                                               absl::StrJoin(refused, "; "), ")"));
}

absl::Status CudnnExecutionPlan::execute(const CudnnHandle& handle,
                                         const std::vector<std::pair<int64_t, void*>>& bindings,
                                         void* workspace) const {
  const CudnnApi& api = handle.api();
  std::vector<int64_t> uids;
  std::vector<void*> pointers;
  for (const auto& [uid, pointer] : bindings) {
    uids.push_back(uid);
    pointers.push_back(pointer);
  }
  MSTEP_ASSIGN_OR_RETURN(CudnnDescriptor pack,
                         CudnnDescriptor::create(api, CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR,
                                                 absl::StrCat(what_, ": variant pack")));
  MSTEP_RETURN_IF_ERROR(pack.set_ints(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, uids));
  MSTEP_RETURN_IF_ERROR(pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
                                 static_cast<int64_t>(pointers.size()), pointers.data()));
  MSTEP_RETURN_IF_ERROR(
      pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, workspace));
  MSTEP_RETURN_IF_ERROR(pack.finalize());
  return check_cudnn(api, api.cudnnBackendExecute(handle.get(), plan_.get(), pack.get()),
                     "cudnnBackendExecute", what_);
}

} // namespace mstep::cuda
