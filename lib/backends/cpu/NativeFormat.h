// The cpu backend's disk-cache form of an executable: the optimized module
// text (its graph and memory plan) plus the JIT's native object code, so a
// load parses the module but runs neither the pipeline nor LLVM codegen.
//   "MSTEPCPU" | u32 version | u64 n | module text (n) | u64 m | object (m)
// The disk cache adds its own checksum around the whole payload.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mstep::cpu {

class FusionJit;

inline constexpr uint32_t kNativeFormatVersion = 1;

/// `jit` may be null (a step without compiled fusions).
std::string write_native_format(absl::string_view module_text, const FusionJit* jit);

struct NativeParts {
  absl::string_view module_text;
  absl::string_view object;  // empty: no JIT object
};
/// Splits a blob; an error names what is wrong (magic, version, sizes).
/// The parts view `blob`.
absl::StatusOr<NativeParts> read_native_format(absl::string_view blob);

}  // namespace mstep::cpu
