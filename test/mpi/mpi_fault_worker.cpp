// The faults of a data-parallel job, one per mode, for ctest (label mpi)
// under `mpirun -np 2`. Each mode checks the error a rank gets and prints
// "PASS <mode>" on rank 0 (ctest matches it; the job's exit code does not
// count, as a failed collective ends the job with MPI_Abort):
//   timeout   rank 1 skips an all_reduce; with MSTEP_DIST_TIMEOUT=2 rank 0
//             fails naming the collective and rank 1 (timeout_first: at
//             the first step, in the step-graph check).
//   mismatch  the ranks' step graphs differ in a shape: both fail at the
//             first run, naming rank 1 and both shapes.
//   env       MSTEP_WORLD_SIZE disagrees with mpirun's world: init() says so
//             (env_rank: MSTEP_RANK disagrees with MPI's rank).
//   single    no mpirun: init() makes a world of 1, all_reduce is the identity.
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>

#include "mstep/mstep.h"

namespace dist = mstep::distributed;
using mstep::Tensor;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

/// Prints the verdict; on a failure also the message that was wrong.
void verdict(const char* mode, bool ok, const std::string& message) {
  if (ok)
    std::printf("PASS %s rank %d\n", mode, dist::rank());
  else
    std::printf("FAIL %s rank %d: %s\n", mode, dist::rank(), message.c_str());
  std::fflush(stdout);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const mstep::Error& e) {
    return e.what();
  }
  return "(no error)";
}

/// Step 1 runs on both ranks; at step 2 rank 1 stays away: rank 0's
/// all_reduce itself times out. In the second run of the mode
/// (timeout_first), rank 1 is away from the first step, so the step-graph
/// check times out, naming the collective it precedes.
int timeout(bool at_first_step) {
  dist::init();
  auto step = [] {
    Tensor y = dist::all_reduce(mstep::ones({8}), dist::ReduceOp::sum);
    y.to_vector<float>();
  };
  if (!at_first_step) step();
  if (dist::rank() == 1) {  // never arrives; rank 0 aborts the job
    std::this_thread::sleep_for(std::chrono::seconds(60));
    return 1;
  }
  const auto t0 = std::chrono::steady_clock::now();
  const std::string m = error_of(step);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("rank 0 error after %.1f s: %s\n", s, m.c_str());
  const char* mode = at_first_step ? "timeout_first" : "timeout";
  verdict(mode,
          contains(m, "mstep.all_reduce(sum) f32[8]") && contains(m, "rank 1 never arrived") &&
              contains(m, "MSTEP_DIST_TIMEOUT") && s >= 1.5 && s < 20,
          m);
  // The process group is unusable now; a later collective says so at once.
  const std::string later = error_of(step);
  verdict(mode, contains(later, "an earlier collective failed"), later);
  dist::abort(0);
}

int mismatch() {
  dist::init();
  const int64_t rows = dist::rank() == 0 ? 8 : 4;
  const std::string m = error_of([&] {
    Tensor y = dist::all_reduce(mstep::ones({rows, 16}));
    y.to_vector<float>();
  });
  std::printf("rank %d error: %s\n", dist::rank(), m.c_str());
  verdict("mismatch",
          contains(m, "rank 1 has another graph") && contains(m, "f32[4, 16]") &&
              contains(m, "f32[8, 16]"),
          m);
  if (dist::rank() == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // let rank 1 print
    dist::abort(0);
  }
  std::this_thread::sleep_for(std::chrono::seconds(60));
  return 1;
}

int env() {
  const std::string m = error_of([] { dist::init(); });
  verdict("env", contains(m, "MSTEP_WORLD_SIZE=3") && contains(m, "world has 2 processes"), m);
  return 0;
}

int env_rank() {
  const std::string m = error_of([] { dist::init(); });
  verdict("env_rank", contains(m, "MSTEP_RANK=5 but MPI says this process is rank"), m);
  return 0;
}

int single() {
  dist::init();
  Tensor x = mstep::from_vector(std::vector<float>{1, 2, 3}, {3});
  std::vector<float> y = dist::all_reduce(x).to_vector<float>();
  std::vector<float> g = dist::all_gather(x).to_vector<float>();
  dist::barrier();
  verdict("single",
          dist::is_initialized() && dist::world_size() == 1 && dist::rank() == 0 &&
              y == std::vector<float>{1, 2, 3} && g == std::vector<float>{1, 2, 3},
          "world of 1 is not the identity");
  dist::finalize();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "timeout") return timeout(false);
  if (mode == "timeout_first") return timeout(true);
  if (mode == "mismatch") return mismatch();
  if (mode == "env") return env();
  if (mode == "env_rank") return env_rank();
  if (mode == "single") return single();
  std::fprintf(stderr, "usage: %s timeout|timeout_first|mismatch|env|env_rank|single\n", argv[0]);
  return 2;
}
