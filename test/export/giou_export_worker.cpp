// The exporting side of the custom-op round trip (test/export/
// CustomOpRoundTrip.cmake): a box regressor (pred = anchors + x w) trained
// with the GIoU loss custom op (examples/custom_ops/giou_loss, registered
// in this process) and SGD, two lazy steps, then the step captured, saved
// and replayed here on N fresh batches. mstep-run, with the ops from
// libmstep_giou_plugin.so, replays the saved step on the same batches;
// `mstep_export_worker compare` checks its losses and weights bitwise.
//
//   giou_export_worker <dir> <cpu|ref|neuron> <steps>
//       writes <dir>/step.mstep, <dir>/inputs.safetensors (x [N,B,8],
//       target [N,B,4]) and <dir>/expected.safetensors (loss [N], w)
#include <cstdio>
#include <map>
#include <random>
#include <string>

#include "examples/custom_ops/giou_loss/GiouLoss.h"
#include "mstep/mstep.h"
#include "mstep/runtime/Backend.h"
#include "mstep/runtime/SafetensorsFile.h"

namespace {

using namespace mstep;

constexpr int64_t kBatch = 32, kFeatures = 8;

HostTensor host(const Tensor& t) {
  const std::vector<float> v = t.to_vector<float>();
  return {DType::f32, t.shape(), std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4)};
}

/// `n` boxes (x1, y1, x2, y2) with x1 < x2 and y1 < y2.
std::vector<float> boxes(std::mt19937_64& rng, int64_t n) {
  std::uniform_real_distribution<float> corner(0.f, 1.f), size(0.5f, 1.5f);
  std::vector<float> b;
  for (int64_t i = 0; i < n; ++i) {
    const float x = corner(rng), y = corner(rng);
    b.insert(b.end(), {x, y, x + size(rng), y + size(rng)});
  }
  return b;
}

int export_step(const std::string& dir, const std::string& device, int64_t steps) {
  absl::StatusOr<DeviceType> type = BackendRegistry::device_type(device);
  if (!type.ok()) throw Error(type.status());
  set_default_device(Device{*type, 0});
  std::mt19937_64 rng(11);
  std::normal_distribution<float> normal(0.f, 0.1f);
  const Tensor anchors = from_vector(boxes(rng, kBatch), {kBatch, 4});
  std::vector<float> w0(kFeatures * 4);
  for (float& v : w0) v = normal(rng);
  Tensor w = from_vector(w0, {kFeatures, 4}).requires_grad_();
  optim::SGD opt({w}, {.lr = 0.5});
  Tensor x = zeros({kBatch, kFeatures}), target = zeros({kBatch, 4}), loss;
  auto step = [&] {
    opt.zero_grad();
    loss = examples::giou_loss(anchors + matmul(x, w), target, "mean");
    loss.backward();
    opt.step();
    mark_step();
  };
  // N + 3 batches: two lazy warmup steps, the capture, then the N replayed.
  std::vector<std::vector<float>> xs(steps + 3), targets(steps + 3);
  for (int64_t i = 0; i < steps + 3; ++i) {
    for (int64_t k = 0; k < kBatch * kFeatures; ++k) xs[i].push_back(normal(rng) * 10);
    targets[i] = boxes(rng, kBatch);
  }
  auto feed = [&](int64_t i) {
    x.copy_(from_vector(xs[i], {kBatch, kFeatures}));
    target.copy_(from_vector(targets[i], {kBatch, 4}));
  };
  Graph graph;
  for (int64_t i = 0; i < 2; ++i) feed(i), step();
  feed(2);
  {
    CaptureGuard capture(graph);
    step();
  }
  graph.save(dir + "/step.mstep", {{"x", x}, {"target", target}, {"loss", loss}, {"w", w}});

  HostTensor all_x{DType::f32, Shape({steps, kBatch, kFeatures}), {}};
  HostTensor all_targets{DType::f32, Shape({steps, kBatch, 4}), {}};
  HostTensor losses{DType::f32, Shape({steps}), {}};
  for (int64_t i = 0; i < steps; ++i) {
    all_x.bytes.append(reinterpret_cast<const char*>(xs[i + 3].data()), xs[i + 3].size() * 4);
    all_targets.bytes.append(reinterpret_cast<const char*>(targets[i + 3].data()),
                             targets[i + 3].size() * 4);
    feed(i + 3);
    graph.replay();
    losses.bytes += host(loss).bytes;
  }
  std::map<std::string, HostTensor> inputs{{"x", std::move(all_x)},
                                           {"target", std::move(all_targets)}};
  std::map<std::string, HostTensor> expected{{"loss", std::move(losses)}, {"w", host(w)}};
  for (const auto& [file, tensors] : {std::pair{"/inputs.safetensors", &inputs},
                                      std::pair{"/expected.safetensors", &expected}})
    if (absl::Status s = write_safetensors(dir + file, *tensors); !s.ok()) {
      std::fprintf(stderr, "giou_export_worker: %s\n", std::string(s.message()).c_str());
      return 1;
    }
  std::printf("exported %s/step.mstep (%zu segments, GIoU custom op); replayed %lld steps\n",
              dir.c_str(), graph.num_segments(), static_cast<long long>(steps));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: giou_export_worker <dir> <cpu|ref|neuron> <steps>\n");
    return 2;
  }
  try {
    return export_step(argv[1], argv[2], std::atoll(argv[3]));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "giou_export_worker: %s\n", e.what());
    return 1;
  }
}
