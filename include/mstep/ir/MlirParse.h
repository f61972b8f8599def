// Parse-verify-diagnose, written once: MLIR text to a verified module, or an
// error carrying every diagnostic with its location. The disk cache, the C
// API's modules (trace_graph_from_mlir) and the cpu backend's JIT and
// executable loader all read modules through it.
//
// Includes MLIR headers: compiler code only (docs/architecture.md).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OwningOpRef.h"

namespace mstep {

/// Collects the diagnostics `context` emits while alive, each as
/// "\n  <location>: <message>", to append to an error message. Not
/// thread-safe: it captures every diagnostic of the context, so one
/// context's work runs on one thread at a time.
class DiagnosticCollector {
 public:
  explicit DiagnosticCollector(mlir::MLIRContext& context);
  const std::string& text() const { return text_; }

 private:
  std::string text_;
  mlir::ScopedDiagnosticHandler handler_;
};

/// Parses `text` into a module of `context` (which has the mstep dialects
/// registered: register_mstep_dialects) and verifies it. `text` need not be
/// NUL-terminated. InvalidArgument on failure, with the message
/// "<source_name> is not a valid mstep module:" and the diagnostics, whose
/// locations name `source_name` as the file ("<source_name>":line:col).
absl::StatusOr<mlir::OwningOpRef<mlir::ModuleOp>>
parse_mstep_module(absl::string_view text, mlir::MLIRContext& context,
                   absl::string_view source_name);

}  // namespace mstep
