// The GIoU example's custom ops (examples/custom_ops/giou_loss) on the
// `neuron` device with their NeuronCore kernels (GiouNeuron.cpp) against
// the ref device's host kernels: the forward and backward ops for every
// reduction (no host fallback left: both run as tile programs), a few
// gradient steps through autograd, and the kernels' NKI dump (valid
// Python).
//
// Tolerance, from fp32 arithmetic: each per-box value (a loss, a
// coordinate's gradient) is a chain of at most ~30 fp32 roundings of half
// an ulp, on both sides (the host kernel in fp32 too, with the host
// compiler's FMA contractions in places), and the cancellations in the
// gradient (d_uni = a - b) are bounded by the operands, which are bounded
// by the tensor's largest value: |got - want| <= 64 * 2^-24 * max|want|.
// The reductions sum in fp32 on neuron (each partition's up to F losses in
// turn, then the 128 partitions and the chunks on the Tensor engine) and in
// double on the host: |got - want| <= (F + 128 + chunks + 64) * 2^-24 *
// sum|loss|, and |loss| <= 2 (IoU and the enclosure term lie in [0, 1]).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "examples/custom_ops/giou_loss/GiouLoss.h"
#include "mstep/mstep.h"
#include "mstep/runtime/Tracer.h"

namespace mstep {
namespace {

constexpr Device kNeuron{DeviceType::neuron, 0};
constexpr Device kRef{DeviceType::ref, 0};
constexpr double kUlp = 1.0 / (1 << 24);

/// N box pairs (x1, y1, x2, y2): random, every 13th target disjoint from
/// its pred and, with `ties`, every 7th equal to it (ties in every
/// coordinate) and every 11th sharing pred's x1.
struct Boxes {
  std::vector<float> pred, target;
};
Boxes boxes(int64_t n, unsigned seed, bool ties = true) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> pos(-2, 2), size(0.1f, 3);
  Boxes b;
  for (int64_t i = 0; i < n; ++i) {
    float p[4], t[4];
    for (float* box : {p, t}) {
      box[0] = pos(rng);
      box[1] = pos(rng);
      box[2] = box[0] + size(rng);
      box[3] = box[1] + size(rng);
    }
    if (ties && i % 7 == 0) std::copy(p, p + 4, t);
    if (ties && i % 11 == 0) t[0] = p[0];
    if (i % 13 == 0) {
      t[0] = p[2] + 1;
      t[2] = t[0] + 1;
    }
    b.pred.insert(b.pred.end(), p, p + 4);
    b.target.insert(b.target.end(), t, t + 4);
  }
  return b;
}

/// The loss and the gradients of pred and target of giou_loss_backward
/// (the gradient of the loss `grad`), called as ops on `d`, in one step.
std::vector<std::vector<float>> forward_backward(const Boxes& b, const std::string& reduction,
                                                 const std::vector<float>& grad, Device d) {
  const int64_t n = static_cast<int64_t>(b.pred.size() / 4);
  Tensor pred = from_vector(b.pred, {n, 4}, std::nullopt, d);
  Tensor target = from_vector(b.target, {n, 4}, std::nullopt, d);
  Tensor g = reduction == "none" ? from_vector(grad, {n}, std::nullopt, d)
                                 : from_vector(grad, {}, std::nullopt, d);
  const CustomAttrs attrs = {{"reduction", reduction}};
  Tensor loss = custom("giou_loss", {pred, target}, attrs)[0];
  std::vector<Tensor> grads = custom("giou_loss_backward", {pred, target, g}, attrs);
  mark_step();
  return {loss.to_vector<float>(), grads[0].to_vector<float>(), grads[1].to_vector<float>()};
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, static_cast<double>(std::fabs(x)));
  return m;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, double tol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol) << what << " [" << i << "]";
}

/// N = 300: [128, 2] and 44 boxes left; N = 128 * 300 + 5: two chunks of
/// up to 256 boxes per partition and 5 left.
class NeuronGiou : public ::testing::TestWithParam<int64_t> {
protected:
  static void SetUpTestSuite() { examples::register_giou_loss(); }
};

TEST_P(NeuronGiou, ForwardAndBackwardOpsRunAsTileProgramsWithRefsValues) {
  const int64_t n = GetParam();
  const Boxes b = boxes(n, 17);
  const int64_t f = n / 128, chunks = (f + 255) / 256 + (n % 128 > 0);
  for (const std::string reduction : {"none", "mean", "sum"}) {
    std::vector<float> grad(reduction == "none" ? n : 1);
    for (size_t i = 0; i < grad.size(); ++i) grad[i] = 1.5f - 0.001f * static_cast<float>(i % 997);
    const Metrics before = metrics();
    const auto got = forward_backward(b, reduction, grad, kNeuron);
    const Metrics after = metrics();
    // No host fallback: both ops ran as their tile programs.
    EXPECT_EQ(after.fallbacks - before.fallbacks, 0) << reduction;
    EXPECT_EQ(after.simulated.programs - before.simulated.programs, 2) << reduction;
    const auto want = forward_backward(b, reduction, grad, kRef);
    const double loss_tol = reduction == "none"
                                ? 64 * kUlp * max_abs(want[0])
                                : (f + 128 + chunks + 64) * kUlp * 2.0 * static_cast<double>(n) /
                                      (reduction == "mean" ? static_cast<double>(n) : 1.0);
    expect_close(got[0], want[0], loss_tol, reduction + " loss");
    expect_close(got[1], want[1], 64 * kUlp * max_abs(want[1]), reduction + " grad pred");
    expect_close(got[2], want[2], 64 * kUlp * max_abs(want[2]), reduction + " grad target");
  }
}

INSTANTIATE_TEST_SUITE_P(Boxes, NeuronGiou, ::testing::Values(300, 128 * 300 + 5));

/// Three gradient-descent steps on the boxes themselves through autograd
/// (the loss's backward is the backward op): the losses and the final
/// boxes on neuron against ref. Boxes without ties: at a tie the gradient
/// of a max jumps (1, 0.5, 0), so after a step the last-ulp differences the
/// tolerance allows could pick another side.
std::pair<std::vector<float>, std::vector<float>> descend(const Boxes& b, Device d) {
  const int64_t n = static_cast<int64_t>(b.pred.size() / 4);
  Tensor pred = from_vector(b.pred, {n, 4}, std::nullopt, d);
  const Tensor target = from_vector(b.target, {n, 4}, std::nullopt, d);
  std::vector<float> losses;
  for (int step = 0; step < 3; ++step) {
    Tensor p = pred.detach().requires_grad_();
    Tensor loss = examples::giou_loss(p, target, "sum");
    loss.backward();
    pred = p.detach() - p.grad() * 0.05;
    mark_step();
    losses.push_back(loss.item());
  }
  return {losses, pred.to_vector<float>()};
}

TEST(NeuronGiouStep, GradientStepsThroughAutogradMatchRef) {
  examples::register_giou_loss();
  const Boxes b = boxes(300, 5, /*ties=*/false);
  const auto [losses, boxes_after] = descend(b, kNeuron);
  const auto [want_losses, want_boxes] = descend(b, kRef);
  // Each step's loss: the sum's bound (F = 2, one chunk and the tail); the
  // boxes move by 0.05 * grad, whose errors (the gradients' bound, and the
  // earlier steps' through the boxes) stay below 1e-5 of the coordinates.
  for (size_t s = 0; s < losses.size(); ++s)
    EXPECT_NEAR(losses[s], want_losses[s], (2 + 128 + 2 + 64) * kUlp * 2.0 * 300) << s;
  expect_close(boxes_after, want_boxes, 1e-5 * (1 + max_abs(want_boxes)), "boxes");
}

TEST(NeuronGiouNki, TheKernelsNkiDumpIsValidPython) {
  examples::register_giou_loss();
  const auto dir = std::filesystem::temp_directory_path() /
                   ("mstep_neuron_giou_nki_" + std::to_string(static_cast<long>(::getpid())));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  mark_step();
  Tracer::get().mutable_options().dump_dir = dir.string();
  // A shape no other test compiles, so this step compiles here.
  forward_backward(boxes(131, 3), "mean", {1.0f}, kNeuron);
  Tracer::get().mutable_options().dump_dir.clear();
  int forward = 0, backward = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir / "neuron_nki")) {
    const std::string file = e.path().filename().string();
    const bool fwd =
        file.rfind("custom_giou_loss_", 0) == 0 && file.rfind("custom_giou_loss_backward_", 0) != 0;
    const bool bwd = file.rfind("custom_giou_loss_backward_", 0) == 0;
    if (!fwd && !bwd) continue;
    forward += fwd;
    backward += bwd;
    std::ifstream in(e.path());
    std::stringstream ss;
    ss << in.rdbuf();
    EXPECT_THAT(ss.str(), ::testing::HasSubstr("Not compiled against the Neuron SDK"));
    EXPECT_THAT(ss.str(), ::testing::HasSubstr(bwd ? "def custom_giou_loss_backward("
                                                   : "def custom_giou_loss("));
    if (!std::filesystem::exists("/usr/bin/python3")) continue;
    const std::string cmd = "/usr/bin/python3 -m py_compile '" + e.path().string() + "' 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << file << " is not valid Python";
  }
  EXPECT_EQ(forward, 1);
  EXPECT_EQ(backward, 1);
  std::filesystem::remove_all(dir);
}

} // namespace
} // namespace mstep
