// The ref kernel of `custom` nodes: the host kernel the user registered for
// backend "ref" (mstep/runtime/CustomOp.h). The cpu backend runs it too,
// as a counted host fallback, for a custom op with no "cpu" kernel.
#include "lib/backends/host/HostCustomCall.h"
#include "lib/backends/ref/RefKernels.h"
#include "mstep/core/Error.h"

namespace mstep::ref {

namespace {

std::vector<TensorType> input_types(const KernelArgs& a) {
  std::vector<TensorType> types;
  for (const HostBuffer* b : a.inputs) types.push_back(b->type());
  return types;
}

absl::Status run_custom(const KernelArgs& a) {
  // Looked up per call: check_custom_kernel found it at compile time, and
  // registered kernels are never removed.
  MSTEP_ASSIGN_OR_RETURN(host::HostCustomCall call,
                         host::HostCustomCall::bind(a.node, input_types(a), "ref"));
  std::vector<const void*> in;
  for (const HostBuffer* b : a.inputs) in.push_back(b->bytes());
  std::vector<void*> out;
  for (HostBuffer* b : a.outputs) out.push_back(b->bytes());
  return call.run(in, out);
}

} // namespace

absl::Status check_custom_kernel(const GraphNode& node) {
  return host::HostCustomCall::bind(node, {}, "ref").status();
}

void register_custom_kernels(KernelTable& table) {
  table[static_cast<int>(OpKind::custom)] = run_custom;
}

} // namespace mstep::ref
