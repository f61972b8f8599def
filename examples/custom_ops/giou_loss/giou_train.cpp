// giou_train: a small box-regression model trained with the GIoU loss as a
// custom op (examples/custom_ops/giou_loss) and, side by side from the same
// initial weights and batches, with the same loss composed of built-in ops.
//
// Data: synthetic. Each sample has 8 features x ~ N(0, 1); its box comes
// from a fixed random "teacher": r = A x, centre (2 r0, 2 r1), width and
// height 2 exp(tanh(r2) / 2) and 2 exp(tanh(r3) / 2).
// Model: Linear 8->64, ReLU, Linear 64->4 giving a centre and log-sizes,
// turned into a box (x1, y1, x2, y2); Adam (lr --lr); lazy mode, one
// mark_step per step.
//
//   giou_train [--steps N] [--batch N] [--lr X] [--device cpu|ref] [--log-every N]
//              [--check TOL]
//
// Prints both losses every --log-every steps, then each run's median step
// time (wall time of zero_grad, forward, loss, backward, optimizer step and
// mark_step; the first 3 steps, which compile, left out) and the thread
// count. --check TOL: exit 1 unless every step's two losses agree within
// TOL * (1 + |loss|) (ctest's examples check).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "examples/custom_ops/giou_loss/GiouLoss.h"
#include "examples/models/DeviceFlag.h"
#include "mstep/mstep.h"

using namespace mstep;

namespace {

constexpr int64_t kFeatures = 8, kHidden = 64;

[[noreturn]] void fail(const std::string& message) {
  std::fprintf(stderr, "giou_train: %s\n", message.c_str());
  std::exit(2);
}

struct Options {
  int steps = 60, log_every = 10;
  int64_t batch = 256;
  double lr = 1e-2;
  double check = -1; // < 0: no check
  Device device{DeviceType::cpu, 0};
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i], value;
    if (auto eq = flag.find('='); eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag.resize(eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      fail(flag + " needs a value");
    }
    char* end = nullptr;
    auto number = [&] {
      const double v = std::strtod(value.c_str(), &end);
      if (end == value.c_str() || *end != '\0') fail(flag + ": not a number: " + value);
      return v;
    };
    if (flag == "--steps")
      o.steps = static_cast<int>(number());
    else if (flag == "--batch")
      o.batch = static_cast<int64_t>(number());
    else if (flag == "--lr")
      o.lr = number();
    else if (flag == "--log-every")
      o.log_every = std::max(1, static_cast<int>(number()));
    else if (flag == "--check")
      o.check = number();
    else if (flag == "--device") {
      std::optional<Device> d = examples::parse_device(value);
      if (!d) fail("--device " + value + ": not one of " + examples::device_choices());
      o.device = *d;
    } else {
      fail("unknown flag " + flag + " (flags: --steps --batch --lr --device --log-every --check)");
    }
  }
  if (o.steps < 1 || o.batch < 1) fail("--steps and --batch must be at least 1");
  return o;
}

/// One batch of features [batch, 8] and teacher boxes [batch, 4].
struct Batch {
  Tensor x, boxes;
};

Batch make_batch(int64_t batch, int step, Device device) {
  static const std::vector<double> teacher = [] {
    std::mt19937 rng(7);
    std::normal_distribution<double> n(0.0, 0.5);
    std::vector<double> a(4 * kFeatures);
    for (double& v : a) v = n(rng);
    return a;
  }();
  std::mt19937 rng(1000 + step);
  std::normal_distribution<float> n;
  std::vector<float> x(batch * kFeatures), boxes(batch * 4);
  for (int64_t i = 0; i < batch; ++i) {
    double r[4] = {0, 0, 0, 0};
    for (int64_t f = 0; f < kFeatures; ++f) {
      x[i * kFeatures + f] = n(rng);
      for (int k = 0; k < 4; ++k) r[k] += teacher[k * kFeatures + f] * x[i * kFeatures + f];
    }
    const double cx = 2 * r[0], cy = 2 * r[1];
    const double w = 2 * std::exp(std::tanh(r[2]) / 2), h = 2 * std::exp(std::tanh(r[3]) / 2);
    const double box[4] = {cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2};
    for (int k = 0; k < 4; ++k) boxes[i * 4 + k] = static_cast<float>(box[k]);
  }
  return {from_vector(x, {batch, kFeatures}, std::nullopt, device),
          from_vector(boxes, {batch, 4}, std::nullopt, device)};
}

class BoxRegressor : public nn::Module {
public:
  BoxRegressor()
      : nn::Module("BoxRegressor"),
        fc1(register_module("fc1", std::make_shared<nn::Linear>(kFeatures, kHidden))),
        fc2(register_module("fc2", std::make_shared<nn::Linear>(kHidden, 4))) {}

  /// x [N, 8] -> boxes [N, 4] (x1, y1, x2, y2), valid by construction.
  Tensor forward(const Tensor& x) {
    Tensor out = (*fc2)(relu((*fc1)(x)));
    Tensor centre = slice(out, 1, 0, 2), half_size = exp(slice(out, 1, 2, 4)) * 0.5;
    return cat({centre - half_size, centre + half_size}, 1);
  }

  std::shared_ptr<nn::Linear> fc1, fc2;
};

/// One model, its optimizer and its loss.
struct Run {
  const char* name;
  Tensor (*loss_fn)(const Tensor&, const Tensor&, const std::string&);
  std::shared_ptr<BoxRegressor> model;
  std::unique_ptr<optim::Adam> opt;
  std::vector<double> losses, step_ms;

  Run(const char* name, Tensor (*loss_fn)(const Tensor&, const Tensor&, const std::string&),
      const Options& o)
      : name(name), loss_fn(loss_fn) {
    manual_seed(42); // the same initial weights for both runs
    model = std::make_shared<BoxRegressor>();
    model->to(o.device);
    opt = std::make_unique<optim::Adam>(model->parameters(), optim::AdamOptions{.lr = o.lr});
  }

  void step(const Batch& b) {
    const auto start = std::chrono::steady_clock::now();
    opt->zero_grad();
    Tensor loss = loss_fn(model->forward(b.x), b.boxes, "mean");
    loss.backward();
    opt->step();
    mark_step();
    const double value = loss.item();
    step_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
    losses.push_back(value);
  }

  double median_ms() const {
    std::vector<double> steady(step_ms.begin() + std::min<size_t>(3, step_ms.size() - 1),
                               step_ms.end());
    std::sort(steady.begin(), steady.end());
    return steady[steady.size() / 2];
  }
};

} // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  set_default_device(o.device);
  std::printf("giou_train: %d steps, batch %lld, device %s, %d cpu threads; GIoU loss as the "
              "custom op and composed of built-in ops\n",
              o.steps, static_cast<long long>(o.batch), o.device.to_string().c_str(),
              cpu_thread_count());
  Run custom_run("custom", examples::giou_loss, o);
  Run composed_run("composed", examples::giou_loss_composed, o);
  bool agree = true;
  for (int s = 0; s < o.steps; ++s) {
    const Batch b = make_batch(o.batch, s, o.device);
    custom_run.step(b);
    composed_run.step(b);
    const double a = custom_run.losses.back(), c = composed_run.losses.back();
    const bool close = std::fabs(a - c) <= o.check * (1 + std::fabs(c));
    agree = agree && close;
    if (s % o.log_every == 0 || s + 1 == o.steps || (o.check >= 0 && !close))
      std::printf("step %4d  loss custom %.7f  composed %.7f  diff %.2e%s\n", s, a, c,
                  std::fabs(a - c), o.check >= 0 && !close ? "  (beyond --check)" : "");
  }
  std::printf("median step ms: custom %.3f  composed %.3f  (device %s, %d threads, batch %lld; "
              "%lld graphs compiled)\n",
              custom_run.median_ms(), composed_run.median_ms(), o.device.to_string().c_str(),
              cpu_thread_count(), static_cast<long long>(o.batch),
              static_cast<long long>(metrics().compiles));
  if (o.check >= 0) {
    std::printf(agree ? "the two losses agree within %g at every step\n"
                      : "the two losses differ by more than %g\n",
                o.check);
    return agree ? 0 : 1;
  }
  return 0;
}
