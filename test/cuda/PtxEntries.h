// The kernels a PTX module declares, with their parameter layouts, read
// from its text: each `.entry NAME(.param .u64 ..., .param .u32 ...)`,
// every parameter at its natural alignment (a 64-bit type: 8 bytes, else
// 4). For the fake driver (FakeCudaDriver::kernels_from_ptx), which must
// know the layout of each kernel a plan compiled in the process launches.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "lib/backends/cuda/CudaModule.h"

namespace mstep::cuda::testing {

struct PtxEntry {
  std::string name;
  std::vector<CudaKernelParam> params;
};

inline std::vector<PtxEntry> ptx_entries(absl::string_view ptx) {
  std::vector<PtxEntry> entries;
  for (size_t at = ptx.find(".entry "); at != absl::string_view::npos;
       at = ptx.find(".entry ", at + 1)) {
    const size_t open = ptx.find('(', at), close = ptx.find(')', open);
    if (open == absl::string_view::npos || close == absl::string_view::npos) break;
    PtxEntry& entry = entries.emplace_back();
    entry.name = std::string(absl::StripAsciiWhitespace(ptx.substr(at + 7, open - at - 7)));
    const absl::string_view params = ptx.substr(open, close - open);
    size_t offset = 0;
    for (size_t p = params.find(".param"); p != absl::string_view::npos;
         p = params.find(".param", p + 1)) {
      // The type: the word after ".param" (".u64", ".f32", ...).
      absl::string_view type = absl::StripLeadingAsciiWhitespace(params.substr(p + 6));
      type = type.substr(0, type.find_first_of(" \t\n"));
      const size_t size = absl::EndsWith(type, "64") ? 8 : 4;
      offset = (offset + size - 1) / size * size;
      entry.params.push_back({offset, size});
      offset += size;
    }
  }
  return entries;
}

} // namespace mstep::cuda::testing
