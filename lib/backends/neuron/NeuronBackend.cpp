// NeuronBackend: opaque simulated HBM, the host-fallback executable, and
// the backend's registration (in the object library only tests link).
#include "lib/backends/neuron/NeuronBackend.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "lib/backends/ref/RefKernels.h"
#include "mstep/core/Error.h"

namespace mstep::neuron {

namespace {

constexpr Device kDevice{DeviceType::neuron, 0};

std::shared_ptr<host::HostBuffer> nan_filled(const TensorType& type) {
  auto b = std::make_shared<host::HostBuffer>(type, kDevice);
  std::memset(b->bytes(), 0xFF, type.bytes());
  return b;
}

absl::Status check_buffer(const Buffer& b, absl::string_view what, size_t bytes) {
  if (b.device().type != DeviceType::neuron)
    return absl::InvalidArgumentError(
        absl::StrCat("neuron ", what, " of a ", b.device().to_string(), " buffer"));
  if (bytes != b.type().bytes())
    return absl::InvalidArgumentError(absl::StrCat("neuron ", what, " of ", bytes, " bytes with ",
                                                   b.type().to_string(), " (", b.type().bytes(),
                                                   " bytes)"));
  return absl::OkStatus();
}

class NeuronExecutable final : public Executable {
public:
  NeuronExecutable(std::vector<TensorType> input_types, std::unique_ptr<Executable> ref,
                   std::vector<HostFallbackOp> fallbacks)
      : input_types_(std::move(input_types)), ref_(std::move(ref)),
        fallbacks_(std::move(fallbacks)) {}

  size_t num_kernels() const override { return fallbacks_.size(); }
  absl::Span<const HostFallbackOp> host_fallbacks() const override { return fallbacks_; }

  using Executable::run;
  /// Donations are declined: every output is a new buffer (or, for an input
  /// passed through, a copy of it, so no two buffers share HBM).
  absl::StatusOr<std::vector<BufferPtr>> run(absl::Span<const BufferPtr> inputs,
                                             const Donation&) override {
    if (inputs.size() != input_types_.size())
      return absl::InvalidArgumentError(absl::StrCat(
          "neuron executable expects ", input_types_.size(), " inputs, got ", inputs.size()));
    std::vector<BufferPtr> host_inputs;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const BufferPtr& b = inputs[i];
      if (!b || b->type() != input_types_[i] || b->device().type != DeviceType::neuron)
        return absl::InvalidArgumentError(absl::StrCat(
            "neuron executable input ", i, " should be a neuron ", input_types_[i].to_string(),
            ", got ",
            b ? absl::StrCat(b->device().to_string(), " ", b->type().to_string()) : "null"));
      host_inputs.push_back(static_cast<const NeuronBuffer&>(*b).storage());
    }
    MSTEP_ASSIGN_OR_RETURN(std::vector<BufferPtr> results, ref_->run(host_inputs));
    std::vector<BufferPtr> outputs;
    for (BufferPtr& r : results) {
      auto host = std::dynamic_pointer_cast<host::HostBuffer>(r);
      bool shared = !host;
      for (const BufferPtr& in : host_inputs) shared |= in == r;
      if (shared) {
        auto copy = std::make_shared<host::HostBuffer>(r->type(), kDevice);
        std::memcpy(copy->bytes(), std::static_pointer_cast<host::HostBuffer>(r)->bytes(),
                    r->type().bytes());
        host = std::move(copy);
      }
      outputs.push_back(std::make_shared<NeuronBuffer>(r->type(), std::move(host)));
    }
    return outputs;
  }

private:
  std::vector<TensorType> input_types_;
  std::unique_ptr<Executable> ref_;
  std::vector<HostFallbackOp> fallbacks_;
};

} // namespace

NeuronBuffer::NeuronBuffer(TensorType type) : Buffer(type, kDevice), storage_(nan_filled(type)) {}

NeuronBuffer::NeuronBuffer(TensorType type, std::shared_ptr<host::HostBuffer> storage)
    : Buffer(type, kDevice), storage_(std::move(storage)) {}

absl::StatusOr<BufferPtr> NeuronBackend::allocate(const TensorType& type) {
  return std::make_shared<NeuronBuffer>(type);
}

absl::Status NeuronBackend::copy_in(Buffer& dst, const void* src, size_t bytes) {
  MSTEP_RETURN_IF_ERROR(check_buffer(dst, "copy_in", bytes));
  if (bytes) std::memcpy(static_cast<NeuronBuffer&>(dst).storage()->bytes(), src, bytes);
  return absl::OkStatus();
}

absl::Status NeuronBackend::copy_out(const Buffer& src, void* dst, size_t bytes) {
  MSTEP_RETURN_IF_ERROR(check_buffer(src, "copy_out", bytes));
  if (bytes) std::memcpy(dst, static_cast<const NeuronBuffer&>(src).storage()->bytes(), bytes);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Executable>> make_neuron_executable(TraceGraph graph) {
  std::vector<HostFallbackOp> fallbacks;
  for (const GraphNode& n : graph.nodes)
    if (n.op != OpKind::parameter && n.op != OpKind::constant && !n.results.empty())
      fallbacks.push_back({n.op, n.results[0].dtype});
  std::vector<TensorType> inputs = graph.input_types;
  // The interpreter only makes new host memory; donation stays off.
  graph.donated_to.assign(graph.donated_to.size(), -1);
  MSTEP_ASSIGN_OR_RETURN(std::unique_ptr<Executable> ref,
                         ref::make_ref_executable(std::move(graph)));
  return std::make_unique<NeuronExecutable>(std::move(inputs), std::move(ref),
                                            std::move(fallbacks));
}

namespace {

const bool registered = [] {
  BackendRegistry::register_backend("neuron", DeviceType::neuron,
                                    [] { return std::unique_ptr<Backend>(new NeuronBackend()); });
  return true;
}();

} // namespace
} // namespace mstep::neuron
