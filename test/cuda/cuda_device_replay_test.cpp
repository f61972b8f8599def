// Graph's device replay (lib/runtime/DeviceReplay) over the fake driver's
// CUDA graphs, for a step whose reads all go through library work (a
// training step's matmuls are cuBLASLt calls, whose nodes cannot be
// patched): a data input is copied into a static buffer at the head of the
// graph, so when it moves, that copy node is patched and nothing is
// recorded again (device_graph_rerecords stays 0), and the results are the
// new input's. Library work here is a stand-in (a copy node the fake runs,
// plus a node it reports as a memset), named as CudaExecutable names a
// cuBLASLt step.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "lib/backends/cuda/CudaBackend.h"
#include "lib/runtime/DeviceReplay.h"
#include "mstep/core/Error.h"
#include "mstep/runtime/Metrics.h"
#include "mstep/runtime/TensorImpl.h"
#include "test/cuda/FakeCudaBackendTest.h"

namespace mstep::cuda {
namespace {

using ::testing::ElementsAre;
using ::testing::SizeIs;

/// A step of two "matmuls": result 0 = a stand-in library call over input
/// 0 (the batch), result 1 = one over input 1 (the weight, which the step
/// writes back), each into the offered buffer.
class LibraryStep final : public Executable {
 public:
  LibraryStep(CudaBackend& backend, testing::FakeCudaDriver& fake)
      : backend_(backend), fake_(fake) {}
  using Executable::run;
  absl::StatusOr<std::vector<BufferPtr>> run(absl::Span<const BufferPtr> inputs,
                                             const Donation& donation) override {
    std::vector<BufferPtr> results;
    for (size_t i = 0; i < 2; ++i) {
      BufferPtr from = inputs[i], into = donation.outputs[i];
      const Buffer* reads[] = {from.get()};
      const Buffer* writes[] = {into.get()};
      MSTEP_RETURN_IF_ERROR(backend_.enqueue(
          "cublasLt step (a stand-in)",
          [&] {
            MSTEP_RETURN_IF_ERROR(MSTEP_CUDA_CALL(
                backend_.context().api(), cuMemcpyDtoDAsync, CudaBackend::device_pointer(*into),
                CudaBackend::device_pointer(*from), from->type().bytes(),
                backend_.context().stream()));
            fake_.record_stream_call("cublasLtMatmul", backend_.context().stream(), "");
            return absl::OkStatus();
          },
          reads, writes));
      results.push_back(into);
    }
    return results;
  }

 private:
  CudaBackend& backend_;
  testing::FakeCudaDriver& fake_;
};

class CudaDeviceReplayTest : public testing::FakeCudaBackendTest {
 protected:
  void SetUp() override {
    FakeCudaBackendTest::SetUp();
    reset_metrics();
    x_ = tensor({1, 2, 3, 4}, InputRole::input);
    w_ = tensor({9, 9, 9, 9}, InputRole::parameter);
    y_ = TensorImpl::make(type_, device_);
    y_->add_handle();
    internal::Segment seg;
    seg.executable = std::make_shared<LibraryStep>(*backend_, fake_);
    seg.device = device_;
    for (const auto& [t, role] : {std::pair{x_, InputRole::input}, {w_, InputRole::parameter}}) {
      internal::InputBinding b;
      b.source = internal::InputBinding::Source::tensor;
      b.tensor = t;
      seg.inputs.push_back(b);
      seg.input_info.push_back({type_, device_, role});
    }
    seg.result_types = {type_, type_};
    seg.outputs = {{.result = 0, .offerable = false, .tensor = y_},
                   {.result = 1, .offerable = false, .tensor = w_}};
    segments_.push_back(std::move(seg));
  }
  void TearDown() override {
    y_->drop_handle();
    for (const auto& t : {x_, w_}) t->drop_handle();
  }
  std::shared_ptr<TensorImpl> tensor(std::vector<float> values, InputRole role) {
    auto t = TensorImpl::make(type_, device_);
    t->set_buffer(filled(values));
    t->set_input_role(role);
    t->add_handle();
    return t;
  }
  BufferPtr filled(const std::vector<float>& values) {
    BufferPtr b = input(type_);
    EXPECT_TRUE(backend_->copy_in(*b, values.data(), type_.bytes()).ok());
    return b;
  }
  std::vector<float> read(const TensorImpl& t) {
    std::vector<float> host(type_.numel());
    EXPECT_TRUE(backend_->copy_out(*t.buffer(), host.data(), type_.bytes()).ok());
    return host;
  }
  const TensorType type_{Shape({4}), DType::f32};
  const Device device_{DeviceType::cuda, 0};
  std::shared_ptr<TensorImpl> x_, w_, y_;
  std::vector<internal::Segment> segments_;
};

TEST_F(CudaDeviceReplayTest, AMovedBatchPatchesTheHeadCopyAndIsNotRecordedAgain) {
  std::unique_ptr<internal::DeviceReplay> replay =
      internal::DeviceReplay::record(segments_, *backend_);
  ASSERT_NE(replay, nullptr);
  const size_t captures = fake_.calls_named("cuStreamBeginCapture").size();
  const BufferPtr w_buffer = w_->buffer();
  replay->replay(0, 0);
  EXPECT_THAT(read(*y_), ElementsAre(1, 2, 3, 4));
  for (float v : {5.0f, 20.0f}) {
    // As `x.copy_(batch)`: the tensor now holds another buffer.
    x_->set_buffer(filled({v, v + 1, v + 2, v + 3}));
    const size_t before = fake_.calls.size();
    replay->replay(0, 0);
    EXPECT_THAT(read(*y_), ElementsAre(v, v + 1, v + 2, v + 3));
    size_t set = 0;
    for (size_t i = before; i < fake_.calls.size(); ++i)
      if (fake_.calls[i].name == "cuGraphExecMemcpyNodeSetParams") {
        ++set;
        EXPECT_EQ(fake_.calls[i].source, CudaBackend::device_pointer(*x_->buffer()));
      }
    EXPECT_EQ(set, 1u) << "only the head copy of x";
  }
  EXPECT_THAT(read(*w_), ElementsAre(9, 9, 9, 9));
  EXPECT_EQ(w_->buffer(), w_buffer) << "the weight is written back in place";
  EXPECT_THAT(fake_.calls_named("cuStreamBeginCapture"), SizeIs(captures));
  EXPECT_THAT(fake_.calls_named("cuGraphExecUpdate"), SizeIs(0));
  EXPECT_EQ(metrics().device_graph_launches, 3);
  EXPECT_EQ(metrics().device_graph_updates, 2);
  EXPECT_EQ(metrics().device_graph_node_patches, 2);
  EXPECT_EQ(metrics().device_graph_rerecords, 0);
}

TEST_F(CudaDeviceReplayTest, AMovedWeightThatLibraryWorkReadsIsRecordedAgainAndCounted) {
  std::unique_ptr<internal::DeviceReplay> replay =
      internal::DeviceReplay::record(segments_, *backend_);
  ASSERT_NE(replay, nullptr);
  // A snapshot shares the weight's buffer: the weight gets one of its own,
  // which the cuBLASLt stand-in reads, so the step is recorded again.
  const BufferPtr snapshot = w_->buffer();
  w_->set_buffer(filled({7, 7, 7, 7}));
  replay->replay(0, 0);
  EXPECT_THAT(read(*y_), ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(read(*w_), ElementsAre(7, 7, 7, 7));
  EXPECT_THAT(fake_.calls_named("cuGraphExecUpdate"), SizeIs(1));
  EXPECT_EQ(metrics().device_graph_updates, 1);
  EXPECT_EQ(metrics().device_graph_rerecords, 1);
  EXPECT_EQ(metrics().device_graph_node_patches, 0);
}

}  // namespace
}  // namespace mstep::cuda
