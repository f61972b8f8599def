// The pretty syntax of the StableHLO ops the import reads (see
// StableHloSyntax.h). Each hook follows the op's printed form in StableHLO's
// own printers, as JAX prints it:
//   %0 = stablehlo.add %a, %b : tensor<2x3xf32>                (same types)
//   %1 = stablehlo.convert %a : (tensor<3xf32>) -> tensor<3xi32>
//   %2 = stablehlo.constant dense<1.0> : tensor<f32>
//   %3 = stablehlo.broadcast_in_dim %a, dims = [1] : (tensor<8xf32>) -> tensor<2x8xf32>
//   %4 = stablehlo.dot_general %a, %b, batching_dims = [0] x [0],
//            contracting_dims = [2] x [1], precision = [DEFAULT, DEFAULT] : (...) -> ...
//   %5 = stablehlo.reduce(%a init: %c) applies stablehlo.add across dimensions = [1] : ...
//        (or `across dimensions = [1] : ... reducer(%x: T, %y: T) { ... }`)
//   %6 = stablehlo.compare EQ, %a, %b, FLOAT : (...) -> ...
//   %7 = stablehlo.select %p, %a, %b : tensor<4xi1>, tensor<4xf32>
//   %8 = stablehlo.slice %a [0:2, 0:8:1] : (...) -> ...
//   %9 = stablehlo.iota dim = 0 : tensor<8xi32>
#include "lib/compiler/stablehlo/StableHloSyntax.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "llvm/ADT/StringSet.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"

namespace mstep::stablehlo {
class SyntaxDialect;
}
MLIR_DECLARE_EXPLICIT_TYPE_ID(mstep::stablehlo::SyntaxDialect)
MLIR_DEFINE_EXPLICIT_TYPE_ID(mstep::stablehlo::SyntaxDialect)

namespace mstep::stablehlo {

namespace {

using mlir::OpAsmParser;
using mlir::OperationState;
using mlir::ParseResult;
using Operands = llvm::SmallVector<OpAsmParser::UnresolvedOperand, 4>;

mlir::Attribute opaque(mlir::MLIRContext* ctx, const std::string& text) {
  return mlir::OpaqueAttr::get(mlir::StringAttr::get(ctx, "stablehlo"), text,
                               mlir::NoneType::get(ctx));
}

/// `[1, 2]` (possibly empty).
ParseResult parse_int_list(OpAsmParser& p, std::vector<int64_t>& out) {
  return p.parseCommaSeparatedList(OpAsmParser::Delimiter::Square, [&]() -> ParseResult {
    int64_t v;
    if (p.parseInteger(v)) return mlir::failure();
    out.push_back(v);
    return mlir::success();
  });
}

/// `: T` (every operand and the result of type T), `: (A, B) -> R`, or for
/// select `: P, T` (the predicate's type, then the values' and result's).
ParseResult parse_types(OpAsmParser& p, OperationState& st, const Operands& operands) {
  mlir::Type type;
  llvm::SMLoc loc = p.getCurrentLocation();
  if (p.parseOptionalAttrDict(st.attributes) || p.parseColon() || p.parseType(type))
    return mlir::failure();
  if (auto fn = mlir::dyn_cast<mlir::FunctionType>(type)) {
    st.addTypes(fn.getResults());
    return p.resolveOperands(operands, fn.getInputs(), loc, st.operands);
  }
  llvm::SmallVector<mlir::Type, 4> types(operands.size(), type);
  mlir::Type value;
  if (mlir::succeeded(p.parseOptionalComma())) {
    if (p.parseType(value)) return mlir::failure();
    for (size_t i = 1; i < types.size(); ++i) types[i] = value;
    type = value;
  }
  st.addTypes(type);
  return p.resolveOperands(operands, types, loc, st.operands);
}

/// `%a, %b, ...` then the types: elementwise ops, convert, reshape, select.
ParseResult parse_plain(OpAsmParser& p, OperationState& st) {
  Operands operands;
  if (p.parseOperandList(operands)) return mlir::failure();
  return parse_types(p, st, operands);
}

/// `%a, <keyword> = [...]` then the types, the list stored as `attr`.
ParseResult parse_with_dims(OpAsmParser& p, OperationState& st, llvm::StringRef keyword,
                            llvm::StringRef attr) {
  Operands operands(1);
  std::vector<int64_t> dims;
  if (p.parseOperand(operands[0]) || p.parseComma() || p.parseKeyword(keyword) ||
      p.parseEqual() || parse_int_list(p, dims))
    return mlir::failure();
  st.addAttribute(attr, mlir::DenseI64ArrayAttr::get(p.getContext(), dims));
  return parse_types(p, st, operands);
}

ParseResult parse_broadcast_in_dim(OpAsmParser& p, OperationState& st) {
  return parse_with_dims(p, st, "dims", "broadcast_dimensions");
}

ParseResult parse_transpose(OpAsmParser& p, OperationState& st) {
  return parse_with_dims(p, st, "dims", "permutation");
}

ParseResult parse_constant(OpAsmParser& p, OperationState& st) {
  mlir::Attribute value;
  if (p.parseOptionalAttrDict(st.attributes) || p.parseAttribute(value)) return mlir::failure();
  auto typed = mlir::dyn_cast<mlir::TypedAttr>(value);
  if (!typed) return p.emitError(p.getCurrentLocation(), "a constant needs a typed value");
  st.addAttribute("value", value);
  st.addTypes(typed.getType());
  return mlir::success();
}

ParseResult parse_iota(OpAsmParser& p, OperationState& st) {
  int64_t dim;
  mlir::Type type;
  if (p.parseKeyword("dim") || p.parseEqual() || p.parseInteger(dim) ||
      p.parseOptionalAttrDict(st.attributes) || p.parseColon() || p.parseType(type))
    return mlir::failure();
  st.addAttribute("iota_dimension", mlir::IntegerAttr::get(
                                        mlir::IntegerType::get(p.getContext(), 64), dim));
  st.addTypes(type);
  return mlir::success();
}

ParseResult parse_compare(OpAsmParser& p, OperationState& st) {
  llvm::StringRef direction, type;
  Operands operands(2);
  if (p.parseKeyword(&direction) || p.parseComma() || p.parseOperand(operands[0]) ||
      p.parseComma() || p.parseOperand(operands[1]))
    return mlir::failure();
  if (mlir::succeeded(p.parseOptionalComma()) && p.parseKeyword(&type)) return mlir::failure();
  mlir::MLIRContext* ctx = p.getContext();
  st.addAttribute("comparison_direction", opaque(ctx, "comparison_direction " + direction.str()));
  if (!type.empty()) st.addAttribute("compare_type", opaque(ctx, "comparison_type " + type.str()));
  return parse_types(p, st, operands);
}

/// `%a [0:2, 4:8:2]`.
ParseResult parse_slice(OpAsmParser& p, OperationState& st) {
  Operands operands(1);
  std::vector<int64_t> start, limit, strides;
  if (p.parseOperand(operands[0]) ||
      p.parseCommaSeparatedList(OpAsmParser::Delimiter::Square, [&]() -> ParseResult {
        int64_t lo, hi, step = 1;
        if (p.parseInteger(lo) || p.parseColon() || p.parseInteger(hi)) return mlir::failure();
        if (mlir::succeeded(p.parseOptionalColon()) && p.parseInteger(step)) return mlir::failure();
        start.push_back(lo), limit.push_back(hi), strides.push_back(step);
        return mlir::success();
      }))
    return mlir::failure();
  mlir::MLIRContext* ctx = p.getContext();
  st.addAttribute("start_indices", mlir::DenseI64ArrayAttr::get(ctx, start));
  st.addAttribute("limit_indices", mlir::DenseI64ArrayAttr::get(ctx, limit));
  st.addAttribute("strides", mlir::DenseI64ArrayAttr::get(ctx, strides));
  return parse_types(p, st, operands);
}

/// `%a, %b, dim = 0`.
ParseResult parse_concatenate(OpAsmParser& p, OperationState& st) {
  Operands operands(1);
  int64_t dim;
  if (p.parseOperand(operands[0])) return mlir::failure();
  while (true) {
    if (p.parseComma()) return mlir::failure();
    OpAsmParser::UnresolvedOperand next;
    mlir::OptionalParseResult got = p.parseOptionalOperand(next);
    if (!got.has_value()) break;
    if (mlir::failed(*got)) return mlir::failure();
    operands.push_back(next);
  }
  if (p.parseKeyword("dim") || p.parseEqual() || p.parseInteger(dim)) return mlir::failure();
  st.addAttribute("dimension",
                  mlir::IntegerAttr::get(mlir::IntegerType::get(p.getContext(), 64), dim));
  return parse_types(p, st, operands);
}

/// `%a, %b, batching_dims = [0] x [0], contracting_dims = [2] x [1],
/// precision = [DEFAULT, DEFAULT]`: the dimension numbers become the
/// generic form's `#stablehlo.dot<...>` text.
ParseResult parse_dot_general(OpAsmParser& p, OperationState& st) {
  Operands operands(2);
  if (p.parseOperand(operands[0]) || p.parseComma() || p.parseOperand(operands[1]))
    return mlir::failure();
  std::vector<std::string> fields;
  while (mlir::succeeded(p.parseOptionalComma())) {
    llvm::StringRef key;
    llvm::SMLoc loc = p.getCurrentLocation();
    if (p.parseKeyword(&key) || p.parseEqual()) return mlir::failure();
    if (key == "batching_dims" || key == "contracting_dims") {
      std::vector<int64_t> lhs, rhs;
      if (parse_int_list(p, lhs) || p.parseKeyword("x") || parse_int_list(p, rhs))
        return mlir::failure();
      const std::string kind = key == "batching_dims" ? "batching" : "contracting";
      fields.push_back(absl::StrCat("lhs_", kind, "_dimensions = [", absl::StrJoin(lhs, ", "), "]"));
      fields.push_back(absl::StrCat("rhs_", kind, "_dimensions = [", absl::StrJoin(rhs, ", "), "]"));
    } else if (key == "precision") {
      // Ignored, as in the generic form: mstep computes in the element type.
      if (p.parseCommaSeparatedList(OpAsmParser::Delimiter::Square,
                                    [&]() { return p.parseKeyword(&key); }))
        return mlir::failure();
    } else {
      return p.emitError(loc, "'stablehlo.dot_general': '" + key.str() +
                                  "' is not supported by mstep's StableHLO import");
    }
  }
  st.addAttribute("dot_dimension_numbers",
                  opaque(p.getContext(), "dot<" + absl::StrJoin(fields, ", ") + ">"));
  return parse_types(p, st, operands);
}

/// `(%a init: %c), ... applies stablehlo.add across dimensions = [1] : type`
/// or the same without `applies <op>` and with `reducer(%x: T, %y: T) {...}`
/// after the type.
ParseResult parse_reduce(OpAsmParser& p, OperationState& st) {
  Operands inputs, inits;
  if (p.parseCommaSeparatedList([&]() -> ParseResult {
        OpAsmParser::UnresolvedOperand input, init;
        if (p.parseLParen() || p.parseOperand(input) || p.parseKeyword("init") ||
            p.parseColon() || p.parseOperand(init) || p.parseRParen())
          return mlir::failure();
        inputs.push_back(input), inits.push_back(init);
        return mlir::success();
      }))
    return mlir::failure();
  llvm::StringRef applies;
  llvm::SMLoc applies_loc = p.getCurrentLocation();
  if (mlir::succeeded(p.parseOptionalKeyword("applies")) && p.parseKeyword(&applies))
    return mlir::failure();
  std::vector<int64_t> dims;
  if (p.parseKeyword("across") || p.parseKeyword("dimensions") || p.parseEqual() ||
      parse_int_list(p, dims))
    return mlir::failure();
  st.addAttribute("dimensions", mlir::DenseI64ArrayAttr::get(p.getContext(), dims));
  Operands operands = inputs;
  operands.append(inits.begin(), inits.end());
  if (parse_types(p, st, operands)) return mlir::failure();
  mlir::Region* body = st.addRegion();
  if (applies.empty()) {
    llvm::SmallVector<OpAsmParser::Argument, 4> args;
    if (p.parseKeyword("reducer") ||
        p.parseArgumentList(args, OpAsmParser::Delimiter::Paren, /*allowType=*/true) ||
        p.parseRegion(*body, args))
      return mlir::failure();
    return mlir::success();
  }
  // The compact form: one op applied to (accumulator, element) per operand.
  if (inputs.size() != 1)
    return p.emitError(applies_loc, "'stablehlo.reduce': the compact form with several "
                                    "operands is not supported by mstep's StableHLO import");
  mlir::Type scalar = st.operands[1].getType();
  mlir::Location loc = p.getEncodedSourceLoc(applies_loc);
  auto* block = new mlir::Block();
  body->push_back(block);
  block->addArgument(scalar, loc);
  block->addArgument(scalar, loc);
  mlir::OpBuilder b(p.getContext());
  b.setInsertionPointToEnd(block);
  OperationState apply(loc, applies);
  apply.addOperands({block->getArgument(0), block->getArgument(1)});
  apply.addTypes(scalar);
  mlir::Operation* op = b.create(apply);
  OperationState ret(loc, "stablehlo.return");
  ret.addOperands(op->getResult(0));
  b.create(ret);
  return mlir::success();
}

/// `stablehlo.return %a, %b : T, U`.
ParseResult parse_return(OpAsmParser& p, OperationState& st) {
  Operands operands;
  llvm::SmallVector<mlir::Type, 4> types;
  llvm::SMLoc loc = p.getCurrentLocation();
  if (p.parseOperandList(operands) || p.parseOptionalAttrDict(st.attributes) ||
      p.parseColonTypeList(types))
    return mlir::failure();
  return p.resolveOperands(operands, types, loc, st.operands);
}

/// Ops with no hook: an error at the op naming it, custom_call with its
/// target. (MLIR prefixes "custom op '<name>'" to the message.)
ParseResult parse_unsupported(OpAsmParser& p, OperationState& st) {
  std::string target;
  mlir::StringAttr symbol;
  if (st.name.getStringRef() == "stablehlo.custom_call" &&
      mlir::succeeded(p.parseOptionalSymbolName(symbol)))
    target = " calling '" + symbol.getValue().str() + "'";
  return p.emitError(p.getNameLoc(),
                     target + " is not supported by mstep's StableHLO import");
}

const llvm::StringSet<>& plain_ops() {
  static const auto* ops = new llvm::StringSet<>{
      "stablehlo.add",         "stablehlo.subtract",   "stablehlo.multiply",
      "stablehlo.divide",      "stablehlo.maximum",    "stablehlo.minimum",
      "stablehlo.power",       "stablehlo.and",        "stablehlo.or",
      "stablehlo.negate",      "stablehlo.abs",        "stablehlo.exponential",
      "stablehlo.exponential_minus_one", "stablehlo.log", "stablehlo.log_plus_one",
      "stablehlo.sqrt",        "stablehlo.rsqrt",      "stablehlo.tanh",
      "stablehlo.logistic",    "stablehlo.sine",       "stablehlo.cosine",
      "stablehlo.is_finite",   "stablehlo.not",        "stablehlo.select",
      "stablehlo.convert",     "stablehlo.reshape"};
  return *ops;
}

}  // namespace

/// The `stablehlo` namespace with no ops: unknown ops (the generic form) and
/// opaque attributes and types are allowed; the pretty form of the
/// supported ops goes through the hooks above.
class SyntaxDialect : public mlir::Dialect {
 public:
  explicit SyntaxDialect(mlir::MLIRContext* ctx)
      : mlir::Dialect(getDialectNamespace(), ctx, mlir::TypeID::get<SyntaxDialect>()) {
    allowUnknownOperations();
    allowUnknownTypes();
  }
  static llvm::StringRef getDialectNamespace() { return "stablehlo"; }

  mlir::Attribute parseAttribute(mlir::DialectAsmParser& p, mlir::Type type) const override {
    return mlir::OpaqueAttr::get(mlir::StringAttr::get(getContext(), getNamespace()),
                                 p.getFullSymbolSpec(),
                                 type ? type : mlir::NoneType::get(getContext()));
  }
  mlir::Type parseType(mlir::DialectAsmParser& p) const override {
    return mlir::OpaqueType::get(mlir::StringAttr::get(getContext(), getNamespace()),
                                 p.getFullSymbolSpec());
  }

  std::optional<ParseOpHook> getParseOperationHook(llvm::StringRef name) const override {
    if (plain_ops().contains(name)) return ParseOpHook(parse_plain);
    if (name == "stablehlo.constant") return ParseOpHook(parse_constant);
    if (name == "stablehlo.iota") return ParseOpHook(parse_iota);
    if (name == "stablehlo.broadcast_in_dim") return ParseOpHook(parse_broadcast_in_dim);
    if (name == "stablehlo.transpose") return ParseOpHook(parse_transpose);
    if (name == "stablehlo.compare") return ParseOpHook(parse_compare);
    if (name == "stablehlo.slice") return ParseOpHook(parse_slice);
    if (name == "stablehlo.concatenate") return ParseOpHook(parse_concatenate);
    if (name == "stablehlo.dot_general") return ParseOpHook(parse_dot_general);
    if (name == "stablehlo.reduce") return ParseOpHook(parse_reduce);
    if (name == "stablehlo.return") return ParseOpHook(parse_return);
    return ParseOpHook(parse_unsupported);
  }
};

void load_stablehlo_syntax(mlir::MLIRContext& context) {
  context.getOrLoadDialect<SyntaxDialect>();
}

}  // namespace mstep::stablehlo
