// StableHLO in, the driver: parses the module (pretty or generic op form,
// unregistered dialects allowed: StableHloSyntax.h), picks @main, makes its arguments the graph's inputs,
// hands each op to the op table (StableHloImportOps.h), inlines func.call
// and makes the returned values the graph's outputs. See
// include/mstep/compiler/StableHloImport.h.
#include "mstep/compiler/StableHloImport.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/compiler/stablehlo/StableHloImportOps.h"
#include "lib/compiler/stablehlo/StableHloSyntax.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

namespace mstep {

namespace {

using stablehlo::GraphBuilder;
using stablehlo::located_error;
using stablehlo::ValueMap;

/// How deep func.call may nest (a recursive module is an error).
constexpr int kMaxCallDepth = 64;

std::string string_attr(mlir::DictionaryAttr dict, std::initializer_list<const char*> keys,
                        std::string fallback) {
  if (dict)
    for (const char* key : keys)
      if (auto s = dict.getAs<mlir::StringAttr>(key)) return s.getValue().str();
  return fallback;
}

class Importer {
 public:
  Importer(mlir::ModuleOp module, GraphBuilder& b) : module_(module), b_(b) {}

  /// Imports `func`'s body with its arguments bound to `args`; its
  /// returned values go to `results`.
  absl::Status body(mlir::func::FuncOp func, const std::vector<ValueRef>& args,
                    std::vector<ValueRef>& results, int depth) {
    if (!func.getBody().hasOneBlock())
      return located_error(func.getLoc(),
                           absl::StrCat("function @", func.getSymName().str(), " has ",
                                        func.getBody().getBlocks().size(),
                                        " blocks; mstep imports straight-line functions only"));
    ValueMap values;
    mlir::Block& block = func.getBody().front();
    for (unsigned i = 0; i < block.getNumArguments(); ++i) values[block.getArgument(i)] = args[i];
    for (mlir::Operation& op : block) {
      for (mlir::Value v : op.getOperands())
        if (!values.count(v))
          return located_error(op.getLoc(),
                               absl::StrCat("'", op.getName().getStringRef().str(),
                                            "' uses a value that is not defined before it in "
                                            "@", func.getSymName().str()));
      if (auto ret = mlir::dyn_cast<mlir::func::ReturnOp>(op)) {
        for (mlir::Value v : ret.getOperands()) results.push_back(values.lookup(v));
        continue;
      }
      if (auto call = mlir::dyn_cast<mlir::func::CallOp>(op)) {
        if (absl::Status s = inline_call(call, values, depth); !s.ok()) return s;
        continue;
      }
      if (op.getName().getDialectNamespace() != "stablehlo")
        return located_error(op.getLoc(),
                             absl::StrCat("'", op.getName().getStringRef().str(),
                                          "' is not supported by mstep's StableHLO import (a "
                                          "function body holds stablehlo ops, func.call and "
                                          "func.return)"));
      if (absl::Status s = stablehlo::import_op(&op, b_, values); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

 private:
  absl::Status inline_call(mlir::func::CallOp call, ValueMap& values, int depth) {
    auto callee = module_.lookupSymbol<mlir::func::FuncOp>(call.getCallee());
    if (!callee || callee.isExternal())
      return located_error(call.getLoc(), absl::StrCat("func.call to @", call.getCallee().str(),
                                                       ", which has no body in the module"));
    if (depth >= kMaxCallDepth)
      return located_error(call.getLoc(),
                           absl::StrCat("func.call to @", call.getCallee().str(), " nests more than ",
                                        kMaxCallDepth, " calls deep (a recursive module?)"));
    std::vector<ValueRef> args, results;
    for (mlir::Value v : call.getOperands()) args.push_back(values.lookup(v));
    if (absl::Status s = body(callee, args, results, depth + 1); !s.ok()) return s;
    for (unsigned i = 0; i < call.getNumResults(); ++i) values[call.getResult(i)] = results[i];
    return absl::OkStatus();
  }

  mlir::ModuleOp module_;
  GraphBuilder& b_;
};

/// @main, or the module's only public function.
mlir::FailureOr<mlir::func::FuncOp> entry(mlir::ModuleOp module) {
  if (auto main = module.lookupSymbol<mlir::func::FuncOp>("main")) return main;
  mlir::func::FuncOp only;
  for (auto f : module.getOps<mlir::func::FuncOp>()) {
    if (!f.isPublic()) continue;
    if (only) return mlir::failure();
    only = f;
  }
  if (!only) return mlir::failure();
  return only;
}

}  // namespace

absl::StatusOr<ImportedStableHlo> stablehlo_to_trace_graph(absl::string_view text,
                                                           absl::string_view source_name) {
  mlir::MLIRContext context(mlir::MLIRContext::Threading::DISABLED);
  context.allowUnregisteredDialects();
  context.getOrLoadDialect<mlir::func::FuncDialect>();
  stablehlo::load_stablehlo_syntax(context);  // the pretty form too
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic& d) {
    if (d.getSeverity() != mlir::DiagnosticSeverity::Error) return mlir::success();
    absl::StrAppend(&diagnostics, diagnostics.empty() ? "" : "\n",
                    stablehlo::location_text(d.getLocation()), ": error: ", d.str());
    return mlir::success();
  });
  llvm::SourceMgr sources;
  sources.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(text.data(), text.size()),
                                           llvm::StringRef(source_name.data(), source_name.size())),
      llvm::SMLoc());
  mlir::ParserConfig config(&context);
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceFile<mlir::ModuleOp>(sources, config);
  if (!module) return absl::InvalidArgumentError(diagnostics);
  mlir::FailureOr<mlir::func::FuncOp> main = entry(*module);
  if (mlir::failed(main))
    return located_error(module->getLoc(),
                         "the module has no func.func @main and not exactly one public function");

  ImportedStableHlo out;
  GraphBuilder b;
  std::vector<ValueRef> args;
  for (unsigned i = 0; i < main->getNumArguments(); ++i) {
    mlir::BlockArgument arg = main->getArgument(i);
    absl::StatusOr<TensorType> type =
        stablehlo::tensor_type(arg.getType(), main->getLoc(),
                               absl::StrCat("argument ", i, " of @", main->getSymName().str()));
    if (!type.ok()) return type.status();
    args.push_back(b.input(*type));
    mlir::DictionaryAttr attrs = main->getArgAttrDict(i);
    out.input_names.push_back(string_attr(attrs, {"mstep.name", "jax.arg_info"}, absl::StrCat("arg", i)));
    if (attrs)
      if (auto alias = attrs.getAs<mlir::IntegerAttr>("tf.aliasing_output"))
        b.graph().donated_to[i] = static_cast<int32_t>(alias.getInt());
  }
  Importer importer(*module, b);
  std::vector<ValueRef> results;
  if (absl::Status s = importer.body(*main, args, results, 0); !s.ok()) return s;
  b.graph().outputs = results;
  out.num_arguments = args.size();
  out.constants = b.constant_inputs();
  for (size_t k = 0; k < out.constants.size(); ++k)
    out.input_names.push_back(absl::StrCat("constant", k));
  for (unsigned i = 0; i < main->getNumResults(); ++i)
    out.output_names.push_back(string_attr(main->getResultAttrDict(i),
                                           {"mstep.name", "jax.result_info"},
                                           absl::StrCat("result", i)));
  for (int32_t& d : b.graph().donated_to)
    if (d >= static_cast<int32_t>(results.size())) d = -1;
  out.graph = std::move(b.graph());
  return out;
}

}  // namespace mstep
