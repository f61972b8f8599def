// libFuzzer target for the mstep dialect's parsers, verifiers and folders.
// Each input is MLIR text. It must either be rejected with diagnostics or
// verify; a module that verifies must then (1) print and parse back, and
// (2) still verify after -canonicalize, which runs the mstep folders. A
// crash, a sanitizer report or a failed (1)/(2) is a bug (abort). Built by
// test/fuzz/CMakeLists.txt with clang's -fsanitize=fuzzer; see that file
// for how to run it by hand.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "mstep/ir/dialect/MstepDialect.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
/// ASan reads this at startup. llvm::BumpPtrAllocator poisons each new slab
/// and unpoisons each allocation, but only where it was compiled with ASan:
/// here, in the header code this binary inlines, not inside libMLIR. A slab
/// started here and then filled by libMLIR (the context's attribute storage)
/// reads as use-after-poison, a false positive, so that manual poisoning is
/// switched off; ASan's own checks (heap, stack, globals) stay on.
extern "C" const char* __asan_default_options() { return "allow_user_poisoning=0"; }
#endif
#endif

namespace {

/// The context every input is parsed into: built once (loading the dialects
/// costs far more than parsing a small input), single-threaded so a crash's
/// stack is the parser's, and with a handler that swallows diagnostics
/// (rejecting input is the expected outcome, not news). Its uniqued types
/// and attributes grow with the inputs, slowly: measured, the process holds
/// about 800 MB after 15 minutes, mostly ASan's quarantine and allocator
/// caches (replacing the context every 200k inputs made that worse).
mlir::MLIRContext& fuzzContext() {
  static mlir::MLIRContext* context = [] {
    mlir::DialectRegistry registry;
    registry.insert<mstep::dialect::MstepDialect, mlir::func::FuncDialect, mlir::arith::ArithDialect,
                    mlir::math::MathDialect, mlir::tensor::TensorDialect,
                    mlir::linalg::LinalgDialect>();
    auto* created = new mlir::MLIRContext(registry, mlir::MLIRContext::Threading::DISABLED);
    created->loadAllAvailableDialects();
    created->getDiagEngine().registerHandler([](mlir::Diagnostic&) { return mlir::success(); });
    return created;
  }();
  return *context;
}

/// Skips spaces and `//` comments (the only comments MLIR has) from `pos`.
size_t skipSpaceAndComments(llvm::StringRef text, size_t pos) {
  while (pos < text.size()) {
    if (llvm::isSpace(text[pos])) {
      ++pos;
    } else if (text.substr(pos).starts_with("//")) {
      pos = text.find('\n', pos);
      if (pos == llvm::StringRef::npos) return text.size();
    } else {
      break;
    }
  }
  return pos;
}

/// Whether `text` may hold a dense array attribute `array<T ...>` whose
/// element type T is not one of the byte-sized integer and float types that
/// MLIR 19 handles. Upstream bugs, not mstep's (reproduce with mlir-opt
/// --allow-unregistered-dialect on `"test.op"() {a = array<i1: 1>} : () -> ()`):
/// - `array<i1: 1>` (an integer literal for i1) stores no data, and printing
///   it, as every diagnostic on its op does, reads a null pointer (segfault;
///   an assertion in the parser in debug builds, llvm/circt#9374);
/// - `array<index: 1>` prints bytes past the end of its data
///   (llvm/llvm-project#179045).
/// No mstep op takes such an array, so skipping these inputs loses nothing.
bool mayHoldBrokenDenseArray(llvm::StringRef text) {
  static const llvm::StringRef kSafeElementTypes[] = {"i8",  "i16", "i32",  "i64",
                                                      "f16", "f32", "bf16", "f64"};
  for (size_t at = text.find("array"); at != llvm::StringRef::npos;
       at = text.find("array", at + 1)) {
    size_t pos = skipSpaceAndComments(text, at + 5);
    if (pos >= text.size() || text[pos] != '<') continue;
    pos = skipSpaceAndComments(text, pos + 1);
    const size_t end = text.find_first_of(" \t\r\n:>/", pos);
    const llvm::StringRef elementType = text.slice(pos, end);
    if (!llvm::is_contained(kSafeElementTypes, elementType)) return true;
  }
  return false;
}

/// Prints `module` to a string in the custom (pretty) form.
std::string printModule(mlir::ModuleOp module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  module.print(os);
  return text;
}

/// Reports a bug found on an input that verified, with the IR involved, and
/// aborts so libFuzzer saves the input as a crash artifact.
[[noreturn]] void reportBug(const char* what, const std::string& ir) {
  std::fprintf(stderr, "mstep fuzzer: %s\n--- IR ---\n%s\n", what, ir.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mlir::MLIRContext& context = fuzzContext();
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (mayHoldBrokenDenseArray(text)) return -1;  // upstream bugs; -1: not added to the corpus

  // 1. Parse and verify. The std::string gives the lexer the NUL terminator
  //    it reads at the end of its buffer (the fuzzer's bytes have none).
  mlir::ParserConfig config(&context);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(text, config, "fuzz-input");
  if (!module) return 0;  // rejected with a diagnostic: the expected outcome

  // 2. What verified prints in a form that parses and verifies again (the
  //    custom assembly formats round-trip).
  const std::string printed = printModule(*module);
  if (!mlir::parseSourceString<mlir::ModuleOp>(printed, config, "fuzz-printed"))
    reportBug("a verified module does not parse back after printing", printed);

  // 3. Canonicalization (mstep folders and upstream patterns) keeps a valid
  //    module valid: the pass manager verifies after the pass.
  mlir::PassManager pm(&context);
  pm.addPass(mlir::createCanonicalizerPass());
  if (mlir::failed(pm.run(*module)))
    reportBug("-canonicalize turned a verified module invalid", printed);
  return 0;
}
