// The tiled matmul tile program C[M, N] = A[M, K] . B[K, N]: 128x128
// stationary tiles of A^T against 128x512 moving tiles of B, K accumulated
// in a PSUM bank, the bank copied to SBUF by the Scalar engine (converting
// to C's dtype) and DMA'd out; loads, copies and stores pipelined through
// rings of buffers (TiledMatmulProgram.cpp). HBM tensors, in order: "AT"
// [K, M] (A transposed, as nc_matmul's stationary operand wants it; the
// calibration point's form, and the lowering's when A is a transpose in
// the graph), "B" [K, N], "C" [M, N].
//
// Batched (bmm, attention's composed q·kᵀ and p·v): `batches` lists, per
// product, where its A and B start in their HBM tensors (the batch
// dims' broadcast resolved by the caller); the tiles of every product run
// through the same pipeline. With `a_row_major` (the lowering's 2-d and
// batched matmuls) the first tensor is "A" as the graph holds it ([M, K]
// per product): its rows are DMA'd contiguously (K on the free axis) and
// each 128 x 128 block is transposed on the Tensor engine (a matmul
// against an on-chip identity into PSUM, copied to SBUF by Scalar), so
// the transpose is simulated work, not a host step. With `b_transposed`
// the second is "BT" [N, K], made into B the same way. Such a transpose
// multiplies by the identity's zeros, so a non-finite element of A makes
// NaN the whole 128-row tile of C it reaches (ref: only its own row), and
// one of B^T a 128-column chunk, as on hardware that transposes on the PE
// array.
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

/// The fastest variant by the cost model (TiledMatmulChoice.cpp: the
/// choice is remembered per shape, so a step's repeated layers build and
/// cost the variants once).
TileProgram tiled_matmul_program(const TiledMatmulShape& shape);

/// The pipelines tiled_matmul_program chooses between (the same C from
/// each): a PSUM copy per output tile or per pair of tiles
/// (MatmulCopyGroups.h), row-major A's transposes one or two uses ahead,
/// a pair's K steps side by side. Variant i of tiled_matmul_variant_count.
int tiled_matmul_variant_count(const TiledMatmulShape& shape);
TileProgram tiled_matmul_variant(const TiledMatmulShape& shape, int i);
/// All of them, in that order.
std::vector<TileProgram> tiled_matmul_variants(const TiledMatmulShape& shape);

} // namespace mstep::neuron
