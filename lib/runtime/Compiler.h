// The one way the runtime reaches the compiler: a trace graph in, an
// executable out (import -> pass pipeline -> backend compile). No MLIR in
// this header, so the tracer stays free of MLIR headers. Library-internal.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "mstep/ir/TraceGraph.h"
#include "mstep/runtime/Backend.h"

namespace mstep {

struct CompileOptions {
  bool fuse = true;
  /// When non-empty, the MLIR after import and after every pass is written
  /// to <dump_dir>/graph_<key>/NN_<stage>.mlir.
  std::string dump_dir;
  uint64_t key = 0;
};

/// Imports `graph`, runs the pipeline and compiles the result on `backend`.
/// Not thread-safe: the tracer calls it from its one thread.
absl::StatusOr<std::unique_ptr<Executable>> compile_graph(const TraceGraph& graph,
                                                          Backend& backend,
                                                          const CompileOptions& options);

}  // namespace mstep
