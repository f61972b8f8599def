// Google Benchmark's console output, plus a copy of each run by function
// name, for the summary (RESULT) lines the benches print after the table.
#pragma once

#include <benchmark/benchmark.h>

#include <map>
#include <string>
#include <vector>

namespace mstep::bench {

class CapturingReporter : public benchmark::ConsoleReporter {
public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) captured[r.run_name.function_name] = r;
    ConsoleReporter::ReportRuns(runs);
  }
  std::map<std::string, Run> captured;
};

} // namespace mstep::bench
