// cuBLASLt for the cuda backend's matmuls (issue 21 §1, issue 22 §1):
// the library loaded at run time with dlopen("libcublasLt.so.13") into a
// table of functions, as the driver is (CudaDriverApi.h), so nothing links
// it and a machine without it reports "cublasLt: unavailable: <reason>";
// and CublasLtMatmul, which runs mstep's row-major matmuls (f32, or bf16
// or f16 with fp32 accumulation; transposes; bias, ReLU and GELU
// epilogues; the bias-gradient epilogues; a strided batch in one call) on
// a context's stream. Only cublasLt.h's types are used. Library-internal.
//
// Row-major to column-major: cuBLASLt is column-major, and a row-major
// [r, c] matrix is the column-major [c, r] matrix with leading dimension
// c. So C = op(A) op(B) (row-major, [m, n]) is computed as the
// column-major C^T = op(B)^T op(A)^T: cuBLASLt's A is mstep's B, its B is
// mstep's A, and its m and n are mstep's n and m. A bias of length n
// (one per output column) is cuBLASLt's per-row bias of C^T.
// plan_cublaslt_gemm does this arithmetic as a pure function.
//
// Bias data types (cublasLt.h, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE): a
// bias, and a bias gradient, have the output's type (f32, or bf16 / f16 for
// a bf16 / f16 matmul): no other combination is planned.
//
// The heuristic is asked once per (shape, transposes, dtype, epilogue, batch) on
// the device, on first use (or has_algorithm(), which CudaExecutable calls
// when it loads a plan), and cached with its descriptors. The 32 MiB
// workspace (PyTorch's size on Hopper) is allocated with the helper, so a
// captured graph (issue 22) needs no allocation.
//
// Thread-safety: a CublasLtApi is immutable; a CublasLtMatmul is used by
// one thread at a time (its owner's).
#pragma once

#include <cublasLt.h>

#include <cstdint>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <tuple>
#include <utility>

#include "absl/status/statusor.h"
#include "lib/backends/cuda/CudaMemory.h"
#include "mstep/core/DType.h"

namespace mstep::cuda {

#define MSTEP_CUBLASLT_FUNCTIONS(X)                                                                \
  X(cublasLtCreate)                                                                                \
  X(cublasLtDestroy)                                                                               \
  X(cublasLtGetVersion)                                                                            \
  X(cublasLtGetStatusName)                                                                         \
  X(cublasLtGetStatusString)                                                                       \
  X(cublasLtMatmulDescCreate)                                                                      \
  X(cublasLtMatmulDescDestroy)                                                                     \
  X(cublasLtMatmulDescSetAttribute)                                                                \
  X(cublasLtMatrixLayoutCreate)                                                                    \
  X(cublasLtMatrixLayoutDestroy)                                                                   \
  X(cublasLtMatrixLayoutSetAttribute)                                                              \
  X(cublasLtMatmulPreferenceCreate)                                                                \
  X(cublasLtMatmulPreferenceDestroy)                                                               \
  X(cublasLtMatmulPreferenceSetAttribute)                                                          \
  X(cublasLtMatmulAlgoGetHeuristic)                                                                \
  X(cublasLtMatmul)

/// The table: a field per function, named and typed as cublasLt.h
/// declares it.
struct CublasLtApi {
#define MSTEP_CUBLASLT_FIELD(name) decltype(&::name) name = nullptr;
  MSTEP_CUBLASLT_FUNCTIONS(MSTEP_CUBLASLT_FIELD)
#undef MSTEP_CUBLASLT_FIELD
  size_t version = 0; ///< cublasLtGetVersion(): 130000 + 100 * minor + patch
};

struct CublasLtLoadOptions {
  /// dlopen'ed by name (the loader's path: LD_LIBRARY_PATH); tests give
  /// a missing name or a path.
  std::string library = "libcublasLt.so.13";
};

/// dlopen and dlsym of every function, and a version check (the major
/// version of the header built against). Errors: UnavailableError
/// "cublasLt: unavailable: <reason>" (dlerror, a missing function, the
/// wrong major version). The library is never unloaded.
absl::StatusOr<std::shared_ptr<const CublasLtApi>>
load_cublaslt(const CublasLtLoadOptions& options = {});

enum class MatmulEpilogue : uint8_t { none, relu, gelu };

/// Which operand's sum over k the call also writes, a bias gradient: none;
/// lhs (sum_l op(A)[i, l], [m]: cuBLASLt's BGRADB, its B being mstep's A);
/// rhs (sum_l op(B)[l, j], [n]: BGRADA). The weight gradient x^T dz of a
/// linear layer and its bias gradient (dz summed over the rows) in one call.
enum class MatmulBiasGrad : uint8_t { none, lhs, rhs };

/// One row-major matmul: C[m, n] = epilogue(op(A) op(B) + bias), A stored
/// [m, k] ([k, m] with transpose_a), B stored [k, n] ([n, k] with
/// transpose_b), bias [n] when `bias`; or C = op(A) op(B) and a bias
/// gradient (`bias_grad`, written where the bias pointer points). A, B, C,
/// the bias and the bias gradient have `dtype` (f32, or bf16 or f16
/// accumulated in f32), except that with `f32_result` C is f32 (a 16-bit
/// product that a kernel rounds later: no bias, epilogue or bias
/// gradient). GELU is the tanh approximation.
struct MatmulShape {
  int64_t m = 0, n = 0, k = 0;
  bool transpose_a = false, transpose_b = false;
  DType dtype = DType::f32;
  bool f32_result = false;
  MatmulEpilogue epilogue = MatmulEpilogue::none;
  bool bias = false;
  MatmulBiasGrad bias_grad = MatmulBiasGrad::none;
  /// "[64, 32] x [32, 16] bf16, B transposed, bias + gelu" (", bias grad
  /// of A").
  std::string to_string() const;
  friend bool operator==(const MatmulShape&, const MatmulShape&) = default;
  /// The order of the plan cache.
  friend bool operator<(const MatmulShape& x, const MatmulShape& y) {
    return std::tie(x.m, x.n, x.k, x.transpose_a, x.transpose_b, x.dtype, x.f32_result,
                    x.epilogue, x.bias, x.bias_grad) <
           std::tie(y.m, y.n, y.k, y.transpose_a, y.transpose_b, y.dtype, y.f32_result,
                    y.epilogue, y.bias, y.bias_grad);
  }
};

/// A strided batch of `count` matmuls of one shape, in one call: matmul i
/// reads A at its address + i * a_stride elements (B, C likewise). A
/// stride of 0 shares A or B across the batch (a broadcast batch dim); C's
/// is at least its matrix (the results do not overlap). A bias is shared
/// by the batch.
struct MatmulBatch {
  int64_t count = 1;
  int64_t a_stride = 0, b_stride = 0, c_stride = 0;
  friend bool operator==(const MatmulBatch&, const MatmulBatch&) = default;
  friend bool operator<(const MatmulBatch& x, const MatmulBatch& y) {
    return std::tie(x.count, x.a_stride, x.b_stride, x.c_stride) <
           std::tie(y.count, y.a_stride, y.b_stride, y.c_stride);
  }
};

/// A column-major operand as cuBLASLt's matrix layout describes it: the
/// stored matrix is `rows` x `cols` with leading dimension `ld`, used
/// transposed when `transpose`; in a batch, the next matrix `batch_stride`
/// elements on (CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET).
struct CublasLtOperand {
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
  bool transpose = false;
  int64_t batch_stride = 0;
  friend bool operator==(const CublasLtOperand&, const CublasLtOperand&) = default;
};

/// The cuBLASLt call for a MatmulShape: D[m, n] = op(a) op(b) in
/// column-major terms, where `a` is mstep's B and `b` is mstep's A (see
/// the top), and the bias has `m` entries; `batch_count` of them
/// (CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT of every layout).
struct CublasLtGemm {
  uint64_t m = 0, n = 0, k = 0;
  CublasLtOperand a, b, c;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  int32_t batch_count = 1;
};

/// The arithmetic above. Errors: a size below 1, a dtype other than f32,
/// bf16 and f16, an f32 result of f32 or with a bias, an epilogue or a
/// bias gradient, a bias gradient with a bias, an activation or a batch, a batch
/// below 1 or above INT32_MAX, a negative stride, a C stride under C's
/// matrix (each names the shape).
absl::StatusOr<CublasLtGemm> plan_cublaslt_gemm(const MatmulShape& shape,
                                                const MatmulBatch& batch = {});
/// The epilogue enum for an epilogue and whether a bias is added.
cublasLtEpilogue_t cublaslt_epilogue(MatmulEpilogue epilogue, bool bias);
/// The epilogue enum of a shape (a bias gradient's, or cublaslt_epilogue's).
cublasLtEpilogue_t cublaslt_epilogue(const MatmulShape& shape);

class CublasLtMatmul {
public:
  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;

  /// A handle and the workspace on `context`'s device. Errors name the
  /// call (cublasLtCreate, the workspace allocation).
  static absl::StatusOr<std::unique_ptr<CublasLtMatmul>>
  create(const CudaContext& context, std::shared_ptr<const CublasLtApi> api,
         size_t workspace_bytes = kWorkspaceBytes);
  ~CublasLtMatmul();
  CublasLtMatmul(const CublasLtMatmul&) = delete;
  CublasLtMatmul& operator=(const CublasLtMatmul&) = delete;

  /// Queues the matmul (or `batch` of them, one call) on the context's
  /// stream (device addresses; `bias` the bias, or where the bias gradient
  /// goes, 0 unless shape.bias or shape.bias_grad). The first call for a
  /// shape and batch asks the heuristic.
  absl::Status run(const MatmulShape& shape, CUdeviceptr a, CUdeviceptr b, CUdeviceptr bias,
                   CUdeviceptr c, const MatmulBatch& batch = {});

  /// Whether the heuristic has an algorithm for `shape` and `batch` on
  /// this device (asked now, unless asked before; the answer is kept, and
  /// a later run() uses the algorithm). Errors: a descriptor or heuristic
  /// call that fails, naming the shape.
  absl::StatusOr<bool> has_algorithm(const MatmulShape& shape, const MatmulBatch& batch = {});

  size_t heuristic_queries() const { return heuristic_queries_; }
  size_t cached_plans() const { return plans_.size(); }
  const CublasLtApi& api() const { return *api_; }

private:
  struct Plan;
  CublasLtMatmul(const CudaContext& context, std::shared_ptr<const CublasLtApi> api);
  /// The cached plan, made on first use; an error when the heuristic
  /// has no algorithm.
  absl::StatusOr<Plan*> plan(const MatmulShape& shape, const MatmulBatch& batch);
  /// plan(), but null when the heuristic has no algorithm.
  absl::StatusOr<Plan*> find_plan(const MatmulShape& shape, const MatmulBatch& batch);
  /// OK, or the error for a failed call of `call` for `shape`.
  absl::Status check(cublasStatus_t status, absl::string_view call, const MatmulShape& shape) const;

  const CudaContext& context_;
  std::shared_ptr<const CublasLtApi> api_;
  cublasLtHandle_t handle_ = nullptr;
  CudaDeviceBuffer workspace_;
  std::map<std::pair<MatmulShape, MatmulBatch>, std::unique_ptr<Plan>> plans_;
  std::set<std::pair<MatmulShape, MatmulBatch>> no_algorithm_;  // the heuristic found none
  size_t heuristic_queries_ = 0;
};

} // namespace mstep::cuda
