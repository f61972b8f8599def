// link_shared_object: the object is linked in a private directory by the
// system linker (lib/compiler/ExternalTool.h: spawned without a shell):
//
//   <linker> -shared -Bsymbolic -z noexecstack -o fusions.so fusions.o
//
// -Bsymbolic binds the library's references to its own definitions, so
// two loaded libraries with the same entry names never interpose.
#include "lib/backends/cpu/SharedObjectLink.h"

#include "lib/compiler/ExternalTool.h"

#ifndef MSTEP_SYSTEM_LINKER
#error "MSTEP_SYSTEM_LINKER: the build defines the linker's path (lib/backends/cpu/CMakeLists.txt)"
#endif

namespace mstep::cpu {

const std::string& system_linker() {
  static const std::string* linker = new std::string(MSTEP_SYSTEM_LINKER);
  return *linker;
}

absl::StatusOr<std::string> link_shared_object(absl::string_view object,
                                               const std::string& linker,
                                               const std::vector<std::string>& extra_args) {
  ExternalToolRun run;
  run.who = "fusion JIT";
  run.tool = "the linker";
  run.hint = "mstep links the fused kernels with the linker it was configured with";
  run.args = {linker, "-shared", "-Bsymbolic", "-z", "noexecstack",
              "-o", "{dir}/fusions.so", "{dir}/fusions.o"};
  run.args.insert(run.args.end(), extra_args.begin(), extra_args.end());
  run.inputs["fusions.o"] = std::string(object);
  run.outputs = {"fusions.so"};
  absl::StatusOr<ExternalToolResult> result = run_external_tool(run);
  if (!result.ok()) return result.status();
  return std::move(result->outputs["fusions.so"]);
}

} // namespace mstep::cpu
