// `mstep` MLIR function -> TraceGraph: the inverse of the importer. The ref
// backend compiles a module by exporting it and running the nodes with its
// kernels; a fusion region exports to a `fusion` node whose body is the
// region's own TraceGraph.
#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "lib/ir/import/CustomOpAttrs.h"
#include "lib/ir/import/OpMapping.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mstep/core/Error.h"
#include "mstep/ir/MlirImport.h"
#include "mstep/ir/dialect/MstepOps.h"
#include "mstep/runtime/CustomOp.h"

namespace mstep {

absl::StatusOr<DType> to_dtype(mlir::Type t) {
  if (t.isF32()) return DType::f32;
  if (t.isF64()) return DType::f64;
  if (t.isBF16()) return DType::bf16;
  if (t.isF16()) return DType::f16;
  if (t.isInteger(32)) return DType::i32;
  if (t.isInteger(64)) return DType::i64;
  if (t.isInteger(1)) return DType::boolean;
  std::string s;
  llvm::raw_string_ostream(s) << t;
  return absl::InvalidArgumentError(absl::StrCat("element type ", s, " has no mstep dtype"));
}

absl::StatusOr<TensorType> to_tensor_type(mlir::Type t) { return tensor_type_from_mlir(t); }

namespace {

using ir_mapping::AttrEncoding;

std::string describe(mlir::Operation* op) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "'" << op->getName() << "' at " << op->getLoc();
  return s;
}

/// The trace form of one MLIR attribute value.
absl::StatusOr<AttrValue> convert_attr(mlir::Attribute a) {
  using namespace mstep::dialect;
  if (auto b = llvm::dyn_cast<mlir::BoolAttr>(a)) return AttrValue(int64_t{b.getValue()});
  if (auto i = llvm::dyn_cast<mlir::IntegerAttr>(a)) return AttrValue(i.getInt());
  if (auto f = llvm::dyn_cast<mlir::FloatAttr>(a)) return AttrValue(f.getValueAsDouble());
  if (auto l = llvm::dyn_cast<mlir::DenseI64ArrayAttr>(a))
    return AttrValue(IntList(l.asArrayRef().begin(), l.asArrayRef().end()));
  if (auto e = llvm::dyn_cast<GeluApproximationAttr>(a))
    return AttrValue(static_cast<int64_t>(e.getValue()));
  if (auto e = llvm::dyn_cast<LossReductionAttr>(a)) return AttrValue(static_cast<int64_t>(e.getValue()));
  if (auto e = llvm::dyn_cast<PaddingSideAttr>(a)) return AttrValue(static_cast<int64_t>(e.getValue()));
  if (auto e = llvm::dyn_cast<SoftmaxModeAttr>(a)) return AttrValue(static_cast<int64_t>(e.getValue()));
  if (auto e = llvm::dyn_cast<OptimizerKindAttr>(a)) return AttrValue(static_cast<int64_t>(e.getValue()));
  if (auto e = llvm::dyn_cast<ReduceOpAttr>(a)) return AttrValue(static_cast<int64_t>(e.getValue()));
  return absl::InvalidArgumentError("unsupported attribute kind");
}

/// The value of one `user_attrs` entry of an mstep.custom, or null when
/// its kind is none the schema has.
std::optional<CustomAttrValue> custom_value(mlir::Attribute v) {
  if (auto flag = llvm::dyn_cast<mlir::BoolAttr>(v)) return CustomAttrValue(flag.getValue());
  if (auto i = llvm::dyn_cast<mlir::IntegerAttr>(v)) return CustomAttrValue(i.getInt());
  if (auto f = llvm::dyn_cast<mlir::FloatAttr>(v)) return CustomAttrValue(f.getValueAsDouble());
  if (auto l = llvm::dyn_cast<mlir::DenseI64ArrayAttr>(v))
    return CustomAttrValue(IntList(l.asArrayRef().begin(), l.asArrayRef().end()));
  if (auto str = llvm::dyn_cast<mlir::StringAttr>(v)) return CustomAttrValue(str.getValue().str());
  if (auto t = llvm::dyn_cast<mlir::TypeAttr>(v)) {
    auto dtype = to_dtype(t.getValue());
    if (dtype.ok()) return CustomAttrValue(*dtype);
  }
  return std::nullopt;
}

}  // namespace

int64_t custom_op_version(dialect::CustomOp op) {
  auto v = op->getAttrOfType<mlir::IntegerAttr>("version");
  return v ? v.getInt() : 1;
}

absl::Status append_custom_attrs(dialect::CustomOp op, const CustomOp& custom, AttrList& attrs) {
  mlir::DictionaryAttr given = op.getUserAttrs();
  for (mlir::NamedAttribute a : given)
    if (std::none_of(custom.schema.attrs.begin(), custom.schema.attrs.end(),
                     [&](const CustomAttrSpec& s) { return s.name == a.getName().strref(); }))
      return absl::InvalidArgumentError(absl::StrCat("custom op '", custom.label(),
                                                     "' has no attribute '",
                                                     a.getName().strref().str(), "'"));
  for (const CustomAttrSpec& spec : custom.schema.attrs) {
    mlir::Attribute v = given.get(spec.name);
    std::optional<CustomAttrValue> value;
    if (v) {
      value = custom_value(v);
      if (!value)
        return absl::InvalidArgumentError(absl::StrCat("custom op '", custom.label(),
                                                       "': attribute '", spec.name,
                                                       "' has no trace form"));
    } else if (spec.default_value) {
      value = spec.default_value;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("custom op '", custom.label(), "' needs attribute '", spec.name, "'"));
    }
    absl::StatusOr<AttrValue> stored = encode_custom_attr(spec, *value);
    if (!stored.ok())
      return absl::InvalidArgumentError(
          absl::StrCat("custom op '", custom.label(), "': ", stored.status().message()));
    attrs.push_back({AttrName::custom_attr, *std::move(stored)});
  }
  return absl::OkStatus();
}

namespace {

/// The trace attributes of an mstep.custom: the id of the registered op its
/// `op_name` and `version` (1 when absent) name, then its `user_attrs`
/// (append_custom_attrs).
absl::Status export_custom_attrs(dialect::CustomOp op, GraphNode& n) {
  const std::string where = describe(op.getOperation());
  const int64_t version = custom_op_version(op);
  auto found = CustomOpRegistry::global().find(op.getOpName().str(), version);
  if (!found.ok())
    return absl::FailedPreconditionError(absl::StrCat(
        where, ": ", found.status().message(),
        " (register custom ops before compiling or loading a module that calls them)"));
  n.attrs.push_back({AttrName::custom_op, static_cast<int64_t>((*found)->id)});
  absl::Status appended = append_custom_attrs(op, **found, n.attrs);
  if (!appended.ok())
    return absl::Status(appended.code(), absl::StrCat(where, ": ", appended.message()));
  return absl::OkStatus();
}

/// Trace attributes the dialect implies: result types and the presence of
/// optional operands and results.
void add_implied_attrs(mlir::Operation* op, OpKind kind, GraphNode& n) {
  auto set = [&](AttrName name, AttrValue v) { n.attrs.push_back({name, std::move(v)}); };
  auto segment = [&](llvm::StringRef attr, unsigned i) -> int64_t {
    auto sizes = op->getAttrOfType<mlir::DenseI32ArrayAttr>(attr);
    return sizes ? sizes[i] : 0;
  };
  switch (kind) {
    case OpKind::full:
    case OpKind::rand:
    case OpKind::randn:
    case OpKind::reshape:
    case OpKind::expand:
    case OpKind::conv2d_input_grad:
    case OpKind::conv2d_weight_grad:
    case OpKind::avg_pool2d_grad: {
      const Shape& s = n.results[0].shape;
      set(AttrName::shape, IntList(s.dims().begin(), s.dims().end()));
      break;
    }
    case OpKind::cast: set(AttrName::dtype, n.results[0].dtype); break;
    case OpKind::layer_norm:
      set(AttrName::has_weight, segment("operandSegmentSizes", 1));
      set(AttrName::has_bias, segment("operandSegmentSizes", 2));
      break;
    case OpKind::rms_norm: set(AttrName::has_weight, int64_t{op->getNumOperands() > 1}); break;
    case OpKind::conv2d: set(AttrName::has_bias, int64_t{op->getNumOperands() > 2}); break;
    case OpKind::sdpa:
    case OpKind::sdpa_grad: {
      const unsigned first_optional = kind == OpKind::sdpa ? 3 : 4;
      set(AttrName::has_mask, segment("operandSegmentSizes", first_optional));
      set(AttrName::has_valid_len, segment("operandSegmentSizes", first_optional + 1));
      if (!op->hasAttr("rng_offset")) set(AttrName::offset, int64_t{-1});
      if (kind == OpKind::sdpa_grad) {
        set(AttrName::return_probs, int64_t{0});
        set(AttrName::return_mask, int64_t{op->getNumResults() > 3});
      }
      // Defaulted attributes are absent from the dictionary.
      auto defaulted = [&](AttrName name, int64_t v) {
        for (const Attr& a : n.attrs)
          if (a.name == name) return;
        set(name, v);
      };
      defaulted(AttrName::is_causal, 0);
      defaulted(AttrName::recompute, 1);
      defaulted(AttrName::padding_side, 0);
      if (kind == OpKind::sdpa) {
        defaulted(AttrName::return_probs, 0);
        defaulted(AttrName::return_mask, 0);
      }
      bool has_dropout = false;
      for (const Attr& a : n.attrs) has_dropout |= a.name == AttrName::dropout_p;
      if (!has_dropout) set(AttrName::dropout_p, 0.0);
      break;
    }
    case OpKind::multi_tensor_update: {
      // The segment sizes say which operands and results are present.
      auto sizes = [&](llvm::StringRef attr) {
        IntList list;
        if (auto a = op->getAttrOfType<mlir::DenseI32ArrayAttr>(attr))
          for (int32_t size : a.asArrayRef()) list.push_back(size);
        return list;
      };
      set(AttrName::operand_segments, sizes("operandSegmentSizes"));
      set(AttrName::result_segments, sizes("resultSegmentSizes"));
      // Defaulted attributes are absent from the dictionary.
      auto defaulted = [&](AttrName name, AttrValue v) {
        for (const Attr& a : n.attrs)
          if (a.name == name) return;
        set(name, std::move(v));
      };
      defaulted(AttrName::nesterov, int64_t{0});
      defaulted(AttrName::amsgrad, int64_t{0});
      defaulted(AttrName::maximize, int64_t{0});
      defaulted(AttrName::grad_norm_type, 2.0);
      break;
    }
    default: break;
  }
}

/// Exports the ops of `block` (a function body or a fusion region) into
/// `g`; `args` are the block's arguments' values in `g`.
absl::Status export_block(mlir::Block& block, TraceGraph& g,
                          llvm::DenseMap<mlir::Value, ValueRef>& value_of);

absl::StatusOr<std::shared_ptr<const TraceGraph>> export_region(mlir::Region& region) {
  auto body = std::make_shared<TraceGraph>();
  llvm::DenseMap<mlir::Value, ValueRef> value_of;
  mlir::Block& block = region.front();
  for (mlir::BlockArgument arg : block.getArguments()) {
    auto type = to_tensor_type(arg.getType());
    if (!type.ok()) return type.status();
    GraphNode p;
    p.op = OpKind::parameter;
    p.attrs.push_back({AttrName::index, static_cast<int64_t>(arg.getArgNumber())});
    p.results.push_back(*type);
    value_of[arg] = {static_cast<uint32_t>(body->nodes.size()), 0};
    body->nodes.push_back(std::move(p));
    body->input_types.push_back(*type);
  }
  absl::Status s = export_block(block, *body, value_of);
  if (!s.ok()) return s;
  return std::shared_ptr<const TraceGraph>(std::move(body));
}

absl::Status export_block(mlir::Block& block, TraceGraph& g,
                          llvm::DenseMap<mlir::Value, ValueRef>& value_of) {
  for (mlir::Operation& op : block) {
    if (op.hasTrait<mlir::OpTrait::IsTerminator>()) {
      for (mlir::Value v : op.getOperands()) g.outputs.push_back(value_of.at(v));
      continue;
    }
    std::optional<OpKind> kind = ir_mapping::trace_op(op.getName().getStringRef());
    if (!kind)
      return absl::UnimplementedError(
          absl::StrCat("op ", describe(&op), " has no trace-graph form; the ref backend runs "
                                             "only mstep ops (lower nothing past the mstep dialect)"));
    GraphNode n;
    n.op = *kind;
    for (mlir::Value v : op.getOperands()) n.operands.push_back(value_of.at(v));
    for (mlir::Type t : op.getResultTypes()) {
      auto type = to_tensor_type(t);
      if (!type.ok()) return type.status();
      n.results.push_back(*type);
    }
    for (mlir::NamedAttribute a : op.getAttrDictionary()) {
      std::optional<AttrName> name = ir_mapping::trace_attr(*kind, a.getName().strref());
      if (!name) continue;  // segment sizes, discardable mstep.* attributes
      // The trace form has only exact softmax; the dialect defaults to it.
      if (*name == AttrName::softmax_mode &&
          llvm::cast<dialect::SoftmaxModeAttr>(a.getValue()).getValue() == dialect::SoftmaxMode::none)
        continue;
      auto value = convert_attr(a.getValue());
      if (!value.ok())
        return absl::InvalidArgumentError(absl::StrCat(
            "attribute '", a.getName().strref().str(), "' of ", describe(&op), ": ",
            value.status().message()));
      n.attrs.push_back({*name, std::move(*value)});
    }
    add_implied_attrs(&op, *kind, n);
    if (auto custom = llvm::dyn_cast<dialect::CustomOp>(&op))
      MSTEP_RETURN_IF_ERROR(export_custom_attrs(custom, n));
    if (*kind == OpKind::fusion) {
      auto body = export_region(op.getRegion(0));
      if (!body.ok()) return body.status();
      n.body = std::move(*body);
    }
    const auto index = static_cast<uint32_t>(g.nodes.size());
    for (unsigned r = 0; r < op.getNumResults(); ++r) value_of[op.getResult(r)] = {index, r};
    g.nodes.push_back(std::move(n));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TensorType> tensor_type_from_mlir(mlir::Type t) {
  auto ranked = llvm::dyn_cast<mlir::RankedTensorType>(t);
  if (!ranked || !ranked.hasStaticShape()) {
    std::string s;
    llvm::raw_string_ostream(s) << t;
    return absl::InvalidArgumentError(absl::StrCat("type ", s, " is not a static tensor"));
  }
  auto dtype = to_dtype(ranked.getElementType());
  if (!dtype.ok()) return dtype.status();
  return TensorType{Shape(ranked.getShape()), *dtype};
}


absl::StatusOr<TraceGraph> export_trace_graph(mlir::func::FuncOp func) {
  TraceGraph g;
  llvm::DenseMap<mlir::Value, ValueRef> value_of;
  if (func.getBody().empty())
    return absl::InvalidArgumentError(absl::StrCat("function @", func.getName().str(),
                                                   " has no body"));
  mlir::Block& block = func.getBody().front();
  for (mlir::BlockArgument arg : block.getArguments()) {
    const unsigned i = arg.getArgNumber();
    auto type = to_tensor_type(arg.getType());
    if (!type.ok()) return type.status();
    GraphNode p;
    p.op = OpKind::parameter;
    p.attrs.push_back({AttrName::index, static_cast<int64_t>(i)});
    p.results.push_back(*type);
    value_of[arg] = {static_cast<uint32_t>(g.nodes.size()), 0};
    g.nodes.push_back(std::move(p));
    g.input_types.push_back(*type);
    InputRole role = InputRole::input;
    if (auto r = func.getArgAttrOfType<mlir::StringAttr>(i, "mstep.role"))
      for (InputRole candidate : {InputRole::input, InputRole::parameter,
                                  InputRole::optimizer_state, InputRole::rng_state,
                                  InputRole::device_scalar})
        if (r.getValue().str() == input_role_name(candidate)) role = candidate;
    g.input_roles.push_back(role);
    auto alias = func.getArgAttrOfType<mlir::IntegerAttr>(i, "mstep.aliased_result");
    g.donated_to.push_back(alias ? static_cast<int32_t>(alias.getInt()) : -1);
  }
  absl::Status s = export_block(block, g, value_of);
  if (!s.ok()) return s;
  return g;
}

}  // namespace mstep
