// The StableHLO exporter's driver: walks each function of an mstep module
// in order, names every value, hands each op to the op table
// (StableHloOps.h) and writes the function's signature with its aliasing
// attributes. See include/mstep/compiler/StableHloExport.h.
#include "mstep/compiler/StableHloExport.h"

#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/compiler/stablehlo/StableHloOps.h"
#include "llvm/ADT/DenseMap.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"

namespace mstep {

namespace {

using stablehlo::FunctionText;
using stablehlo::Value;

/// The shape and MLIR element-type spelling of a static tensor type.
mlir::FailureOr<Value> describe(mlir::Type type, mlir::Location loc) {
  auto t = mlir::dyn_cast<mlir::RankedTensorType>(type);
  if (!t || !t.hasStaticShape())
    return mlir::emitError(loc) << "StableHLO export: " << type << " is not a static tensor type";
  std::string elem;
  llvm::raw_string_ostream os(elem);
  os << t.getElementType();
  return Value{"", std::vector<int64_t>(t.getShape().begin(), t.getShape().end()), elem};
}

/// `{a = 1, b = "x"}` of the attributes a consumer needs, or "".
std::string attr_dict(const std::vector<std::string>& entries) {
  return entries.empty() ? "" : absl::StrCat(" {", absl::StrJoin(entries, ", "), "}");
}

std::string string_attr(mlir::DictionaryAttr attrs, llvm::StringRef name) {
  if (!attrs) return "";
  auto s = attrs.getAs<mlir::StringAttr>(name);
  if (!s) return "";
  std::string quoted;
  llvm::raw_string_ostream os(quoted);
  os << s;  // printed with MLIR's escaping
  return absl::StrCat(name.str(), " = ", quoted);
}

mlir::FailureOr<std::string> export_function(
    mlir::func::FuncOp func, llvm::StringRef name,
    const std::shared_ptr<std::vector<std::string>>& helpers) {
  FunctionText f(helpers);
  llvm::DenseMap<mlir::Value, Value> values;
  std::vector<std::string> args;
  for (mlir::BlockArgument arg : func.getArguments()) {
    auto v = describe(arg.getType(), func.getLoc());
    if (mlir::failed(v)) return mlir::failure();
    v->name = absl::StrCat("%arg", arg.getArgNumber());
    std::vector<std::string> attrs;
    mlir::DictionaryAttr dict = func.getArgAttrDict(arg.getArgNumber());
    if (dict)
      if (auto alias = dict.getAs<mlir::IntegerAttr>("mstep.aliased_result"))
        attrs.push_back(absl::StrCat("tf.aliasing_output = ", alias.getInt(), " : i32"));
    for (const char* name : {"mstep.name", "mstep.role"})
      if (std::string s = string_attr(dict, name); !s.empty()) attrs.push_back(s);
    args.push_back(absl::StrCat(v->name, ": ", FunctionText::type(*v), attr_dict(attrs)));
    values[arg] = *v;
  }
  std::vector<std::string> results;
  for (unsigned i = 0; i < func.getNumResults(); ++i) {
    auto v = describe(func.getResultTypes()[i], func.getLoc());
    if (mlir::failed(v)) return mlir::failure();
    std::vector<std::string> attrs;
    if (std::string s = string_attr(func.getResultAttrDict(i), "mstep.name"); !s.empty())
      attrs.push_back(s);
    results.push_back(FunctionText::type(*v) + attr_dict(attrs));
  }

  std::string ret;
  for (mlir::Operation& op : func.getBody().front()) {
    if (auto r = mlir::dyn_cast<mlir::func::ReturnOp>(op)) {
      std::vector<std::string> names, types;
      for (mlir::Value v : r.getOperands()) {
        names.push_back(values[v].name);
        types.push_back(FunctionText::type(values[v]));
      }
      ret = names.empty() ? "    return\n"
                          : absl::StrCat("    return ", absl::StrJoin(names, ", "), " : ",
                                         absl::StrJoin(types, ", "), "\n");
      continue;
    }
    std::vector<Value> operands, result_types;
    for (mlir::Value v : op.getOperands()) operands.push_back(values[v]);
    for (mlir::Type t : op.getResultTypes()) {
      auto v = describe(t, op.getLoc());
      if (mlir::failed(v)) return mlir::failure();
      result_types.push_back(*v);
    }
    absl::StatusOr<std::vector<Value>> lowered =
        stablehlo::lower_op(f, &op, operands, result_types);
    if (!lowered.ok())
      return op.emitError() << "StableHLO export: " << std::string(lowered.status().message());
    for (unsigned i = 0; i < op.getNumResults(); ++i) values[op.getResult(i)] = (*lowered)[i];
  }
  return absl::StrCat("  func.func public @", name.str(), "(",
                      absl::StrJoin(args, ", "), ") -> (", absl::StrJoin(results, ", "),
                      ") {\n", f.text(), ret, "  }\n");
}

}  // namespace

mlir::LogicalResult export_stablehlo(mlir::ModuleOp module, llvm::raw_ostream& os) {
  std::string text = absl::StrCat("module @", module.getSymName() ? module.getSymName()->str() : "mstep",
                                  " {\n");
  auto helpers = std::make_shared<std::vector<std::string>>();
  auto funcs = module.getOps<mlir::func::FuncOp>();
  const bool only = std::distance(funcs.begin(), funcs.end()) == 1;
  for (auto func : funcs) {
    if (func.isExternal())
      return func.emitError() << "StableHLO export: function @" << func.getSymName()
                              << " has no body";
    mlir::FailureOr<std::string> body = export_function(func, only ? "main" : func.getSymName(), helpers);
    if (mlir::failed(body)) return mlir::failure();
    text += *body;
  }
  os << text << absl::StrJoin(*helpers, "") << "}\n";
  return mlir::success();
}

}  // namespace mstep
