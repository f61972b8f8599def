// A stored graph with collectives (Graph::save, issue 23) loads only in a
// world of the size it was captured in: load_graph refuses it elsewhere,
// naming both sizes, before anything runs (it used to fail only when its
// first collective ran). ctest runs this three times, sharing the files in
// MSTEP_STORED_GRAPH_DIR: in a world of 1 (saves world_1.mstep), under
// mpirun -np 2 (saves world_2.mstep, refuses world_1.mstep), and in a world
// of 1 again (refuses world_2.mstep); MSTEP_STORED_GRAPH_OTHER_WORLD names
// the file to refuse. Each run also replays its own file against the
// closed form.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "mstep/mstep.h"
#include "mstep/runtime/LoadedGraph.h"

namespace mstep {
namespace {

namespace dist = mstep::distributed;
using ::testing::HasSubstr;

std::string world_file(const std::string& dir, int world) {
  return dir + "/world_" + std::to_string(world) + ".mstep";
}

TEST(StoredGraphWorld, LoadsOnlyInTheWorldItWasCapturedIn) {
  const char* dir = std::getenv("MSTEP_STORED_GRAPH_DIR");
  if (!dir) GTEST_SKIP() << "MSTEP_STORED_GRAPH_DIR not set";
  const int w = dist::world_size(), r = dist::rank();
  std::filesystem::create_directories(dir);
  // acc += all_reduce(x), x = (r + 1) * [1, 2], captured and saved by rank 0.
  Tensor x = from_vector(std::vector<float>{float(r + 1), 2.0f * float(r + 1)}, {2});
  Tensor acc = zeros({2});
  acc.copy_(acc + 0.0);
  mark_step();
  Graph graph;
  graph.capture_begin();
  acc.copy_(acc + dist::all_reduce(x));
  graph.capture_end();
  const std::string mine = world_file(dir, w);
  if (r == 0) graph.save(mine, {{"x", x}, {"acc", acc}});
  dist::barrier();

  // In its own world it loads and replays: every rank's x is rank 0's
  // saved [1, 2], so the sum over the world is w * [1, 2].
  auto loaded = load_graph(mine);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  std::vector<float> acc_value(2, 0.0f);
  ASSERT_TRUE((*loaded)->write("acc", acc_value.data(), sizeof(float) * 2).ok());
  ASSERT_TRUE((*loaded)->replay().ok());
  ASSERT_TRUE((*loaded)->read("acc", acc_value.data(), sizeof(float) * 2).ok());
  EXPECT_FLOAT_EQ(acc_value[0], float(w));
  EXPECT_FLOAT_EQ(acc_value[1], 2.0f * float(w));

  const char* other = std::getenv("MSTEP_STORED_GRAPH_OTHER_WORLD");
  if (!other) return;
  auto refused = load_graph(world_file(dir, std::atoi(other)));
  ASSERT_FALSE(refused.ok()) << "a graph captured in a world of " << other
                             << " loaded in a world of " << w;
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string message(refused.status().message());
  EXPECT_THAT(message, HasSubstr(std::string("captured in a world of ") + other + " processes"));
  EXPECT_THAT(message, HasSubstr("this process is in a world of " + std::to_string(w)));
}

}  // namespace
}  // namespace mstep
