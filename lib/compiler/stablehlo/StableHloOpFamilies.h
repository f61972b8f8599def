// The op families of the StableHLO exporter that live in files of their
// own (the op table, StableHloOps.cpp, maps their names to these):
// convolutions (StableHloConv.cpp), pools (StableHloPool.cpp), argmax and
// var (StableHloStatistics.cpp), gather/scatter_add/pad/triu/tril
// (StableHloIndexing.cpp). Each has lower_op's contract (StableHloOps.h).
// Library-internal; compiler code only (MLIR headers).
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "lib/compiler/stablehlo/StableHloText.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Operation.h"

namespace mstep::stablehlo {

using Values = std::vector<Value>;

inline int64_t i64_attr(mlir::Operation* op, llvm::StringRef name) {
  return op->getAttrOfType<mlir::IntegerAttr>(name).getInt();
}
inline std::vector<int64_t> array_attr(mlir::Operation* op, llvm::StringRef name) {
  auto a = op->getAttrOfType<mlir::DenseI64ArrayAttr>(name);
  return a ? std::vector<int64_t>(a.asArrayRef().begin(), a.asArrayRef().end())
           : std::vector<int64_t>{};
}

/// The type sums of `elem` accumulate in, as the ref kernels: f32 for
/// bf16 and f16 (each result rounded once on store), else `elem`.
inline std::string accumulator_type(const std::string& elem) {
  return elem == "bf16" || elem == "f16" ? "f32" : elem;
}

// Each: absl::StatusOr<Values>(FunctionText&, mlir::Operation*, operands, results).
absl::StatusOr<Values> lower_conv2d(FunctionText& f, mlir::Operation* op, const Values& in,
                                    const Values& out);
absl::StatusOr<Values> lower_conv2d_input_grad(FunctionText& f, mlir::Operation* op, const Values& in,
                                               const Values& out);
absl::StatusOr<Values> lower_conv2d_weight_grad(FunctionText& f, mlir::Operation* op, const Values& in,
                                                const Values& out);
absl::StatusOr<Values> lower_max_pool2d(FunctionText& f, mlir::Operation* op, const Values& in,
                                        const Values& out);
absl::StatusOr<Values> lower_avg_pool2d(FunctionText& f, mlir::Operation* op, const Values& in,
                                        const Values& out);
absl::StatusOr<Values> lower_max_pool2d_grad(FunctionText& f, mlir::Operation* op, const Values& in,
                                             const Values& out);
absl::StatusOr<Values> lower_avg_pool2d_grad(FunctionText& f, mlir::Operation* op, const Values& in,
                                             const Values& out);
absl::StatusOr<Values> lower_argmax(FunctionText& f, mlir::Operation* op, const Values& in,
                                    const Values& out);
absl::StatusOr<Values> lower_var(FunctionText& f, mlir::Operation* op, const Values& in,
                                 const Values& out);
absl::StatusOr<Values> lower_gather(FunctionText& f, mlir::Operation* op, const Values& in,
                                    const Values& out);
absl::StatusOr<Values> lower_scatter_add(FunctionText& f, mlir::Operation* op, const Values& in,
                                         const Values& out);
absl::StatusOr<Values> lower_pad(FunctionText& f, mlir::Operation* op, const Values& in,
                                 const Values& out);
absl::StatusOr<Values> lower_triu(FunctionText& f, mlir::Operation* op, const Values& in,
                                  const Values& out);
absl::StatusOr<Values> lower_tril(FunctionText& f, mlir::Operation* op, const Values& in,
                                  const Values& out);

}  // namespace mstep::stablehlo
