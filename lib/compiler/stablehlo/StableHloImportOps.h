// StableHLO in: the trace graph being built (GraphBuilder, in
// StableHloImportBuilder.cpp with the located errors) and the op table
// that maps one StableHLO op onto it (import_op). The driver is
// StableHloImport.cpp. Library-internal; compiler code only (MLIR headers).
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "llvm/ADT/DenseMap.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "mstep/compiler/StableHloImport.h"
#include "mstep/ir/TraceGraph.h"

namespace mstep::stablehlo {

/// Appends nodes to a TraceGraph. Every helper returns its input when
/// there is nothing to do (a reshape to the same shape, ...).
class GraphBuilder {
 public:
  TraceGraph& graph() { return graph_; }
  const TensorType& type(ValueRef v) const { return graph_.type_of(v); }

  ValueRef add(OpKind op, std::vector<ValueRef> operands, AttrList attrs, TensorType type);
  ValueRef input(TensorType type);
  /// A large constant: a graph input whose value is `bytes`.
  ValueRef constant_input(TensorType type, std::string bytes);
  const std::vector<ImportedStableHlo::Constant>& constant_inputs() const { return constants_; }
  /// A 0-d constant, or `value` broadcast to `type`'s shape (`full`).
  ValueRef constant(double value, DType dtype);
  ValueRef full(double value, const TensorType& type);
  ValueRef reshape(ValueRef v, const Shape& shape);
  ValueRef permute(ValueRef v, const std::vector<int64_t>& perm);
  ValueRef expand(ValueRef v, const Shape& shape);
  ValueRef cast(ValueRef v, DType dtype);
  /// The scalar `v` holds when it is a constant or a `full` of one.
  std::optional<double> constant_value(ValueRef v) const;

 private:
  TraceGraph graph_;
  std::vector<ImportedStableHlo::Constant> constants_;
};

/// The mstep value of each StableHLO value in scope (one per function
/// body being inlined).
using ValueMap = llvm::DenseMap<mlir::Value, ValueRef>;

/// "<file>:<line>:<col>" of `loc` (the first file location inside it;
/// "<file>" for line 0), or "<unknown location>".
std::string location_text(mlir::Location loc);
/// InvalidArgument "<location>: error: StableHLO import: <message>".
absl::Status located_error(mlir::Location loc, const std::string& message);

/// The TensorType of a static ranked tensor type whose element type has
/// an mstep dtype; a located error naming the type otherwise.
absl::StatusOr<TensorType> tensor_type(mlir::Type type, mlir::Location loc,
                                       const std::string& what);

/// Appends `op` (a stablehlo.* op, not func.call / func.return) to `b`,
/// its operands looked up in `values`, and maps its results there. A
/// located error naming the op when it is not supported or breaks its
/// rules.
absl::Status import_op(mlir::Operation* op, GraphBuilder& b, ValueMap& values);

}  // namespace mstep::stablehlo
