// The exporting side of the exported-graph round trip (test/export): trains
// mnist_mlp's model (examples::Mlp, Adadelta lr 0.1, NLL loss) for two lazy
// steps on a small batch, captures the whole step, saves it, then replays
// it in process on N fresh batches. A second process (mstep-run, linked
// with the runtime only) replays the saved step on the same batches; the
// `compare` mode checks that its losses and weights equal these bitwise.
//
//   export_worker export <dir> <cpu|ref|neuron|xla> <steps>
//       writes <dir>/step.mstep, <dir>/inputs.safetensors (x [N,B,784],
//       y [N,B]) and <dir>/expected.safetensors (loss [N], the weights)
//   export_worker stablehlo <dir> <steps>
//       the same on ref, exported with Graph::export_stablehlo instead:
//       <dir>/step.stablehlo.mlir, <dir>/values.safetensors (the step's
//       arguments before the first replay), <dir>/inputs.safetensors and
//       <dir>/expected.safetensors with the loss and every weight after
//       each step ([N, ...]); test/interop checks XLA and IREE against them
//   export_worker stablehlo_gpt <dir> <steps>
//       the same for a GPT-mini training step (examples::GptMini: 1 layer,
//       dim 32, 2 heads, seq 16, attention and residual dropout 0.1;
//       cross entropy, clip_grad_norm_ 1.0, AdamW), one mark_step; the
//       batches are tokens and targets [N, 2, 16]
//   export_worker stablehlo_random <dir> <steps>
//       the creation ops alone: rand (f32, bf16), randn, a float arange,
//       each step's values in expected.safetensors (no loss, no batches)
//   export_worker stablehlo_ops_<conv|pool|misc|attention> <dir> <steps>
//       one op family, forward and backward, with each output and
//       gradient per step in expected.safetensors (stablehlo_op_cases.cpp);
//       stablehlo_ops_convnet: a conv net's whole training step (loss and
//       weights per step, as `stablehlo`)
//   export_worker compare <expected.safetensors> <got.safetensors>
//       exit 0 when every tensor of the first is in the second, bitwise
//   export_worker bad_inputs <file>
//       inputs of a wrong name, a wrong shape and a wrong dtype
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>

#include "examples/models/GptMini.h"
#include "examples/models/Mlp.h"
#include "mstep/mstep.h"
#include "mstep/runtime/Backend.h"
#include "mstep/runtime/SafetensorsFile.h"

namespace mstep::export_test {
int export_stablehlo_op_case(const std::string& name, const std::string& dir, int64_t steps);
}

namespace {

using namespace mstep;

constexpr int64_t kBatch = 16, kPixels = 784, kClasses = 10;

/// The values of an f32 tensor (a sync point).
HostTensor host(const Tensor& t) {
  const std::vector<float> v = t.to_vector<float>();
  return {DType::f32, t.shape(), std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4)};
}

int fail(const std::string& message) {
  std::fprintf(stderr, "export_worker: %s\n", message.c_str());
  return 1;
}

/// Appends one step's value `t` to `stack`, a [steps, ...] f32 tensor
/// being filled; the first value gives an empty stack its shape.
void append_step(HostTensor& stack, int64_t steps, const HostTensor& t) {
  if (stack.bytes.empty()) {
    std::vector<int64_t> dims{steps};
    for (int64_t d : t.shape.dims()) dims.push_back(d);
    stack = {DType::f32, Shape(dims), {}};
  }
  stack.bytes += t.bytes;
}

int export_step(const std::string& dir, const std::string& device, int64_t steps,
                bool stablehlo) {
  absl::StatusOr<DeviceType> type = BackendRegistry::device_type(device);
  if (!type.ok()) return fail(std::string(type.status().message()));
  set_default_device(Device{*type, 0});
  manual_seed(0);
  auto model = std::make_shared<examples::Mlp>();
  optim::Adadelta opt(model->parameters(), {.lr = 0.1});
  Tensor x = zeros({kBatch, kPixels}), y = zeros({kBatch}, DType::i64), loss;
  auto step = [&] {
    opt.zero_grad();
    loss = nll_loss(model->forward(x), y);
    loss.backward();
    mark_step();
    opt.step();
    mark_step();
  };
  // N + 3 batches: two lazy warmup steps, the capture, then the N replayed.
  std::mt19937_64 rng(7);
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int64_t> label(0, kClasses - 1);
  std::vector<std::vector<float>> xs(steps + 3, std::vector<float>(kBatch * kPixels));
  std::vector<std::vector<int64_t>> ys(steps + 3, std::vector<int64_t>(kBatch));
  for (auto& b : xs) for (float& v : b) v = normal(rng);
  for (auto& b : ys) for (int64_t& v : b) v = label(rng);
  auto feed = [&](int64_t i) {
    x.copy_(from_vector(xs[i], {kBatch, kPixels}));
    y.copy_(from_vector(ys[i], {kBatch}));
  };
  Graph graph;
  for (int64_t i = 0; i < 2; ++i) feed(i), step();
  feed(2);
  {
    CaptureGuard capture(graph);
    step();
  }
  std::map<std::string, Tensor> names{{"x", x}, {"y", y}, {"loss", loss}};
  for (auto& [name, p] : model->named_parameters()) names.emplace(name, p);
  if (stablehlo)
    graph.export_stablehlo(dir + "/step.stablehlo.mlir", names, dir + "/values.safetensors");
  else
    graph.save(dir + "/step.mstep", names);

  std::map<std::string, HostTensor> inputs, expected;
  HostTensor all_x{DType::f32, Shape({steps, kBatch, kPixels}), {}};
  HostTensor all_y{DType::i64, Shape({steps, kBatch}), {}};
  HostTensor losses{DType::f32, Shape({steps}), {}};
  for (int64_t i = 0; i < steps; ++i) {
    all_x.bytes.append(reinterpret_cast<const char*>(xs[i + 3].data()), xs[i + 3].size() * 4);
    all_y.bytes.append(reinterpret_cast<const char*>(ys[i + 3].data()), ys[i + 3].size() * 8);
    feed(i + 3);
    graph.replay();
    append_step(losses, steps, host(loss));
    if (stablehlo)
      for (auto& [name, p] : model->named_parameters()) append_step(expected[name], steps, host(p));
  }
  inputs["x"] = std::move(all_x);
  inputs["y"] = std::move(all_y);
  expected["loss"] = std::move(losses);
  if (!stablehlo)
    for (auto& [name, p] : model->named_parameters()) expected[name] = host(p);
  if (absl::Status s = write_safetensors(dir + "/inputs.safetensors", inputs); !s.ok())
    return fail(std::string(s.message()));
  if (absl::Status s = write_safetensors(dir + "/expected.safetensors", expected); !s.ok())
    return fail(std::string(s.message()));
  std::printf("exported %s/%s (%zu segments); replayed %lld steps\n", dir.c_str(),
              stablehlo ? "step.stablehlo.mlir" : "step.mstep", graph.num_segments(),
              static_cast<long long>(steps));
  return 0;
}

/// The GPT-mini step of `stablehlo_gpt` (see the file comment).
int export_gpt_stablehlo(const std::string& dir, int64_t steps) {
  constexpr int64_t kB = 2, kS = 16, kVocab = 32;
  set_default_device(Device{DeviceType::ref, 0});
  manual_seed(0);
  examples::GptMini model({.vocab = kVocab, .dim = 32, .heads = 2, .layers = 1, .max_seq = kS,
                           .dropout = 0.1});
  optim::AdamW opt(model.parameters(), {.lr = 1e-3, .weight_decay = 0.1});
  Tensor tokens = zeros({kB, kS}, DType::i64), targets = zeros({kB, kS}, DType::i64), loss;
  auto step = [&] {
    opt.zero_grad();
    loss = cross_entropy(model.forward(tokens, Tensor()).reshape({-1, kVocab}), targets.reshape({-1}));
    loss.backward();
    optim::clip_grad_norm_(model.parameters(), 1.0);
    opt.step();
    mark_step();
  };
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<int64_t> token(0, kVocab - 1);
  std::vector<std::vector<int64_t>> ts(steps + 3, std::vector<int64_t>(kB * kS)), ys = ts;
  for (auto& b : ts) for (int64_t& v : b) v = token(rng);
  for (auto& b : ys) for (int64_t& v : b) v = token(rng);
  auto feed = [&](int64_t i) {
    tokens.copy_(from_vector(ts[i], {kB, kS}));
    targets.copy_(from_vector(ys[i], {kB, kS}));
  };
  Graph graph;
  for (int64_t i = 0; i < 2; ++i) feed(i), step();
  feed(2);
  {
    CaptureGuard capture(graph);
    step();
  }
  std::map<std::string, Tensor> names{{"tokens", tokens}, {"targets", targets}, {"loss", loss}};
  for (auto& [name, p] : model.named_parameters()) names.emplace(name, p);
  graph.export_stablehlo(dir + "/step.stablehlo.mlir", names, dir + "/values.safetensors");

  std::map<std::string, HostTensor> inputs, expected;
  HostTensor all_t{DType::i64, Shape({steps, kB, kS}), {}}, all_y = all_t;
  HostTensor losses{DType::f32, Shape({steps}), {}};
  for (int64_t i = 0; i < steps; ++i) {
    all_t.bytes.append(reinterpret_cast<const char*>(ts[i + 3].data()), ts[i + 3].size() * 8);
    all_y.bytes.append(reinterpret_cast<const char*>(ys[i + 3].data()), ys[i + 3].size() * 8);
    feed(i + 3);
    graph.replay();
    append_step(losses, steps, host(loss));
    for (auto& [name, p] : model.named_parameters()) append_step(expected[name], steps, host(p));
  }
  inputs["tokens"] = std::move(all_t);
  inputs["targets"] = std::move(all_y);
  expected["loss"] = std::move(losses);
  if (absl::Status s = write_safetensors(dir + "/inputs.safetensors", inputs); !s.ok())
    return fail(std::string(s.message()));
  if (absl::Status s = write_safetensors(dir + "/expected.safetensors", expected); !s.ok())
    return fail(std::string(s.message()));
  std::printf("exported %s/step.stablehlo.mlir (GPT-mini, %zu segments); replayed %lld steps\n",
              dir.c_str(), graph.num_segments(), static_cast<long long>(steps));
  return 0;
}

/// The creation ops of `stablehlo_random` (see the file comment).
int export_random_stablehlo(const std::string& dir, int64_t steps) {
  set_default_device(Device{DeviceType::ref, 0});
  manual_seed(5);
  Graph graph;
  std::map<std::string, Tensor> names;
  {
    CaptureGuard capture(graph);
    names = {{"uniform", rand({3, 7})},
             {"normal", randn({2, 5})},
             {"uniform_bf16", rand({4, 3}, DType::bf16)},
             {"arange", arange(0.1, 2.0, 0.3)}};
  }
  graph.export_stablehlo(dir + "/step.stablehlo.mlir", names, dir + "/values.safetensors");
  std::map<std::string, HostTensor> expected;
  for (int64_t i = 0; i < steps; ++i) {
    graph.replay();
    for (auto& [name, t] : names) append_step(expected[name], steps, host(t.to(DType::f32)));
  }
  if (absl::Status s = write_safetensors(dir + "/inputs.safetensors", {}); !s.ok())
    return fail(std::string(s.message()));
  if (absl::Status s = write_safetensors(dir + "/expected.safetensors", expected); !s.ok())
    return fail(std::string(s.message()));
  std::printf("exported %s/step.stablehlo.mlir (creation ops); replayed %lld steps\n", dir.c_str(),
              static_cast<long long>(steps));
  return 0;
}

int compare(const std::string& expected_path, const std::string& got_path) {
  auto expected = read_safetensors(expected_path);
  auto got = read_safetensors(got_path);
  if (!expected.ok()) return fail(std::string(expected.status().message()));
  if (!got.ok()) return fail(std::string(got.status().message()));
  int problems = 0;
  for (const auto& [name, want] : expected->tensors) {
    auto it = got->tensors.find(name);
    if (it == got->tensors.end()) {
      std::fprintf(stderr, "'%s' is missing from %s\n", name.c_str(), got_path.c_str());
      ++problems;
    } else if (!(it->second == want)) {
      std::fprintf(stderr, "'%s' differs: %s %s vs %s %s\n", name.c_str(),
                   want.type().to_string().c_str(), expected_path.c_str(),
                   it->second.type().to_string().c_str(), got_path.c_str());
      ++problems;
    }
  }
  if (problems) return fail(std::to_string(problems) + " tensors differ");
  std::printf("%zu tensors bitwise equal\n", expected->tensors.size());
  return 0;
}

}  // namespace

int bad_inputs(const std::string& path) {
  std::map<std::string, HostTensor> bad;
  bad["images"] = {DType::f32, Shape({2}), std::string(8, '\0')};
  bad["x"] = {DType::f32, Shape({3, 5}), std::string(60, '\0')};
  bad["y"] = {DType::f32, Shape({kBatch}), std::string(kBatch * 4, '\0')};
  absl::Status s = write_safetensors(path, bad);
  return s.ok() ? 0 : fail(std::string(s.message()));
}

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "export" && argc == 5)
      return export_step(argv[2], argv[3], std::atoll(argv[4]), false);
    if (mode == "stablehlo" && argc == 4) return export_step(argv[2], "ref", std::atoll(argv[3]), true);
    if (mode == "stablehlo_gpt" && argc == 4) return export_gpt_stablehlo(argv[2], std::atoll(argv[3]));
    if (mode == "stablehlo_random" && argc == 4)
      return export_random_stablehlo(argv[2], std::atoll(argv[3]));
    if (mode.rfind("stablehlo_ops_", 0) == 0 && argc == 4) {
      const std::string name = mode.substr(std::strlen("stablehlo_ops_"));
      const int rc = export_test::export_stablehlo_op_case(name, argv[2], std::atoll(argv[3]));
      if (rc >= 0) return rc;
      return fail("unknown stablehlo_ops case '" + name + "'");
    }
    if (mode == "compare" && argc == 4) return compare(argv[2], argv[3]);
    if (mode == "bad_inputs" && argc == 3) return bad_inputs(argv[2]);
  } catch (const std::exception& e) {
    return fail(e.what());
  }
  std::fprintf(stderr, "usage: export_worker export <dir> <cpu|ref> <steps> | "
                       "stablehlo[_gpt|_random] <dir> <steps> | "
                       "stablehlo_ops_<case> <dir> <steps> | "
                       "compare <a> <b>\n");
  return 2;
}
