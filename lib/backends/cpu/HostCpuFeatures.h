// The instruction-set features of the CPU this process runs on, named as
// LLVM names its target features (llvm::sys::getHostCPUFeatures: "avx2",
// "avx512f", "amx-tile", ...), detected with cpuid and xgetbv, without
// LLVM: the runtime checks that code generated for one host can run here.
// Library-internal; no MLIR or LLVM headers.
//
// Thread-safety: every function may be called from any thread.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace mstep::cpu {

/// The architecture this library was built for, as LLVM's triple names it
/// ("x86_64", "aarch64").
absl::string_view host_architecture();

/// Whether this host can be asked about `feature` (x86 only: every feature
/// LLVM 19 detects on an x86 host).
bool knows_cpu_feature(absl::string_view feature);

/// Every feature knows_cpu_feature() accepts, sorted.
std::vector<std::string> known_cpu_features();

/// Whether this host's CPU (and its OS, for the register state that AVX,
/// AVX-512 and AMX need saved) has `feature`; false for unknown names.
bool host_has_cpu_feature(absl::string_view feature);

} // namespace mstep::cpu
