// ptxas on the compile half's PTX: a cubin for one architecture and what
// `ptxas -v` says of each kernel (registers, shared memory, spills).
// Library-internal; no MLIR.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/backends/cuda/PtxasReport.h"

namespace mstep::cuda {

/// The ptxas of the toolkit mstep was configured with.
const std::string& configured_ptxas();
/// The toolkit's root (libdevice for the PTX's math functions).
const std::string& configured_cuda_toolkit();

struct AssembledPtx {
  std::string cubin;
  std::vector<PtxasKernelReport> reports;
};

/// `ptxas -v -O3 -arch=<arch>` on `ptx`. ptxas refusing the PTX is an
/// error with its log, naming `what` (the kernel) and the architecture.
/// The same (ptxas, arch, PTX) is assembled once per process (ptxas is
/// deterministic; one process's steps, and a test's cases, often share a
/// kernel's text): up to 256 MiB of texts and cubins are kept, then
/// dropped together. Thread-safe.
absl::StatusOr<AssembledPtx> assemble_ptx(absl::string_view ptx, absl::string_view arch,
                                          absl::string_view what,
                                          const std::string& ptxas = configured_ptxas());

}  // namespace mstep::cuda
