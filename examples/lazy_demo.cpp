// lazy_demo: a small training loop in lazy mode.
//
// Linear regression y = x @ w, fitted by gradient descent with the
// gradient written out by hand (autograd arrives with the training issue).
// Every step is traced, cut by mark_step(), and after the first step served
// from the graph cache: one compile, then hits. The learning rate is a
// device scalar, so the decay schedule does not recompile.
#include <chrono>
#include <cstdio>

#include "mstep/mstep.h"

using namespace mstep;

int main() {
  constexpr int64_t kSamples = 256, kFeatures = 16, kSteps = 200;
  manual_seed(0);
  Tensor true_w = randn({kFeatures, 1});
  Tensor x = randn({kSamples, kFeatures});
  Tensor y = matmul(x, true_w) + randn({kSamples, 1}) * 0.01;
  Tensor w = zeros({kFeatures, 1});
  Tensor lr = Tensor::scalar(0.1);
  mark_step();

  std::printf("lazy_demo: linear regression, %lld samples x %lld features, %lld steps\n",
              static_cast<long long>(kSamples), static_cast<long long>(kFeatures),
              static_cast<long long>(kSteps));
  auto t0 = std::chrono::steady_clock::now();
  double first_loss = 0, loss_value = 0;
  for (int64_t step = 0; step < kSteps; ++step) {
    lr.fill_(0.1 * (1.0 - 0.5 * step / kSteps));  // decaying, no recompile
    Tensor err = matmul(x, w) - y;
    Tensor loss = mean(err * err);
    Tensor grad = matmul(transpose(x, 0, 1), err) * (2.0 / kSamples);
    w.copy_(w - lr * grad);
    mark_step();
    if (step == 0 || (step + 1) % 50 == 0) {
      loss_value = loss.item();
      if (step == 0) first_loss = loss_value;
      std::printf("  step %4lld  loss %.6f\n", static_cast<long long>(step + 1), loss_value);
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const Metrics m = metrics();
  std::printf("\nloss %.6f -> %.6f\n", first_loss, loss_value);
  std::printf("steps %lld, %.1f us/step (ref backend), compiles %lld, cache hits %lld, "
              "sync points %lld\n",
              static_cast<long long>(kSteps), seconds * 1e6 / kSteps,
              static_cast<long long>(m.cache_misses), static_cast<long long>(m.cache_hits),
              static_cast<long long>(m.sync_points));
  std::printf("replay mode (capture once, replay with no tracing) arrives with the "
              "runtime issue; see README.\n");
  return loss_value < first_loss * 0.01 ? 0 : 1;
}
