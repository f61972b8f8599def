// mstep-compile: compiles an exported step (Graph::save) for another
// backend ahead of time, on a machine that need not have its device:
// compile here, run there (mstep-run, on the GPU machine).
//
//   mstep-compile step.mstep --device cuda -o step_cuda.mstep [--zero-values]
//                 [--plugin libmyops.so]...
//
// --plugin: a shared library that registers the custom ops the step calls
//   (mstep/runtime/Plugin.h), with their kernels for the target (a "cuda"
//   kernel's CUDA C++ source is compiled here with NVRTC).
// --zero-values: every tensor the file carries (parameters, optimizer
//   state, the batch, constants) becomes zeros, so the file compresses to
//   its code: for timing runs that ship it to another machine (a step's time
//   does not depend on its values), never for results.
//
// The input must be exported on ref, whose stored form is the step's
// graph, with fusion off (MSTEP_FUSE=0: the target fuses for itself);
// each segment's graph goes
// through the target's pipeline and compile half (BackendCompiler::
// compile_stored), and everything else of the file (slots and their values,
// bindings, constants, the RNG state) is kept. MSTEP_DUMP_DIR dumps as a
// compile does. For cuda, each segment's plan is summarized on stdout
// (steps, kernel launches, copies, cuBLASLt and cuDNN calls, the arena).
// Exit status: 0 ok, 1 the file does not load or a segment does not
// compile (the error names the segment and the op), 2 bad arguments.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/compiler/Compiler.h"
#include "lib/runtime/GraphArchive.h"
#include "lib/runtime/TrustedPath.h"
#include "mstep/compiler/BackendCompiler.h"
#include "mstep/core/Error.h"
#include "mstep/runtime/Options.h"
#include "mstep/runtime/Plugin.h"
#include "tools/common/StoredGraph.h"
#ifdef MSTEP_CUDA_PLAN_SUMMARY
#include "lib/backends/cuda/CudaPlanFormat.h"
#include "lib/backends/cuda/CudaPlanSummary.h"
#endif

namespace {

using namespace mstep;

[[noreturn]] void fail(int code, const std::string& message) {
  std::fprintf(stderr, "mstep-compile: %s\n", message.c_str());
  std::exit(code);
}

}  // namespace

int main(int argc, char** argv) {
  std::string in, out, device;
  std::vector<std::string> plugins;
  bool zero_values = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) fail(2, absl::StrCat(arg, " needs a value"));
      return argv[++i];
    };
    if (arg == "--device") device = value();
    else if (arg == "-o") out = value();
    else if (arg == "--zero-values") zero_values = true;
    else if (arg == "--plugin") plugins.push_back(value());
    else if (arg == "-h" || arg == "--help") {
      std::printf("usage: mstep-compile step.mstep --device BACKEND -o out.mstep [--zero-values] "
                  "[--plugin libmyops.so]...\n");
      return 0;
    } else if (!arg.empty() && arg[0] == '-') fail(2, absl::StrCat("unknown option ", arg));
    else if (in.empty()) in = arg;
    else fail(2, absl::StrCat("one step file only; got '", in, "' and '", arg, "'"));
  }
  if (in.empty() || out.empty() || device.empty())
    fail(2, "usage: mstep-compile step.mstep --device BACKEND -o out.mstep");
  for (const std::string& plugin : plugins)
    if (absl::Status s = load_plugin(plugin); !s.ok()) fail(2, std::string(s.message()));
  if (!CompilerRegistry::get(device).ok())
    fail(2, absl::StrCat("no compile half for --device ", device, "; compiled here: ",
                         absl::StrJoin(CompilerRegistry::names(), ", ")));

  absl::StatusOr<std::string> bytes = internal::read_trusted_file(in);
  if (!bytes.ok()) fail(1, std::string(bytes.status().message()));
  absl::StatusOr<GraphArchive> archive = decode_graph_archive(*bytes, in);
  if (!archive.ok()) fail(1, std::string(archive.status().message()));

  const RuntimeOptions runtime = RuntimeOptions::from_env();
  for (size_t s = 0; s < archive->segments.size(); ++s) {
    GraphArchive::Segment& segment = archive->segments[s];
    absl::StatusOr<TraceGraph> graph = tools::stored_graph(archive->backend, segment.executable);
    if (!graph.ok())
      fail(1, absl::StrCat(in, ": segment ", s, ": ", graph.status().message()));
    absl::StatusOr<std::string> stored = compile_graph_stored(
        *graph, device, {.dump_dir = runtime.dump_dir, .key = s}, runtime);
    if (!stored.ok())
      fail(1, absl::StrCat(in, ": segment ", s, " for ", device, ": ", stored.status().message()));
    segment.executable = *std::move(stored);
#ifdef MSTEP_CUDA_PLAN_SUMMARY
    if (device == "cuda") {
      absl::StatusOr<cuda::CudaPlan> plan = cuda::deserialize_cuda_plan(segment.executable);
      if (!plan.ok())
        fail(1, absl::StrCat(in, ": segment ", s, ": ", plan.status().message()));
      std::printf("mstep-compile: segment %zu: %s\n", s,
                  cuda::describe_cuda_plan_summary(cuda::summarize_cuda_plan(*plan)).c_str());
    }
#endif
  }
  archive->backend = device;
  if (zero_values) {
    for (GraphArchive::Slot& slot : archive->slots) slot.value.assign(slot.value.size(), '\0');
    for (GraphArchive::Constant& constant : archive->constants)
      constant.value.assign(constant.value.size(), '\0');
  }
  const std::string encoded = encode_graph_archive(*archive);
  std::FILE* f = std::fopen(out.c_str(), "wb");
  if (f == nullptr || std::fwrite(encoded.data(), 1, encoded.size(), f) != encoded.size() ||
      std::fclose(f) != 0)
    fail(1, absl::StrCat("cannot write ", out));
  std::printf("mstep-compile: %s -> %s (%s, %zu segment(s))\n", in.c_str(), out.c_str(),
              device.c_str(), archive->segments.size());
  return 0;
}
