// parse_ptxas_report: line by line. "Compiling entry function 'K' for
// 'sm_XY'" opens a kernel; the lines after it up to the next such line
// belong to it: "N bytes stack frame, N bytes spill stores, N bytes spill
// loads" and "Used N registers, used N barriers, N bytes smem, N bytes
// cmem[0]" (each item optional but the registers).
#include "lib/backends/cuda/PtxasReport.h"

#include <algorithm>
#include <regex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace mstep::cuda {
namespace {

/// The number before `suffix` in `line` (e.g. "N registers"); -1 when absent.
long number_before(const std::string& line, const std::string& suffix) {
  std::smatch match;
  if (!std::regex_search(line, match, std::regex("([0-9]+) " + suffix))) return -1;
  return std::stol(match[1]);
}

} // namespace

absl::StatusOr<std::vector<PtxasKernelReport>> parse_ptxas_report(absl::string_view text) {
  static const std::regex entry("Compiling entry function '([^']+)' for '([^']+)'");
  std::vector<PtxasKernelReport> reports;
  std::vector<bool> has_registers;
  for (absl::string_view view : absl::StrSplit(text, '\n')) {
    std::string line(view);
    std::smatch match;
    if (std::regex_search(line, match, entry)) {
      reports.push_back({.kernel = match[1], .arch = match[2]});
      has_registers.push_back(false);
      continue;
    }
    if (reports.empty()) continue;
    PtxasKernelReport& report = reports.back();
    if (line.find("stack frame") != std::string::npos) {
      report.stack_bytes = std::max(0L, number_before(line, "bytes stack frame"));
      report.spill_store_bytes = std::max(0L, number_before(line, "bytes spill stores"));
      report.spill_load_bytes = std::max(0L, number_before(line, "bytes spill loads"));
    } else if (long registers = number_before(line, "registers");
               registers >= 0 && line.find("Used") != std::string::npos) {
      report.registers = static_cast<int>(registers);
      report.barriers = static_cast<int>(std::max(0L, number_before(line, "barriers")));
      report.shared_bytes = std::max(0L, number_before(line, "bytes smem"));
      report.constant_bytes = std::max(0L, number_before(line, "bytes cmem\\[0\\]"));
      has_registers.back() = true;
    }
  }
  if (reports.empty())
    return absl::InvalidArgumentError(
        "ptxas report: no \"Compiling entry function\" line (was ptxas run with -v?)");
  for (size_t i = 0; i < reports.size(); ++i)
    if (!has_registers[i])
      return absl::InvalidArgumentError(absl::StrCat("ptxas report: entry function ",
                                                     reports[i].kernel, " for ", reports[i].arch,
                                                     " has no \"Used N registers\" line"));
  return reports;
}

} // namespace mstep::cuda
