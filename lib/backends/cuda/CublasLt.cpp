// cuBLASLt: the loader, the row-major to column-major plan, and the
// matmul helper with its per-shape cache of descriptors and heuristics.
#include "lib/backends/cuda/CublasLt.h"

#include <dlfcn.h>

#include "absl/strings/str_cat.h"
#include "mstep/core/Error.h"

namespace mstep::cuda {

namespace {

absl::Status unavailable(absl::string_view reason) {
  return absl::UnavailableError(absl::StrCat("cublasLt: unavailable: ", reason));
}

const char* epilogue_name(MatmulEpilogue e) {
  switch (e) {
  case MatmulEpilogue::none: return "none";
  case MatmulEpilogue::relu: return "relu";
  case MatmulEpilogue::gelu: return "gelu";
  }
  return "?";
}

} // namespace

absl::StatusOr<std::shared_ptr<const CublasLtApi>>
load_cublaslt(const CublasLtLoadOptions& options) {
  void* library = dlopen(options.library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* error = dlerror();
    return unavailable(absl::StrCat("cannot load ", options.library, ": ",
                                    error != nullptr ? error : "dlopen failed",
                                    " (put the CUDA toolkit's or the nvidia-cublas wheel's lib "
                                    "folder on LD_LIBRARY_PATH)"));
  }
  auto api = std::make_shared<CublasLtApi>();
#define MSTEP_CUBLASLT_LOAD(name)                                                                  \
  api->name = reinterpret_cast<decltype(api->name)>(dlsym(library, #name));                        \
  if (api->name == nullptr)                                                                        \
    return unavailable(absl::StrCat(options.library, " has no ", #name));
  MSTEP_CUBLASLT_FUNCTIONS(MSTEP_CUBLASLT_LOAD)
#undef MSTEP_CUBLASLT_LOAD
  api->version = api->cublasLtGetVersion();
  if (api->version / 10000 != CUBLAS_VER_MAJOR)
    return unavailable(absl::StrCat(options.library, " is version ", api->version,
                                    "; this build needs major version ", CUBLAS_VER_MAJOR));
  return std::shared_ptr<const CublasLtApi>(std::move(api));
}

std::string MatmulShape::to_string() const {
  std::string s = absl::StrCat("[", transpose_a ? k : m, ", ", transpose_a ? m : k, "] x [",
                               transpose_b ? n : k, ", ", transpose_b ? k : n, "] ",
                               dtype_name(dtype));
  if (transpose_a) absl::StrAppend(&s, ", A transposed");
  if (transpose_b) absl::StrAppend(&s, ", B transposed");
  if (f32_result) absl::StrAppend(&s, ", f32 result");
  if (bias || epilogue != MatmulEpilogue::none)
    absl::StrAppend(&s, ", ", bias ? "bias" : "", bias && epilogue != MatmulEpilogue::none ? " + " : "",
                    epilogue != MatmulEpilogue::none ? epilogue_name(epilogue) : "");
  if (bias_grad != MatmulBiasGrad::none)
    absl::StrAppend(&s, ", bias grad of ", bias_grad == MatmulBiasGrad::lhs ? "A" : "B");
  return s;
}

cublasLtEpilogue_t cublaslt_epilogue(MatmulEpilogue epilogue, bool bias) {
  switch (epilogue) {
  case MatmulEpilogue::none: return bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  case MatmulEpilogue::relu: return bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
  case MatmulEpilogue::gelu: return bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

cublasLtEpilogue_t cublaslt_epilogue(const MatmulShape& shape) {
  // cuBLASLt's A is mstep's B (the top of CublasLt.h).
  switch (shape.bias_grad) {
  case MatmulBiasGrad::none:
    break;
  case MatmulBiasGrad::lhs:
    return CUBLASLT_EPILOGUE_BGRADB;
  case MatmulBiasGrad::rhs:
    return CUBLASLT_EPILOGUE_BGRADA;
  }
  return cublaslt_epilogue(shape.epilogue, shape.bias);
}

absl::StatusOr<CublasLtGemm> plan_cublaslt_gemm(const MatmulShape& shape,
                                                const MatmulBatch& batch) {
  if (shape.m < 1 || shape.n < 1 || shape.k < 1)
    return absl::InvalidArgumentError(absl::StrCat(
        "cublasLt matmul ", shape.to_string(), ": every size must be at least 1 (m=", shape.m,
        ", n=", shape.n, ", k=", shape.k, ")"));
  if (shape.dtype != DType::f32 && shape.dtype != DType::bf16 && shape.dtype != DType::f16)
    return absl::InvalidArgumentError(absl::StrCat("cublasLt matmul ", shape.to_string(),
                                                   ": only f32, bf16 and f16 are supported"));
  if (shape.f32_result && (shape.dtype == DType::f32 || shape.bias ||
                           shape.epilogue != MatmulEpilogue::none ||
                           shape.bias_grad != MatmulBiasGrad::none))
    return absl::InvalidArgumentError(
        absl::StrCat("cublasLt matmul ", shape.to_string(),
                     ": an f32 result goes with bf16 or f16 operands and no bias, activation or "
                     "bias gradient"));
  if (shape.bias_grad != MatmulBiasGrad::none &&
      (shape.bias || shape.epilogue != MatmulEpilogue::none || batch.count != 1))
    return absl::InvalidArgumentError(absl::StrCat(
        "cublasLt matmul ", shape.to_string(),
        ": a bias gradient goes with no bias, activation or batch (batch of ", batch.count, ")"));
  if (batch.count < 1 || batch.count > INT32_MAX || batch.a_stride < 0 || batch.b_stride < 0 ||
      (batch.count > 1 && batch.c_stride < shape.m * shape.n))
    return absl::InvalidArgumentError(
        absl::StrCat("cublasLt matmul ", shape.to_string(), ": a batch of ", batch.count,
                     " with strides ", batch.a_stride, ", ", batch.b_stride, ", ", batch.c_stride,
                     " (a count in [1, 2^31), strides at least 0, C's at least its matrix)"));
  const auto m = static_cast<uint64_t>(shape.m), n = static_cast<uint64_t>(shape.n),
             k = static_cast<uint64_t>(shape.k);
  CublasLtGemm gemm;
  // C^T[n, m] = op(B)^T [n, k] * op(A)^T [k, m], all column-major.
  gemm.m = n;
  gemm.n = m;
  gemm.k = k;
  // mstep's B: row-major [k, n] is column-major [n, k] (ld n), used as is;
  // stored [n, k] (transpose_b) it is column-major [k, n] (ld k), transposed.
  gemm.a = shape.transpose_b ? CublasLtOperand{k, n, static_cast<int64_t>(k), true}
                             : CublasLtOperand{n, k, static_cast<int64_t>(n), false};
  // mstep's A: row-major [m, k] is column-major [k, m] (ld k), used as is;
  // stored [k, m] (transpose_a) it is column-major [m, k] (ld m), transposed.
  gemm.b = shape.transpose_a ? CublasLtOperand{m, k, static_cast<int64_t>(m), true}
                             : CublasLtOperand{k, m, static_cast<int64_t>(k), false};
  gemm.c = {n, m, static_cast<int64_t>(n), false};
  gemm.epilogue = cublaslt_epilogue(shape);
  gemm.batch_count = static_cast<int32_t>(batch.count);
  if (batch.count > 1) {
    gemm.a.batch_stride = batch.b_stride;
    gemm.b.batch_stride = batch.a_stride;
    gemm.c.batch_stride = batch.c_stride;
  }
  return gemm;
}

// ---- the helper -------------------------------------------------------------

struct CublasLtMatmul::Plan {
  const CublasLtApi* api = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    if (c) api->cublasLtMatrixLayoutDestroy(c);
    if (b) api->cublasLtMatrixLayoutDestroy(b);
    if (a) api->cublasLtMatrixLayoutDestroy(a);
    if (desc) api->cublasLtMatmulDescDestroy(desc);
  }
};

absl::Status CublasLtMatmul::check(cublasStatus_t status, absl::string_view call,
                                   const MatmulShape& shape) const {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  absl::StatusCode code = status == CUBLAS_STATUS_ALLOC_FAILED ? absl::StatusCode::kResourceExhausted
                          : status == CUBLAS_STATUS_INVALID_VALUE ? absl::StatusCode::kInvalidArgument
                          : status == CUBLAS_STATUS_NOT_SUPPORTED ? absl::StatusCode::kUnimplemented
                                                                  : absl::StatusCode::kInternal;
  return absl::Status(code, absl::StrCat("cublasLt matmul ", shape.to_string(), ": ", call, ": ",
                                         api_->cublasLtGetStatusName(status), " (",
                                         api_->cublasLtGetStatusString(status), ")"));
}

CublasLtMatmul::CublasLtMatmul(const CudaContext& context, std::shared_ptr<const CublasLtApi> api)
    : context_(context), api_(std::move(api)) {}

absl::StatusOr<std::unique_ptr<CublasLtMatmul>>
CublasLtMatmul::create(const CudaContext& context, std::shared_ptr<const CublasLtApi> api,
                       size_t workspace_bytes) {
  std::unique_ptr<CublasLtMatmul> helper(new CublasLtMatmul(context, std::move(api)));
  MSTEP_RETURN_IF_ERROR(context.make_current());
  cublasStatus_t status = helper->api_->cublasLtCreate(&helper->handle_);
  if (status != CUBLAS_STATUS_SUCCESS)
    return unavailable(absl::StrCat("cublasLtCreate: ", helper->api_->cublasLtGetStatusName(status),
                                    " (", helper->api_->cublasLtGetStatusString(status), ")"));
  MSTEP_ASSIGN_OR_RETURN(helper->workspace_, CudaDeviceBuffer::allocate(context, workspace_bytes));
  return helper;
}

CublasLtMatmul::~CublasLtMatmul() {
  plans_.clear();
  if (handle_ != nullptr) api_->cublasLtDestroy(handle_);
}

absl::StatusOr<CublasLtMatmul::Plan*> CublasLtMatmul::plan(const MatmulShape& shape,
                                                           const MatmulBatch& batch) {
  MSTEP_ASSIGN_OR_RETURN(Plan * found, find_plan(shape, batch));
  if (found == nullptr)
    return absl::UnimplementedError(absl::StrCat("cublasLt matmul ", shape.to_string(),
                                                 ": the heuristic found no algorithm on ",
                                                 context_.device().name));
  return found;
}

absl::StatusOr<bool> CublasLtMatmul::has_algorithm(const MatmulShape& shape,
                                                   const MatmulBatch& batch) {
  MSTEP_RETURN_IF_ERROR(context_.make_current());
  MSTEP_ASSIGN_OR_RETURN(Plan * found, find_plan(shape, batch));
  return found != nullptr;
}

absl::StatusOr<CublasLtMatmul::Plan*> CublasLtMatmul::find_plan(const MatmulShape& shape,
                                                                const MatmulBatch& batch) {
  if (auto it = plans_.find({shape, batch}); it != plans_.end()) return it->second.get();
  if (no_algorithm_.count({shape, batch})) return nullptr;
  MSTEP_ASSIGN_OR_RETURN(CublasLtGemm gemm, plan_cublaslt_gemm(shape, batch));
  const CublasLtApi& api = *api_;
  auto plan = std::make_unique<Plan>();
  plan->api = api_.get();
  const cudaDataType_t type = shape.dtype == DType::bf16  ? CUDA_R_16BF
                              : shape.dtype == DType::f16 ? CUDA_R_16F
                                                          : CUDA_R_32F;
  MSTEP_RETURN_IF_ERROR(check(api.cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                              "cublasLtMatmulDescCreate", shape));
  auto set_desc = [&](cublasLtMatmulDescAttributes_t attribute, const auto& value) {
    return check(api.cublasLtMatmulDescSetAttribute(plan->desc, attribute, &value, sizeof(value)),
                 "cublasLtMatmulDescSetAttribute", shape);
  };
  const cublasOperation_t op_a = gemm.a.transpose ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = gemm.b.transpose ? CUBLAS_OP_T : CUBLAS_OP_N;
  MSTEP_RETURN_IF_ERROR(set_desc(CUBLASLT_MATMUL_DESC_TRANSA, op_a));
  MSTEP_RETURN_IF_ERROR(set_desc(CUBLASLT_MATMUL_DESC_TRANSB, op_b));
  MSTEP_RETURN_IF_ERROR(set_desc(CUBLASLT_MATMUL_DESC_EPILOGUE, gemm.epilogue));
  // The bias, or the bias gradient, has the output's type (the top).
  if (shape.bias || shape.bias_grad != MatmulBiasGrad::none)
    MSTEP_RETURN_IF_ERROR(set_desc(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, type));
  auto layout = [&](cublasLtMatrixLayout_t* out, const CublasLtOperand& o,
                    cudaDataType_t layout_type) -> absl::Status {
    MSTEP_RETURN_IF_ERROR(check(api.cublasLtMatrixLayoutCreate(out, layout_type, o.rows, o.cols, o.ld),
                                "cublasLtMatrixLayoutCreate", shape));
    if (gemm.batch_count == 1) return absl::OkStatus();
    auto set_layout = [&](cublasLtMatrixLayoutAttribute_t attribute, const auto& value) {
      return check(api.cublasLtMatrixLayoutSetAttribute(*out, attribute, &value, sizeof(value)),
                   "cublasLtMatrixLayoutSetAttribute", shape);
    };
    MSTEP_RETURN_IF_ERROR(set_layout(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, gemm.batch_count));
    return set_layout(CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, o.batch_stride);
  };
  MSTEP_RETURN_IF_ERROR(layout(&plan->a, gemm.a, type));
  MSTEP_RETURN_IF_ERROR(layout(&plan->b, gemm.b, type));
  MSTEP_RETURN_IF_ERROR(layout(&plan->c, gemm.c, shape.f32_result ? CUDA_R_32F : type));

  cublasLtMatmulPreference_t preference = nullptr;
  MSTEP_RETURN_IF_ERROR(check(api.cublasLtMatmulPreferenceCreate(&preference),
                              "cublasLtMatmulPreferenceCreate", shape));
  const uint64_t workspace = workspace_.size();
  cublasStatus_t status = api.cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  if (status == CUBLAS_STATUS_SUCCESS) {
    ++heuristic_queries_;
    status = api.cublasLtMatmulAlgoGetHeuristic(handle_, plan->desc, plan->a, plan->b, plan->c,
                                                plan->c, preference, 1, &result, &found);
  }
  api.cublasLtMatmulPreferenceDestroy(preference);
  MSTEP_RETURN_IF_ERROR(check(status, "cublasLtMatmulAlgoGetHeuristic", shape));
  if (found < 1) {
    no_algorithm_.insert({shape, batch});
    return nullptr;
  }
  plan->algo = result.algo;
  Plan* raw = plan.get();
  plans_.emplace(std::make_pair(shape, batch), std::move(plan));
  return raw;
}

absl::Status CublasLtMatmul::run(const MatmulShape& shape, CUdeviceptr a, CUdeviceptr b,
                                 CUdeviceptr bias, CUdeviceptr c, const MatmulBatch& batch) {
  const bool wants_bias = shape.bias || shape.bias_grad != MatmulBiasGrad::none;
  if (wants_bias != (bias != 0))
    return absl::InvalidArgumentError(
        absl::StrCat("cublasLt matmul ", shape.to_string(),
                     wants_bias ? ": no bias (or bias gradient) pointer given"
                                : ": a bias pointer given without bias or bias gradient"));
  MSTEP_RETURN_IF_ERROR(context_.make_current());
  MSTEP_ASSIGN_OR_RETURN(Plan * p, plan(shape, batch));
  const CublasLtApi& api = *api_;
  if (wants_bias) {
    auto pointer = reinterpret_cast<void*>(bias);
    MSTEP_RETURN_IF_ERROR(check(api.cublasLtMatmulDescSetAttribute(
                                    p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &pointer,
                                    sizeof(pointer)),
                                "cublasLtMatmulDescSetAttribute", shape));
  }
  const float alpha = 1.0f, beta = 0.0f;
  // cuBLASLt's A is mstep's B and its B mstep's A (the top of CublasLt.h).
  return check(api.cublasLtMatmul(handle_, p->desc, &alpha, reinterpret_cast<const void*>(b), p->a,
                                  reinterpret_cast<const void*>(a), p->b, &beta,
                                  reinterpret_cast<const void*>(c), p->c, reinterpret_cast<void*>(c),
                                  p->c, &p->algo, reinterpret_cast<void*>(workspace_.pointer()),
                                  workspace_.size(), reinterpret_cast<cudaStream_t>(context_.stream())),
               "cublasLtMatmul", shape);
}

} // namespace mstep::cuda
