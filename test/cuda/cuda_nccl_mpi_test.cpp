// The NCCL communicator's unique-id exchange (issue 23, CudaCollective.h)
// under mpirun -np 2, with the fake driver and the fake libnccl on each
// rank: only rank 0 calls ncclGetUniqueId, every rank joins a 2-rank
// communicator with its own rank and the id rank 0 made (the fake logs its
// first byte: 7 from its ncclGetUniqueId, 0 where the id never came).
// Prints "PASS nccl_mpi rank R" (ctest matches rank 0's). No GPU, no real
// NCCL.
#include <dlfcn.h>

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "lib/backends/cuda/CudaExecutable.h"
#include "lib/runtime/distributed/Communicator.h"
#include "test/cuda/CudaStepText.h"
#include "test/cuda/FakeCudaDriver.h"

namespace mstep::cuda {
namespace {

constexpr const char* kStep = R"(
func.func @step(%x: tensor<8x64xf32>) -> tensor<8x64xf32> {
  %0 = mstep.all_reduce %x {reduce_op = #mstep.reduce_op<sum>, world_size = 2 : i64} : tensor<8x64xf32> -> tensor<8x64xf32>
  return %0 : tensor<8x64xf32>
}
)";

int run() {
  RuntimeOptions options;
  if (absl::Status s = dist::init(options); !s.ok()) {
    std::printf("FAIL nccl_mpi: init: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  const int rank = dist::rank();
  auto fail = [&](const std::string& why) {
    std::printf("FAIL nccl_mpi rank %d: %s\n", rank, why.c_str());
    std::fflush(stdout);
    return 1;
  };
  if (dist::world_size() != 2) return fail("not a world of 2");
  testing::FakeCudaDriver fake;
  CudaBackendOptions backend_options;
  backend_options.nccl_library = MSTEP_FAKE_LIBNCCL;
  auto backend = CudaBackend::create(fake.driver(), backend_options);
  if (!backend.ok()) return fail(std::string(backend.status().message()));
  auto plan = testing::plan_of(kStep);
  if (!plan.ok()) return fail(std::string(plan.status().message()));
  auto exe = CudaExecutable::create(**backend, *plan);
  if (!exe.ok()) return fail(std::string(exe.status().message()));
  void* lib = dlopen(MSTEP_FAKE_LIBNCCL, RTLD_NOW);
  auto log_fn = reinterpret_cast<const char* (*)()>(dlsym(lib, "mstep_fake_nccl_log"));
  const std::string log = log_fn();
  const bool made_id = log.find("ncclGetUniqueId") != std::string::npos;
  if (made_id != (rank == 0)) return fail(absl::StrCat("ncclGetUniqueId called: ", made_id, "\n", log));
  const std::string joined =
      absl::StrCat("ncclCommInitRankConfig nranks=2 rank=", rank, " id=7 blocking=0");
  if (log.find(joined) == std::string::npos) return fail(absl::StrCat("no '", joined, "' in\n", log));
  exe->reset();
  backend->reset();
  std::printf("PASS nccl_mpi rank %d\n", rank);
  std::fflush(stdout);
  return dist::finalize().ok() ? 0 : 1;
}

}  // namespace
}  // namespace mstep::cuda

int main() { return mstep::cuda::run(); }
