// The xla backend's stored form of an executable: what the disk cache and
// an exported graph (Graph::save) keep, so a load (mstep-run, a disk-cache
// hit) runs neither MLIR nor LLVM:
//   seal("MSTEPXLA", kXlaFormatVersion,
//        bytes(graph) | bytes(arena plan) | target | callouts | bytes(shared object))
// where bytes(x) is a u64 length and x (core/ByteStream.h), the graph is
// serialize_graph()'s, the plan serialize_arena_plan()'s (the layout and
// the arena size follow from the two: lay_out_step), the target
// bytes(arch) | bytes(cpu) | u32 n | n x bytes(feature) (FusionTarget), the
// callouts u32 n | n x u32 node. The seal's checksum covers all of it.
// Runtime half: no MLIR or LLVM headers.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/backends/xla/XlaStep.h"

namespace mstep::xla {

/// 2: XlaRuntimeCalls::gemm_bf16 takes the matmul epilogue (bias,
/// activation, residual), so a version-1 object would call it wrongly.
/// 3: XlaRuntimeCalls has matmul_f32 (f32 matmuls with their epilogue), a
/// field a version-2 runtime's table lacks.
/// 4: XlaRuntimeCalls has gemm_bf16_f32 (the bf16 convolutions' gemms).
inline constexpr uint32_t kXlaFormatVersion = 4;

std::string write_xla_format(const XlaProgram& program);

/// The program of a stored blob, its layout rebuilt from the graph and the
/// plan. Unimplemented when `blob` is not one (no MSTEPXLA magic: a cache
/// entry that holds module text); DataLoss, naming what is wrong, for a
/// truncated or corrupt one (version, sizes, checksum, a section that does
/// not decode, a plan or a callout that does not fit the graph). The
/// target is not checked here (check_target, FusionJit.h).
absl::StatusOr<XlaProgram> read_xla_format(absl::string_view blob);

} // namespace mstep::xla
