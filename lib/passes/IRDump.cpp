// The IR dump instrumentation (IRDump.h).
#include "mstep/passes/IRDump.h"

#include <cstdio>
#include <filesystem>

#include "llvm/Support/raw_ostream.h"
#include "mlir/IR/Operation.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassInstrumentation.h"

namespace mstep::passes {

namespace {

class DumpEachPass : public mlir::PassInstrumentation {
 public:
  DumpEachPass(std::filesystem::path dir, std::string first_name)
      : dir_(std::move(dir)), first_name_(std::move(first_name)) {}

  void runBeforePass(mlir::Pass* pass, mlir::Operation* op) override {
    if (wrote_input_) return;
    wrote_input_ = true;
    write("00_" + first_name_, op);
  }
  void runAfterPass(mlir::Pass* pass, mlir::Operation* op) override {
    if (pass->getArgument().empty()) return;  // a pass manager nesting passes
    char number[16];
    std::snprintf(number, sizeof number, "%02d_", ++count_);
    write(number + pass->getArgument().str(), op);
  }

 private:
  /// Writes the whole module (nested passes run on functions).
  void write(const std::string& name, mlir::Operation* op) {
    while (op->getParentOp()) op = op->getParentOp();
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    llvm::raw_fd_ostream os((dir_ / (name + ".mlir")).string(), ec);
    if (!ec) op->print(os);
  }

  std::filesystem::path dir_;
  std::string first_name_;
  bool wrote_input_ = false;
  int count_ = 0;
};

}  // namespace

void add_ir_dump(mlir::PassManager& pm, const std::string& dir, const std::string& first_name) {
  pm.addInstrumentation(std::make_unique<DumpEachPass>(dir, first_name));
}

}  // namespace mstep::passes
