// One process of the tracer-level multi-process cache test
// (cache_process_test.cpp): runs graphs <first> .. <first+count-1> through
// mark_step() for <rounds> rounds, each round in an order drawn from
// <seed>, and checks every result against the same computation on the
// host. The disk cache comes from the environment, as in a real job:
//
//   MSTEP_CACHE=<dir>,false,<max_mb> MSTEP_MAX_GRAPHS=2 \
//     mstep_cache_process_worker <first> <count> <rounds> <seed>
//
// A small MSTEP_MAX_GRAPHS makes every round miss in memory again, so the
// processes keep loading from and storing to the shared directory. Graph g
// has its own shapes (x is f32[g + 2, 5]), hence its own cache entry.
//
// Prints one line "compiles=N disk_hits=N disk_misses=N disk_corrupt=N
// warnings=N lookups=N" on stdout. Exit codes: 0 ok, 2 usage or no disk
// cache, 3 a wrong result, 4 a corrupt entry or any warning (concurrent
// writers that rename whole files must never produce one), 5 an exception.
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "lib/runtime/DiskCache.h"
#include "mstep/mstep.h"
#include "mstep/runtime/Tracer.h"

namespace {

constexpr int64_t kCols = 5, kOut = 3;

/// Deterministic inputs of graph g: x f32[g + 2, kCols], w f32[kCols, kOut].
std::vector<float> x_values(int g) {
  std::vector<float> v((g + 2) * kCols);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(std::sin(0.37 * i + g));
  return v;
}
std::vector<float> w_values(int g) {
  std::vector<float> v(kCols * kOut);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(std::cos(0.91 * i - g));
  return v;
}

/// The graph: per row, sum(relu(x @ w - 0.25)) * 1.5 + sum(x^2) / cols.
std::vector<double> expected(int g) {
  const std::vector<float> x = x_values(g), w = w_values(g);
  std::vector<double> out(g + 2);
  for (int64_t r = 0; r < g + 2; ++r) {
    double relu_sum = 0, sq = 0;
    for (int64_t o = 0; o < kOut; ++o) {
      double acc = 0;
      for (int64_t k = 0; k < kCols; ++k) acc += double{x[r * kCols + k]} * w[k * kOut + o];
      relu_sum += std::max(acc - 0.25, 0.0);
    }
    for (int64_t k = 0; k < kCols; ++k) sq += double{x[r * kCols + k]} * x[r * kCols + k];
    out[r] = relu_sum * 1.5 + sq / kCols;
  }
  return out;
}

std::vector<float> run_graph(int g) {
  using namespace mstep;
  Tensor x = from_vector(x_values(g), {g + 2, kCols});
  Tensor w = from_vector(w_values(g), {kCols, kOut});
  const int64_t rows_dim[] = {1};
  Tensor y = sum(relu(matmul(x, w) - 0.25), rows_dim) * 1.5 + mean(x * x, rows_dim);
  mark_step();
  return y.to_vector<float>();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s <first> <count> <rounds> <seed>\n", argv[0]);
    return 2;
  }
  const int first = std::atoi(argv[1]), count = std::atoi(argv[2]), rounds = std::atoi(argv[3]);
  uint64_t rng = std::strtoull(argv[4], nullptr, 10) * 2654435761u + 1;
  std::atomic<int64_t> warnings{0};
  mstep::set_warning_handler([&](absl::string_view w) {
    ++warnings;
    std::fprintf(stderr, "worker warning: %.*s\n", static_cast<int>(w.size()), w.data());
  });
  try {
    if (!mstep::Tracer::get().disk_cache()) {
      std::fprintf(stderr, "worker: no disk cache (set MSTEP_CACHE)\n");
      return 2;
    }
    int64_t lookups = 0;
    std::vector<int> order(count);
    for (int round = 0; round < rounds; ++round) {
      for (int i = 0; i < count; ++i) order[i] = first + i;
      for (int i = count - 1; i > 0; --i) {  // Fisher-Yates with a 64-bit LCG
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        std::swap(order[i], order[(rng >> 33) % (i + 1)]);
      }
      for (int g : order) {
        const std::vector<float> got = run_graph(g);
        const std::vector<double> want = expected(g);
        ++lookups;
        if (got.size() != want.size()) {
          std::fprintf(stderr, "worker: graph %d gave %zu values, expected %zu\n", g, got.size(),
                       want.size());
          return 3;
        }
        for (size_t r = 0; r < want.size(); ++r) {
          if (std::abs(got[r] - want[r]) > 1e-4 * (1 + std::abs(want[r]))) {
            std::fprintf(stderr, "worker: graph %d row %zu is %.9g, expected %.9g\n", g, r,
                         got[r], want[r]);
            return 3;
          }
        }
      }
    }
    mstep::Tracer::get().reset_disk_cache();  // finishes the queued writes
    const mstep::Metrics m = mstep::metrics();
    std::printf("compiles=%lld disk_hits=%lld disk_misses=%lld disk_corrupt=%lld warnings=%lld "
                "lookups=%lld\n",
                static_cast<long long>(m.compiles), static_cast<long long>(m.disk_hits),
                static_cast<long long>(m.disk_misses), static_cast<long long>(m.disk_corrupt),
                static_cast<long long>(warnings.load()), static_cast<long long>(lookups));
    std::fflush(stdout);
    if (m.disk_corrupt > 0 || warnings.load() > 0) return 4;
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "worker: %s\n", e.what());
    return 5;
  }
}
