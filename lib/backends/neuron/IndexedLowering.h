// Embedding forward and backward (issue 19): index_select and index_add
// along dim 0, the ops `embedding` and its gradient record. Rows are
// moved by dma_indirect: the token ids (int64 on the host, narrowed to the
// int32 the DMA engines read after ref's range check) sit one per
// partition in SBUF, 128 tokens per tile.
//   index_select: per token tile and column chunk, a gathering DMA of the
//     table rows into SBUF, then a store of the [tokens, chunk] block.
//   index_add: the output starts as a copy of the input (HBM to HBM), then
//     per token tile and chunk the source rows are loaded and scatter-added
//     into their output rows by an accumulating dma_indirect. All of these
//     run on one DMA engine, in program order, rows in partition order: the
//     adds land in ref's order (token by token), so the result is ref's,
//     bit for bit, and deterministic.
// Anything else (another dim with outer rows, an empty tensor, a dtype
// the engines do not move) is refused and runs on the host.
#pragma once

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "lib/backends/neuron/Lowering.h"

namespace mstep::neuron {

absl::StatusOr<LoweredOp> lower_index_select(const GraphNode& node,
                                             absl::Span<const TensorType> operand_types);
absl::StatusOr<LoweredOp> lower_index_add(const GraphNode& node,
                                          absl::Span<const TensorType> operand_types);

} // namespace mstep::neuron
