// parse_mstep_module: the one place mstep parses and verifies MLIR text.
#include "mstep/ir/MlirParse.h"

#include "absl/strings/str_cat.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

namespace mstep {

DiagnosticCollector::DiagnosticCollector(mlir::MLIRContext& context)
    : handler_(&context, [this](mlir::Diagnostic& d) {
        llvm::raw_string_ostream os(text_);
        os << "\n  " << d.getLocation() << ": " << d;
        return mlir::success();
      }) {}

absl::StatusOr<mlir::OwningOpRef<mlir::ModuleOp>>
parse_mstep_module(absl::string_view text, mlir::MLIRContext& context,
                   absl::string_view source_name) {
  DiagnosticCollector diagnostics(context);
  // A copy: MLIR's lexer stops at a terminating NUL, which a view into a
  // larger buffer (a serialized executable) does not have.
  llvm::SourceMgr sources;
  sources.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(text.data(), text.size()),
                                           llvm::StringRef(source_name.data(), source_name.size())),
      llvm::SMLoc());
  auto module = mlir::parseSourceFile<mlir::ModuleOp>(sources, mlir::ParserConfig(&context));
  if (!module || mlir::failed(mlir::verify(*module)))
    return absl::InvalidArgumentError(
        absl::StrCat(source_name, " is not a valid mstep module:", diagnostics.text()));
  return module;
}

}  // namespace mstep
