// The process group's shared internals (Communicator.cpp, SameGraphCheck.cpp):
// the process-wide state under one mutex, polling under the
// MSTEP_DIST_TIMEOUT deadline, MPI error text, and the arrival notes that
// name a rank that never came. Not installed; every file that includes it
// is compiled with the same MSTEP_HAVE_MPI (lib/runtime/CMakeLists.txt),
// since State's layout depends on it.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

#if MSTEP_HAVE_MPI
#define OMPI_SKIP_MPICXX 1  // MPI's C API only: the C++ bindings need libmpi_cxx
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace mstep::dist {

/// Process-wide state, guarded by `mu` (MPI calls included).
struct State {
  std::mutex mu;
  bool initialized = false;
  bool finalized = false;
  int rank = 0;
  int world = 1;
  double timeout = 300;
  int64_t max_call_bytes = int64_t{1} << 30;  // RuntimeOptions::dist_max_call_bytes
  std::string failure;  // the first collective that failed, for later calls
  uint64_t entered = 0; // collectives this rank entered
#if MSTEP_HAVE_MPI
  MPI_Comm data = MPI_COMM_NULL;   // the collectives
  MPI_Comm notes = MPI_COMM_NULL;  // arrival notes
  MPI_Comm check = MPI_COMM_NULL;  // check_same_graph
  MPI_Op half_ops[2][3] = {};      // [bf16, f16][sum, max, min]
  bool we_initialized_mpi = false;
#endif
};

State& state();

using Clock = std::chrono::steady_clock;

/// Polls `done` until it returns true or the deadline passes; spins a
/// little, then sleeps briefly, so a waiting rank leaves its core to the
/// others on an oversubscribed machine.
template <typename Done>
bool poll_until(Clock::time_point deadline, Done done) {
  for (int i = 0;; ++i) {
    if (done()) return true;
    if (Clock::now() > deadline) return false;
    if (i < 64)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(i < 1024 ? 20 : 200));
  }
}

/// Now plus the state's timeout.
Clock::time_point deadline_from_now();
std::string seconds_text(double s);

/// The arrival note a rank sends every peer as it enters a collective.
struct Note {
  uint64_t seq = 0;
  char what[120] = {};
};

#if MSTEP_HAVE_MPI

std::string mpi_error(int code);
absl::Status mpi_check(int code, absl::string_view call, absl::string_view what);
/// MPI_Test on each request (a completed one becomes MPI_REQUEST_NULL);
/// true when all are complete.
bool test_requests(std::vector<MPI_Request>& requests);

/// The arrival notes of one collective (or graph check): posted as a rank
/// enters it, tested with it, read when it ends or times out.
struct ArrivalNotes {
  std::vector<MPI_Request> requests;  // receives from each peer, then sends
  std::vector<Note> received;         // per peer (own slot unused)
  Note sent;

  /// Under the state's lock.
  void post(State& s, absl::string_view what);
  /// Under the state's lock: whether every note went and came.
  bool test() { return test_requests(requests); }
  /// The peers whose note did not come.
  std::vector<int> missing(const State& s) const;
  /// The peers whose note came from another collective (another count, or
  /// with `compare_what` another description), described.
  std::vector<std::string> out_of_step(const State& s, bool compare_what) const;
  /// "rank 1 never arrived", or what else kept the transfer.
  std::string who_is_missing(const State& s) const;
};

#endif  // MSTEP_HAVE_MPI

}  // namespace mstep::dist
