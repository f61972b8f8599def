#include "lib/backends/cpu/HostFallbackKernel.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/backends/host/HostBuffer.h"
#include "lib/backends/ref/RefKernels.h"
#include "mstep/core/Error.h"

namespace mstep::cpu {

namespace {

constexpr Device kCpu{DeviceType::cpu, 0};

/// Ref buffers that view the pointers of each call.
struct Views {
  std::vector<std::shared_ptr<host::HostBuffer>> operands, results;
  std::vector<const host::HostBuffer*> in;
  std::vector<host::HostBuffer*> out;

  explicit Views(const KernelRequest& r) {
    for (ValueRef v : r.node().operands) {
      operands.push_back(std::make_shared<host::HostBuffer>(
          host::HostBuffer::view(r.graph.type_of(v), kCpu, nullptr)));
      in.push_back(operands.back().get());
    }
    for (const TensorType& t : r.node().results) {
      results.push_back(
          std::make_shared<host::HostBuffer>(host::HostBuffer::view(t, kCpu, nullptr)));
      out.push_back(results.back().get());
    }
  }
  void bind(const void* const* operand_ptrs, void* const* result_ptrs) {
    for (size_t i = 0; i < operands.size(); ++i)
      operands[i]->rebind(static_cast<std::byte*>(const_cast<void*>(operand_ptrs[i])));
    for (size_t j = 0; j < results.size(); ++j)
      results[j]->rebind(static_cast<std::byte*>(result_ptrs[j]));
  }
};

class RefOpKernel final : public CpuKernel {
 public:
  RefOpKernel(const KernelRequest& r, ref::RefKernel kernel)
      : node_(r.node()), kernel_(kernel), views_(r), name_(absl::StrCat("ref.", op_name(node_.op))) {}

  void run(const void* const* operands, void* const* results) override {
    views_.bind(operands, results);
    error_ = kernel_(ref::KernelArgs{node_, views_.in, views_.out});
  }
  absl::string_view name() const override { return name_; }
  bool can_fail() const override { return true; }
  absl::Status last_error() const override { return error_; }

 private:
  absl::Status error_;
  GraphNode node_;
  ref::RefKernel kernel_;
  Views views_;
  std::string name_;
};

/// A fusion the JIT did not compile: its body through the ref interpreter.
class RefFusionKernel final : public CpuKernel {
 public:
  RefFusionKernel(const KernelRequest& r, std::unique_ptr<Executable> body)
      : body_(std::move(body)), views_(r) {
    inputs_.assign(views_.operands.begin(), views_.operands.end());
  }

  void run(const void* const* operands, void* const* results) override {
    views_.bind(operands, results);
    auto outputs = body_->run(inputs_);
    error_ = outputs.status();
    if (!outputs.ok()) return;
    for (size_t j = 0; j < outputs->size(); ++j)
      std::memcpy(results[j], static_cast<const host::HostBuffer&>(*(*outputs)[j]).bytes(),
                  (*outputs)[j]->type().bytes());
  }
  absl::string_view name() const override { return "ref.fusion"; }
  bool can_fail() const override { return true; }
  absl::Status last_error() const override { return error_; }

 private:
  absl::Status error_;
  std::unique_ptr<Executable> body_;
  Views views_;
  std::vector<BufferPtr> inputs_;
};

}  // namespace

bool is_host_data_op(OpKind op) {
  switch (op) {
    case OpKind::constant: case OpKind::full: case OpKind::arange: case OpKind::rand:
    case OpKind::randn: case OpKind::reshape: case OpKind::permute: case OpKind::expand:
    case OpKind::slice: case OpKind::cat: case OpKind::gather: case OpKind::index_select:
    case OpKind::pad: case OpKind::triu: case OpKind::tril: case OpKind::slice_scatter:
      return true;
    default:
      return false;
  }
}

absl::StatusOr<std::unique_ptr<CpuKernel>> make_host_fallback_kernel(const KernelRequest& request) {
  const GraphNode& node = request.node();
  if (node.op == OpKind::fusion) {
    MSTEP_ASSIGN_OR_RETURN(std::unique_ptr<Executable> body, ref::make_ref_executable(*node.body));
    return std::make_unique<RefFusionKernel>(request, std::move(body));
  }
  ref::RefKernel kernel = ref::ref_kernel(node.op);
  if (!kernel)
    return absl::UnimplementedError(
        absl::StrCat("cpu backend has no kernel for op '", op_name(node.op), "' (nor has ref)"));
  return std::make_unique<RefOpKernel>(request, kernel);
}

}  // namespace mstep::cpu
