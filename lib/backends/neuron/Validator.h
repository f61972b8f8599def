// The validator: every tile program is checked before it is simulated or
// costed. A breach is an InvalidArgument error that names the instruction
// (index, engine, opcode), the rule and the values, e.g.
//   tile program 'mm': #3 Tensor nc_matmul: rule matmul_shape: moving N = 600 > 512
//
// Rules (the names errors use):
//   dtype              operands are bf16, fp16, fp32 or int32
//   partition_count    1..128 partitions
//   partition_start    > 64 partitions start at 0; 33-64 at 0 or 64; <= 32 at 0, 32, 64 or 96
//   free_dims          at most 4 free dimensions, each of size >= 1
//   free_size          at most 64K free elements in SBUF, 4K in PSUM, per operand
//   buffer             the operand names an existing allocation/HBM tensor of its kind and dtype
//   allocation_live    an on-chip operand's allocation is live at the instruction
//   bounds             every addressed element lies inside its allocation or HBM tensor
//   engine_opcode      the opcode runs on that engine
//   engine_memory      Tensor reads SBUF, writes PSUM; Vector/Scalar read and write SBUF/PSUM;
//                      GpSimd SBUF only; DMA moves between HBM and SBUF; only DMA reaches HBM
//   gpsimd_psum        (v2) GpSimd never touches PSUM
//   tensor_tensor_psum (v2) the two inputs of a Vector tensor_tensor are not both in PSUM
//   operands           the opcode's operand count, optional operands and dtypes; iota and
//                      affine_select have one affine step per free dim of dst
//   shape              operand shapes agree (partitions, elements per partition)
//   matmul_shape       K <= 128, M <= 128, N <= 512, PSUM dst [M, N] fp32
//   psum_bank          an nc_matmul output stays inside one 2 KiB PSUM bank
//   bn_stats           bn_stats reads <= 512 free elements; bn_aggr whole records of 3
//   dma_engine         the DMA engine index is 0..15
//   semaphore          semaphore ids exist; a wait's value is at most the signals there are
//   capacity           live SBUF (192 KiB) / PSUM (16 KiB) per partition at every program point
//   allocation_overlap live allocations of one memory do not overlap
//   deadlock           the queues can run to completion (ExecutionOrder.h)
//   race               two instructions on different engines (or DMA engines) that touch
//                      overlapping SBUF/PSUM bytes or HBM elements, one of them writing, are
//                      ordered by semaphores (RaceCheck.h)
// The v2 rule that Vector and GpSimd cannot use SBUF at the same time (and
// Vector and Scalar PSUM) is a timing rule: the cost model serialises them.
#pragma once

#include "absl/status/status.h"
#include "lib/backends/neuron/TileProgram.h"

namespace mstep::neuron {

/// OK, or the first breach found: allocations first (at the point each
/// becomes live), then the instructions in program order, then semaphores
/// and deadlock, then races.
absl::Status validate(const TileProgram& program);

} // namespace mstep::neuron
