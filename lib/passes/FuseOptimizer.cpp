// FuseOptimizer: placeholder until the pass is written (see Passes.td).
#include "mstep/passes/Passes.h"

namespace mstep::passes {
#define GEN_PASS_DEF_FUSEOPTIMIZER
#include "mstep/passes/Passes.h.inc"

namespace {
struct FuseOptimizerPass : impl::FuseOptimizerBase<FuseOptimizerPass> {
  void runOnOperation() override {}
};
}  // namespace
}  // namespace mstep::passes
