// The tiled matmul tile program C[M, N] = A[M, K] . B[K, N], the way the
// lowering will tile matmul: 128x128 stationary tiles of A^T against
// 128x512 moving tiles of B, K accumulated in a PSUM bank, the bank copied
// to SBUF by the Vector engine (converting to C's dtype) and DMA'd out.
// A column block of B (all of K, 512 wide) and a row block of A^T stay in
// SBUF, each double-buffered, so DMA overlaps compute.
// HBM tensors, in order: "AT" [K, M] (A transposed, as nc_matmul's
// stationary operand wants it), "B" [K, N], "C" [M, N].
#pragma once

#include "lib/backends/neuron/TileProgram.h"

namespace mstep::neuron {

struct TiledMatmulShape {
  int64_t m = 0, k = 0, n = 0;
  DType input = DType::bf16;
  DType output = DType::f32;
};

TileProgram tiled_matmul_program(const TiledMatmulShape& shape);

} // namespace mstep::neuron
