// DeviceReplay::record (Graph::capture_end's device-graph recording) on
// async_host's model of CUDA Graphs: a segment with an op run on the host
// cannot be recorded, and the error names the op and the backend; the
// backend keeps working. A backend that records no graphs gets no device
// replay and runs nothing at capture_end.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "lib/runtime/DeviceReplay.h"
#include "mstep/core/Error.h"
#include "test/unit/AsyncHostGraphs.h"

namespace mstep {
namespace {

using ::testing::HasSubstr;

/// One f32[2] result; says it runs `add` on the host; counts its runs.
class HostAddExecutable final : public Executable {
 public:
  using Executable::run;
  absl::StatusOr<std::vector<BufferPtr>> run(absl::Span<const BufferPtr>,
                                             const Donation& donation) override {
    ++runs;
    return std::vector<BufferPtr>{donation.outputs.empty() ? nullptr : donation.outputs[0]};
  }
  absl::Span<const HostFallbackOp> host_fallbacks() const override { return fallbacks_; }
  int runs = 0;

 private:
  const HostFallbackOp fallbacks_[1] = {{OpKind::add, DType::f32}};
};

std::vector<internal::Segment> one_segment(std::shared_ptr<Executable> executable) {
  internal::Segment seg;
  seg.executable = std::move(executable);
  seg.device = Device{DeviceType::async_host, 0};
  seg.result_types = {TensorType{Shape({2}), DType::f32}};
  std::vector<internal::Segment> segments;
  segments.push_back(std::move(seg));
  return segments;
}

class DeviceReplayRecordTest : public ::testing::Test {
 protected:
  void SetUp() override { testing::record_async_host_graphs(true); }
  void TearDown() override { testing::record_async_host_graphs(false); }
  Backend& backend() { return *value_or_throw(BackendRegistry::get(DeviceType::async_host)); }
};

TEST_F(DeviceReplayRecordTest, AHostFallbackCannotBeRecordedAndIsNamed) {
  auto exe = std::make_shared<HostAddExecutable>();
  std::vector<internal::Segment> segments = one_segment(exe);
  try {
    (void)internal::DeviceReplay::record(segments, backend());
    FAIL() << "a host fallback was recorded into a device graph";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot be recorded as a device graph on async_host"));
    EXPECT_THAT(e.what(), HasSubstr("captured graph 0: op add (f32) runs on the host"));
  }
  EXPECT_EQ(exe->runs, 0);
  // The recording ended: the backend allocates again.
  EXPECT_TRUE(backend().allocate(TensorType{Shape({2}), DType::f32}).ok());
}

TEST_F(DeviceReplayRecordTest, ABackendThatRecordsNoGraphsGetsNoDeviceReplay) {
  testing::record_async_host_graphs(false);
  auto exe = std::make_shared<HostAddExecutable>();
  std::vector<internal::Segment> segments = one_segment(exe);
  EXPECT_EQ(internal::DeviceReplay::record(segments, backend()), nullptr);
  EXPECT_EQ(exe->runs, 0);
}

}  // namespace
}  // namespace mstep
