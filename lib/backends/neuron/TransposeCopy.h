// A copy that transposes its two minor dims (a permute swapping the last
// two axes, e.g. h^T for a weight gradient) as an on-chip program instead
// of element-wise DMAs (one descriptor per element: CostParams::
// dma_descriptor_bytes charges bf16 at 1/32 of the bandwidth).
//
// Bit-exact for every dtype and value (NaN payloads, infinities, -0): a
// Tensor-engine transpose (a matmul against the identity) is not, on
// NeuronCore-v2, for NaN/Inf (0 x inf = NaN spreads along the row; -0 + 0
// = +0). So the bytes are transposed, not the values: the rows arrive by
// DMA as uint8 (contiguous runs), the Vector engine widens each byte to
// bf16 (0..255, exact), each 128 x 128 block of every byte plane is
// transposed by an nc_matmul against a bf16 identity into PSUM (finite
// small integers: exact), written to PSUM with the byte stride so a bank
// holds whole elements, the Scalar engine copies each bank back to uint8
// (exact), and the rows of the result leave by DMA, contiguous. Element
// size e costs e matmuls per block and e bytes of PSUM traffic per element.
#pragma once

#include <cstdint>
#include <vector>

#include "lib/backends/neuron/Lowering.h"

namespace mstep::neuron {

/// out[o_off + sum(i_b * o_b) + x * out_row + y] =
/// in[i_off + sum(i_b * in_b) + y * in_row + x] (in elements of
/// `element_bytes` bytes), for x < cols_x, y < cols_y and every index i_b
/// of the batch dims.
struct MinorTranspose {
  int64_t element_bytes = 0;
  std::vector<int64_t> batch_sizes, batch_src, batch_dst;
  int64_t x = 0, y = 0;            ///< result rows (input row length used) and columns
  int64_t in_row = 0, out_row = 0; ///< row strides (elements) of input and result
  int64_t src_offset = 0, dst_offset = 0;
  int64_t in_elements = 0, out_elements = 0; ///< HBM tensor sizes
};

/// The on-chip program of `t` (HBM tensor 0 the input, 1 the result), or
/// an error when it cannot be tiled (unvalidated; lower_node validates).
absl::StatusOr<LoweredOp> lower_minor_transpose(const MinorTranspose& t, OpKind op);

} // namespace mstep::neuron
