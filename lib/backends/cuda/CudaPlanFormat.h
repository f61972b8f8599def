// A CudaPlan <-> bytes: the cuda executable's stored form (the disk
// cache's and an exported graph's). Runtime half: no MLIR, so a machine
// with only the runtime loads what another compiled.
//   seal("MSTEPCUD", kCudaPlanFormatVersion, body)    (core/ByteStream.h)
// body: the values (tensor types), the input count, the outputs, the
// kernels (name, origin, grid, block, PTX, a cubin per arch, ptxas's
// report per arch), the cuBLASLt matmul steps, the cuDNN SDPA steps
// (version 2), the launches (their attention index: version 2), then the
// arena (one offset per value, its size), then per kernel its parameter
// slots and dynamic shared memory (version 3: custom ops' CUDA kernels).
// Version 4 appends the error word's value (CudaPlan::error_word), version 5
// the aliases (value, root, byte offset), version 6 the collective steps
// (CudaPlan::collectives: origin, op, reduce_op, root, dim, world_size) and
// each launch's collective index, version 7 each matmul's bias gradient
// (MatmulShape::bias_grad, a u8), version 8 each matmul's epilogue
// fallback (CudaMatmulInfo::fallback: its kernel launches), version 9 each
// attention step's strides (SdpaLayout: 8 x 4 i64, q, k, v, out, grad_out,
// grad_q, grad_k, grad_v), version 10 each matmul's f32 result flag
// (MatmulShape::f32_result, a u8).
// Versions 1 (no attention steps), 2 (no slots), 3 (no error word), 4 (no
// aliases), 5 (no collectives), 6 (no bias gradients), 7 (no epilogue
// fallbacks), 8 (no attention strides) and 9 (no f32 results) are still read.
// Library-internal.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/backends/cuda/CudaPlan.h"

namespace mstep::cuda {

/// Bump on any change of the layout above (and keep reading the old one
/// where it is a subset, as each version is of the next).
inline constexpr uint32_t kCudaPlanFormatVersion = 10;
/// The oldest version deserialize_cuda_plan reads.
inline constexpr uint32_t kCudaPlanFormatOldestVersion = 1;

std::string serialize_cuda_plan(const CudaPlan& plan);

/// The plan of serialize_cuda_plan()'s bytes, checked by
/// validate_cuda_plan(). Unimplemented when `blob` is not one (no
/// MSTEPCUD magic: e.g. module text); DataLoss naming what is wrong for a
/// version it does not read (newer than kCudaPlanFormatVersion, older than
/// kCudaPlanFormatOldestVersion), a truncated or corrupt blob, or a plan that does not
/// check.
absl::StatusOr<CudaPlan> deserialize_cuda_plan(absl::string_view blob);

} // namespace mstep::cuda
