// mstep-aot: a step compiled ahead of time into a stand-alone shared object
// with one C function, and the C header that documents it (the xla
// backend's step function without the runtime: XlaCompile.h).
//
//   mstep-aot step.mlir|step.mstep -o libstep.so --header step.h [--data step.bin]
//             [--xla-memory-limit=BYTES]
//
// The input: a module in the mstep dialect with func @step (its arguments
// may carry mstep.role and mstep.aliased_result), or a step exported by
// Graph::save on ref with fusion off (MSTEP_FUSE=0), as for mstep-compile;
// its segments become one function (MergedStep.h). The object exports
//   int mstep_step(const void* const* inputs, void* const* outputs, void* temp);
// and needs nothing but libc, libm and oneDNN (its sgemm). The header
// lists every input and output (index, name, dtype, shape, role, which
// outputs may be written in place of their input) and the temp size, as
// comments and macros.
// --data: the values of every input at export (parameters, optimizer state,
//   the batch, constants, the RNG state of the next step), each at the
//   64-byte aligned offset its ..._DATA_OFFSET macro gives; exported steps
//   only.
// --xla-memory-limit=BYTES: the temp arena's limit (as, and over,
//   MSTEP_XLA_MEMORY_LIMIT): cheap values are recomputed to meet it
//   (lib/backends/xla/XlaRemat.h); one that cannot be met fails the
//   compile with the smallest that can.
// A step whose function still calls out to the runtime for some ops is
// refused; the error lists them. MSTEP_DUMP_DIR dumps the pipeline's IR.
// Exit status: 0 ok, 1 the input does not load or the step does not
// compile (the error names why), 2 bad arguments.
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/backends/xla/XlaCompile.h"
#include "lib/compiler/Compiler.h"
#include "lib/runtime/GraphArchive.h"
#include "lib/runtime/TrustedPath.h"
#include "mstep/runtime/Options.h"
#include "tools/common/StoredGraph.h"
#include "tools/mstep-aot/MergedStep.h"

namespace {

using namespace mstep;

[[noreturn]] void fail(int code, const std::string& message) {
  std::fprintf(stderr, "mstep-aot: %s\n", message.c_str());
  std::exit(code);
}

/// One input or output of mstep_step.
struct Argument {
  std::string name;
  std::string role;
  TensorType type;
  std::string macro; // MSTEP_STEP_IN_<NAME> / MSTEP_STEP_OUT_<NAME>
  std::string note;  // more about it (in-place updates)
  std::string value; // its value at export (--data)
  int64_t updates = -1;  // an output: the input it is the new value of
  bool in_place = false; // an output: may be given that input's buffer
};

/// What the step reads and writes, named.
struct StepInterface {
  std::vector<Argument> inputs;
  /// Per graph output: its name.
  std::vector<std::string> output_names;
  bool has_rng = false;
  uint64_t rng_seed = 0, rng_first_offset = 0, rng_per_step = 0;
  bool has_values = false;
};

/// `name` as the tail of a C macro: upper case, '_' for the rest.
std::string macro_tail(absl::string_view name) {
  std::string out;
  for (char c : name)
    out += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::toupper(c)) : '_';
  return out;
}

std::string shape_text(const TensorType& type) {
  return absl::StrCat("[", absl::StrJoin(type.shape, ", "), "]");
}

void write_file(const std::string& path, const std::string& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() ||
      std::fclose(f) != 0)
    fail(1, absl::StrCat("cannot write ", path));
}

/// The graph and the names of `path`: an exported step or a module.
TraceGraph read_step(const std::string& path, StepInterface& step) {
  absl::StatusOr<std::string> bytes = internal::read_trusted_file(path);
  if (!bytes.ok()) fail(1, std::string(bytes.status().message()));
  if (absl::EndsWith(path, ".mlir")) {
    absl::StatusOr<TraceGraph> graph = trace_graph_from_mlir(*bytes);
    if (!graph.ok()) fail(1, absl::StrCat(path, ": ", graph.status().message()));
    for (size_t i = 0; i < graph->input_types.size(); ++i) {
      const InputRole role =
          i < graph->input_roles.size() ? graph->input_roles[i] : InputRole::input;
      step.inputs.push_back({absl::StrCat("arg", i), std::string(input_role_name(role)),
                             graph->input_types[i], "", "", ""});
    }
    for (size_t k = 0; k < graph->outputs.size(); ++k)
      step.output_names.push_back(absl::StrCat("result", k));
    return *std::move(graph);
  }
  absl::StatusOr<GraphArchive> archive = decode_graph_archive(*bytes, path);
  if (!archive.ok()) fail(1, std::string(archive.status().message()));
  if (!archive->custom_ops.empty())
    fail(1, absl::StrCat(path, ": the step calls custom ops (", archive->custom_ops[0].name,
                         ", ...), which a stand-alone step has no kernels for"));
  std::vector<TraceGraph> segments;
  for (size_t s = 0; s < archive->segments.size(); ++s) {
    absl::StatusOr<TraceGraph> graph =
        tools::stored_graph(archive->backend, archive->segments[s].executable);
    if (!graph.ok()) fail(1, absl::StrCat(path, ": segment ", s, ": ", graph.status().message()));
    segments.push_back(*std::move(graph));
  }
  absl::StatusOr<tools::MergedStep> merged = tools::merge_segments(*archive, segments);
  if (!merged.ok()) fail(1, absl::StrCat(path, ": ", merged.status().message()));
  step.has_values = true;
  for (size_t i = 0; i < merged->input_names.size(); ++i)
    step.inputs.push_back({merged->input_names[i], merged->input_roles[i],
                           merged->graph.input_types[i], "", "", merged->input_values[i]});
  step.output_names = merged->output_names;
  if (merged->rng_input >= 0) {
    step.has_rng = true;
    step.rng_seed = merged->rng_seed;
    step.rng_first_offset = merged->rng_first_offset;
    step.rng_per_step = merged->rng_per_step;
    step.inputs[merged->rng_input].role =
        "RNG state: i64[2] {MSTEP_STEP_RNG_SEED, the step's offset}";
  }
  return std::move(merged->graph);
}

/// Unique macro names, in order (a clash gets the index appended).
void name_macros(std::vector<Argument>& arguments, absl::string_view prefix,
                 std::set<std::string>& used) {
  for (size_t i = 0; i < arguments.size(); ++i) {
    std::string macro = absl::StrCat(prefix, macro_tail(arguments[i].name));
    if (!used.insert(macro).second) {
      macro = absl::StrCat(macro, "_", i);
      used.insert(macro);
    }
    arguments[i].macro = std::move(macro);
  }
}

/// The input whose new value graph output `k` is (donated_to), or -1.
int64_t updated_input(const TraceGraph& graph, size_t k) {
  for (size_t i = 0; i < graph.donated_to.size(); ++i)
    if (graph.donated_to[i] == static_cast<int32_t>(k)) return static_cast<int64_t>(i);
  return -1;
}

constexpr int64_t kAlign = 64;
int64_t aligned(int64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

std::string header_text(const std::string& source, const StepInterface& step,
                        const std::vector<Argument>& inputs, const std::vector<Argument>& outputs,
                        const xla::XlaProgram& program, const std::vector<std::string>& unwritten,
                        bool with_data) {
  const xla::XlaLayout& layout = program.layout;
  std::string h;
  absl::StrAppend(&h, "/* Written by mstep-aot from ", source, "; do not edit.\n",
                  " *\n",
                  " * int mstep_step(const void* const* inputs, void* const* outputs, void* temp);\n",
                  " *\n",
                  " * Runs one step. inputs[i] points at input i and outputs[j] at the buffer of\n",
                  " * output j below: dense, row-major tensors of the dtype and shape listed,\n",
                  " * 64-byte aligned. temp points at MSTEP_STEP_TEMP_BYTES bytes of scratch,\n",
                  " * 64-byte aligned (what it holds between calls does not matter). Inputs are\n",
                  " * only read, except that an output marked \"in place\" may be given its\n",
                  " * input's buffer: the step then updates that input (a parameter, an optimizer\n",
                  " * state) in place. Otherwise every buffer must be distinct. Returns 0, or\n",
                  " * nonzero when the step stopped on invalid data (a label or an index out\n",
                  " * of range).\n",
                  " * Single-threaded, except for oneDNN's sgemm (its OpenMP threads).\n",
                  " * The code was generated for ", program.target.arch, " (CPU ",
                  program.target.cpu, ") and needs these CPU features:\n");
  std::string line;
  for (const std::string& feature : program.target.features) {
    if (line.size() + feature.size() > 76) absl::StrAppend(&h, " *  ", line, "\n"), line.clear();
    absl::StrAppend(&line, " ", feature);
  }
  absl::StrAppend(&h, " *  ", line, "\n *\n");
  absl::StrAppend(&h, " * inputs (index, name, dtype, shape, role):\n");
  for (size_t i = 0; i < inputs.size(); ++i)
    absl::StrAppend(&h, " *   ", i, "  ", inputs[i].name, "  ", dtype_name(inputs[i].type.dtype),
                    " ", shape_text(inputs[i].type), "  ", inputs[i].role, "\n");
  absl::StrAppend(&h, " * outputs (index, name, dtype, shape, what it is):\n");
  for (size_t j = 0; j < outputs.size(); ++j)
    absl::StrAppend(&h, " *   ", j, "  ", outputs[j].name, "  ",
                    dtype_name(outputs[j].type.dtype), " ", shape_text(outputs[j].type), "  ",
                    outputs[j].role, outputs[j].note.empty() ? "" : "; ", outputs[j].note, "\n");
  for (const std::string& line : unwritten) absl::StrAppend(&h, " * ", line, "\n");
  if (step.has_rng)
    absl::StrAppend(&h, " * The RNG state input (dropout, rand) holds {MSTEP_STEP_RNG_SEED, offset}:\n",
                    " * offset MSTEP_STEP_RNG_FIRST_OFFSET for the step after the export, and\n",
                    " * MSTEP_STEP_RNG_OFFSET_PER_STEP more for each later one.\n");
  if (with_data)
    absl::StrAppend(&h, " * The --data file holds every input's value at export, input i at its\n",
                    " * ..._DATA_OFFSET (MSTEP_STEP_DATA_BYTES in all).\n");
  absl::StrAppend(&h, " */\n#ifndef MSTEP_STEP_H_\n#define MSTEP_STEP_H_\n\n");
  absl::StrAppend(&h, "#define MSTEP_STEP_NUM_INPUTS ", inputs.size(), "\n");
  absl::StrAppend(&h, "#define MSTEP_STEP_NUM_OUTPUTS ", outputs.size(), "\n");
  absl::StrAppend(&h, "/* The temp arena: ", layout.arena_bytes,
                  " bytes (every intermediate of the step, planned), 64-byte aligned. */\n");
  absl::StrAppend(&h, "#define MSTEP_STEP_TEMP_BYTES ", layout.arena_bytes, "\n");
  if (step.has_rng)
    absl::StrAppend(&h, "#define MSTEP_STEP_RNG_SEED ", step.rng_seed, "ULL\n",
                    "#define MSTEP_STEP_RNG_FIRST_OFFSET ", step.rng_first_offset, "ULL\n",
                    "#define MSTEP_STEP_RNG_OFFSET_PER_STEP ", step.rng_per_step, "ULL\n");
  absl::StrAppend(&h, "\n/* Inputs: index and bytes", with_data ? ", offset in the --data file" : "",
                  ". */\n");
  int64_t offset = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    absl::StrAppend(&h, "#define ", inputs[i].macro, " ", i, " /* ", inputs[i].name, ": ",
                    dtype_name(inputs[i].type.dtype), shape_text(inputs[i].type), " */\n");
    absl::StrAppend(&h, "#define ", inputs[i].macro, "_BYTES ", inputs[i].type.bytes(), "\n");
    if (with_data) {
      absl::StrAppend(&h, "#define ", inputs[i].macro, "_DATA_OFFSET ", offset, "\n");
      offset += aligned(static_cast<int64_t>(inputs[i].type.bytes()));
    }
  }
  if (with_data) absl::StrAppend(&h, "#define MSTEP_STEP_DATA_BYTES ", offset, "\n");
  absl::StrAppend(&h, "\n/* Outputs: index and bytes; _IN_PLACE_OF: the input whose buffer it may "
                      "be given. */\n");
  for (size_t j = 0; j < outputs.size(); ++j) {
    absl::StrAppend(&h, "#define ", outputs[j].macro, " ", j, " /* ", outputs[j].name, ": ",
                    dtype_name(outputs[j].type.dtype), shape_text(outputs[j].type), " */\n");
    absl::StrAppend(&h, "#define ", outputs[j].macro, "_BYTES ", outputs[j].type.bytes(), "\n");
  }
  for (size_t k = 0; k < layout.outputs.size(); ++k) {
    const xla::XlaLayout::Output& out = layout.outputs[k];
    if (out.output >= 0 && out.donated_arg >= 0)
      absl::StrAppend(&h, "#define ", outputs[out.output].macro, "_IN_PLACE_OF ",
                      inputs[out.donated_arg].macro, "\n");
  }
  // The same as lists, for a caller that loops over them.
  auto list = [&](absl::string_view macro, auto&& values) {
    absl::StrAppend(&h, "#define ", macro, " {", absl::StrJoin(values, ", "), "}\n");
  };
  std::vector<int64_t> input_bytes, offsets, output_bytes, updates, in_place;
  int64_t at = 0;
  for (const Argument& a : inputs) {
    input_bytes.push_back(static_cast<int64_t>(a.type.bytes()));
    offsets.push_back(at);
    at += aligned(input_bytes.back());
  }
  for (const Argument& a : outputs) {
    output_bytes.push_back(static_cast<int64_t>(a.type.bytes()));
    updates.push_back(a.updates);
    in_place.push_back(a.in_place);
  }
  absl::StrAppend(&h, "\n/* As lists (C initializers), by index: inputs' bytes", with_data ? " and --data offsets" : "",
                  "; outputs' bytes, the input each is the new\n * value of (-1: none) and whether "
                  "it may be given that input's buffer (1: in place). */\n");
  list("MSTEP_STEP_INPUT_BYTES", input_bytes);
  if (with_data) list("MSTEP_STEP_INPUT_DATA_OFFSETS", offsets);
  list("MSTEP_STEP_OUTPUT_BYTES", output_bytes);
  list("MSTEP_STEP_OUTPUT_UPDATES", updates);
  list("MSTEP_STEP_OUTPUT_IN_PLACE", in_place);
  absl::StrAppend(&h, "\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n",
                  "int mstep_step(const void* const* inputs, void* const* outputs, void* temp);\n",
                  "\n#ifdef __cplusplus\n}\n#endif\n\n#endif /* MSTEP_STEP_H_ */\n");
  return h;
}

} // namespace

int main(int argc, char** argv) {
  std::string in, out, header, data;
  std::optional<std::string> memory_limit;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) fail(2, absl::StrCat(arg, " needs a value"));
      return argv[++i];
    };
    if (arg == "-o") out = value();
    else if (arg == "--header") header = value();
    else if (arg == "--data") data = value();
    else if (absl::StartsWith(arg, "--xla-memory-limit=")) {
      memory_limit = arg.substr(std::strlen("--xla-memory-limit="));
      if (absl::StatusOr<int64_t> bytes = parse_xla_memory_limit(*memory_limit); !bytes.ok())
        fail(2, absl::StrCat("--xla-memory-limit: ", bytes.status().message()));
    }
    else if (arg == "-h" || arg == "--help") {
      std::printf("usage: mstep-aot step.mlir|step.mstep -o libstep.so --header step.h "
                  "[--data step.bin] [--xla-memory-limit=BYTES]\n");
      return 0;
    } else if (!arg.empty() && arg[0] == '-') fail(2, absl::StrCat("unknown option ", arg));
    else if (in.empty()) in = arg;
    else fail(2, absl::StrCat("one step only; got '", in, "' and '", arg, "'"));
  }
  if (in.empty() || out.empty() || header.empty())
    fail(2, "usage: mstep-aot step.mlir|step.mstep -o libstep.so --header step.h [--data step.bin] "
            "[--xla-memory-limit=BYTES]");

  StepInterface step;
  const TraceGraph graph = read_step(in, step);
  if (!data.empty() && !step.has_values)
    fail(2, absl::StrCat("--data needs an exported step (", in,
                         " is a module: it holds no values)"));
  RuntimeOptions runtime = RuntimeOptions::from_env();
  if (memory_limit) runtime.xla_memory_limit = *memory_limit;
  absl::StatusOr<xla::XlaProgram> program = xla::compile_graph_aot(graph, runtime);
  if (!program.ok()) fail(1, absl::StrCat(in, ": ", program.status().message()));
  const xla::XlaLayout& layout = program->layout;

  // The outputs of mstep_step: the values the step writes, each named by
  // the first graph output that is it.
  std::vector<Argument> outputs(layout.output_values.size());
  std::vector<std::string> unwritten;
  for (size_t k = 0; k < layout.outputs.size(); ++k) {
    const xla::XlaLayout::Output& o = layout.outputs[k];
    const std::string& name = step.output_names[k];
    if (o.input >= 0) {
      unwritten.push_back(absl::StrCat("(The step's result ", name, " is input ", o.input,
                                       " unchanged: not an output.)"));
      continue;
    }
    Argument& a = outputs[o.output];
    if (!a.name.empty()) continue;
    a.name = name;
    a.type = program->graph.type_of(program->graph.outputs[k]);
    const int64_t updates = updated_input(graph, k);
    a.updates = updates;
    a.in_place = o.donated_arg >= 0 && o.donated_arg == updates;
    a.role = updates >= 0 ? absl::StrCat("the new value of input ", updates, " (",
                                         step.inputs[updates].name, ")")
                          : "output";
    if (o.donated_arg >= 0)
      a.note = absl::StrCat("in place: may be input ", o.donated_arg, "'s buffer");
  }
  for (size_t i = 0; i < step.inputs.size(); ++i)
    for (size_t k = 0; k < layout.outputs.size(); ++k)
      if (layout.outputs[k].donated_arg == static_cast<int32_t>(i) && layout.outputs[k].output >= 0)
        absl::StrAppend(&step.inputs[i].role, ", updated in place by output ",
                        layout.outputs[k].output);
  std::set<std::string> used;
  name_macros(step.inputs, "MSTEP_STEP_IN_", used);
  name_macros(outputs, "MSTEP_STEP_OUT_", used);

  write_file(out, program->shared_object);
  write_file(header, header_text(in, step, step.inputs, outputs, *program, unwritten, !data.empty()));
  if (!data.empty()) {
    std::string bytes;
    for (const Argument& a : step.inputs) {
      bytes += a.value;
      bytes.resize(static_cast<size_t>(aligned(static_cast<int64_t>(bytes.size()))), '\0');
    }
    write_file(data, bytes);
  }
  std::printf("mstep-aot: %s -> %s, %s (%zu inputs, %zu outputs, temp %lld bytes)\n", in.c_str(),
              out.c_str(), header.c_str(), step.inputs.size(), outputs.size(),
              static_cast<long long>(layout.arena_bytes));
  return 0;
}
