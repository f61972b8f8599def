// giou_bench: the GIoU loss's forward and backward on N boxes (default
// 100k) on the cpu backend, as the custom op (examples/custom_ops/giou_loss)
// and as its composition of built-in ops, both compiled (the composition's
// elementwise ops fused by mstep's fusion passes). Issue 18's target: the
// custom op at least 3x faster.
//
// One iteration: loss = giou(pred, target, "mean"); loss.backward();
// mark_step() (which runs the step; the results are read back once, after
// the timed iterations). pred is a leaf that requires grad,
// target a constant, both materialized once. After --warmup iterations
// (the first compiles), --iters iterations are timed one by one; the two
// variants alternate iteration by iteration so they see the same machine.
// Prints each one's median and minimum milliseconds, the ratio of the
// medians and the thread count (OMP_NUM_THREADS sets it), and checks that
// both give the same loss and gradient within f32 rounding.
//
//   giou_bench [--boxes N] [--iters N] [--warmup N] [--device cpu|ref]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "examples/custom_ops/giou_loss/GiouLoss.h"
#include "examples/models/DeviceFlag.h"
#include "mstep/mstep.h"

using namespace mstep;

namespace {

/// N random boxes, and targets near them (most overlap, some do not).
std::pair<std::vector<float>, std::vector<float>> make_boxes(int64_t n) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> pos(0, 100), size(1, 20), shift(-8, 8);
  std::vector<float> pred(n * 4), target(n * 4);
  for (int64_t i = 0; i < n; ++i) {
    const float x = pos(rng), y = pos(rng), w = size(rng), h = size(rng);
    const float tx = x + shift(rng), ty = y + shift(rng), tw = w + shift(rng) / 4,
                th = h + shift(rng) / 4;
    float* p = &pred[i * 4];
    float* t = &target[i * 4];
    p[0] = x, p[1] = y, p[2] = x + w, p[3] = y + h;
    t[0] = tx, t[1] = ty, t[2] = tx + std::max(tw, 0.5f), t[3] = ty + std::max(th, 0.5f);
  }
  return {pred, target};
}

struct Variant {
  const char* name;
  Tensor (*loss)(const Tensor&, const Tensor&, const std::string&);
  std::vector<double> ms;
  double value = 0;
  std::vector<float> grad;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

} // namespace

int main(int argc, char** argv) {
  int64_t boxes = 100000;
  int iters = 20, warmup = 3;
  Device device{DeviceType::cpu, 0};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--boxes")
      boxes = std::atoll(value.c_str());
    else if (flag == "--iters")
      iters = std::atoi(value.c_str());
    else if (flag == "--warmup")
      warmup = std::atoi(value.c_str());
    else if (flag == "--device" && examples::parse_device(value))
      device = *examples::parse_device(value);
    else {
      std::fprintf(stderr,
                   "giou_bench: bad flag %s %s (flags: --boxes --iters --warmup --device)\n",
                   flag.c_str(), value.c_str());
      return 2;
    }
  }
  if (boxes < 1 || iters < 1 || warmup < 0) {
    std::fprintf(stderr, "giou_bench: --boxes and --iters must be at least 1\n");
    return 2;
  }
  set_default_device(device);
  auto [p, t] = make_boxes(boxes);
  Tensor pred = from_vector(p, {boxes, 4}).requires_grad_();
  Tensor target = from_vector(t, {boxes, 4});

  Variant variants[] = {{"custom", examples::giou_loss, {}, 0, {}},
                        {"composed", examples::giou_loss_composed, {}, 0, {}}};
  for (int it = 0; it < warmup + iters; ++it)
    for (Variant& v : variants) {
      pred.set_grad(Tensor());
      const auto start = std::chrono::steady_clock::now();
      Tensor loss = v.loss(pred, target, "mean");
      loss.backward();
      mark_step(); // the cpu backend runs the step before returning
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
      if (it >= warmup) v.ms.push_back(ms);
      if (it + 1 == warmup + iters) { // read back once, untimed
        v.grad = pred.grad().to_vector<float>();
        v.value = loss.item();
      }
    }

  // The same loss and gradient, up to f32 rounding of different orders.
  double worst = 0;
  for (size_t i = 0; i < variants[0].grad.size(); ++i)
    worst = std::max(worst, std::fabs(variants[0].grad[i] - variants[1].grad[i]) /
                                (1e-6 + std::fabs(variants[1].grad[i])));
  std::printf("giou_bench: %lld boxes, forward + backward, device %s, %d threads; loss custom %.7f "
              "composed %.7f; largest relative gradient difference %.1e\n",
              static_cast<long long>(boxes), device.to_string().c_str(), cpu_thread_count(),
              variants[0].value, variants[1].value, worst);
  for (const Variant& v : variants)
    std::printf("  %-8s median %.3f ms  min %.3f ms  (%d iterations)\n", v.name, median(v.ms),
                *std::min_element(v.ms.begin(), v.ms.end()), iters);
  std::printf("custom_ms %.3f composed_ms %.3f speedup %.2f threads %d\n", median(variants[0].ms),
              median(variants[1].ms), median(variants[1].ms) / median(variants[0].ms),
              cpu_thread_count());
  return 0;
}
