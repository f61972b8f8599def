// FusionJit's runtime half: load (check the target against this host's CPU,
// dlopen the shared object, look each nest's entry up once) and the
// CpuKernel that runs a fusion's nests, split over the OpenMP threads when
// large. No MLIR or LLVM: compile() is FusionJitCompile.cpp.
#include "lib/backends/cpu/FusionJit.h"

#include <omp.h>

#include <algorithm>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/backends/cpu/HostCpuFeatures.h"
#include "lib/backends/cpu/SharedLibrary.h"
#include "mstep/core/Error.h"

namespace mstep::cpu {

struct FusionJit::Code {
  /// Null when no fusion was compiled. Every kernel keeps it open.
  std::unique_ptr<SharedLibrary> library;
  /// Per fusion, per nest.
  std::vector<std::vector<FusionEntry>> entries;
};

namespace {

/// Runs the nests of one fusion, each over its whole outer dim: on the
/// calling thread, or in contiguous chunks (multiples of the nest's grain)
/// on every OpenMP thread.
class JitFusionKernel final : public CpuKernel {
public:
  struct Nest {
    FusionEntry entry;
    int64_t outer;
    int64_t grain;
    bool empty;
    bool parallel;
  };

  JitFusionKernel(std::shared_ptr<const FusionJit> owner, absl::InlinedVector<Nest, 1> nests)
      : owner_(std::move(owner)), nests_(std::move(nests)) {}

  void run(const void* const* operands, void* const* results) override {
    for (const Nest& nest : nests_) {
      if (nest.empty) continue;
      if (!nest.parallel) {
        nest.entry(operands, results, 0, nest.outer);
        continue;
      }
      const Nest* split = &nest;
#pragma omp parallel
      {
        const int64_t threads = omp_get_num_threads();
        const int64_t thread = omp_get_thread_num();
        const int64_t units = (split->outer + split->grain - 1) / split->grain;
        const int64_t begin = std::min(split->outer, units * thread / threads * split->grain);
        const int64_t end = std::min(split->outer, units * (thread + 1) / threads * split->grain);
        if (begin < end) split->entry(operands, results, begin, end);
      }
    }
  }

  absl::string_view name() const override { return "jit.fusion"; }

private:
  std::shared_ptr<const FusionJit> owner_;
  absl::InlinedVector<Nest, 1> nests_;
};

absl::Status type_mismatch(int k, absl::string_view what, size_t i, const TensorType& expected,
                           const TensorType& got) {
  return absl::InvalidArgumentError(
      absl::StrCat("FusionJit::kernel: fusion ", k, " was compiled with ", what, " ", i,
                   " of type ", expected.to_string(), ", but the node has ", got.to_string(),
                   "; compile the kernels from the module this graph was exported from"));
}

} // namespace

absl::Status check_target(const FusionTarget& target, absl::string_view who) {
  if (target.arch != host_architecture())
    return absl::FailedPreconditionError(absl::StrCat(
        who, ": the kernels were generated for ", target.arch, ", this host is ",
        host_architecture(), "; compile the step on this host"));
  std::vector<std::string> missing, unknown;
  for (const std::string& feature : target.features) {
    if (!knows_cpu_feature(feature))
      unknown.push_back(feature);
    else if (!host_has_cpu_feature(feature))
      missing.push_back(feature);
  }
  if (!missing.empty())
    return absl::FailedPreconditionError(absl::StrCat(
        who, ": the kernels were generated for a CPU (", target.cpu,
        ") with features this host's CPU lacks: ", absl::StrJoin(missing, ", "),
        "; running them would crash (illegal instruction), so nothing was loaded; compile the "
        "step on this host"));
  if (!unknown.empty())
    return absl::FailedPreconditionError(absl::StrCat(
        who,
        ": the kernels were generated with CPU features this build cannot check on this host: ",
        absl::StrJoin(unknown, ", "), "; compile the step on this host"));
  return absl::OkStatus();
}

FusionJit::FusionJit(FusionObject index, std::unique_ptr<Code> code)
    : index_(std::move(index)), code_(std::move(code)) {}

FusionJit::~FusionJit() = default;

absl::StatusOr<std::shared_ptr<FusionJit>> FusionJit::load(absl::string_view object) {
  MSTEP_ASSIGN_OR_RETURN(FusionObject parsed, parse_fusion_object(object));
  return from_object(std::move(parsed));
}

absl::StatusOr<std::shared_ptr<FusionJit>> FusionJit::from_object(FusionObject object) {
  auto code = std::make_unique<Code>();
  code->entries.resize(object.fusions.size());
  if (!object.shared_object.empty()) {
    MSTEP_RETURN_IF_ERROR(check_target(object.target, "FusionJit::load"));
    MSTEP_ASSIGN_OR_RETURN(code->library,
                           SharedLibrary::load(object.shared_object, "FusionJit: the fused kernels' shared object"));
    for (size_t k = 0; k < object.fusions.size(); ++k) {
      for (const FusionNestInfo& nest : object.fusions[k].nests) {
        MSTEP_ASSIGN_OR_RETURN(void* address, code->library->symbol(nest.symbol));
        code->entries[k].push_back(reinterpret_cast<FusionEntry>(address));
      }
    }
  } else if (std::any_of(object.fusions.begin(), object.fusions.end(),
                         [](const FusionInfo& f) { return f.compiled; })) {
    return absl::DataLossError("FusionJit: compiled fusions but no object code");
  }
  return std::shared_ptr<FusionJit>(new FusionJit(std::move(object), std::move(code)));
}

std::string FusionJit::object() const { return serialize_fusion_object(index_); }

absl::string_view FusionJit::skip_reason(int k) const {
  if (k < 0 || k >= num_fusions()) return "no such fusion";
  return index_.fusions[k].skip_reason;
}

absl::StatusOr<std::unique_ptr<CpuKernel>> FusionJit::kernel(int k,
                                                             const KernelRequest& request) const {
  if (k < 0 || k >= num_fusions())
    return absl::InvalidArgumentError(absl::StrCat("FusionJit::kernel: fusion ", k,
                                                   " does not exist; the step has ", num_fusions(),
                                                   " fusions"));
  const FusionInfo& fusion = index_.fusions[k];
  if (!fusion.compiled) return std::unique_ptr<CpuKernel>();
  const GraphNode& node = request.node();
  if (node.op != OpKind::fusion || node.operands.size() != fusion.operand_types.size() ||
      node.results.size() != fusion.result_types.size())
    return absl::InvalidArgumentError(absl::StrCat(
        "FusionJit::kernel: node ", request.index, " ('", op_name(node.op), "', ",
        node.operands.size(), " operands, ", node.results.size(), " results) is not fusion ", k,
        " (", fusion.operand_types.size(), " operands, ", fusion.result_types.size(), " results)"));
  for (size_t i = 0; i < node.operands.size(); ++i)
    if (request.graph.type_of(node.operands[i]) != fusion.operand_types[i])
      return type_mismatch(k, "operand", i, fusion.operand_types[i],
                           request.graph.type_of(node.operands[i]));
  for (size_t j = 0; j < node.results.size(); ++j)
    if (node.results[j] != fusion.result_types[j])
      return type_mismatch(k, "result", j, fusion.result_types[j], node.results[j]);

  absl::InlinedVector<JitFusionKernel::Nest, 1> nests;
  for (size_t n = 0; n < fusion.nests.size(); ++n) {
    const FusionNestInfo& info = fusion.nests[n];
    nests.push_back({code_->entries[k][n], info.outer, info.grain, info.elements == 0,
                     info.elements >= kParallelElements && info.outer >= 2});
  }
  return std::unique_ptr<CpuKernel>(new JitFusionKernel(shared_from_this(), std::move(nests)));
}

} // namespace mstep::cpu
