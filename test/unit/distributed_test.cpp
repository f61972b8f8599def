// mstep::distributed without init(): a world of one process, where every
// collective is the identity (a node is still recorded, so a step's graph
// does not depend on the world size), and the errors each collective
// raises at its call. The collectives across processes are tested under
// mpirun (test/mpi, label mpi).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "lib/backends/cpu/CpuExecutable.h"
#include "lib/compiler/Compiler.h"
#include "mstep/ir/GraphSerialize.h"
#include "mstep/mstep.h"
#include "mstep/runtime/Backend.h"
#include "mstep/runtime/Tracer.h"
#include "test/unit/TestUtil.h"

namespace mstep {
namespace {

namespace dist = mstep::distributed;
using dist::ReduceOp;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::error_of;
using testing::f32;
using testing::i64;

class DistributedTest : public ::testing::TestWithParam<DeviceType> {
 protected:
  Tensor x23() const {
    return from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}, std::nullopt,
                       Device{GetParam(), 0});
  }
};

TEST(Distributed, AWorldOfOneWithoutInit) {
  EXPECT_FALSE(dist::is_initialized());
  EXPECT_EQ(dist::rank(), 0);
  EXPECT_EQ(dist::world_size(), 1);
  dist::barrier();  // alone: returns at once
}

TEST_P(DistributedTest, EveryCollectiveIsTheIdentity) {
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::mean, ReduceOp::max, ReduceOp::min})
    EXPECT_THAT(dist::all_reduce(x23(), op).to_vector<float>(), ElementsAre(1, 2, 3, 4, 5, 6));
  Tensor g = dist::all_gather(x23(), 1);
  EXPECT_EQ(g.shape(), (Shape{2, 3}));
  EXPECT_THAT(g.to_vector<float>(), ElementsAre(1, 2, 3, 4, 5, 6));
  EXPECT_THAT(dist::broadcast(x23(), 0).to_vector<float>(), ElementsAre(1, 2, 3, 4, 5, 6));
  Tensor s = dist::reduce_scatter(x23(), ReduceOp::sum, -1);
  EXPECT_EQ(s.shape(), (Shape{2, 3}));
  EXPECT_THAT(s.to_vector<float>(), ElementsAre(1, 2, 3, 4, 5, 6));
  // Integer dtypes and fused neighbours.
  Tensor ints = from_vector(std::vector<int64_t>{7, -2}, {2}, std::nullopt, Device{GetParam(), 0});
  EXPECT_THAT(dist::all_reduce(ints, ReduceOp::max).to_vector<int64_t>(), ElementsAre(7, -2));
  EXPECT_THAT((dist::all_reduce(x23() * 2.0) + 1.0).to_vector<float>(),
              ElementsAre(3, 5, 7, 9, 11, 13));
}

TEST_P(DistributedTest, TheNodeIsRecordedWithItsWorld) {
  Tensor y = dist::all_reduce(x23(), ReduceOp::mean);
  const std::string text = pending_graph().to_text();
  EXPECT_THAT(text, HasSubstr("all_reduce("));
  EXPECT_THAT(text, HasSubstr("reduce_op=1"));
  EXPECT_THAT(text, HasSubstr("world_size=1"));
  mark_step();
}

TEST_P(DistributedTest, InnerDimGathersAndScattersAreDimZeroCollectivesBetweenPermutes) {
  // Along dim 1: the dim moved to the front, the collective along dim 0,
  // the dim moved back; no backend rearranges bytes around the transfer.
  Tensor g = dist::all_gather(x23(), 1);
  Tensor s = dist::reduce_scatter(x23(), ReduceOp::sum, -1);
  const std::string text = pending_graph().to_text();
  EXPECT_THAT(text, HasSubstr("all_gather("));
  EXPECT_THAT(text, HasSubstr("reduce_scatter("));
  EXPECT_THAT(text, HasSubstr("permute("));
  EXPECT_THAT(text, Not(HasSubstr("dim=1")));
  EXPECT_EQ(g.shape(), (Shape{2, 3}));
  EXPECT_THAT(g.to_vector<float>(), ElementsAre(1, 2, 3, 4, 5, 6));
  EXPECT_THAT(s.to_vector<float>(), ElementsAre(1, 2, 3, 4, 5, 6));
}

TEST_P(DistributedTest, TheGraphSerializesWithItsCollectives) {
  // Disk-cache entries and exported graphs store the trace graph: the
  // collectives and their attributes come back as they were.
  Tensor y = dist::reduce_scatter(dist::all_gather(x23(), 1), ReduceOp::max, 0) +
             dist::broadcast(x23(), 0);
  TraceGraph g = pending_graph();
  auto back = deserialize_graph(serialize_graph(g));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->to_text(), g.to_text());
  EXPECT_THAT(g.to_text(), HasSubstr("reduce_scatter("));
  EXPECT_THAT(g.to_text(), HasSubstr("root=0"));
  mark_step();
}

TEST_P(DistributedTest, GradientsFlowThroughSumAndMean) {
  // World of 1: the gradient of all_reduce is the all_reduce of the
  // gradient, the gradient itself.
  Tensor w = x23().requires_grad_();
  sum(dist::all_reduce(w * w, ReduceOp::mean) + dist::all_gather(w, 0)).backward();
  EXPECT_THAT(w.grad().to_vector<float>(), ElementsAre(3, 5, 7, 9, 11, 13));
}

TEST_P(DistributedTest, MaxHasNoGradient) {
  Tensor w = x23().requires_grad_();
  Tensor y = sum(dist::all_reduce(w, ReduceOp::max));
  const std::string msg = error_of([&] { y.backward(); });
  EXPECT_THAT(msg, HasSubstr("distributed::all_reduce with ReduceOp::max has no gradient"));
}

INSTANTIATE_TEST_SUITE_P(Backends, DistributedTest,
                         ::testing::Values(DeviceType::ref, DeviceType::cpu),
                         [](const auto& info) {
                           return std::string(info.param == DeviceType::ref ? "ref" : "cpu");
                         });

/// The kernels of the last recorded step compiled for cpu, in run order
/// (empty, with a test failure, when it cannot be compiled).
std::vector<std::string> cpu_kernels_of_last_step() {
  const StepRecord& step = Tracer::get().last_step();
  EXPECT_NE(step.graph, nullptr);
  if (!step.graph) return {};
  auto compiled =
      compile_graph(*step.graph, **BackendRegistry::get(DeviceType::cpu), {}, RuntimeOptions{});
  EXPECT_TRUE(compiled.ok()) << compiled.status();
  if (!compiled.ok()) return {};
  auto* exe = dynamic_cast<cpu::CpuExecutable*>(compiled->executable.get());
  EXPECT_NE(exe, nullptr);
  return exe ? exe->kernel_names() : std::vector<std::string>{};
}

TEST(Distributed, TheCpuStepWaitsAtTheFirstReader) {
  // y = all_reduce(a) * matmul(b, b): the collective starts before the
  // matmul, which does not need it, and is waited for after it, right
  // before the fusion that reads it.
  const Device cpu{DeviceType::cpu, 0};
  Tensor a = from_vector(std::vector<float>(16, 1.0f), {4, 4}, std::nullopt, cpu);
  Tensor b = from_vector(std::vector<float>(16, 2.0f), {4, 4}, std::nullopt, cpu);
  Tracer::get().set_record_steps(true);
  Tensor y = dist::all_reduce(a) * matmul(b, b);
  mark_step();
  const std::vector<std::string> names = cpu_kernels_of_last_step();
  Tracer::get().set_record_steps(false);
  ASSERT_FALSE(names.empty());
  auto at = [&](absl::string_view name) {
    return std::find(names.begin(), names.end(), name) - names.begin();
  };
  const std::string all = ::testing::PrintToString(names);
  ASSERT_LT(at("mpi.all_reduce"), static_cast<long>(names.size())) << all;
  ASSERT_LT(at("mpi.wait"), static_cast<long>(names.size())) << all;
  ASSERT_LT(at("onednn.matmul"), static_cast<long>(names.size())) << all;
  EXPECT_LT(at("mpi.all_reduce"), at("onednn.matmul")) << all;
  EXPECT_LT(at("onednn.matmul"), at("mpi.wait")) << all;
  EXPECT_EQ(at("mpi.wait") + 1, static_cast<long>(names.size()) - 1) << "the reader is last: " << all;
  EXPECT_THAT(y.to_vector<float>(), ::testing::Each(16.0f));
}

TEST(Distributed, TheCpuStepOverlapsWorkTracedAfterTheReaders) {
  // The tracer orders the step depth-first from its outputs, so v's reader
  // (the fusion computing v) comes right after the all_reduce, before the
  // matmul that does not need it; mstep-sink-collective-readers moves the
  // reader down, so the matmul runs while the collective is in flight.
  const Device cpu{DeviceType::cpu, 0};
  Tensor a = from_vector(std::vector<float>(16, 1.0f), {4, 4}, std::nullopt, cpu);
  Tensor b = from_vector(std::vector<float>(16, 2.0f), {4, 4}, std::nullopt, cpu);
  Tracer::get().set_record_steps(true);
  Tensor v = reshape(dist::all_reduce(a), {16}) * 3.0;
  Tensor m = matmul(b, b);
  mark_step();
  const std::vector<std::string> names = cpu_kernels_of_last_step();
  Tracer::get().set_record_steps(false);
  ASSERT_FALSE(names.empty());
  auto at = [&](absl::string_view name) {
    return std::find(names.begin(), names.end(), name) - names.begin();
  };
  const std::string all = ::testing::PrintToString(names);
  ASSERT_LT(at("mpi.wait"), static_cast<long>(names.size())) << all;
  ASSERT_LT(at("onednn.matmul"), static_cast<long>(names.size())) << all;
  EXPECT_LT(at("mpi.all_reduce"), at("onednn.matmul")) << all;
  EXPECT_LT(at("onednn.matmul"), at("mpi.wait")) << all;
  EXPECT_THAT(v.to_vector<float>(), ::testing::Each(3.0f));
  EXPECT_THAT(m.to_vector<float>(), ::testing::Each(16.0f));
}

TEST(Distributed, ErrorsAtTheCall) {
  EXPECT_THAT(error_of([] { dist::all_reduce(Tensor()); }),
              HasSubstr("distributed::all_reduce: the input is undefined"));
  Tensor flags = from_vector(std::vector<bool>{true, false}, {2});
  EXPECT_THAT(error_of([&] { dist::all_reduce(flags); }),
              HasSubstr("distributed::all_reduce: cannot reduce a bool tensor"));
  EXPECT_THAT(error_of([] { dist::all_reduce(i64({1, 2}, {2}), ReduceOp::mean); }),
              HasSubstr("ReduceOp::mean needs a floating-point input. Got i64[2]"));
  EXPECT_THAT(error_of([] { dist::all_gather(f32({1}, {}), 0); }),
              HasSubstr("distributed::all_gather: needs a tensor with at least one dim"));
  EXPECT_THAT(error_of([] { dist::all_gather(f32({1, 2}, {2}), 1); }),
              HasSubstr("distributed::all_gather"));
  EXPECT_THAT(error_of([] { dist::broadcast(f32({1, 2}, {2}), 1); }),
              HasSubstr("distributed::broadcast: root 1 is not a rank of this world of 1"));
  EXPECT_THAT(error_of([] { dist::reduce_scatter(f32({1, 2}, {2}), ReduceOp::sum, 3); }),
              HasSubstr("distributed::reduce_scatter"));
  // The process keeps working.
  EXPECT_THAT(dist::all_reduce(f32({4}, {1})).to_vector<float>(), ElementsAre(4));
}

}  // namespace
}  // namespace mstep
