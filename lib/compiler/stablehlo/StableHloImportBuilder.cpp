// StableHLO in: the trace graph builder, locations, and the static tensor
// types the import accepts (StableHloImportOps.h).
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "lib/compiler/stablehlo/StableHloImportOps.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"

namespace mstep::stablehlo {

// ---------------------------------------------------------------- builder

ValueRef GraphBuilder::add(OpKind op, std::vector<ValueRef> operands, AttrList attrs,
                           TensorType type) {
  GraphNode n;
  n.op = op;
  n.attrs = std::move(attrs);
  for (ValueRef v : operands) n.operands.push_back(v);
  n.results.push_back(std::move(type));
  graph_.nodes.push_back(std::move(n));
  return {static_cast<uint32_t>(graph_.nodes.size() - 1), 0};
}

ValueRef GraphBuilder::input(TensorType type) {
  const auto index = static_cast<int64_t>(graph_.input_types.size());
  graph_.input_types.push_back(type);
  graph_.donated_to.push_back(-1);
  return add(OpKind::parameter, {}, {{AttrName::index, index}}, std::move(type));
}

ValueRef GraphBuilder::constant_input(TensorType type, std::string bytes) {
  constants_.push_back({graph_.input_types.size(), std::move(bytes)});
  return input(std::move(type));
}

ValueRef GraphBuilder::constant(double value, DType dtype) {
  return add(OpKind::constant, {}, {{AttrName::value, value}}, {Shape{}, dtype});
}

ValueRef GraphBuilder::full(double value, const TensorType& type) {
  ValueRef c = constant(value, type.dtype);
  if (type.shape.rank() == 0) return c;
  return add(OpKind::full, {c}, {{AttrName::shape, IntList(type.shape.begin(), type.shape.end())}},
             type);
}

ValueRef GraphBuilder::reshape(ValueRef v, const Shape& shape) {
  if (type(v).shape == shape) return v;
  return add(OpKind::reshape, {v}, {{AttrName::shape, IntList(shape.begin(), shape.end())}},
             {shape, type(v).dtype});
}

ValueRef GraphBuilder::permute(ValueRef v, const std::vector<int64_t>& perm) {
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == static_cast<int64_t>(i);
  if (identity) return v;
  const TensorType& t = type(v);
  Shape out;
  for (int64_t p : perm) out.push_back(t.shape[p]);
  return add(OpKind::permute, {v}, {{AttrName::perm, IntList(perm.begin(), perm.end())}},
             {out, t.dtype});
}

ValueRef GraphBuilder::expand(ValueRef v, const Shape& shape) {
  if (type(v).shape == shape) return v;
  return add(OpKind::expand, {v}, {{AttrName::shape, IntList(shape.begin(), shape.end())}},
             {shape, type(v).dtype});
}

ValueRef GraphBuilder::cast(ValueRef v, DType dtype) {
  if (type(v).dtype == dtype) return v;
  return add(OpKind::cast, {v}, {{AttrName::dtype, dtype}}, {type(v).shape, dtype});
}

std::optional<double> GraphBuilder::constant_value(ValueRef v) const {
  const GraphNode& n = graph_.nodes[v.node];
  if (n.op == OpKind::constant) return attr_double(n.attrs, AttrName::value);
  if (n.op == OpKind::full) return constant_value(n.operands[0]);
  if (n.op == OpKind::expand) return constant_value(n.operands[0]);
  return std::nullopt;
}

// ------------------------------------------------------------- locations

std::string location_text(mlir::Location loc) {
  std::optional<std::string> found;
  loc->walk([&](mlir::Location l) {
    if (auto file = mlir::dyn_cast<mlir::FileLineColLoc>(l)) {
      // Line 0: the whole file (the module the parser wraps around it).
      found = file.getLine() == 0 ? file.getFilename().str()
                                  : absl::StrCat(file.getFilename().str(), ":", file.getLine(),
                                                 ":", file.getColumn());
      return mlir::WalkResult::interrupt();
    }
    return mlir::WalkResult::advance();
  });
  return found.value_or("<unknown location>");
}

absl::Status located_error(mlir::Location loc, const std::string& message) {
  return absl::InvalidArgumentError(
      absl::StrCat(location_text(loc), ": error: StableHLO import: ", message));
}

namespace {

std::string print(mlir::Type type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << type;
  return s;
}

std::optional<DType> dtype_of(mlir::Type elem) {
  if (elem.isF32()) return DType::f32;
  if (elem.isF64()) return DType::f64;
  if (elem.isBF16()) return DType::bf16;
  if (elem.isF16()) return DType::f16;
  if (elem.isSignlessInteger(1)) return DType::boolean;
  if (elem.isSignlessInteger(32)) return DType::i32;
  if (elem.isSignlessInteger(64)) return DType::i64;
  return std::nullopt;
}

}  // namespace

absl::StatusOr<TensorType> tensor_type(mlir::Type type, mlir::Location loc,
                                       const std::string& what) {
  auto t = mlir::dyn_cast<mlir::RankedTensorType>(type);
  if (!t || !t.hasStaticShape())
    return located_error(loc, absl::StrCat(what, " has type ", print(type),
                                           ", which is not statically shaped; mstep imports "
                                           "static shapes only (lower the function with "
                                           "concrete shapes)"));
  std::optional<DType> dtype = dtype_of(t.getElementType());
  if (!dtype)
    return located_error(loc, absl::StrCat(what, " has element type ", print(t.getElementType()),
                                           ", which mstep has no dtype for (f32, f64, bf16, f16, "
                                           "i32, i64, i1)"));
  return TensorType{Shape(t.getShape()), *dtype};
}

}  // namespace mstep::stablehlo
