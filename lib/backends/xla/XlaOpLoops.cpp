// emit_op_loop (XlaOpLoops.h): the families in turn.
#include "lib/backends/xla/XlaOpLoops.h"

namespace mstep::xla {

std::optional<OpLoop> emit_op_loop(llvm::Module& module, const TraceGraph& graph, uint32_t node) {
  using Family = std::optional<OpLoop> (*)(llvm::Module&, const TraceGraph&, uint32_t);
  for (Family family : {emit_reduction_loop, emit_softmax_loop, emit_loss_loop, emit_random_loop,
                        emit_copy_loop, emit_optimizer_loop, emit_index_loop, emit_norm_loop})
    if (std::optional<OpLoop> loop = family(module, graph, node)) return loop;
  return std::nullopt;
}

} // namespace mstep::xla
