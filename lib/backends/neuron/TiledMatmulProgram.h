// The tiled matmul tile program C[M, N] = A[M, K] . B[K, N], the way the
// lowering will tile matmul: 128x128 stationary tiles of A^T against
// 128x512 moving tiles of B, K accumulated in a PSUM bank, the bank copied
// to SBUF by the Vector engine (converting to C's dtype) and DMA'd out.
// A column block of B (all of K, 512 wide) and a row block of A^T stay in
// SBUF, each double-buffered, so DMA overlaps compute.
// HBM tensors, in order: "AT" [K, M] (A transposed, as nc_matmul's
// stationary operand wants it), "B" [K, N], "C" [M, N].
//
// Batched (bmm, attention's composed q·kᵀ and p·v): `batches` lists, per
// product, where its A and B start in their HBM tensors (the batch
// dims' broadcast resolved by the caller); the tiles of every product run
// through the same pipeline. With `a_row_major` (the lowering's 2-d and
// batched matmuls) the first tensor is "A" as the graph holds it ([M, K]
// per product): its rows are DMA'd contiguously (K on the free axis) and
// each 128 x 128 block is transposed on the Tensor engine (a matmul
// against an on-chip identity into PSUM, copied to SBUF by Scalar), so
// the transpose is simulated work, not a host step. Such a transpose
// multiplies by the identity's zeros, so a non-finite element of A turns
// into NaN across its K row of the 128-row block (ref: only its own row
// of C), as on hardware that transposes by a matmul.
#pragma once

#include <vector>

#include "lib/backends/neuron/TileProgram.h"

namespace mstep::neuron {

/// Where one product of a batch starts: element offsets into A (or AT)
/// and B (C holds the products one after another, M x N each).
struct MatmulOffsets {
  int64_t a = 0, b = 0;
};

struct TiledMatmulShape {
  int64_t m = 0, k = 0, n = 0;
  DType input = DType::bf16;
  DType output = DType::f32;
  /// Empty: one product at offsets 0. Else the products and the HBM
  /// tensors' element counts (a_elements, b_elements; C holds
  /// batches.size() x M x N).
  std::vector<MatmulOffsets> batches = {};
  int64_t a_elements = 0, b_elements = 0;
  bool a_row_major = false;
  /// B given as B^T ("BT" [N, K] per product, e.g. a weight the graph
  /// transposes): its rows are DMA'd contiguously and each 128 x 128
  /// block transposed on chip like A's (so at most ~3K columns of K: two
  /// staging buffers of 4 x 128 rows of K each).
  bool b_transposed = false;
};

TileProgram tiled_matmul_program(const TiledMatmulShape& shape);

} // namespace mstep::neuron
