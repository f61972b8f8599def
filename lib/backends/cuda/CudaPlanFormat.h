// A CudaPlan <-> bytes: the cuda executable's stored form (the disk
// cache's and an exported graph's). Runtime half: no MLIR, so a machine
// with only the runtime loads what another compiled.
//   seal("MSTEPCUD", kCudaPlanFormatVersion, body)    (core/ByteStream.h)
// body: the values (tensor types), the input count, the outputs, the
// kernels (name, origin, grid, block, PTX, a cubin per arch, ptxas's
// report per arch), the cuBLASLt matmul steps, the launches, then the
// arena (one offset per value, its size). Library-internal.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/backends/cuda/CudaPlan.h"

namespace mstep::cuda {

/// Bump on any change of the layout above.
inline constexpr uint32_t kCudaPlanFormatVersion = 1;

std::string serialize_cuda_plan(const CudaPlan& plan);

/// The plan of serialize_cuda_plan()'s bytes, checked by
/// validate_cuda_plan(). Unimplemented when `blob` is not one (no
/// MSTEPCUD magic: e.g. module text); DataLoss naming what is wrong for a
/// wrong version, a truncated or corrupt blob, or a plan that does not
/// check.
absl::StatusOr<CudaPlan> deserialize_cuda_plan(absl::string_view blob);

} // namespace mstep::cuda
