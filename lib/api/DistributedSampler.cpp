// distributed::DistributedSampler (mstep/api/DistributedSampler.h): torch's
// index arithmetic, with a shuffle that is the same on every rank.
#include "mstep/api/DistributedSampler.h"

#include <random>

#include "absl/strings/str_cat.h"
#include "lib/api/OpBuilder.h"
#include "mstep/api/Distributed.h"

namespace mstep::distributed {

namespace {
constexpr const char* kOp = "DistributedSampler";

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
}  // namespace

DistributedSampler::DistributedSampler(int64_t dataset_size, DistributedSamplerOptions options)
    : dataset_size_(dataset_size),
      replicas_(options.num_replicas < 0 ? world_size() : options.num_replicas),
      rank_(options.rank < 0 ? distributed::rank() : options.rank),
      options_(options) {
  if (dataset_size < 0)
    detail::throw_op_error(kOp, absl::StrCat("dataset_size must be >= 0, got ", dataset_size), "",
                           "Pass the number of samples in the data set.");
  if (replicas_ < 1)
    detail::throw_op_error(kOp, absl::StrCat("num_replicas must be >= 1, got ", replicas_), "",
                           "Leave it at -1 for world_size(), or pass the number of ranks.");
  if (rank_ >= replicas_)
    detail::throw_op_error(kOp,
                           absl::StrCat("rank ", rank_, " is outside [0, ", replicas_, ")"), "",
                           "Pass a rank below num_replicas, or -1 for this process's rank().");
  num_samples_ = options.drop_last && dataset_size % replicas_ != 0
                     ? ceil_div(dataset_size - replicas_, replicas_)
                     : ceil_div(dataset_size, replicas_);
  if (num_samples_ < 0) num_samples_ = 0;
}

std::vector<int64_t> DistributedSampler::indices() const {
  std::vector<int64_t> all(dataset_size_);
  for (int64_t i = 0; i < dataset_size_; ++i) all[i] = i;
  if (options_.shuffle) {
    // Fisher-Yates with a uniform draw written out (std::shuffle and
    // std::uniform_int_distribution differ between standard libraries).
    std::mt19937_64 rng(options_.seed + static_cast<uint64_t>(epoch_));
    for (int64_t i = dataset_size_ - 1; i > 0; --i) {
      const uint64_t range = static_cast<uint64_t>(i) + 1;
      const uint64_t limit = UINT64_MAX - UINT64_MAX % range;
      uint64_t draw;
      do draw = rng();
      while (draw >= limit);
      std::swap(all[i], all[static_cast<int64_t>(draw % range)]);
    }
  }
  const int64_t total = num_samples_ * replicas_;
  if (total > dataset_size_ && dataset_size_ > 0)  // pad with the first indices, repeated
    for (int64_t i = 0, n = dataset_size_; int64_t(all.size()) < total; ++i)
      all.push_back(all[i % n]);
  std::vector<int64_t> mine;
  mine.reserve(num_samples_);
  for (int64_t i = rank_; i < total && i < int64_t(all.size()); i += replicas_)
    mine.push_back(all[i]);
  return mine;
}

}  // namespace mstep::distributed
