// HostCustomCall: the lookup of a custom op's host kernel and its call.
#include "lib/backends/host/HostCustomCall.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "mstep/core/Error.h"

namespace mstep::host {

namespace {

absl::StatusOr<std::shared_ptr<const CustomOp>> op_of(const GraphNode& node) {
  return CustomOpRegistry::global().find(
      static_cast<uint64_t>(attr_int(node.attrs, AttrName::custom_op)));
}

} // namespace

bool HostCustomCall::has_kernel(const GraphNode& node, absl::string_view backend) {
  auto op = op_of(node);
  return op.ok() && custom_kernel_as<HostCustomKernel>((*op)->kernel(backend)) != nullptr;
}

absl::StatusOr<HostCustomCall> HostCustomCall::bind(const GraphNode& node,
                                                    std::vector<TensorType> input_types,
                                                    absl::string_view backend) {
  HostCustomCall call;
  MSTEP_ASSIGN_OR_RETURN(call.op_, op_of(node));
  const CustomOp& op = *call.op_;
  const CustomKernel* kernel = op.kernel(backend);
  if (kernel == nullptr) {
    std::vector<absl::string_view> have;
    for (const auto& [name, k] : op.kernels) have.push_back(name);
    return absl::FailedPreconditionError(
        absl::StrCat("custom op '", op.name, "' has no kernel for backend '", backend,
                     "' (it has kernels for: ", have.empty() ? "none" : absl::StrJoin(have, ", "),
                     "). Register one with "
                     "CustomOpRegistry::global().add_kernel(\"",
                     op.name, "\", \"", backend, "\", ...)."));
  }
  call.kernel_ = custom_kernel_as<HostCustomKernel>(kernel);
  if (call.kernel_ == nullptr)
    return absl::FailedPreconditionError(
        absl::StrCat("custom op '", op.name, "': the kernel registered for backend '", backend,
                     "' is a '", kernel->kind(), "' kernel; backend '", backend,
                     "' runs host kernels (mstep::host_kernel)"));
  call.attrs_ = node.attrs;
  call.input_types_ = std::move(input_types);
  call.output_types_.assign(node.results.begin(), node.results.end());
  return call;
}

absl::Status HostCustomCall::run(absl::Span<const void* const> inputs,
                                 absl::Span<void* const> outputs) const {
  const CustomAttrView view(op_->schema.attrs, custom_attr_values(attrs_));
  absl::Status s = (*kernel_)(HostKernelCall{inputs, input_types_, outputs, output_types_, view});
  if (s.ok()) return s;
  return absl::Status(s.code(),
                      absl::StrCat("custom op '", op_->label(), "' kernel failed: ", s.message()));
}

} // namespace mstep::host
