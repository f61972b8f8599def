// distributed::DistributedSampler: each rank's share of an epoch, as
// torch.utils.data.distributed.DistributedSampler (issue 23).
//
//   distributed::DistributedSampler sampler(dataset_size, {.seed = 0});
//   for (int64_t epoch = 0; ...; ++epoch) {
//     sampler.set_epoch(epoch);            // a new shuffle per epoch
//     for (int64_t i : sampler.indices()) ...this rank's samples, in order
//   }
//
// Every rank draws the same permutation of [0, dataset_size) from
// (seed + epoch) (a Fisher-Yates shuffle on std::mt19937_64, the same on
// every machine; not torch.randperm's values), then takes the elements
// rank, rank + num_replicas, ... of it. The epoch is cut to a multiple of
// num_replicas as torch does: drop_last drops the tail, otherwise the
// first indices are repeated to pad it, so every rank gets size() samples.
#pragma once

#include <cstdint>
#include <vector>

namespace mstep::distributed {

struct DistributedSamplerOptions {
  /// The ranks sharing the data; -1: world_size().
  int64_t num_replicas = -1;
  /// This rank's share; -1: rank().
  int64_t rank = -1;
  bool shuffle = true;
  uint64_t seed = 0;
  bool drop_last = false;
};

class DistributedSampler {
 public:
  /// Throws mstep::Error for a negative dataset_size, num_replicas < 1, or
  /// a rank outside [0, num_replicas).
  explicit DistributedSampler(int64_t dataset_size, DistributedSamplerOptions options = {});

  /// The epoch whose shuffle indices() returns (seed + epoch).
  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  int64_t epoch() const { return epoch_; }
  /// This rank's indices into the data set for the current epoch.
  std::vector<int64_t> indices() const;
  /// How many indices() returns: ceil(n / replicas), or with drop_last
  /// and n not a multiple, ceil((n - replicas) / replicas).
  int64_t size() const { return num_samples_; }
  int64_t num_replicas() const { return replicas_; }
  int64_t rank() const { return rank_; }

 private:
  int64_t dataset_size_, replicas_, rank_, num_samples_;
  DistributedSamplerOptions options_;
  int64_t epoch_ = 0;
};

}  // namespace mstep::distributed
