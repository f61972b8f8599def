// Loop nests of the indexing ops for the cuda compile half (dispatched by
// CudaOpLoops.cpp), following lib/backends/ref's RefShape.cpp and
// RefScatter.cpp: index_select (embedding), index_add (its backward: a
// lane per column walking the index in order, or a lane per output element
// adding the rows that name it, chosen by an estimated cost; both add
// duplicates in ref's order without atomics), gather, and scatter_add (a
// lane per index position off the scattered dim). An index out of range
// reads and writes nothing out of bounds, gives NaN (zero for integers)
// or adds nothing, and is reported in the error word (CudaErrorWord.h).
// Library-internal; MLIR.
#pragma once

#include "lib/backends/cuda/CudaLoopNest.h"
#include "mstep/ir/dialect/MstepOps.h"

namespace mstep::cuda {
struct CudaCodegenOptions;
}

namespace mstep::cuda::loops {

void build_index_select(dialect::IndexSelectOp op, Nest& nest);
/// `options`: index_add_owner_max_ratio picks the form.
void build_index_add(dialect::IndexAddOp op, const CudaCodegenOptions& options, Nest& nest);
void build_gather(dialect::GatherOp op, Nest& nest);
void build_scatter_add(dialect::ScatterAddOp op, Nest& nest);

} // namespace mstep::cuda::loops
