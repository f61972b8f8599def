// Races in the cuda kernels, found on the host. Every iteration of a
// kernel's scf.parallel loops (its blocks, its threads, a block-rows
// phase's threads) runs concurrently on the GPU, with no order among them
// and no atomics in mstep's kernels. So a kernel is free of races only if
// its results do not depend on that order: whole plans run on the host in
// plan order with every parallel loop forwards, then backwards
// (ScopedReversedParallelLoops, TiledHost.h), must give the same bytes in
// every value, intermediates included. A comparison with ref within a
// tolerance would let a race that moves the last bits pass; this does not.
//
// What this cannot see: a race between a phase's threads that the
// barrier placement (map_block_rows) would introduce, which only a GPU
// run shows (scripts/gpu_check.sh).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test/cuda/RefOracle.h"
#include "test/cuda/TiledHost.h"
#include "test/cuda/TrainingSteps.h"

namespace mstep::cuda {
namespace {

using testing::CudaStepContext;
using testing::run_tiled_op_on_host;

/// A loop nest whose every iteration of scf.parallel (lb) to (ub) step
/// (step) stores its index into out[0]: the survivor is the iteration run
/// last. A race on purpose.
std::string last_writer_loop(int lb, int ub, int step) {
  return "func.func @op0(%out: memref<1xi64>) {\n"
         "  %c0 = arith.constant 0 : index\n"
         "  %lb = arith.constant " + std::to_string(lb) + " : index\n"
         "  %ub = arith.constant " + std::to_string(ub) + " : index\n"
         "  %step = arith.constant " + std::to_string(step) + " : index\n"
         "  scf.parallel (%i) = (%lb) to (%ub) step (%step) {\n"
         "    %v = arith.index_cast %i : index to i64\n"
         "    memref.store %v, %out[%c0] : memref<1xi64>\n"
         "  }\n"
         "  return\n"
         "}\n";
}

int64_t last_writer(int lb, int ub, int step) {
  CudaStepContext step_context(nullptr);
  TiledOp op{.name = "op0", .module = last_writer_loop(lb, ub, step), .params = {0}};
  std::vector<std::vector<char>> values = {std::vector<char>(8, 0)};
  run_tiled_op_on_host(step_context.context(), op, values);
  int64_t result;
  std::memcpy(&result, values[0].data(), sizeof result);
  return result;
}

TEST(CudaHostRaces, ReversedLoopsRunTheirLastIterationFirst) {
  // Iterations 0..3, and 1, 3, 5, 7 (a lower bound and a step that do not
  // divide the span).
  EXPECT_EQ(last_writer(0, 4, 1), 3);
  EXPECT_EQ(last_writer(1, 8, 2), 7);
  testing::ScopedReversedParallelLoops reversed;
  EXPECT_EQ(last_writer(0, 4, 1), 0);
  EXPECT_EQ(last_writer(1, 8, 2), 1);
}

/// `graph`'s step compiled for cuda and run on the host forwards and
/// backwards: every value's bytes equal.
void expect_the_same_bytes_in_either_order(const TraceGraph& graph, int64_t max_integer) {
  CudaStepContext step(nullptr);
  mlir::OwningOpRef<mlir::ModuleOp> module = testing::pipelined(graph, step);
  ASSERT_TRUE(module);
  auto compiled = compile_cuda_step(*module, default_cuda_compile_options());
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  const CudaPlan& plan = compiled->plan;
  const std::vector<std::vector<char>> inputs = testing::step_inputs(plan, max_integer);
  auto run = [&](std::vector<std::vector<char>>& values) {
    values = testing::host_values(plan, inputs);
    ASSERT_NO_FATAL_FAILURE(testing::run_plan_on_host(step.context(), *compiled, values));
  };
  std::vector<std::vector<char>> forward, backward;
  ASSERT_NO_FATAL_FAILURE(run(forward));
  {
    testing::ScopedReversedParallelLoops reversed;
    ASSERT_NO_FATAL_FAILURE(run(backward));
  }
  testing::expect_the_same_bytes(plan, forward, backward, "the whole step");
}

TEST(CudaHostRaces, MnistsWholeStepGivesTheSameBytesInEitherOrder) {
  expect_the_same_bytes_in_either_order(testing::mnist_step_graph(), 1);
}

TEST(CudaHostRaces, GptMinisWholeF32StepGivesTheSameBytesInEitherOrder) {
  // Row groups, column-sum and elementwise batches, slice_scatter
  // fusions, the composed attention's row kernels, the embedding
  // gradients, the optimizer update.
  expect_the_same_bytes_in_either_order(testing::gpt_step_graph(), 16);
}

TEST(CudaHostRaces, GptMinisWholeBf16AutocastStepGivesTheSameBytesInEitherOrder) {
  expect_the_same_bytes_in_either_order(testing::gpt_bf16_step_graph(), 16);
}

}  // namespace
}  // namespace mstep::cuda
