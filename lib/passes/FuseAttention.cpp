// FuseAttention: placeholder until the pass is written (see Passes.td).
#include "mstep/passes/Passes.h"

namespace mstep::passes {
#define GEN_PASS_DEF_FUSEATTENTION
#include "mstep/passes/Passes.h.inc"

namespace {
struct FuseAttentionPass : impl::FuseAttentionBase<FuseAttentionPass> {
  void runOnOperation() override {}
};
}  // namespace
}  // namespace mstep::passes
