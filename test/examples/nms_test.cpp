// The NMS custom op of examples/custom_ops/nms on ref and cpu: a captured
// post-processing step replays on new boxes bitwise equal to lazy mode and
// without recompiling, the index form is refused in a capture, and bad
// input is an error at the call. PyTorch's keep masks: the oracle
// (test/oracle/cases/nms.py).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "examples/custom_ops/nms/Nms.h"
#include "test/unit/TestUtil.h"

namespace mstep {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class NmsTest : public ::testing::TestWithParam<DeviceType> {
protected:
  void SetUp() override {
    saved_ = default_device();
    set_default_device(Device{GetParam(), 0});
  }
  void TearDown() override { set_default_device(saved_); }

private:
  Device saved_{DeviceType::ref, 0};
};

/// The mask as 0/1 integers.
std::vector<int64_t> mask_values(const Tensor& keep) {
  return keep.to(DType::i64).to_vector<int64_t>();
}

TEST_P(NmsTest, KeepsTheBestBoxOfEachOverlappingGroup) {
  // B overlaps A with IoU 81 / 119 = 0.68 and scores lower; C is apart.
  const Tensor boxes =
      from_vector(std::vector<float>{1, 1, 11, 11, 0, 0, 10, 10, 20, 20, 30, 30}, {3, 4});
  const Tensor scores = from_vector(std::vector<float>{0.8f, 0.9f, 0.7f}, {3});
  EXPECT_THAT(mask_values(examples::nms_keep_mask(boxes, scores, 0.5)), ElementsAre(0, 1, 1));
  EXPECT_THAT(mask_values(examples::nms_keep_mask(boxes, scores, 0.7)), ElementsAre(1, 1, 1));
}

/// The outputs of one step, on the host.
struct HostDetections {
  std::vector<float> scores, boxes, score_sum;
  std::vector<int64_t> keep, count;
  bool operator==(const HostDetections&) const = default;
};
HostDetections to_host(const examples::Detections& d) {
  return {d.scores.to_vector<float>(), d.boxes.to_vector<float>(), d.score_sum.to_vector<float>(),
          mask_values(d.keep), d.count.to_vector<int64_t>()};
}

TEST_P(NmsTest, CapturedStepReplaysOnNewBoxesBitwiseEqualToLazyWithoutRecompiling) {
  constexpr int64_t kBoxes = 200;
  constexpr double kIou = 0.5, kScore = 0.05;
  Tensor boxes = zeros({kBoxes, 4}), logits = zeros({kBoxes});
  auto load = [&](uint32_t seed) {
    const examples::Candidates c = examples::synthetic_candidates(kBoxes, seed);
    boxes.copy_(from_vector(c.boxes, {kBoxes, 4}));
    logits.copy_(from_vector(c.logits, {kBoxes}));
    mark_step();
  };
  auto lazy = [&] {
    examples::Detections d = examples::postprocess(boxes, logits, kIou, kScore);
    mark_step();
    return to_host(d);
  };

  load(1);
  lazy(); // warmup
  Graph graph;
  examples::Detections out;
  {
    CaptureGuard capture(graph);
    out = examples::postprocess(boxes, logits, kIou, kScore);
  }
  std::vector<int64_t> counts;
  for (uint32_t seed = 2; seed < 8; ++seed) {
    load(seed);
    const int64_t compiles = metrics().compiles;
    graph.replay();
    const HostDetections replayed = to_host(out);
    EXPECT_EQ(metrics().compiles, compiles) << "seed " << seed;
    EXPECT_EQ(replayed, lazy()) << "seed " << seed;
    counts.push_back(replayed.count[0]);
  }
  // The images keep different numbers of boxes: the output's size does not
  // follow them, so the same graph serves them all.
  EXPECT_GT(*std::max_element(counts.begin(), counts.end()),
            *std::min_element(counts.begin(), counts.end()));
}

TEST_P(NmsTest, TheIndexFormIsRefusedInACapture) {
  const examples::Candidates c = examples::synthetic_candidates(20, 1);
  const Tensor boxes = from_vector(c.boxes, {20, 4}), scores = from_vector(c.logits, {20});
  mark_step();
  Graph graph;
  const std::string msg = testing::error_of([&] {
    CaptureGuard capture(graph);
    nonzero(examples::nms_keep_mask(boxes, scores, 0.5));
  });
  EXPECT_THAT(msg, HasSubstr("data-dependent output shape"));
  // The mask form is captured.
  Tensor keep;
  {
    CaptureGuard capture(graph);
    keep = examples::nms_keep_mask(boxes, scores, 0.5);
  }
  EXPECT_TRUE(graph.captured());
  EXPECT_EQ(keep.shape(), Shape({20}));
}

TEST_P(NmsTest, NoGradientFlowsThroughTheMask) {
  Tensor boxes = from_vector(std::vector<float>{0, 0, 1, 1}, {1, 4}).requires_grad_();
  Tensor scores = from_vector(std::vector<float>{0.5f}, {1}).requires_grad_();
  const Tensor keep = examples::nms_keep_mask(boxes, scores, 0.5);
  EXPECT_FALSE(keep.requires_grad());
  EXPECT_THAT(mask_values(keep), ElementsAre(1));
}

TEST_P(NmsTest, BadInputIsAnErrorAtTheCallNamingTheOp) {
  const Tensor boxes = zeros({5, 4}), scores = zeros({5});
  auto error = [](auto&& call) {
    const std::string msg = testing::error_of(call);
    EXPECT_THAT(msg, HasSubstr("custom_op 'nms'"));
    return msg;
  };
  EXPECT_THAT(error([&] { examples::nms_keep_mask(boxes.to(DType::f64), scores, 0.5); }),
              HasSubstr("input 0 ('boxes') must be f32, got f64"));
  EXPECT_THAT(error([&] { examples::nms_keep_mask(boxes, scores.to(DType::i64), 0.5); }),
              HasSubstr("input 1 ('scores') must be f32, got i64"));
  std::string msg = error([&] { examples::nms_keep_mask(zeros({5, 5}), scores, 0.5); });
  EXPECT_THAT(msg, HasSubstr("boxes must be [N, 4]"));
  EXPECT_THAT(msg, HasSubstr("f32[5, 5]"));
  EXPECT_THAT(error([&] { examples::nms_keep_mask(zeros({20}), scores, 0.5); }),
              HasSubstr("boxes must be [N, 4]"));
  EXPECT_THAT(error([&] {
                examples::nms_keep_mask(boxes, zeros({5, 1}), 0.5);
              }),
              HasSubstr("scores must be [N] with the boxes' N = 5"));
  EXPECT_THAT(error([&] { examples::nms_keep_mask(boxes, zeros({4}), 0.5); }),
              HasSubstr("scores must be [N] with the boxes' N = 5"));
  for (double bad : {-0.1, 1.5, std::nan("")})
    EXPECT_THAT(error([&] { examples::nms_keep_mask(boxes, scores, bad); }),
                HasSubstr("iou_threshold must be in [0, 1]"));
  // The process keeps working.
  EXPECT_THAT(mask_values(examples::nms_keep_mask(boxes, scores, 0.5)),
              ElementsAre(1, 1, 1, 1, 1)); // zero-area boxes: IoU 0/0, nothing suppressed
}

INSTANTIATE_TEST_SUITE_P(RefAndCpu, NmsTest, ::testing::Values(DeviceType::ref, DeviceType::cpu),
                         [](const auto& info) {
                           return info.param == DeviceType::ref ? "ref" : "cpu";
                         });

} // namespace
} // namespace mstep
