// NaN guard: the gradient check run from Optimizer::step(), the
// reproducer it writes on a hit, and load_reproducer() / Reproducer::run().
// See include/mstep/api/NanGuard.h for the protocol and the file layout.
#include "mstep/api/NanGuard.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <set>
#include <sstream>

#include "lib/api/OpBuilder.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "lib/compiler/Compiler.h"
#include "lib/runtime/RuntimeInternal.h"
#include "mstep/mstep.h"
#include "mstep/runtime/Tracer.h"

namespace mstep {

namespace fs = std::filesystem;

namespace {

constexpr char kMagic[] = "mstep-nan-guard-reproducer 1";
constexpr char kGraphFile[] = "graph.mlir";
constexpr char kInputsFile[] = "inputs.safetensors";
constexpr char kWeightsFile[] = "weights.safetensors";
constexpr char kMetaFile[] = "meta.txt";

/// A tensor handle on an existing buffer (a graph input or result).
Tensor wrap(const BufferPtr& buffer) {
  auto impl = TensorImpl::make(buffer->type(), buffer->device());
  impl->set_buffer(buffer);
  return Tensor(std::move(impl));
}

/// Whether a materialized tensor holds NaN or Inf (integers never do).
bool has_nonfinite(const Tensor& t) {
  if (!is_floating(t.dtype())) return false;
  for (double v : t.to_vector<double>())
    if (!std::isfinite(v)) return true;
  return false;
}


// ---- Writing ----------------------------------------------------------

/// What the guard found, for meta.txt.
struct Hit {
  std::vector<size_t> nonfinite_parameters;
  std::map<size_t, size_t> parameter_inputs; // parameter -> graph input
  std::map<size_t, size_t> gradient_outputs; // parameter -> graph output
  std::vector<size_t> nonfinite_outputs;
};

/// The labels of the not-deterministic custom ops `graph` (and the bodies
/// of its nodes) calls, sorted; the graph parsed, so they are registered.
std::vector<std::string> nondeterministic_custom_ops(const TraceGraph& graph) {
  std::set<std::string> labels;
  std::function<void(const TraceGraph&)> visit = [&](const TraceGraph& g) {
    for (const GraphNode& n : g.nodes) {
      if (n.body) visit(*n.body);
      if (n.op != OpKind::custom) continue;
      auto op = CustomOpRegistry::global().find(
          static_cast<uint64_t>(attr_int(n.attrs, AttrName::custom_op)));
      if (op.ok() && !(*op)->schema.deterministic) labels.insert((*op)->label());
    }
  };
  visit(graph);
  return {labels.begin(), labels.end()};
}

[[noreturn]] void write_failed(const std::string& what) { throw Error(absl::DataLossError(what)); }

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) write_failed(absl::StrCat("cannot write '", path.string(), "' (disk full?)"));
}

std::string meta_text(const optim::Optimizer& optimizer, const StepRecord& step, const Hit& hit) {
  std::string s = absl::StrCat(kMagic, "\n");
  absl::StrAppend(&s, "optimizer ", optimizer.name(), "\n");
  absl::StrAppendFormat(&s, "graph_key %016x\n", step.key.full());
  absl::StrAppend(&s, "graph_key_text ", step.key.to_text(), "\n");
  absl::StrAppend(&s, "rng_seed ", step.rng_seed, "\n");
  absl::StrAppend(&s, "rng_offset ", step.rng_offset, "\n");
  absl::StrAppend(&s, "num_inputs ", step.inputs.size(), "\n");
  for (size_t i = 0; i < step.inputs.size(); ++i) {
    const InputRole role =
        i < step.graph->input_roles.size() ? step.graph->input_roles[i] : InputRole::input;
    absl::StrAppend(&s, "input ", i, " ", input_role_name(role), " ",
                    step.inputs[i]->type().to_string(), "\n");
  }
  absl::StrAppend(&s, "num_outputs ", step.results.size(), "\n");
  absl::StrAppend(&s, "nonfinite_parameters ", absl::StrJoin(hit.nonfinite_parameters, " "), "\n");
  for (size_t k = 0; k < optimizer.parameters().size(); ++k) {
    auto in = hit.parameter_inputs.find(k);
    auto out = hit.gradient_outputs.find(k);
    absl::StrAppend(&s, "parameter ", k, " input ",
                    in == hit.parameter_inputs.end() ? "-" : absl::StrCat(in->second),
                    " gradient_output ",
                    out == hit.gradient_outputs.end() ? "-" : absl::StrCat(out->second), "\n");
  }
  absl::StrAppend(&s, "nonfinite_outputs ", absl::StrJoin(hit.nonfinite_outputs, " "), "\n");
  return s;
}

/// Writes the reproducer of `step` and returns its directory. The files
/// go to a temporary directory renamed into place at the end, so a failed
/// write never leaves a partial reproducer; throws mstep::Error on one.
std::string write_reproducer(const optim::Optimizer& optimizer, const StepRecord& step,
                             const Hit& hit) {
  if (!step.graph) write_failed("the tracer kept no graph for the step");
  const fs::path root = nan_guard_dir();
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) write_failed(absl::StrCat("cannot create '", root.string(), "' (", ec.message(), ")"));
  fs::path final_dir;
  for (int n = 0;; ++n) {
    final_dir = root / absl::StrCat("reproducer_", n);
    if (!fs::exists(final_dir)) break;
  }
  const fs::path tmp = root / absl::StrCat(".", final_dir.filename().string(), ".tmp.", ::getpid());
  fs::remove_all(tmp, ec);
  if (!fs::create_directory(tmp, ec) || ec)
    write_failed(absl::StrCat("cannot create '", tmp.string(), "' (", ec.message(), ")"));
  try {
    absl::StatusOr<std::string> mlir = trace_graph_to_mlir(*step.graph);
    if (!mlir.ok())
      write_failed(absl::StrCat("cannot print the step graph: ", mlir.status().message()));
    write_text(tmp / kGraphFile, *mlir);

    std::map<std::string, Tensor> inputs;
    for (size_t i = 0; i < step.inputs.size(); ++i)
      inputs[absl::StrCat("input.", i)] = wrap(step.inputs[i]);
    save_safetensors((tmp / kInputsFile).string(), inputs, {{"mstep.nan_guard", "inputs"}});

    std::map<std::string, Tensor> weights;
    for (size_t k = 0; k < optimizer.parameters().size(); ++k)
      weights[absl::StrCat("param.", k)] = optimizer.parameters()[k];
    for (const auto& [name, t] : optimizer.state_dict()) weights["optimizer." + name] = t;
    save_safetensors((tmp / kWeightsFile).string(), weights, {{"mstep.nan_guard", "weights"}});

    write_text(tmp / kMetaFile, meta_text(optimizer, step, hit));
  } catch (const Error&) {
    fs::remove_all(tmp, ec);
    throw;
  }
  fs::rename(tmp, final_dir, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove_all(tmp, ignored);
    write_failed(absl::StrCat("cannot rename '", tmp.string(), "' to '", final_dir.string(), "' (",
                              ec.message(), ")"));
  }
  return final_dir.string();
}

/// Maps the optimizer's parameters and gradients to the step's graph
/// inputs and outputs (by buffer identity), and finds the non-finite
/// outputs. Only runs on a hit: it reads every result.
Hit describe_hit(const optim::Optimizer& optimizer, const StepRecord& step,
                 std::vector<size_t> nonfinite_parameters) {
  Hit hit;
  hit.nonfinite_parameters = std::move(nonfinite_parameters);
  const auto& params = optimizer.parameters();
  for (size_t k = 0; k < params.size(); ++k) {
    const BufferPtr& p = params[k].impl()->buffer();
    for (size_t i = 0; i < step.inputs.size(); ++i)
      if (p && step.inputs[i] == p) hit.parameter_inputs[k] = i;
    Tensor g = params[k].grad();
    if (!g.defined() || g.is_pending()) continue;
    for (size_t j = 0; j < step.results.size(); ++j)
      if (step.results[j] == g.impl()->buffer()) hit.gradient_outputs[k] = j;
  }
  for (size_t j = 0; j < step.results.size(); ++j)
    if (has_nonfinite(wrap(step.results[j]))) hit.nonfinite_outputs.push_back(j);
  return hit;
}

/// Turns step recording off when the check ends, however it ends (this
/// also drops the recorded buffers).
struct RecordSteps {
  RecordSteps() { Tracer::get().set_record_steps(true); }
  ~RecordSteps() { Tracer::get().set_record_steps(false); }
  RecordSteps(const RecordSteps&) = delete;
  RecordSteps& operator=(const RecordSteps&) = delete;
};

// ---- Loading ----------------------------------------------------------

[[noreturn]] void load_failed(absl::StatusCode code, const fs::path& file,
                              absl::string_view problem, absl::string_view hint) {
  throw Error(absl::Status(
      code, absl::StrCat("mstep::load_reproducer: '", file.string(), "': ", problem, ". ", hint)));
}

constexpr char kRewrite[] =
    "The reproducer is incomplete or damaged; re-run the training step with the NaN guard on "
    "to write it again.";

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    load_failed(absl::StatusCode::kNotFound, path, "the file is missing or cannot be opened",
                kRewrite);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// load_safetensors, with the reproducer's context on its error.
std::map<std::string, Tensor> load_tensors(const fs::path& path) {
  if (!fs::exists(path))
    load_failed(absl::StatusCode::kNotFound, path, "the file is missing", kRewrite);
  try {
    return load_safetensors(path.string());
  } catch (const Error& e) {
    throw Error(absl::Status(e.code(), absl::StrCat("mstep::load_reproducer: ", e.what())));
  }
}

/// "-" or an index below `limit`.
std::optional<size_t> parse_index(absl::string_view text, size_t limit, bool allow_dash,
                                  const fs::path& file, int line) {
  if (allow_dash && text == "-") return std::nullopt;
  size_t v = 0;
  if (!absl::SimpleAtoi(text, &v) || v >= limit)
    load_failed(absl::StatusCode::kDataLoss, file,
                absl::StrCat("line ", line, ": '", text, "' is not an index below ", limit),
                kRewrite);
  return v;
}

} // namespace

// ---- The guard --------------------------------------------------------

// The setting lives in the runtime options (read from MSTEP_NAN_GUARD at
// start-up), so there is one place that says whether the guard is on.
void enable_nan_guard(const std::string& dir) {
  Tracer::get().mutable_options().nan_guard_dir = dir;
}

std::string nan_guard_dir() { return Tracer::get().options().nan_guard_dir; }

bool nan_guard_enabled() { return !nan_guard_dir().empty(); }

namespace detail {

void check_gradients_before_update(const optim::Optimizer& optimizer) {
  if (!nan_guard_enabled()) return;
  // 1. One reduction: per parameter with a gradient, its count of
  //    non-finite entries, stacked into one small i64 vector.
  const auto& params = optimizer.parameters();
  std::vector<size_t> checked;
  std::vector<Tensor> counts;
  for (size_t k = 0; k < params.size(); ++k) {
    Tensor g = params[k].grad();
    if (!g.defined()) continue;
    checked.push_back(k);
    counts.push_back(sum(to(logical_not(isfinite(g)), DType::i64)));
  }
  if (checked.empty()) return;
  Tensor flags = stack(counts);
  counts.clear();

  // 2. Run forward, backward and the flags as one graph; the update is
  //    not traced yet, so the recorded inputs are the weights before it.
  RecordSteps recording;
  throw_if_error(Tracer::get().mark_step());

  // 3. The one host sync of the check: the flags are computed already.
  ++internal::mutable_metrics().sync_points;
  const std::vector<int64_t> nonfinite = flags.to_vector<int64_t>();
  std::vector<size_t> bad;
  for (size_t j = 0; j < checked.size(); ++j)
    if (nonfinite[j] > 0) bad.push_back(checked[j]);
  if (bad.empty()) return;

  // 4. A hit: write the reproducer and stop before the update.
  const StepRecord& step = Tracer::get().last_step();
  std::string where;
  std::string written;
  try {
    written = write_reproducer(optimizer, step, describe_hit(optimizer, step, bad));
    where = absl::StrCat("A reproducer of the step (its graph, the weights before the update, "
                         "the batch, the RNG state and the graph key) is in '",
                         written, "': load it with mstep::load_reproducer(\"", written,
                         "\") and call run() to re-run the step; nonfinite_outputs() lists "
                         "the outputs that are NaN or Inf.");
  } catch (const Error& e) {
    where = absl::StrCat("The reproducer could not be written: ", e.what());
  }
  std::vector<std::string> listed;
  for (size_t j = 0; j < checked.size(); ++j)
    if (nonfinite[j] > 0)
      listed.push_back(absl::StrCat(checked[j], " (", nonfinite[j], " of ",
                                    params[checked[j]].numel(), " entries)"));
  const absl::Status status = absl::AbortedError(absl::StrCat(
      "mstep::optim::", optimizer.name(),
      "::step: the NaN guard found non-finite gradients (NaN or Inf) for parameter",
      bad.size() > 1 ? "s " : " ", absl::StrJoin(listed, ", "),
      "; the update was not applied, the parameters and optimizer state are unchanged. ", where));
  throw NanGuardError(status, written, std::move(bad));
}

} // namespace detail

// ---- Reproducer ---------------------------------------------------------

Reproducer load_reproducer(const std::string& dir) {
  const fs::path root = dir;
  if (!fs::is_directory(root))
    load_failed(absl::StatusCode::kNotFound, root, "no such directory",
                "Pass the directory named by the NanGuardError (<guard dir>/reproducer_<n>).");
  Reproducer r;
  r.dir_ = dir;

  // 1. meta.txt.
  const fs::path meta_path = root / kMetaFile;
  const std::string meta = read_file(meta_path);
  std::vector<std::string> lines = absl::StrSplit(meta, '\n', absl::SkipEmpty());
  if (lines.empty() || lines[0] != kMagic)
    load_failed(absl::StatusCode::kDataLoss, meta_path,
                absl::StrCat("the first line is not '", kMagic, "'"), kRewrite);
  std::optional<size_t> num_inputs, num_outputs;
  bool has_key = false, has_seed = false, has_offset = false;
  struct ParamLine {
    size_t k;
    std::optional<size_t> input, output;
    int line;
  };
  std::vector<ParamLine> param_lines;
  std::vector<std::pair<std::string, int>> nonfinite_params, nonfinite_outputs;
  for (size_t n = 1; n < lines.size(); ++n) {
    const int line = static_cast<int>(n) + 1;
    const std::string& text = lines[n];
    const size_t space = text.find(' ');
    const std::string word = text.substr(0, space);
    const std::string rest = space == std::string::npos ? "" : text.substr(space + 1);
    std::vector<std::string> f = absl::StrSplit(rest, ' ', absl::SkipEmpty());
    auto bad_line = [&](absl::string_view why) {
      load_failed(absl::StatusCode::kDataLoss, meta_path,
                  absl::StrCat("line ", line, " ('", text, "'): ", why), kRewrite);
    };
    auto number = [&](uint64_t* out) {
      if (f.size() != 1 || !absl::SimpleAtoi(f[0], out)) bad_line("expected one number");
    };
    if (word == "optimizer") {
      r.optimizer_ = rest;
    } else if (word == "graph_key") {
      if (f.size() != 1 || !absl::SimpleHexAtoi(f[0], &r.graph_key_))
        bad_line("expected a hexadecimal key");
      has_key = true;
    } else if (word == "graph_key_text") {
      r.graph_key_text_ = rest;
    } else if (word == "rng_seed") {
      number(&r.rng_seed_);
      has_seed = true;
    } else if (word == "rng_offset") {
      number(&r.rng_offset_);
      has_offset = true;
    } else if (word == "num_inputs" || word == "num_outputs") {
      uint64_t v = 0;
      number(&v);
      (word == "num_inputs" ? num_inputs : num_outputs) = static_cast<size_t>(v);
    } else if (word == "input") {
      // Roles and types are informative; graph.mlir carries them.
    } else if (word == "nonfinite_parameters" || word == "nonfinite_outputs") {
      for (const std::string& s : f)
        (word == "nonfinite_parameters" ? nonfinite_params : nonfinite_outputs)
            .emplace_back(s, line);
    } else if (word == "parameter") {
      if (f.size() != 5 || f[1] != "input" || f[3] != "gradient_output")
        bad_line("expected 'parameter <k> input <i|-> gradient_output <j|->'");
      if (!num_inputs || !num_outputs) bad_line("num_inputs and num_outputs must come first");
      ParamLine p{*parse_index(f[0], SIZE_MAX, false, meta_path, line),
                  parse_index(f[2], *num_inputs, true, meta_path, line),
                  parse_index(f[4], *num_outputs, true, meta_path, line), line};
      param_lines.push_back(p);
    } else {
      bad_line(absl::StrCat("unknown entry '", word, "'"));
    }
  }
  if (!has_key || !has_seed || !has_offset || !num_inputs || !num_outputs)
    load_failed(absl::StatusCode::kDataLoss, meta_path,
                "graph_key, rng_seed, rng_offset, num_inputs or num_outputs is missing", kRewrite);
  for (const ParamLine& p : param_lines) {
    if (p.input) r.parameter_inputs_[p.k] = *p.input;
    if (p.output) r.gradient_outputs_[p.k] = *p.output;
  }
  for (const auto& [s, line] : nonfinite_params)
    r.nonfinite_parameters_.push_back(*parse_index(s, SIZE_MAX, false, meta_path, line));
  for (const auto& [s, line] : nonfinite_outputs)
    r.recorded_nonfinite_outputs_.push_back(*parse_index(s, *num_outputs, false, meta_path, line));

  // 2. graph.mlir.
  const fs::path graph_path = root / kGraphFile;
  absl::StatusOr<TraceGraph> graph = trace_graph_from_mlir(read_file(graph_path));
  if (!graph.ok())
    load_failed(absl::StatusCode::kDataLoss, graph_path,
                absl::StrCat("the MLIR does not parse as a step graph: ", graph.status().message()),
                kRewrite);
  if (graph->input_types.size() != *num_inputs || graph->outputs.size() != *num_outputs)
    load_failed(absl::StatusCode::kDataLoss, graph_path,
                absl::StrFormat("the graph has %d inputs and %d outputs but %s records %d and %d",
                                graph->input_types.size(), graph->outputs.size(), kMetaFile,
                                *num_inputs, *num_outputs),
                kRewrite);
  r.input_roles_ = graph->input_roles;
  r.input_roles_.resize(graph->input_types.size(), InputRole::input);

  // 3. inputs.safetensors: exactly input.0 .. input.<n-1>, of the graph's types.
  const fs::path inputs_path = root / kInputsFile;
  std::map<std::string, Tensor> inputs = load_tensors(inputs_path);
  if (inputs.size() != graph->input_types.size())
    load_failed(absl::StatusCode::kDataLoss, inputs_path,
                absl::StrFormat("it holds %d tensors but the graph has %d inputs", inputs.size(),
                                graph->input_types.size()),
                kRewrite);
  for (size_t i = 0; i < graph->input_types.size(); ++i) {
    auto it = inputs.find(absl::StrCat("input.", i));
    if (it == inputs.end())
      load_failed(absl::StatusCode::kDataLoss, inputs_path,
                  absl::StrCat("tensor 'input.", i, "' is missing"), kRewrite);
    if (it->second.type() != graph->input_types[i])
      load_failed(absl::StatusCode::kDataLoss, inputs_path,
                  absl::StrCat("'input.", i, "' is ", it->second.type().to_string(),
                               " but the graph's input ", i, " is ",
                               graph->input_types[i].to_string()),
                  kRewrite);
    r.inputs_.push_back(it->second);
  }
  r.graph_ = std::make_shared<const TraceGraph>(*std::move(graph));
  r.nondeterministic_custom_ops_ = nondeterministic_custom_ops(*r.graph_);

  // 4. weights.safetensors.
  r.weights_ = load_tensors(root / kWeightsFile);
  return r;
}

std::vector<Tensor> Reproducer::run(Device device) const {
  const std::string op = "mstep::Reproducer::run";
  Backend& backend = *value_or_throw(BackendRegistry::get(device.type));
  const RuntimeOptions& runtime = Tracer::get().options();
  CompileOptions options;
  options.fuse = runtime.fuse;
  absl::StatusOr<CompiledGraph> compiled = compile_graph(*graph_, backend, options, runtime);
  if (!compiled.ok())
    throw Error(absl::Status(compiled.status().code(),
                             absl::StrCat(op, ": the graph of '", dir_, "' does not compile on ",
                                          device.to_string(), ": ", compiled.status().message())));
  // Fresh copies: the executable may update donated inputs in place, and
  // run() must be repeatable.
  std::vector<BufferPtr> buffers;
  for (const Tensor& t : inputs_) {
    const std::vector<std::byte> bytes = detail::host_bytes(t);
    BufferPtr b = value_or_throw(backend.allocate(t.type()));
    throw_if_error(backend.copy_in(*b, bytes.data(), bytes.size()));
    buffers.push_back(std::move(b));
  }
  absl::StatusOr<std::vector<BufferPtr>> results = compiled->executable->run(buffers);
  if (!results.ok())
    throw Error(absl::Status(results.status().code(),
                             absl::StrCat(op, ": running the graph of '", dir_,
                                          "' failed: ", results.status().message())));
  std::vector<Tensor> outputs;
  for (const BufferPtr& b : *results) outputs.push_back(wrap(b));
  last_outputs_ = outputs;
  return outputs;
}

std::vector<size_t> Reproducer::nonfinite_outputs() const {
  if (last_outputs_.empty()) run();
  std::vector<size_t> out;
  for (size_t j = 0; j < last_outputs_.size(); ++j)
    if (has_nonfinite(last_outputs_[j])) out.push_back(j);
  return out;
}

} // namespace mstep
