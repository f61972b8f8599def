// assemble_ptx: ptxas through run_external_tool (no shell, private files),
// each (ptxas, arch, PTX) once per process.
#include "lib/backends/cuda/CudaPtxas.h"

#include <map>
#include <mutex>

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

namespace {

/// What ptxas made of each text so far; dropped whole past kMaxBytes.
struct AssembledCache {
  static constexpr size_t kMaxBytes = size_t{256} << 20;
  std::mutex mutex;
  std::map<std::string, AssembledPtx> entries;
  size_t bytes = 0;
};

AssembledCache& assembled_cache() {
  static auto* cache = new AssembledCache();
  return *cache;
}

/// ptxas on `ptx`, uncached.
absl::StatusOr<AssembledPtx> run_ptxas(absl::string_view ptx, absl::string_view arch,
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

}  // namespace

absl::StatusOr<AssembledPtx> assemble_ptx(absl::string_view ptx, absl::string_view arch,
                                          absl::string_view what, const std::string& ptxas) {
  AssembledCache& cache = assembled_cache();
  std::string key = absl::StrCat(ptxas, "\n", arch, "\n", ptx);
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    if (auto it = cache.entries.find(key); it != cache.entries.end()) return it->second;
  }
  absl::StatusOr<AssembledPtx> out = run_ptxas(ptx, arch, what, ptxas);
  if (!out.ok()) return out;  // not kept: each caller gets the error naming its kernel
  std::lock_guard<std::mutex> lock(cache.mutex);
  const size_t bytes = key.size() + out->cubin.size();
  if (cache.bytes + bytes > AssembledCache::kMaxBytes) {
    cache.entries.clear();
    cache.bytes = 0;
  }
  if (cache.entries.emplace(std::move(key), *out).second) cache.bytes += bytes;
  return out;
}

}  // namespace mstep::cuda
