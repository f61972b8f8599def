// async_host's compile half and its executable: the ref backend's compile
// result (the module exported back to a TraceGraph and interpreted), run
// on async_host's stream. run() checks its inputs, picks the output
// buffers (a donated input, an offered buffer or a new poisoned one) and
// queues the interpreter; it returns before the work is done.
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "absl/strings/str_cat.h"
#include "lib/backends/async_host/AsyncHostBackend.h"
#include "lib/backends/ref/RefExecutableFormat.h"
#include "lib/backends/ref/RefKernels.h"
#include "mstep/compiler/BackendCompiler.h"
#include "mstep/core/Error.h"
#include "mstep/ir/MlirImport.h"

namespace mstep::async_host {

namespace {

class AsyncHostExecutable final : public Executable {
 public:
  AsyncHostExecutable(AsyncHostBackend& backend, std::vector<TensorType> input_types,
                      std::vector<TensorType> output_types, std::vector<int32_t> donated_to,
                      std::unique_ptr<Executable> ref, int64_t delay_us, std::string stored)
      : stored_(std::move(stored)),
        backend_(backend),
        input_types_(std::move(input_types)),
        output_types_(std::move(output_types)),
        donated_to_(std::move(donated_to)),
        ref_(std::move(ref)),
        delay_us_(delay_us) {}

  size_t num_kernels() const override { return ref_->num_kernels(); }
  /// The graph as ref stores it (donations included), which
  /// load_async_host_executable reads back (exported graphs).
  absl::StatusOr<std::string> serialize(absl::string_view) const override { return stored_; }
  absl::Span<const HostFallbackOp> host_fallbacks() const override {
    return ref_->host_fallbacks();
  }

  using Executable::run;
  /// Takes donations as a device backend does: a donated input's buffer is
  /// its output's (the stream writes it after every earlier reader), an
  /// offered buffer of the right type is written instead of a new one.
  absl::StatusOr<std::vector<BufferPtr>> run(absl::Span<const BufferPtr> inputs,
                                             const Donation& donation) override {
    if (inputs.size() != input_types_.size())
      return absl::InvalidArgumentError(absl::StrCat("async_host executable expects ",
                                                     input_types_.size(), " inputs, got ",
                                                     inputs.size()));
    for (size_t i = 0; i < inputs.size(); ++i) {
      const BufferPtr& b = inputs[i];
      if (!b || b->type() != input_types_[i] || b->device().type != DeviceType::async_host)
        return absl::InvalidArgumentError(absl::StrCat(
            "async_host executable input ", i, " should be an async_host ",
            input_types_[i].to_string(), ", got ",
            b ? absl::StrCat(b->device().to_string(), " ", b->type().to_string()) : "null"));
    }
    std::vector<BufferPtr> outputs(output_types_.size());
    for (size_t i = 0; i < donation.inputs.size(); ++i)
      if (donation.inputs[i] && donated_to_[i] >= 0 && !outputs[donated_to_[i]])
        outputs[donated_to_[i]] = inputs[i];
    for (size_t k = 0; k < outputs.size(); ++k) {
      if (outputs[k]) continue;
      const BufferPtr offered = k < donation.outputs.size() ? donation.outputs[k] : nullptr;
      if (!offered && backend_.recording())  // an allocation inside a device graph
        return absl::FailedPreconditionError(absl::StrCat(
            "async_host executable: output ", k, " (", output_types_[k].to_string(),
            ") has no buffer offered while a device graph is being recorded"));
      outputs[k] = offered && offered->device().type == DeviceType::async_host &&
                           offered->type() == output_types_[k]
                       ? offered
                       : std::make_shared<AsyncHostBuffer>(output_types_[k]);
    }
    std::shared_ptr<Executable> ref = ref_;
    backend_.enqueue(std::vector<BufferPtr>(inputs.begin(), inputs.end()), outputs,
                     [ref](const std::vector<BufferPtr>& host_inputs) { return ref->run(host_inputs); },
                     delay_us_);
    return outputs;
  }

 private:
  std::string stored_;
  AsyncHostBackend& backend_;
  std::vector<TensorType> input_types_, output_types_;
  std::vector<int32_t> donated_to_;  // per input: the output it may become, or -1
  std::shared_ptr<Executable> ref_;  // shared with the queued work
  int64_t delay_us_;
};

/// The executable of `graph` (a compiled or stored step) on `backend`.
absl::StatusOr<std::unique_ptr<Executable>> executable_of(AsyncHostBackend& backend,
                                                          TraceGraph graph, int64_t delay_us) {
  std::string stored = ref::write_ref_executable(graph);
  std::vector<TensorType> outputs;
  for (ValueRef v : graph.outputs) outputs.push_back(graph.nodes[v.node].results[v.index]);
  std::vector<TensorType> inputs = graph.input_types;
  // The executable donates async_host buffers itself; the interpreter
  // under it only ever makes new host memory (it would judge an input
  // free to overwrite by who holds its memory, not the async_host buffer).
  std::vector<int32_t> donated_to = graph.donated_to;
  donated_to.resize(inputs.size(), -1);
  graph.donated_to.assign(graph.donated_to.size(), -1);
  MSTEP_ASSIGN_OR_RETURN(std::unique_ptr<Executable> ref, ref::make_ref_executable(std::move(graph)));
  return std::make_unique<AsyncHostExecutable>(backend, std::move(inputs), std::move(outputs),
                                               std::move(donated_to), std::move(ref), delay_us,
                                               std::move(stored));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Executable>> load_async_host_executable(
    AsyncHostBackend& backend, absl::string_view blob, const RuntimeOptions& options) {
  MSTEP_ASSIGN_OR_RETURN(TraceGraph graph, ref::read_ref_executable(blob));
  return executable_of(backend, std::move(graph), options.async_host_delay_us);
}

namespace {

class AsyncHostCompiler final : public BackendCompiler {
 public:
  absl::string_view backend_name() const override { return "async_host"; }

  absl::StatusOr<std::unique_ptr<Executable>> compile(mlir::ModuleOp module, Backend& backend,
                                                      const RuntimeOptions& options) override {
    auto step = module.lookupSymbol<mlir::func::FuncOp>("step");
    if (!step) return absl::InvalidArgumentError("async_host backend: the module has no func @step");
    MSTEP_ASSIGN_OR_RETURN(TraceGraph graph, export_trace_graph(step));
    return executable_of(static_cast<AsyncHostBackend&>(backend), std::move(graph),
                         options.async_host_delay_us);
  }
};

const bool registered = [] {
  CompilerRegistry::register_compiler(
      "async_host", [] { return std::unique_ptr<BackendCompiler>(new AsyncHostCompiler()); });
  return true;
}();

}  // namespace
}  // namespace mstep::async_host
