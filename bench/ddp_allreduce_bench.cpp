// ddp_allreduce_bench: the all-reduce time of a data-parallel step's
// gradients alone (bench/ddp_scaling.sh): `numel` f32 values cut into
// buckets of at most `bucket_mb` MiB, one mstep.all_reduce (mean) per
// bucket, in one step graph; the median of `reps` steps (after 2 warmup
// steps) in ms. Run under mpirun; rank 0 prints
//   allreduce_ms <median> buckets <n> world <w>
// Usage: ddp_allreduce_bench NUMEL BUCKET_MB [REPS] [FIRST_BUCKET_MB]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "mstep/mstep.h"

using namespace mstep;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: ddp_allreduce_bench NUMEL BUCKET_MB [REPS] [FIRST_BUCKET_MB]\n");
    return 2;
  }
  const int64_t numel = std::atoll(argv[1]);
  const double bucket_mb = std::atof(argv[2]);
  const int reps = argc > 3 ? std::atoi(argv[3]) : 10;
  // The first bucket's cap (DDP's first_bucket_cap_mb; 0: bucket_mb).
  const double first_mb = argc > 4 ? std::atof(argv[4]) : 0;
  distributed::init();
  const int64_t per_bucket = std::max<int64_t>(1, int64_t(bucket_mb * 1024 * 1024 / 4));
  std::vector<Tensor> buckets;
  int64_t cap =
      first_mb > 0 ? std::max<int64_t>(1, int64_t(first_mb * 1024 * 1024 / 4)) : per_bucket;
  for (int64_t left = numel; left > 0; left -= cap, cap = per_bucket)
    buckets.push_back(from_vector(std::vector<float>(std::min(left, cap), 1.0f),
                                  {std::min(left, cap)}));
  std::vector<double> ms;
  for (int i = 0; i < reps + 2; ++i) {
    distributed::barrier();
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<Tensor> out;
    for (const Tensor& b : buckets) out.push_back(distributed::all_reduce(b, distributed::ReduceOp::mean));
    mark_step();  // runs the step (the cpu backend returns when it is done)
    if (i >= 2)
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  if (distributed::rank() == 0)
    std::printf("allreduce_ms %.3f buckets %zu world %d\n", ms[ms.size() / 2], buckets.size(),
                distributed::world_size());
  distributed::finalize();
  return 0;
}
