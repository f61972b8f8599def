// The process group of data-parallel training (issue 23): MPI's world
// communicator, the rank and world size, and the collectives that the
// backends' kernels for mstep.all_reduce, all_gather, broadcast and
// reduce_scatter run on it. Library-internal (libmstep_runtime); users go
// through include/mstep/api/Distributed.h.
//
// Without init() the world is one process and every collective copies its
// input (the identity), so single-process code needs no MPI at all.
//
// A collective above RuntimeOptions::dist_max_call_bytes is several MPI
// calls over slices of its buffer, all outstanding at once (CallSlices.h).
//
// Faults never hang: a collective polls its MPI requests (MPI_Test) until
// RuntimeOptions::dist_timeout_s, and each rank, as it enters a collective,
// sends every peer a small arrival note (its collective count and what the
// collective is). On a timeout the error names the collective and the
// ranks whose note never came; a note that names another collective is an
// error too (ranks out of step), instead of wrong sums.
//
// Thread-safety: one mutex serializes every MPI call; collectives must be
// issued in the same order on every rank (the step graphs are, see
// check_same_graph()).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "mstep/core/TensorType.h"
#include "mstep/ir/TraceGraph.h"
#include "mstep/runtime/Options.h"

namespace mstep::dist {

/// The `reduce_op` attribute's codes (mstep::distributed::ReduceOp).
enum class ReduceCode : int64_t { sum = 0, mean = 1, max = 2, min = 3 };
absl::string_view reduce_name(int64_t code);

/// MPI_Init_thread, then the rank and world size, checked against
/// options.dist_rank / dist_world_size when set. A second call is a no-op.
/// FailedPrecondition when mstep was built without MPI or after finalize().
absl::Status init(const RuntimeOptions& options);
bool is_initialized();
/// 0 and 1 without init().
int rank();
int world_size();
double timeout_seconds();
/// Every rank arrives, or an error names the ranks that did not in time.
absl::Status barrier();
/// MPI_Finalize (no-op without init()). After a collective failed, the
/// peers may still be inside it, so this aborts the job instead (code 1).
absl::Status finalize();
/// MPI_Abort(MPI_COMM_WORLD, code) (std::exit without init()). No return.
[[noreturn]] void abort(int code);

/// One collective node of a step graph: what it does and on which types.
struct Collective {
  OpKind op = OpKind::all_reduce;
  int64_t reduce_op = 0;  // all_reduce, reduce_scatter
  int64_t root = 0;       // broadcast
  int64_t dim = 0;        // all_gather, reduce_scatter
  int64_t world_size = 1; // the world the node was recorded in
  TensorType input;
  TensorType result;
  /// What describe() says instead, when set ("mstep::distributed::barrier").
  std::string label;

  /// Reads a collective node's attributes; `input` is its operand's type.
  static Collective of(const GraphNode& node, const TensorType& input);
  /// "mstep.all_reduce(sum) f32[8, 16]"
  std::string describe() const;
};

/// Runs one collective node, again and again (a kernel owns one): start()
/// issues the nonblocking MPI call on host memory and returns at once,
/// wait() completes it. `in` may be reused as soon as start() returns;
/// `out` is written until wait() returns. Not thread-safe.
class CollectiveRun {
 public:
  explicit CollectiveRun(Collective c);
  ~CollectiveRun();
  CollectiveRun(const CollectiveRun&) = delete;
  CollectiveRun& operator=(const CollectiveRun&) = delete;

  const Collective& collective() const { return c_; }
  absl::Status start(const void* in, void* out);
  /// Lets MPI progress the transfer (MPI_Test); true when it is done.
  bool progress();
  /// Completes the collective: the result is in `out`, or an error names
  /// the collective and what went wrong (a timeout: the missing ranks).
  absl::Status wait();
  bool in_flight() const { return in_flight_; }
  /// Of this run's wait() calls so far (for MSTEP_CPU_PROFILE): how many,
  /// and how many found the transfer already complete (progress() saw it
  /// end): those overlapped the work before the wait entirely.
  int64_t waits() const { return waits_; }
  int64_t waits_found_done() const { return waits_found_done_; }

 private:
  struct Mpi;  // requests (one per slice) and scratch memory (Communicator.cpp)
  Collective c_;
  std::unique_ptr<Mpi> mpi_;
  void* out_ = nullptr;
  bool in_flight_ = false;
  bool done_ = false;  // progress() saw the transfer complete
  int64_t waits_ = 0, waits_found_done_ = 0;
};

/// Start and wait at once (the ref backend's kernel).
absl::Status run_collective(const Collective& c, const void* in, void* out);

/// The collectives of `graph` in program order, one describe() per line;
/// empty when it has none.
std::string collective_signature(const TraceGraph& graph);

/// The world size `graph`'s collectives were recorded in (their
/// world_size attribute), or 0 when it has none.
int64_t recorded_world_size(const TraceGraph& graph);
/// OK when a stored graph (`what`: "step.mstep") recorded in a world of
/// `recorded` processes (0: no collectives) can run in this process's
/// world; else FailedPrecondition naming both sizes.
absl::Status check_recorded_world(int64_t recorded, absl::string_view what);

/// What a rank tells the others about a step graph at its first run.
struct GraphIdentity {
  uint64_t structure = 0;  // GraphKey::structure
  uint64_t types = 0;      // GraphKey::types
  std::string collectives; // collective_signature()
  std::string inputs;      // the graph's input types, "f32[8, 16], i64[8]"
};
/// Compares `mine` across ranks (an all-gather, under the timeout): OK when
/// every rank runs the same graph, else FailedPrecondition saying which
/// rank differs and how ("rank 1 has another graph: shapes f32[8, 16] vs
/// f32[4, 16] ..."). Every rank gets the error. OK in a world of 1.
absl::Status check_same_graph(const GraphIdentity& mine);

}  // namespace mstep::dist
