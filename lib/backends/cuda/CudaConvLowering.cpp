// CudaConvLowering: see CudaConvLowering.h.
#include "lib/backends/cuda/CudaConvLowering.h"

#include <functional>

#include "absl/strings/str_cat.h"
#include "lib/backends/cuda/CudaConvColumns.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mstep/core/Error.h"
#include "mstep/ir/MlirImport.h"

namespace mstep::cuda {

namespace {

using conv::ColumnLayout;
using conv::Conv;

/// The steps of one convolution's im2col form (CudaConvLowering.h).
struct Im2col {
  ColumnLayout layout = ColumnLayout::by_batch;
  bool columns = false;        ///< an im2col kernel writes the columns (else x is them)
  bool col2im = false;         ///< the matmul writes column gradients, col2im sums them
  bool swap_grad = false;      ///< dy swapped to [O][N][P] before the matmul
  bool swap_out = false;       ///< the matmul writes [O][N][P], swapped into y
  bool product = false;        ///< the forward's matmul writes scratch (swap_out, or the bias
                               ///< added out of place to an f32 product)
  MatmulShape shape;           ///< f32_result: f16's sums stay f32 until their kernel rounds
  MatmulBatch batch;
  int64_t scratch_bytes = 0;
};

/// The dtype of a matmul's scratch result that a kernel adds to (col2im's
/// taps, the bias): f16's stays f32, so that only the output is rounded,
/// once, as ref does, and a partial sum past f16's range (65504) does not
/// become inf where the output would not; bf16 has f32's range and keeps
/// its own dtype.
DType summed_product_dtype(DType dtype) { return dtype == DType::f16 ? DType::f32 : dtype; }

Im2col im2col_of(mlir::Operation* op, const Conv& c, DType dtype) {
  const int64_t N = c.batch, G = c.groups, R = c.column_rows(), P = c.positions();
  const int64_t O = c.out_channels, Og = c.outs_per_group();
  Im2col f;
  f.shape.dtype = dtype;
  // One group: a matrix per image, batched over the images. Groups, and
  // the weight gradient (a sum over the images): a matrix per group with
  // the images side by side. (The layouts agree for N = 1.)
  f.layout = G == 1 && !mlir::isa<dialect::Conv2dWeightGradOp>(op) ? ColumnLayout::by_batch
                                                                   : ColumnLayout::by_group;
  const bool by_batch = f.layout == ColumnLayout::by_batch;
  const bool x_is_columns = c.pointwise() && (by_batch || N == 1);
  const int64_t column_elements = conv::column_elements(c);
  DType product_dtype = dtype;
  if (auto forward = mlir::dyn_cast<dialect::Conv2dOp>(op)) {
    f.columns = !x_is_columns;
    if (by_batch) {
      f.shape.m = O, f.shape.n = P, f.shape.k = R;
      f.batch = {N, 0, R * P, O * P};
    } else {
      f.shape.m = Og, f.shape.n = N * P, f.shape.k = R;
      f.batch = {G, Og * R, R * N * P, Og * N * P};
      f.swap_out = N > 1;
    }
    if (forward.getBias()) product_dtype = summed_product_dtype(dtype);
    f.product = f.swap_out || product_dtype != dtype;
  } else if (mlir::isa<dialect::Conv2dInputGradOp>(op)) {
    f.col2im = !x_is_columns;
    if (f.col2im) product_dtype = summed_product_dtype(dtype);
    f.shape.transpose_a = true;  // w_g stored [O/G, R]
    if (by_batch) {
      f.shape.m = R, f.shape.n = P, f.shape.k = O;
      f.batch = {N, 0, O * P, R * P};
    } else {
      f.shape.m = R, f.shape.n = N * P, f.shape.k = Og;
      f.batch = {G, Og * R, Og * N * P, R * N * P};
      f.swap_grad = N > 1;
    }
  } else {
    f.columns = !x_is_columns;
    f.swap_grad = N > 1;
    f.shape.transpose_b = true;  // the columns stored [R, N * P]
    f.shape.m = Og, f.shape.n = R, f.shape.k = N * P;
    f.batch = {G, Og * N * P, R * N * P, Og * R};
  }
  f.shape.f32_result = product_dtype != dtype;
  const int64_t size = element_size(dtype), product_size = element_size(product_dtype);
  f.scratch_bytes = (f.columns ? column_elements * size : 0) +
                    (f.col2im ? column_elements * product_size : 0) +
                    (f.swap_grad ? N * O * P * size : 0) + (f.product ? N * O * P * product_size : 0);
  return f;
}

}  // namespace

std::string conv_direct_reason(mlir::Operation* op, const CudaCodegenOptions& options) {
  if (options.conv == CudaConvForm::direct) return "MSTEP_CUDA_CONV=direct";
  auto type = mlir::cast<mlir::RankedTensorType>(op->getResult(0).getType());
  absl::StatusOr<TensorType> result = tensor_type_from_mlir(type);
  if (!result.ok()) return std::string(result.status().message());
  if (result->dtype != DType::f32 && result->dtype != DType::bf16 && result->dtype != DType::f16)
    return absl::StrCat(dtype_name(result->dtype),
                        ": the im2col form takes f32, bf16 and f16 (cuBLASLt's matmul dtypes)");
  for (mlir::Value value : op->getOperands())
    if (mlir::cast<mlir::ShapedType>(value.getType()).getNumElements() == 0)
      return "an empty tensor";
  if (type.getNumElements() == 0) return "an empty tensor";
  const Conv c = conv::geometry_of(op);
  const Im2col f = im2col_of(op, c, result->dtype);
  if (f.scratch_bytes > options.conv_im2col_max_bytes)
    return absl::StrCat("im2col scratch of ", f.scratch_bytes, " bytes over the bound of ",
                        options.conv_im2col_max_bytes);
  if (f.batch.count > INT32_MAX) return "a batch over cuBLASLt's";
  return "";
}

absl::Status CudaConvLowering::lower(mlir::Operation* op, const std::string& origin,
                                     const std::string& name,
                                     const llvm::DenseMap<mlir::Value, int>& ids, int result,
                                     CudaPlan& plan) {
  const Conv c = conv::geometry_of(op);
  const mlir::Type result_type = op->getResult(0).getType();
  const mlir::Type element = mlir::cast<mlir::ShapedType>(result_type).getElementType();
  MSTEP_ASSIGN_OR_RETURN(TensorType result_tensor, tensor_type_from_mlir(result_type));
  const Im2col f = im2col_of(op, c, result_tensor.dtype);
  const int64_t N = c.batch, O = c.out_channels, P = c.positions();
  std::vector<int>& scratch = scratch_.emplace_back();
  // A scratch value of `elements` (of the conv's dtype, or the matmul's
  // f32 result) and its kernel parameter type.
  auto scratch_value = [&](int64_t elements, bool f32 = false) -> std::pair<int, mlir::Type> {
    const int id = add_plan_value(plan, TensorType{Shape({elements}),
                                                   f32 ? DType::f32 : result_tensor.dtype});
    scratch.push_back(id);
    mlir::Type type = f32 ? mlir::Float32Type::get(op->getContext()) : element;
    return {id, mlir::RankedTensorType::get({elements}, type)};
  };
  // The kernels of `build` over `values` (those from `first_written` on written).
  auto kernel = [&](const std::string& suffix, std::vector<int> values,
                    const std::vector<mlir::Type>& types, size_t first_written,
                    const std::function<void(mlir::func::FuncOp)>& build) -> absl::Status {
    const std::string kernel_name = absl::StrCat(name, "_", suffix);
    MSTEP_ASSIGN_OR_RETURN(GeneratedKernels kernels,
                           generate_loop_kernels(op, kernel_name, types,
                                                 [&](mlir::func::FuncOp func) {
                                                   build(func);
                                                   return absl::OkStatus();
                                                 },
                                                 codegen_));
    return sink_(std::move(kernels), kernel_name, std::move(values), first_written,
                 absl::StrCat(origin, ": ", suffix));
  };
  // x as the columns, or the columns im2col writes from it.
  auto columns_of = [&](mlir::Value x) -> absl::StatusOr<int> {
    if (!f.columns) return ids.at(x);
    auto [columns, type] = scratch_value(conv::column_elements(c));
    MSTEP_RETURN_IF_ERROR(kernel("im2col", {ids.at(x), columns}, {x.getType(), type}, 1,
                                 [&](mlir::func::FuncOp func) {
                                   conv::build_im2col(c, f.layout, func);
                                 }));
    return columns;
  };
  // dy [N][O][P], or swapped to [O][N][P].
  auto grad_of = [&](mlir::Value dy) -> absl::StatusOr<int> {
    if (!f.swap_grad) return ids.at(dy);
    auto [swapped, type] = scratch_value(N * O * P);
    MSTEP_RETURN_IF_ERROR(kernel("swap_grad", {ids.at(dy), swapped}, {dy.getType(), type}, 1,
                                 [&](mlir::func::FuncOp func) {
                                   conv::build_swap_outer_dims(O, N, P, false, func);
                                 }));
    return swapped;
  };
  auto gemm = [&](int a, int b, int out) {
    CudaMatmulInfo info;
    info.origin = absl::StrCat(origin, ": im2col gemm");
    info.shape = f.shape;
    info.batch = f.batch.count;
    info.a_stride = f.batch.a_stride;
    info.b_stride = f.batch.b_stride;
    info.c_stride = f.batch.c_stride;
    CudaLaunchStep step;
    step.matmul = static_cast<int>(plan.matmuls.size());
    step.args = {a, b};
    step.writes = {out};
    plan.matmuls.push_back(std::move(info));
    plan.launches.push_back(std::move(step));
  };

  if (auto forward = mlir::dyn_cast<dialect::Conv2dOp>(op)) {
    MSTEP_ASSIGN_OR_RETURN(int columns, columns_of(forward.getInput()));
    const mlir::Value bias = forward.getBias();
    if (f.product) {
      auto [product, type] = scratch_value(N * O * P, f.shape.f32_result);
      gemm(ids.at(forward.getWeight()), columns, product);
      std::vector<int> values = {product};
      std::vector<mlir::Type> types = {type};
      if (bias) values.push_back(ids.at(bias)), types.push_back(bias.getType());
      values.push_back(result);
      types.push_back(result_type);
      if (!f.swap_out)  // f16's f32 product plus the bias, rounded once
        return kernel("bias", values, types, values.size() - 1,
                      [&](mlir::func::FuncOp func) { conv::build_add_bias(O, P, func); });
      return kernel(bias ? "swap_out_bias" : "swap_out", values, types, values.size() - 1,
                    [&](mlir::func::FuncOp func) {
                      conv::build_swap_outer_dims(N, O, P, static_cast<bool>(bias), func);
                    });
    }
    gemm(ids.at(forward.getWeight()), columns, result);
    if (!bias) return absl::OkStatus();
    return kernel("bias", {ids.at(bias), result}, {bias.getType(), result_type}, 1,
                  [&](mlir::func::FuncOp func) { conv::build_add_bias(O, P, func); });
  }
  if (auto input_grad = mlir::dyn_cast<dialect::Conv2dInputGradOp>(op)) {
    MSTEP_ASSIGN_OR_RETURN(int dy, grad_of(input_grad.getGradOutput()));
    if (!f.col2im) {
      gemm(ids.at(input_grad.getWeight()), dy, result);
      return absl::OkStatus();
    }
    auto [columns, type] = scratch_value(conv::column_elements(c), f.shape.f32_result);
    gemm(ids.at(input_grad.getWeight()), dy, columns);
    return kernel("col2im", {columns, result}, {type, result_type}, 1,
                  [&](mlir::func::FuncOp func) { conv::build_col2im(c, f.layout, func); });
  }
  auto weight_grad = mlir::cast<dialect::Conv2dWeightGradOp>(op);
  MSTEP_ASSIGN_OR_RETURN(int columns, columns_of(weight_grad.getInput()));
  MSTEP_ASSIGN_OR_RETURN(int dy, grad_of(weight_grad.getGradOutput()));
  gemm(dy, columns, result);
  return absl::OkStatus();
}

}  // namespace mstep::cuda
