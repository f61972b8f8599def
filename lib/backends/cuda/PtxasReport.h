// What `ptxas -v` says about each kernel it compiles: registers, stack,
// spills, shared and constant memory. The compile half records it for
// every kernel it builds (issue 21); here it reads ptxas's text. Needs no
// CUDA header. Library-internal.
#pragma once

#include "absl/strings/string_view.h"
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace mstep::cuda {

struct PtxasKernelReport {
  std::string kernel;         ///< the entry function
  std::string arch;           ///< "sm_90"
  int registers = 0;          ///< per thread
  int barriers = 0;           ///< named barriers used
  long stack_bytes = 0;       ///< stack frame
  long spill_store_bytes = 0; ///< spill stores
  long spill_load_bytes = 0;  ///< spill loads
  long shared_bytes = 0;      ///< static shared memory (smem)
  long constant_bytes = 0;    ///< cmem[0], the parameter bank (0 where not reported)
  friend bool operator==(const PtxasKernelReport&, const PtxasKernelReport&) = default;
};

/// Every entry function in `text` (the stderr of `ptxas -v`), in order.
/// Text with no "Compiling entry function" line, or an entry with no
/// "Used N registers" line, is an error naming the line it expected.
absl::StatusOr<std::vector<PtxasKernelReport>> parse_ptxas_report(absl::string_view text);

} // namespace mstep::cuda
