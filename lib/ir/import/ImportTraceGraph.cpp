// TraceGraph -> `mstep` MLIR module. One function, one op per node, in the
// graph's (topological) order. Ops are built generically from the spelling
// table (OpMapping.h); the dialect's verifiers then check every op, so a
// mapping mistake is caught here, not in a backend.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "lib/ir/import/OpMapping.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Verifier.h"
#include "mstep/core/Error.h"
#include "mstep/ir/MlirImport.h"
#include "mstep/ir/MlirParse.h"
#include "mstep/ir/dialect/MstepDialect.h"
#include "mstep/runtime/CustomOp.h"

namespace mstep {

namespace {

using ir_mapping::AttrEncoding;

mlir::Type element_type(mlir::MLIRContext& ctx, DType dtype) {
  mlir::Builder b(&ctx);
  switch (dtype) {
    case DType::f32: return b.getF32Type();
    case DType::f64: return b.getF64Type();
    case DType::bf16: return b.getBF16Type();
    case DType::f16: return b.getF16Type();
    case DType::i32: return b.getI32Type();
    case DType::i64: return b.getI64Type();
    case DType::boolean: return b.getI1Type();
  }
  return {};
}

mlir::RankedTensorType tensor_type(mlir::MLIRContext& ctx, const TensorType& t) {
  return mlir::RankedTensorType::get(llvm::ArrayRef<int64_t>(t.shape.dims().data(), t.shape.rank()),
                                     element_type(ctx, t.dtype));
}

/// The MLIR form of one trace attribute, or null when it has none.
absl::StatusOr<mlir::Attribute> convert_attr(mlir::Builder& b, OpKind op, const Attr& a) {
  using namespace mstep::dialect;
  const AttrEncoding encoding = ir_mapping::mlir_attr(op, a.name).encoding;
  if (encoding == AttrEncoding::implied) return mlir::Attribute();
  if (const auto* d = std::get_if<double>(&a.value)) return mlir::Attribute(b.getF64FloatAttr(*d));
  if (const auto* l = std::get_if<IntList>(&a.value))
    return mlir::Attribute(b.getDenseI64ArrayAttr(llvm::ArrayRef<int64_t>(l->data(), l->size())));
  if (!std::holds_alternative<int64_t>(a.value))
    return absl::InternalError(absl::StrCat("attribute '", attr_name(a.name), "' of ",
                                            op_name(op), " has no MLIR form"));
  const int64_t v = std::get<int64_t>(a.value);
  auto bad_code = [&] {
    return absl::InternalError(absl::StrCat("attribute '", attr_name(a.name), "' of ",
                                            op_name(op), " has no mode ", v));
  };
  mlir::MLIRContext* ctx = b.getContext();
  switch (encoding) {
    case AttrEncoding::boolean: return mlir::Attribute(b.getBoolAttr(v != 0));
    case AttrEncoding::gelu_approximation:
      if (auto e = symbolizeGeluApproximation(v)) return mlir::Attribute(GeluApproximationAttr::get(ctx, *e));
      return bad_code();
    case AttrEncoding::loss_reduction:
      if (auto e = symbolizeLossReduction(v)) return mlir::Attribute(LossReductionAttr::get(ctx, *e));
      return bad_code();
    case AttrEncoding::padding_side:
      if (auto e = symbolizePaddingSide(v)) return mlir::Attribute(PaddingSideAttr::get(ctx, *e));
      return bad_code();
    case AttrEncoding::softmax_mode:
      if (auto e = symbolizeSoftmaxMode(v)) return mlir::Attribute(SoftmaxModeAttr::get(ctx, *e));
      return bad_code();
    case AttrEncoding::optimizer_kind:
      if (auto e = symbolizeOptimizerKind(v)) return mlir::Attribute(OptimizerKindAttr::get(ctx, *e));
      return bad_code();
    case AttrEncoding::reduce_op:
      if (auto e = symbolizeReduceOp(v)) return mlir::Attribute(ReduceOpAttr::get(ctx, *e));
      return bad_code();
    default: return mlir::Attribute(b.getI64IntegerAttr(v));
  }
}

/// operandSegmentSizes / resultSegmentSizes of the ops whose optional
/// operands or results are not all at the end.
void add_segment_sizes(mlir::Builder& b, const GraphNode& n, mlir::OperationState& state) {
  auto flag = [&](AttrName name) { return attr_int_or(n.attrs, name, 0) != 0 ? 1 : 0; };
  switch (n.op) {
    case OpKind::layer_norm:
      state.addAttribute("operandSegmentSizes",
                         b.getDenseI32ArrayAttr({1, flag(AttrName::has_weight), flag(AttrName::has_bias)}));
      break;
    case OpKind::sdpa:
    case OpKind::sdpa_grad: {
      const int rng = attr_int(n.attrs, AttrName::offset) >= 0 ? 1 : 0;
      const int saved = n.op == OpKind::sdpa && flag(AttrName::recompute) == 0 ? 1 : 0;
      if (n.op == OpKind::sdpa) {
        state.addAttribute("operandSegmentSizes",
                           b.getDenseI32ArrayAttr({1, 1, 1, flag(AttrName::has_mask),
                                                   flag(AttrName::has_valid_len), rng}));
        state.addAttribute("resultSegmentSizes",
                           b.getDenseI32ArrayAttr({1, flag(AttrName::return_probs),
                                                   flag(AttrName::return_mask), saved}));
      } else {
        state.addAttribute("operandSegmentSizes",
                           b.getDenseI32ArrayAttr({1, 1, 1, 1, flag(AttrName::has_mask),
                                                   flag(AttrName::has_valid_len), rng,
                                                   flag(AttrName::recompute) == 0 ? 1 : 0}));
      }
      break;
    }
    default: break;
  }
}

/// The value a `constant` node holds once stored in its dtype: the trace
/// keeps the user's double and converts when the kernel stores it (1.7 in
/// an i32 is 1, any nonzero in a bool is true); the dialect wants the
/// stored value.
double stored_constant(double value, DType dtype) {
  if (dtype == DType::boolean) return value != 0 ? 1.0 : 0.0;
  if (is_integral(dtype) && std::isfinite(value)) return std::trunc(value);
  return value;
}

/// `op_name`, `user_attrs` and (past version 1) `version` of an
/// mstep.custom from the node's id (looked up in the custom-op registry)
/// and its attribute values, typed by the op's schema.
absl::Status add_custom_attrs(mlir::Builder& b, const GraphNode& n, mlir::OperationState& state) {
  MSTEP_ASSIGN_OR_RETURN(std::shared_ptr<const CustomOp> op,
                         CustomOpRegistry::global().find(static_cast<uint64_t>(
                             attr_int(n.attrs, AttrName::custom_op))));
  absl::Span<const Attr> values = custom_attr_values(n.attrs);
  const std::vector<CustomAttrSpec>& specs = op->schema.attrs;
  if (values.size() != specs.size())
    return absl::InternalError(absl::StrCat("custom op '", op->label(), "' node has ",
                                            values.size(), " attributes, the op declares ",
                                            specs.size()));
  llvm::SmallVector<mlir::NamedAttribute> attrs;
  for (size_t i = 0; i < values.size(); ++i) {
    MSTEP_ASSIGN_OR_RETURN(CustomAttrValue value, decode_custom_attr(specs[i], values[i].value));
    mlir::Attribute v;
    if (const auto* x = std::get_if<int64_t>(&value)) {
      v = b.getI64IntegerAttr(*x);
    } else if (const auto* d = std::get_if<double>(&value)) {
      v = b.getF64FloatAttr(*d);
    } else if (const auto* flag = std::get_if<bool>(&value)) {
      v = b.getBoolAttr(*flag);
    } else if (const auto* l = std::get_if<IntList>(&value)) {
      v = b.getDenseI64ArrayAttr(llvm::ArrayRef<int64_t>(l->data(), l->size()));
    } else if (const auto* str = std::get_if<std::string>(&value)) {
      v = b.getStringAttr(*str);
    } else {
      v = mlir::TypeAttr::get(element_type(*b.getContext(), std::get<DType>(value)));
    }
    attrs.push_back(b.getNamedAttr(specs[i].name, v));
  }
  state.addAttribute("op_name", b.getStringAttr(op->name));
  if (op->version != 1) state.addAttribute("version", b.getI64IntegerAttr(op->version));
  state.addAttribute("user_attrs", b.getDictionaryAttr(attrs));
  return absl::OkStatus();
}

/// Attributes the trace form stores but the dialect leaves out when they
/// hold their "absent" value.
bool skip_attr(OpKind op, const Attr& a) {
  // No dropout: sdpa has no rng_offset (the trace stores -1).
  if (a.name == AttrName::offset && (op == OpKind::sdpa || op == OpKind::sdpa_grad))
    return std::get<int64_t>(a.value) < 0;
  // The backward's results say whether a mask gradient is returned; it
  // never returns probabilities.
  if (op == OpKind::sdpa_grad && (a.name == AttrName::return_probs || a.name == AttrName::return_mask))
    return true;
  return false;
}

}  // namespace

void register_mstep_dialects(mlir::MLIRContext& context) {
  context.loadDialect<dialect::MstepDialect, mlir::func::FuncDialect, mlir::arith::ArithDialect,
                      mlir::math::MathDialect, mlir::tensor::TensorDialect,
                      mlir::linalg::LinalgDialect>();
}

absl::StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> import_trace_graph(const TraceGraph& graph,
                                                                     mlir::MLIRContext& context,
                                                                     llvm::StringRef name) {
  context.loadDialect<dialect::MstepDialect, mlir::func::FuncDialect>();
  mlir::OpBuilder b(&context);
  mlir::Location loc = b.getUnknownLoc();
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::ModuleOp::create(loc);

  // 1. The function: one argument per input, one result per output.
  llvm::SmallVector<mlir::Type> arg_types, result_types;
  for (const TensorType& t : graph.input_types) arg_types.push_back(tensor_type(context, t));
  for (ValueRef v : graph.outputs) result_types.push_back(tensor_type(context, graph.type_of(v)));
  b.setInsertionPointToEnd(module->getBody());
  auto func = b.create<mlir::func::FuncOp>(loc, name, b.getFunctionType(arg_types, result_types));
  for (size_t i = 0; i < graph.input_types.size(); ++i) {
    const InputRole role = i < graph.input_roles.size() ? graph.input_roles[i] : InputRole::input;
    func.setArgAttr(i, "mstep.role", b.getStringAttr(std::string(input_role_name(role))));
    if (i < graph.donated_to.size() && graph.donated_to[i] >= 0)
      func.setArgAttr(i, "mstep.aliased_result", b.getI64IntegerAttr(graph.donated_to[i]));
  }
  mlir::Block* body = func.addEntryBlock();
  b.setInsertionPointToEnd(body);

  // 2. One op per node.
  std::vector<llvm::SmallVector<mlir::Value, 1>> values(graph.nodes.size());
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const GraphNode& n = graph.nodes[i];
    if (n.op == OpKind::parameter) {
      values[i].push_back(body->getArgument(attr_int(n.attrs, AttrName::index)));
      continue;
    }
    if (op_family(n.op) == OpFamily::fused || n.op == OpKind::data)
      return absl::InternalError(absl::StrCat("cannot import ", op_name(n.op), " %", i,
                                              ": it is not a traced op"));
    mlir::OperationState state(mlir::NameLoc::get(b.getStringAttr(absl::StrCat("%", i))),
                               ir_mapping::mlir_op_name(n.op));
    for (ValueRef v : n.operands) state.addOperands(values[v.node][v.index]);
    for (const TensorType& t : n.results) state.addTypes(tensor_type(context, t));
    if (n.op == OpKind::custom) MSTEP_RETURN_IF_ERROR(add_custom_attrs(b, n, state));
    for (const Attr& a : n.attrs) {
      if (n.op == OpKind::custom || skip_attr(n.op, a)) continue;
      Attr stored = a;
      if (n.op == OpKind::constant && a.name == AttrName::value)
        stored.value = stored_constant(std::get<double>(a.value), n.results[0].dtype);
      auto attr = convert_attr(b, n.op, stored);
      if (!attr.ok()) return attr.status();
      if (*attr) state.addAttribute(ir_mapping::mlir_attr(n.op, a.name).name, *attr);
    }
    add_segment_sizes(b, n, state);
    mlir::Operation* op = b.create(state);
    values[i].assign(op->result_begin(), op->result_end());
  }
  llvm::SmallVector<mlir::Value> results;
  for (ValueRef v : graph.outputs) results.push_back(values[v.node][v.index]);
  b.create<mlir::func::ReturnOp>(loc, results);

  // 3. Verify, collecting the diagnostics into the error.
  DiagnosticCollector diagnostics(context);
  if (mlir::failed(mlir::verify(*module)))
    return absl::InternalError(
        absl::StrCat("the imported MLIR module does not verify:", diagnostics.text()));
  return module;
}

}  // namespace mstep
