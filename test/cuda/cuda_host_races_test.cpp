// Races in the cuda kernels, found on the host. Every iteration of a
// kernel's scf.parallel loops (its blocks, its threads, a block-rows
// phase's threads) runs concurrently on the GPU, with no order among them
// and no atomics in mstep's kernels. So a kernel is free of races only if
// its results do not depend on that order: whole plans run on the host in
// plan order with every parallel loop forwards, then backwards
// (ScopedReversedParallelLoops, TiledHost.h), must give the same bytes in
// every value, intermediates included. A comparison with ref within a
// tolerance would let a race that moves the last bits pass; this does not.
// A third run starts every value that is no input as 0xff bytes (NaN)
// instead of 0x7f: an output that changes read bytes no step wrote (what
// validate_cuda_definitions cannot see: a part of a value its producer
// left unwritten).
//
// What this cannot see: a race between a phase's threads that the
// barrier placement (map_block_rows) would introduce, which only a GPU
// run shows (scripts/gpu_check.sh).
#include <gmock/gmock.h>
#include <gtest/gtest-spi.h>
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

TEST(CudaHostRaces, AnOutputReadFromBytesNoStepWroteIsCaught) {
  // %1 (f32[2], no input) has only its element 0 written; the output %2
  // copies both elements: its element 1 is whatever %1 held.
  const char* text =
      "func.func @op0(%in: memref<2xf32>, %scratch: memref<2xf32>, %out: memref<2xf32>) {\n"
      "  %c0 = arith.constant 0 : index\n"
      "  %c1 = arith.constant 1 : index\n"
      "  %x = memref.load %in[%c0] : memref<2xf32>\n"
      "  memref.store %x, %scratch[%c0] : memref<2xf32>\n"
      "  %a = memref.load %scratch[%c0] : memref<2xf32>\n"
      "  %b = memref.load %scratch[%c1] : memref<2xf32>\n"
      "  memref.store %a, %out[%c0] : memref<2xf32>\n"
      "  memref.store %b, %out[%c1] : memref<2xf32>\n"
      "  return\n"
      "}\n";
  CudaStepContext step_context(nullptr);
  CudaPlan plan;
  plan.values.assign(3, TensorType{Shape({2}), DType::f32});
  plan.num_inputs = 1;
  plan.outputs = {2};
  TiledOp op{.name = "op0", .module = text, .params = {0, 1, 2}};
  const std::vector<std::vector<float>> inputs = {{1.5f, 2.5f}};
  std::vector<std::vector<char>> first = testing::host_values(plan, inputs),
                                 poisoned = testing::host_values(plan, inputs, char(0xff));
  run_tiled_op_on_host(step_context.context(), op, first);
  run_tiled_op_on_host(step_context.context(), op, poisoned);
  EXPECT_NONFATAL_FAILURE(testing::expect_no_unwritten_reads(plan, first, poisoned, "the step"),
                          "output 0 (%2, f32[2]) changes with the bytes of memory no step wrote");
}

/// `graph`'s step compiled for cuda and run on the host forwards and
/// backwards: every value's bytes equal; and once more with the values
/// that are no inputs starting as NaN bytes: the same outputs.
void expect_the_same_bytes_in_either_order(const TraceGraph& graph, int64_t max_integer) {
  CudaStepContext step(nullptr);
  mlir::OwningOpRef<mlir::ModuleOp> module = testing::pipelined(graph, step);
  ASSERT_TRUE(module);
  auto compiled = compile_cuda_step(*module, default_cuda_compile_options());
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  const CudaPlan& plan = compiled->plan;
  testing::run_plan_on_host_checked(
      step.context(), *compiled,
      testing::host_values(plan, testing::step_inputs(plan, max_integer)), "the whole step");
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

TEST(CudaHostRaces, GptMinisStepWithDropoutAndDdpBucketsGivesTheSameBytesInEitherOrder) {
  // gpt_train --dropout 0.1 --ddp (a world of one on the host): Philox
  // masks in the composed attention and the residual branches, gradient
  // buckets written in place for their collectives.
  expect_the_same_bytes_in_either_order(mstep::testing::gpt_training_step_graph(3, true, 0.1), 16);
}

TEST(CudaHostRaces, GptMinisWholeBf16AutocastStepGivesTheSameBytesInEitherOrder) {
  expect_the_same_bytes_in_either_order(testing::gpt_bf16_step_graph(), 16);
}

}  // namespace
}  // namespace mstep::cuda
