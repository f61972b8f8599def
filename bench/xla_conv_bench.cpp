// xla_conv_bench: one conv2d layer's forward and backward (the output, the
// input, weight and bias gradients of sum(conv2d(x, w, b) * g)) captured as
// one step and replayed on the `xla` and `cpu` backends, at each thread
// count given (omp_set_num_threads before each side's capture, the step
// compiled anew for it; both backends run on the OpenMP threads, oneDNN
// included):
//
//   xla_conv_bench [--steps N] [--threads 1,2] [--batch 32] [--channels 32]
//                  [--size 28] [--filters 64] [--kernel 3] [--groups 1]
//                  [--only xla|cpu]   (one side, e.g. under perf; no ratio)
//                  [--dtype f32|bf16] (bf16: xla's bf16 -> f32 gemms vs cpu's
//                                      oneDNN bf16 convolution)
//
// The layer pads by kernel / 2 (stride 1). Two lazy warmup steps, the
// captured step, then N timed replays (each reads the bias gradient back).
// Prints per side a RESULT line with the median replay time and the
// threads it ran on, a checksum of the gradients (both sides agree to
// f32 rounding; bf16 to bf16 rounding), then the xla / cpu ratio per
// thread count.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "mstep/mstep.h"
#include "mstep/runtime/Backend.h"
#include "mstep/runtime/Tracer.h"

namespace {

using namespace mstep;
using Clock = std::chrono::steady_clock;

struct Layer {
  int64_t batch = 32, channels = 32, size = 28, filters = 64, kernel = 3, groups = 1;
  DType dtype = DType::f32;
};

std::vector<float> wave(int64_t n, int seed) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(std::sin(0.731 * i + 1.37 * seed));
  return v;
}

struct Side {
  double median_ms = 0;
  double checksum = 0;
};

Side time_side(DeviceType device, const Layer& l, int64_t steps) {
  // Compiled anew at this thread count: oneDNN's primitives (the cpu
  // backend's convolutions) keep the thread count they were created with,
  // so a cached step from another count would run on that count.
  Tracer::get().cache().clear();
  set_default_device(Device{device, 0});
  const int64_t pad = l.kernel / 2;
  Tensor x = from_vector(wave(l.batch * l.channels * l.size * l.size, 1),
                         {l.batch, l.channels, l.size, l.size}, l.dtype)
                 .requires_grad_();
  const int64_t per_group = l.channels / l.groups;
  Tensor w = from_vector(wave(l.filters * per_group * l.kernel * l.kernel, 2),
                         {l.filters, per_group, l.kernel, l.kernel}, l.dtype) *
             0.1;
  w = w.detach().requires_grad_();
  Tensor b = from_vector(wave(l.filters, 3), {l.filters}, l.dtype).requires_grad_();
  Tensor g = from_vector(wave(l.batch * l.filters * l.size * l.size, 4),
                         {l.batch, l.filters, l.size, l.size}, l.dtype);
  Tensor y;
  auto step = [&] {
    for (Tensor* t : {&x, &w, &b}) t->set_grad(Tensor());
    y = conv2d(x, w, b, {1}, {pad}, {1}, l.groups);
    sum(y * g).backward();
    mark_step();
  };
  step(), step();
  Graph graph;
  {
    CaptureGuard capture(graph);
    step();
  }
  std::vector<double> ms;
  for (int64_t i = 0; i < steps; ++i) {
    const auto t0 = Clock::now();
    graph.replay();
    b.grad().to_vector<float>();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  Side side{ms[ms.size() / 2], 0};
  for (const Tensor& t : {y, x.grad(), w.grad(), b.grad()})
    for (float v : t.to_vector<float>()) side.checksum += std::abs(v);
  return side;
}

int fail(const std::string& message) {
  std::fprintf(stderr, "xla_conv_bench: %s\n", message.c_str());
  return 2;
}

} // namespace

int main(int argc, char** argv) {
  Layer layer;
  int64_t steps = 20;
  std::vector<int> threads = {1, 2};
  std::string only;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    int64_t number = 0;
    if (flag == "--threads") {
      threads.clear();
      for (absl::string_view t : absl::StrSplit(value, ',')) {
        int n = 0;
        if (!absl::SimpleAtoi(t, &n) || n < 1) return fail("bad --threads " + value);
        threads.push_back(n);
      }
      continue;
    }
    if (flag == "--dtype") {
      if (value != "f32" && value != "bf16") return fail("--dtype takes f32 or bf16");
      layer.dtype = value == "bf16" ? DType::bf16 : DType::f32;
      continue;
    }
    if (flag == "--only") {
      if (value != "xla" && value != "cpu") return fail("--only takes xla or cpu");
      only = value;
      continue;
    }
    if (!absl::SimpleAtoi(value, &number) || number < 1) return fail("bad " + flag + " " + value);
    if (flag == "--steps") steps = number;
    else if (flag == "--batch") layer.batch = number;
    else if (flag == "--channels") layer.channels = number;
    else if (flag == "--size") layer.size = number;
    else if (flag == "--filters") layer.filters = number;
    else if (flag == "--kernel") layer.kernel = number;
    else if (flag == "--groups") layer.groups = number;
    else return fail("unknown flag " + flag);
  }
  if (argc % 2 == 0) return fail("every flag takes a value");
  if (layer.channels % layer.groups != 0 || layer.filters % layer.groups != 0)
    return fail("--groups must divide --channels and --filters");
  std::printf("layer: input [%lld, %lld, %lld, %lld], weight [%lld, %lld, %lld, %lld], pad %lld, "
              "groups %lld, %s; %lld replays\n",
              (long long)layer.batch, (long long)layer.channels, (long long)layer.size,
              (long long)layer.size, (long long)layer.filters,
              (long long)(layer.channels / layer.groups), (long long)layer.kernel,
              (long long)layer.kernel, (long long)(layer.kernel / 2), (long long)layer.groups,
              layer.dtype == DType::bf16 ? "bf16" : "f32", (long long)steps);
  for (int t : threads) {
    omp_set_num_threads(t);
    Side sides[2];
    const char* names[2] = {"cpu", "xla"};
    for (int s = 0; s < 2; ++s) {
      if (!only.empty() && only != names[s]) continue;
      sides[s] = time_side(s == 0 ? DeviceType::cpu : DeviceType::xla, layer, steps);
      std::printf("RESULT metric=conv_fwd_bwd_ms impl=mstep-%s value=%.3f threads=%d "
                  "checksum=%.6g\n",
                  names[s], sides[s].median_ms, omp_get_max_threads(), sides[s].checksum);
    }
    if (only.empty())
      std::printf("threads=%d xla/cpu=%.2f\n", t, sides[1].median_ms / sides[0].median_ms);
  }
  return 0;
}
