// mstep-run: replays an exported step (Graph::save) with the runtime alone.
//
//   mstep-run step.mstep [--plugin libmyops.so]... [--inputs batch.safetensors]
//                        [--steps N] [--outputs out.safetensors] [--list] [--time]
//                        [--device-graph] [--bad-value NAME:STEP:VALUE] [--profile]
//
// --plugin: a shared library that registers custom ops (mstep/runtime/
//   Plugin.h), loaded before the step; repeatable, in order. A step that
//   calls custom ops loads only when every one is registered, with the
//   version it was exported with.
// --inputs: tensors named as the step's inputs. A tensor of the input's
//   shape is used for every step; one with an extra leading dimension N
//   (= --steps) gives step i its slice i.
// --outputs: the step's outputs (e.g. the loss), stacked over the steps
//   (shape [N, ...]), and the final value of every tensor the step updates
//   (parameters, optimizer state), by name.
// --list: prints the step's backend, custom ops and tensors and exits.
// --time: prints the median host time per step outside the executables
//   (replay_host_us) and the median step time (the replay and the reads of
//   the step's outputs, which on an asynchronous device such as cuda wait
//   for its work); on a simulated device
//   (neuron) also its simulated time per step.
// --device-graph: replays through one device graph (CUDA Graphs) recorded
//   at load, over the tensors' buffers (LoadedGraph::use_device_graph); an
//   error where the backend records none.
// --bad-value NAME:STEP:VALUE: step STEP (from 0) reads VALUE as the
//   first element of input NAME (restored for the next step): the GPU
//   check's replay-after-failure case (a class index out of range). A step
//   that then fails is reported on stdout ("step S failed: ..."), left out
//   of the stacked outputs, and the run goes on.
// --profile: MSTEP_CUDA_PROFILE=1 for this run: a cuda step times each
//   kernel and library call and prints its slowest steps on stderr at exit
//   (lib/backends/cuda/CudaStepProfile.h; each step then waits for the
//   device, so leave it out of timing runs).
// Exit status: 0 ok, 1 the file does not load (a custom op it needs is not
// registered, say) or a step fails, 2 bad arguments or inputs (a plugin
// that does not load).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "mstep/runtime/LoadedGraph.h"
#include "mstep/runtime/Metrics.h"
#include "mstep/runtime/Plugin.h"
#include "mstep/runtime/SafetensorsFile.h"

namespace {

using namespace mstep;

struct Args {
  std::string step, inputs, outputs;
  std::vector<std::string> plugins;
  int64_t steps = 1;
  bool list = false, time = false, device_graph = false, profile = false;
  // --bad-value
  std::string bad_name, bad_value;
  int64_t bad_step = -1;
};

[[noreturn]] void fail(int code, const std::string& message) {
  std::fprintf(stderr, "mstep-run: %s\n", message.c_str());
  std::exit(code);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) fail(2, absl::StrCat(arg, " needs a value"));
      return argv[++i];
    };
    if (arg == "--inputs") a.inputs = value();
    else if (arg == "--outputs") a.outputs = value();
    else if (arg == "--plugin") a.plugins.push_back(value());
    else if (arg == "--steps") {
      const std::string v = value();
      if (!absl::SimpleAtoi(v, &a.steps) || a.steps < 1)
        fail(2, absl::StrCat("--steps wants a positive integer, got '", v, "'"));
    } else if (arg == "--list") a.list = true;
    else if (arg == "--time") a.time = true;
    else if (arg == "--device-graph") a.device_graph = true;
    else if (arg == "--profile") a.profile = true;
    else if (arg == "--bad-value") {
      const std::string v = value();
      const size_t first = v.find(':'), second = v.find(':', first + 1);
      if (first == std::string::npos || second == std::string::npos ||
          !absl::SimpleAtoi(v.substr(first + 1, second - first - 1), &a.bad_step) ||
          a.bad_step < 0)
        fail(2, absl::StrCat("--bad-value wants NAME:STEP:VALUE, got '", v, "'"));
      a.bad_name = v.substr(0, first);
      a.bad_value = v.substr(second + 1);
    }
    else if (arg == "-h" || arg == "--help") {
      std::printf("usage: mstep-run step.mstep [--plugin libmyops.so]... [--inputs in.safetensors] "
                  "[--steps N] [--outputs out.safetensors] [--list] [--time] [--device-graph] "
                  "[--bad-value NAME:STEP:VALUE] [--profile]\n");
      std::exit(0);
    } else if (!arg.empty() && arg[0] == '-') fail(2, absl::StrCat("unknown option ", arg));
    else if (a.step.empty()) a.step = arg;
    else fail(2, absl::StrCat("one step file only; got '", a.step, "' and '", arg, "'"));
  }
  if (a.step.empty()) fail(2, "no step file; usage: mstep-run step.mstep [options]");
  return a;
}

/// `shape` with a leading dimension of `steps`.
Shape with_steps(const Shape& shape, int64_t steps) {
  Shape stacked = shape;
  stacked.mutable_dims().insert(stacked.mutable_dims().begin(), steps);
  return stacked;
}

/// Where step i reads input `slot` from: the file's tensor, whole or its
/// slice i.
struct Feed {
  std::string name;
  const HostTensor* tensor;
  size_t bytes;  // per step
  bool per_step;
};

/// Matches the file's tensors to the step's inputs; every mismatch is named.
std::vector<Feed> match_inputs(const LoadedGraph& graph, const SafetensorsContents& file,
                               const Args& a) {
  std::vector<Feed> feeds;
  std::vector<std::string> problems, inputs;
  for (const LoadedGraph::SlotInfo& s : graph.slots())
    if (s.read) inputs.push_back(s.name);
  for (const auto& [name, tensor] : file.tensors) {
    auto index = graph.find(name);
    if (!index.ok() || !graph.slots()[*index].read) {
      problems.push_back(absl::StrCat("'", name, "' is not an input of the step"));
      continue;
    }
    const LoadedGraph::SlotInfo& slot = graph.slots()[*index];
    if (tensor.dtype != slot.type.dtype) {
      problems.push_back(absl::StrCat("'", name, "' is ", dtype_name(tensor.dtype), ", the step's input is ",
                                      slot.type.to_string()));
      continue;
    }
    const Shape stacked = with_steps(slot.type.shape, a.steps);
    if (tensor.shape == slot.type.shape) {
      feeds.push_back({name, &tensor, slot.type.bytes(), false});
    } else if (tensor.shape == stacked) {
      feeds.push_back({name, &tensor, slot.type.bytes(), true});
    } else {
      problems.push_back(absl::StrCat("'", name, "' has shape ", tensor.shape.to_string(),
                                      "; the step's input is ", slot.type.shape.to_string(),
                                      " (or ", stacked.to_string(), " for one per step)"));
    }
  }
  if (!problems.empty())
    fail(2, absl::StrCat(a.inputs, ": ", absl::StrJoin(problems, "; "),
                         ". The step's inputs: ", absl::StrJoin(inputs, ", ")));
  return feeds;
}

/// The bytes of `text` as one element of `dtype` (i64, i32, f32).
std::string element_bytes(DType dtype, const std::string& text) {
  std::string bytes(element_size(dtype), '\0');
  int64_t i = 0;
  float f = 0;
  if ((dtype == DType::i64 || dtype == DType::i32) && absl::SimpleAtoi(text, &i)) {
    if (dtype == DType::i64) std::memcpy(bytes.data(), &i, 8);
    else {
      const int32_t narrow = static_cast<int32_t>(i);
      std::memcpy(bytes.data(), &narrow, 4);
    }
  } else if (dtype == DType::f32 && absl::SimpleAtof(text, &f)) {
    std::memcpy(bytes.data(), &f, 4);
  } else {
    fail(2, absl::StrCat("--bad-value: '", text, "' is not a ", dtype_name(dtype),
                         " (i64, i32 and f32 inputs are supported)"));
  }
  return bytes;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  if (a.profile) setenv("MSTEP_CUDA_PROFILE", "1", /*overwrite=*/1);  // read as the backend is made
  for (const std::string& plugin : a.plugins)
    if (absl::Status s = load_plugin(plugin); !s.ok()) fail(2, std::string(s.message()));
  const auto load_start = std::chrono::steady_clock::now();
  auto loaded = load_graph(a.step, RuntimeOptions::from_env());
  if (!loaded.ok()) fail(1, std::string(loaded.status().message()));
  LoadedGraph& graph = **loaded;
  const double load_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - load_start).count();
  if (a.list) {
    std::printf("%s: backend %s, %zu segments, loaded in %.1f ms\n", a.step.c_str(),
                std::string(graph.backend()).c_str(), graph.num_segments(), load_ms);
    for (const CustomOpNeed& op : graph.custom_ops())
      std::printf("  custom op %s version %lld\n", op.name.c_str(), static_cast<long long>(op.version));
    for (const LoadedGraph::SlotInfo& s : graph.slots()) {
      // A slot the step writes but never reads is an output (the loss).
      const std::string role = s.written && !s.read ? "output" : std::string(input_role_name(s.role));
      std::printf("  %-24s %-16s %-20s %s%s\n", s.name.c_str(), role.c_str(), s.type.to_string().c_str(),
                  s.read ? "read" : "", s.written ? (s.read ? ", written" : "written") : "");
    }
    return 0;
  }

  SafetensorsContents in;
  std::vector<Feed> feeds;
  if (!a.inputs.empty()) {
    auto file = read_safetensors(a.inputs);
    if (!file.ok()) fail(2, std::string(file.status().message()));
    in = *std::move(file);
    feeds = match_inputs(graph, in, a);
  }
  // Outputs (written, never read: the loss) are kept per step.
  std::map<std::string, HostTensor> out;
  std::vector<const LoadedGraph::SlotInfo*> per_step, final_state;
  for (const LoadedGraph::SlotInfo& s : graph.slots()) {
    if (!s.written) continue;
    (s.read ? final_state : per_step).push_back(&s);
    if (!s.read) {
      out[s.name] = {s.type.dtype, with_steps(s.type.shape, a.steps), std::string(s.type.bytes() * a.steps, '\0')};
    }
  }

  if (a.device_graph)
    if (absl::Status s = graph.use_device_graph(); !s.ok()) fail(1, std::string(s.message()));
  // --bad-value: the input's type and its bytes.
  const LoadedGraph::SlotInfo* bad = nullptr;
  std::string bad_bytes;
  if (a.bad_step >= 0) {
    auto index = graph.find(a.bad_name);
    if (!index.ok() || !graph.slots()[*index].read)
      fail(2, absl::StrCat("--bad-value: '", a.bad_name, "' is not an input of the step"));
    bad = &graph.slots()[*index];
    bad_bytes = std::string(bad->type.bytes(), '\0');
  }
  std::vector<double> host_us, step_ms;
  int64_t kept = 0;  // steps that did not fail (their outputs are stacked)
  for (int64_t i = 0; i < a.steps; ++i) {
    for (const Feed& f : feeds) {
      const char* data = f.tensor->bytes.data() + (f.per_step ? f.bytes * i : 0);
      if (absl::Status s = graph.write(f.name, data, f.bytes); !s.ok())
        fail(1, std::string(s.message()));
    }
    const bool bad_step = bad != nullptr && i == a.bad_step;
    if (bad_step) {
      if (absl::Status s = graph.read(bad->name, bad_bytes.data(), bad_bytes.size()); !s.ok())
        fail(1, std::string(s.message()));
      std::string changed = bad_bytes;
      const std::string element = element_bytes(bad->type.dtype, a.bad_value);
      changed.replace(0, element.size(), element);
      if (absl::Status s = graph.write(bad->name, changed.data(), changed.size()); !s.ok())
        fail(1, std::string(s.message()));
    }
    // The bad step's failure is reported and the run goes on; any other fails it.
    auto failed = [&](const absl::Status& s) {
      if (!bad_step) fail(1, absl::StrCat("step ", i, ": ", s.message()));
      std::printf("step %lld failed: %s\n", static_cast<long long>(i), std::string(s.message()).c_str());
    };
    auto restore = [&] {
      if (!bad_step) return;
      if (absl::Status s = graph.write(bad->name, bad_bytes.data(), bad_bytes.size()); !s.ok())
        fail(1, std::string(s.message()));
    };
    const auto t0 = std::chrono::steady_clock::now();
    if (absl::Status s = graph.replay(); !s.ok()) {
      failed(s);
      restore();
      continue;
    }
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    bool read_ok = true;
    for (const LoadedGraph::SlotInfo* s : per_step) {
      HostTensor& t = out[s->name];
      if (absl::Status st =
              graph.read(s->name, t.bytes.data() + s->type.bytes() * kept, s->type.bytes());
          !st.ok()) {
        failed(st);
        read_ok = false;
        break;
      }
    }
    restore();
    if (!read_ok) continue;
    ++kept;
    host_us.push_back((wall - graph.last_execute_seconds()) * 1e6);
    // Through the reads of the step's outputs (the loss): on an
    // asynchronous device (cuda) they wait for the step's work.
    step_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  // Failed steps are left out of the stacked outputs.
  if (kept < a.steps)
    for (const LoadedGraph::SlotInfo* s : per_step) {
      HostTensor& t = out[s->name];
      t.shape = with_steps(s->type.shape, kept);
      t.bytes.resize(s->type.bytes() * kept);
    }
  if (a.time) {
    std::printf("steps %lld load_ms %.1f step_ms %.3f replay_host_us %.2f\n",
                static_cast<long long>(a.steps), load_ms, median(step_ms), median(host_us));
    if (graph.on_device_graph())  // the static results' private pool
      std::printf("device_graph_pool_bytes %lld\n",
                  static_cast<long long>(metrics().device_graph_pool_bytes));
    // A simulated device (neuron): its cost model's time per step as well.
    if (const SimulatedTime sim = metrics().simulated; sim.runs > 0)
      std::printf("simulated step_ms %.3f  (%s)\n", 1e3 * sim.seconds / a.steps,
                  sim.summary().c_str());
  }
  if (!a.outputs.empty()) {
    for (const LoadedGraph::SlotInfo* s : final_state) {
      HostTensor t{s->type.dtype, s->type.shape, std::string(s->type.bytes(), '\0')};
      if (absl::Status st = graph.read(s->name, t.bytes.data(), t.bytes.size()); !st.ok())
        fail(1, std::string(st.message()));
      out[s->name] = std::move(t);
    }
    if (absl::Status s = write_safetensors(a.outputs, out, {{"steps", std::to_string(a.steps)}});
        !s.ok())
      fail(1, std::string(s.message()));
  }
  return 0;
}
