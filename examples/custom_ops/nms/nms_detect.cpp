// nms_detect: a detector's post-processing step (sigmoid of the logits,
// greedy NMS as the custom op "nms", a score threshold, the kept boxes and
// scores, their count and score sum; examples/custom_ops/nms/Nms.h)
// captured once in an mstep::Graph and replayed on the candidates of new
// synthetic images, without recompiling: the NMS op gives a keep mask of
// fixed size [N], so the step's shapes never depend on the data.
//
// Then it shows why the mask form: the same step returning the kept
// indices (nonzero(keep), what torchvision.ops.nms returns) is refused
// inside a capture, because its output size depends on the data (see
// Nms.h for what that does to CUDA Graphs and torch.compile).
//
//   nms_detect [--images N] [--boxes N] [--iou X] [--score X] [--device cpu|ref] [--check]
//
// Prints the kept boxes per image (first few), the graphs compiled during
// the replays (0), and the median host+kernel time per image, replayed and
// lazy. --check: also runs every image in lazy mode and exits 1 unless the
// replay's outputs equal it bitwise (ctest's examples check).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "examples/custom_ops/nms/Nms.h"
#include "examples/models/DeviceFlag.h"
#include "mstep/mstep.h"

using namespace mstep;

namespace {

struct Options {
  int images = 100;
  int64_t boxes = 1000;
  double iou = 0.5, score = 0.05;
  bool check = false;
  Device device{DeviceType::cpu, 0};
};

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(stderr,
               "nms_detect: %s\nusage: nms_detect [--images N] [--boxes N] [--iou X] "
               "[--score X] [--device %s] [--check]\n",
               problem.c_str(), examples::device_choices().c_str());
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--check") {
      o.check = true;
      continue;
    }
    if (i + 1 >= argc) usage(flag + " needs a value");
    const std::string value = argv[++i];
    char* end = nullptr;
    const double number = std::strtod(value.c_str(), &end);
    const bool numeric = end != value.c_str() && *end == '\0';
    if (flag == "--device") {
      std::optional<Device> d = examples::parse_device(value);
      if (!d) usage("--device " + value + ": not a backend");
      o.device = *d;
    } else if (!numeric) {
      usage(flag + ": not a number: " + value);
    } else if (flag == "--images") {
      o.images = static_cast<int>(number);
    } else if (flag == "--boxes") {
      o.boxes = static_cast<int64_t>(number);
    } else if (flag == "--iou") {
      o.iou = number;
    } else if (flag == "--score") {
      o.score = number;
    } else {
      usage("unknown flag " + flag);
    }
  }
  if (o.images < 2 || o.boxes < 1) usage("--images must be at least 2 and --boxes at least 1");
  return o;
}

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Everything a step outputs, on the host, for a bitwise comparison.
struct HostDetections {
  std::vector<float> scores, boxes;
  std::vector<int64_t> keep;
  int64_t count;
  float score_sum;
  bool operator==(const HostDetections&) const = default;
};
HostDetections to_host(const examples::Detections& d) {
  return {d.scores.to_vector<float>(), d.boxes.to_vector<float>(),
          d.keep.to(DType::i64).to_vector<int64_t>(), d.count.to_vector<int64_t>()[0],
          d.score_sum.to_vector<float>()[0]};
}

} // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  set_default_device(o.device);
  std::printf("nms_detect: %d images, %lld candidate boxes each, iou threshold %g, score "
              "threshold %g, device %s\n",
              o.images, static_cast<long long>(o.boxes), o.iou, o.score,
              o.device.to_string().c_str());

  // Static inputs: each image's candidates are copied into them.
  Tensor boxes = zeros({o.boxes, 4}), logits = zeros({o.boxes});
  auto load = [&](int image) {
    const examples::Candidates c = examples::synthetic_candidates(o.boxes, 100 + image);
    boxes.copy_(from_vector(c.boxes, {o.boxes, 4}));
    logits.copy_(from_vector(c.logits, {o.boxes}));
    mark_step();
  };
  auto lazy_step = [&] {
    examples::Detections d = examples::postprocess(boxes, logits, o.iou, o.score);
    mark_step();
    return d;
  };

  load(0);
  lazy_step(); // warmup: compiles the step once
  Graph graph;
  examples::Detections out;
  {
    CaptureGuard capture(graph);
    out = examples::postprocess(boxes, logits, o.iou, o.score);
  }
  int64_t replay_compiles = 0; // graphs compiled inside replay() calls
  std::vector<double> replay_ms, lazy_ms;
  bool equal = true;
  for (int image = 1; image < o.images; ++image) {
    load(image);
    const int64_t compiles = metrics().compiles;
    const auto start = Clock::now();
    graph.replay();
    replay_compiles += metrics().compiles - compiles;
    const HostDetections replayed = to_host(out);
    replay_ms.push_back(ms_since(start));
    if (image <= 3 || image + 1 == o.images)
      std::printf("image %3d: %3lld boxes kept of %lld, score sum %.4f\n", image,
                  static_cast<long long>(replayed.count), static_cast<long long>(o.boxes),
                  replayed.score_sum);
    if (o.check) {
      const auto lazy_start = Clock::now();
      const HostDetections lazy = to_host(lazy_step());
      lazy_ms.push_back(ms_since(lazy_start));
      if (!(lazy == replayed)) {
        equal = false;
        std::printf("image %3d: the replay differs from lazy mode\n", image);
      }
    }
  }
  std::printf("replayed the captured step %d times (%zu kernels per replay); graphs compiled "
              "during the replays: %lld\n",
              o.images - 1, graph.num_kernels(), static_cast<long long>(replay_compiles));
  std::printf("median ms per image (step + reading the outputs): replay %.3f", median(replay_ms));
  if (o.check) std::printf("  lazy %.3f", median(lazy_ms));
  std::printf("\n");

  // The index form, as torchvision.ops.nms returns it, cannot be captured.
  try {
    Graph dynamic;
    CaptureGuard capture(dynamic);
    examples::Detections d = examples::postprocess(boxes, logits, o.iou, o.score);
    const Tensor kept_indices = nonzero(d.keep);
    (void)kept_indices;
    std::printf("unexpected: the index form was captured\n");
    return 1;
  } catch (const Error& e) {
    std::printf("the index form (nonzero(keep), like torchvision.ops.nms) in a capture: %s\n",
                e.what());
  }
  if (o.check) {
    std::printf(equal ? "every replay equals lazy mode bitwise\n"
                      : "some replays differ from lazy mode\n");
    if (!equal || replay_compiles != 0) return 1;
  }
  return 0;
}
