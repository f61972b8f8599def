// The expansion of mstep.custom calls into their scalar forms (see
// CustomScalarForms.h).
#include "lib/passes/CustomScalarForms.h"

#include <optional>
#include <variant>
#include <vector>

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/STLExtras.h"

namespace mstep::passes {

std::shared_ptr<const CustomOp> findRegisteredCustomOp(dialect::CustomOp call) {
  int64_t version = 1;
  if (auto v = call->getAttrOfType<mlir::IntegerAttr>("version")) version = v.getInt();
  auto found = CustomOpRegistry::global().find(call.getOpName().str(), version);
  return found.ok() ? *std::move(found) : nullptr;
}

namespace {

/// The value of the call's attribute `name` as a number: its `user_attrs`
/// entry, else the schema's default; none for another kind.
std::optional<double> attrValue(dialect::CustomOp call, const CustomOpSchema& schema,
                                llvm::StringRef name) {
  if (mlir::Attribute a = call.getUserAttrs().get(name)) {
    if (auto flag = llvm::dyn_cast<mlir::BoolAttr>(a)) return flag.getValue() ? 1.0 : 0.0;
    if (auto i = llvm::dyn_cast<mlir::IntegerAttr>(a)) return static_cast<double>(i.getInt());
    if (auto f = llvm::dyn_cast<mlir::FloatAttr>(a)) return f.getValueAsDouble();
    return std::nullopt;
  }
  for (const CustomAttrSpec& spec : schema.attrs) {
    if (spec.name != name || !spec.default_value) continue;
    const CustomAttrValue& v = *spec.default_value;
    if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
    if (const auto* d = std::get_if<double>(&v)) return *d;
    if (const auto* b = std::get_if<bool>(&v)) return *b ? 1.0 : 0.0;
  }
  return std::nullopt;
}

/// The one ranked tensor type of a floating element type that every input
/// and result of `call` has, or null.
mlir::RankedTensorType commonFloatType(dialect::CustomOp call) {
  mlir::RankedTensorType common;
  auto same = [&](mlir::Type t) {
    auto ranked = llvm::dyn_cast<mlir::RankedTensorType>(t);
    if (!ranked || !llvm::isa<mlir::FloatType>(ranked.getElementType())) return false;
    if (!common) common = ranked;
    return ranked == common;
  };
  if (!llvm::all_of(call->getOperandTypes(), same) || !llvm::all_of(call->getResultTypes(), same))
    return nullptr;
  return common;
}

/// Builds the form's ops before `call`; returns one value per output, or
/// none (having built nothing) when an attribute the form reads has no
/// numeric value.
std::optional<llvm::SmallVector<mlir::Value>> buildForm(dialect::CustomOp call,
                                                        const CustomOpSchema& schema,
                                                        mlir::RankedTensorType type) {
  const CustomScalarForm& form = *schema.scalar_form;
  for (const ScalarNode& n : form.nodes)
    if (n.op == ScalarOp::attr && !attrValue(call, schema, n.attr)) return std::nullopt;
  mlir::OpBuilder b(call);
  mlir::Location loc = call.getLoc();
  mlir::Type element = type.getElementType();
  auto typeOf = [&](bool full, bool predicate) -> mlir::Type {
    mlir::Type e = predicate ? b.getI1Type() : element;
    return full ? mlir::Type(type.clone(e)) : mlir::Type(mlir::RankedTensorType::get({}, e));
  };
  struct Built {
    mlir::Value value;
    bool full = false;  // the call's shape (else 0-d)
  };
  std::vector<Built> values(form.nodes.size());
  auto constant = [&](double v) -> Built {
    return {b.create<dialect::ConstantOp>(loc, typeOf(false, false), b.getF64FloatAttr(v)), false};
  };
  for (size_t i = 0; i < form.nodes.size(); ++i) {
    const ScalarNode& n = form.nodes[i];
    switch (n.op) {
      case ScalarOp::input: values[i] = {call.getInputs()[n.input], true}; continue;
      case ScalarOp::constant: values[i] = constant(n.value); continue;
      case ScalarOp::attr: values[i] = constant(*attrValue(call, schema, n.attr)); continue;
      default: break;
    }
    llvm::SmallVector<mlir::Value, 3> operands;
    bool full = false;
    for (int32_t arg : n.args) {
      if (arg < 0) continue;
      operands.push_back(values[arg].value);
      full = full || values[arg].full;
    }
    mlir::OperationState state(loc, "mstep." + std::string(scalar_op_name(n.op)));
    state.addOperands(operands);
    state.addTypes(typeOf(full, n.predicate));
    values[i] = {b.create(state)->getResult(0), full};
  }
  llvm::SmallVector<mlir::Value> outputs;
  for (int32_t o : form.outputs) {
    const Built& out = values[o];
    outputs.push_back(out.full ? out.value
                               : b.create<dialect::FullOp>(loc, type, out.value).getResult());
  }
  return outputs;
}

}  // namespace

unsigned expandCustomScalarForms(mlir::Block& block) {
  unsigned expanded = 0;
  for (mlir::Operation& op : llvm::make_early_inc_range(block)) {
    auto call = llvm::dyn_cast<dialect::CustomOp>(op);
    if (!call) continue;
    std::shared_ptr<const CustomOp> registered = findRegisteredCustomOp(call);
    if (!registered || !registered->schema.scalar_form) continue;
    mlir::RankedTensorType type = commonFloatType(call);
    if (!type || call.getInputs().size() != registered->schema.inputs.size() ||
        call->getNumResults() != registered->schema.scalar_form->outputs.size())
      continue;
    std::optional<llvm::SmallVector<mlir::Value>> outputs =
        buildForm(call, registered->schema, type);
    if (!outputs) continue;
    call->replaceAllUsesWith(*outputs);
    call->erase();
    ++expanded;
  }
  return expanded;
}

}  // namespace mstep::passes
