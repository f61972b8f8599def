// Running an external tool of the compile half (the system linker for the
// cpu fusion JIT, ptxas for cuda) on files in a private temporary
// directory: the inputs are written there, the tool is spawned by path
// without a shell (stdin /dev/null, stdout and stderr to one log), and the
// outputs are read back before the directory goes. Library-internal; no
// MLIR or LLVM headers.
//
// Thread-safety: run_external_tool may run on several threads at once
// (each run has its own directory).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mstep {

struct ExternalToolRun {
  /// Who runs it, the prefix of every error ("fusion JIT").
  std::string who;
  /// The tool as errors name it ("the linker", "ptxas").
  std::string tool;
  /// Said after "cannot run <tool> '<path>': <why>" (where the path came from).
  std::string hint;
  /// argv; "{dir}" in an argument is replaced by the private directory.
  std::vector<std::string> args;
  /// Files written into the directory first, by name.
  std::map<std::string, std::string> inputs;
  /// Files read back after a successful run, by name.
  std::vector<std::string> outputs;
};

struct ExternalToolResult {
  /// The tool's stdout and stderr, together.
  std::string log;
  /// run.outputs' contents, by name.
  std::map<std::string, std::string> outputs;
};

/// Runs `run`. A tool that cannot be started, or that fails (a nonzero
/// exit status or a signal), is an error showing its log.
absl::StatusOr<ExternalToolResult> run_external_tool(const ExternalToolRun& run);

}  // namespace mstep
