// assemble_ptx: ptxas through run_external_tool (no shell, private files).
#include "lib/backends/cuda/CudaPtxas.h"

#include "absl/strings/str_cat.h"
#include "lib/compiler/ExternalTool.h"

#ifndef MSTEP_PTXAS
#error "MSTEP_PTXAS: the build defines ptxas's path (lib/backends/cuda/CMakeLists.txt)"
#endif
#ifndef MSTEP_CUDA_TOOLKIT
#error "MSTEP_CUDA_TOOLKIT: the build defines the toolkit's root (lib/backends/cuda/CMakeLists.txt)"
#endif

namespace mstep::cuda {

const std::string& configured_ptxas() {
  static const std::string* ptxas = new std::string(MSTEP_PTXAS);
  return *ptxas;
}

const std::string& configured_cuda_toolkit() {
  static const std::string* root = new std::string(MSTEP_CUDA_TOOLKIT);
  return *root;
}

absl::StatusOr<AssembledPtx> assemble_ptx(absl::string_view ptx, absl::string_view arch,
                                          absl::string_view what, const std::string& ptxas) {
  ExternalToolRun run;
  run.who = absl::StrCat("cuda: assembling ", what, " for ", arch);
  run.tool = "ptxas";
  run.hint = "mstep assembles its kernels with the ptxas of the CUDA toolkit it was configured with";
  run.args = {ptxas, "-v", "-O3", absl::StrCat("-arch=", arch), "-o", "{dir}/kernel.cubin",
              "{dir}/kernel.ptx"};
  run.inputs["kernel.ptx"] = std::string(ptx);
  run.outputs = {"kernel.cubin"};
  absl::StatusOr<ExternalToolResult> result = run_external_tool(run);
  if (!result.ok()) return result.status();
  AssembledPtx out;
  out.cubin = std::move(result->outputs["kernel.cubin"]);
  absl::StatusOr<std::vector<PtxasKernelReport>> reports = parse_ptxas_report(result->log);
  if (!reports.ok())
    return absl::InternalError(absl::StrCat(run.who, ": ptxas -v's report does not parse: ",
                                            reports.status().message()));
  out.reports = std::move(*reports);
  return out;
}

}  // namespace mstep::cuda
