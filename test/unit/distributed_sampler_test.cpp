// distributed::DistributedSampler: each rank's share of an epoch. The
// unshuffled splits are torch 1.13's DistributedSampler(range(n),
// num_replicas, rank, shuffle=False, drop_last) (the oracle, run once);
// the shuffled ones are checked for what torch guarantees: the ranks
// together cover the epoch, the shuffle depends only on seed + epoch.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "mstep/api/DistributedSampler.h"
#include "mstep/core/Error.h"

namespace mstep::distributed {
namespace {

using Split = std::vector<std::vector<int64_t>>;

Split split(int64_t n, int64_t replicas, bool drop_last, bool shuffle = false, uint64_t seed = 0,
            int64_t epoch = 0) {
  Split out;
  for (int64_t r = 0; r < replicas; ++r) {
    DistributedSampler s(n, {.num_replicas = replicas, .rank = r, .shuffle = shuffle,
                             .seed = seed, .drop_last = drop_last});
    s.set_epoch(epoch);
    out.push_back(s.indices());
    EXPECT_EQ(int64_t(out.back().size()), s.size()) << "rank " << r;
  }
  return out;
}

TEST(DistributedSampler, UnshuffledMatchesTorch) {
  EXPECT_EQ(split(10, 3, false), (Split{{0, 3, 6, 9}, {1, 4, 7, 0}, {2, 5, 8, 1}}));
  EXPECT_EQ(split(10, 3, true), (Split{{0, 3, 6}, {1, 4, 7}, {2, 5, 8}}));
  EXPECT_EQ(split(2, 4, false), (Split{{0}, {1}, {0}, {1}}));
  EXPECT_EQ(split(7, 2, false), (Split{{0, 2, 4, 6}, {1, 3, 5, 0}}));
  EXPECT_EQ(split(7, 2, true), (Split{{0, 2, 4}, {1, 3, 5}}));
  EXPECT_EQ(split(0, 2, false), (Split{{}, {}}));
}

TEST(DistributedSampler, ShuffledRanksCoverTheEpochOnce) {
  const Split parts = split(1000, 4, false, true, /*seed=*/7, /*epoch=*/3);
  std::vector<int64_t> all;
  for (const auto& p : parts) all.insert(all.end(), p.begin(), p.end());
  std::sort(all.begin(), all.end());
  std::vector<int64_t> want(1000);
  for (int64_t i = 0; i < 1000; ++i) want[i] = i;
  EXPECT_EQ(all, want);
  // Shuffled: rank 0's first indices are not 0, 4, 8, ...
  EXPECT_NE(parts[0], split(1000, 4, false)[0]);
}

TEST(DistributedSampler, SameSeedAndEpochSameShuffleOtherwiseAnother) {
  EXPECT_EQ(split(50, 2, false, true, 1, 0), split(50, 2, false, true, 1, 0));
  EXPECT_NE(split(50, 2, false, true, 1, 0), split(50, 2, false, true, 1, 1));
  EXPECT_NE(split(50, 2, false, true, 1, 0), split(50, 2, false, true, 2, 0));
  // seed + epoch is the stream, as in torch.
  EXPECT_EQ(split(50, 2, false, true, 1, 1), split(50, 2, false, true, 2, 0));
}

TEST(DistributedSampler, DefaultsToTheWorldWithoutInit) {
  DistributedSampler s(5, {.shuffle = false});
  EXPECT_EQ(s.num_replicas(), 1);
  EXPECT_EQ(s.rank(), 0);
  EXPECT_EQ(s.indices(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
}

TEST(DistributedSampler, BadArgumentsNameTheProblem) {
  auto message = [](auto make) {
    try {
      make();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([] { DistributedSampler(-1); }).find("dataset_size must be >= 0"),
            std::string::npos);
  EXPECT_NE(message([] { DistributedSampler(4, {.num_replicas = 0}); })
                .find("num_replicas must be >= 1"),
            std::string::npos);
  EXPECT_NE(message([] { DistributedSampler(4, {.num_replicas = 2, .rank = 2}); })
                .find("rank 2 is outside [0, 2)"),
            std::string::npos);
}

}  // namespace
}  // namespace mstep::distributed
