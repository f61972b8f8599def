#include "lib/backends/cpu/CustomOpKernel.h"

#include "absl/strings/str_cat.h"
#include "lib/backends/cpu/HostFallbackKernel.h"
#include "lib/backends/host/HostCustomCall.h"
#include "mstep/core/Error.h"

namespace mstep::cpu {

namespace {

class CustomCpuKernel final : public CpuKernel {
public:
  explicit CustomCpuKernel(host::HostCustomCall call, size_t num_operands, size_t num_results)
      : call_(std::move(call)), num_operands_(num_operands), num_results_(num_results),
        name_(absl::StrCat("custom.", call_.op().name)) {}

  void run(const void* const* operands, void* const* results) override {
    error_ = call_.run(absl::MakeConstSpan(operands, num_operands_),
                       absl::MakeConstSpan(results, num_results_));
  }
  absl::string_view name() const override { return name_; }
  bool can_fail() const override { return true; }
  absl::Status last_error() const override { return error_; }

private:
  host::HostCustomCall call_;
  size_t num_operands_, num_results_;
  std::string name_;
  absl::Status error_;
};

} // namespace

absl::StatusOr<SelectedKernel> select_custom_kernel(const KernelRequest& request) {
  const GraphNode& node = request.node();
  std::vector<TensorType> input_types;
  for (ValueRef v : node.operands) input_types.push_back(request.graph.type_of(v));
  auto call = host::HostCustomCall::bind(node, std::move(input_types), "cpu");
  if (call.ok()) {
    auto kernel = std::make_unique<CustomCpuKernel>(std::move(*call), node.operands.size(),
                                                    node.results.size());
    return SelectedKernel{std::move(kernel), false, "custom"};
  }
  if (!host::HostCustomCall::has_kernel(node, "ref")) return call.status();
  MSTEP_ASSIGN_OR_RETURN(std::unique_ptr<CpuKernel> fallback, make_host_fallback_kernel(request));
  return SelectedKernel{std::move(fallback), true, "ref"};
}

} // namespace mstep::cpu
