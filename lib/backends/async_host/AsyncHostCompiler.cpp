// async_host's compile half and its executable: the ref backend's compile
// result (the module exported back to a TraceGraph and interpreted), run
// on async_host's stream. run() checks its inputs, makes poisoned output
// buffers and queues the interpreter; it returns before the work is done.
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "absl/strings/str_cat.h"
#include "lib/backends/async_host/AsyncHostBackend.h"
#include "lib/backends/ref/RefKernels.h"
#include "mstep/compiler/BackendCompiler.h"
#include "mstep/core/Error.h"
#include "mstep/ir/MlirImport.h"

namespace mstep::async_host {

namespace {

class AsyncHostExecutable final : public Executable {
 public:
  AsyncHostExecutable(AsyncHostBackend& backend, std::vector<TensorType> input_types,
                      std::vector<TensorType> output_types, std::unique_ptr<Executable> ref,
                      int64_t delay_us)
      : backend_(backend),
        input_types_(std::move(input_types)),
        output_types_(std::move(output_types)),
        ref_(std::move(ref)),
        delay_us_(delay_us) {}

  size_t num_kernels() const override { return ref_->num_kernels(); }
  absl::Span<const HostFallbackOp> host_fallbacks() const override {
    return ref_->host_fallbacks();
  }

  using Executable::run;
  /// Takes no donation: never updates an input in place and never writes
  /// into an offered buffer; every output is a new buffer (both are
  /// optional in Executable::run).
  absl::StatusOr<std::vector<BufferPtr>> run(absl::Span<const BufferPtr> inputs,
                                             const Donation&) override {
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
    std::vector<BufferPtr> outputs;
    for (const TensorType& t : output_types_) outputs.push_back(std::make_shared<AsyncHostBuffer>(t));
    std::shared_ptr<Executable> ref = ref_;
    backend_.enqueue(std::vector<BufferPtr>(inputs.begin(), inputs.end()), outputs,
                     [ref](const std::vector<BufferPtr>& host_inputs) { return ref->run(host_inputs); },
                     delay_us_);
    return outputs;
  }

 private:
  AsyncHostBackend& backend_;
  std::vector<TensorType> input_types_, output_types_;
  std::shared_ptr<Executable> ref_;  // shared with the queued work
  int64_t delay_us_;
};

class AsyncHostCompiler final : public BackendCompiler {
 public:
  absl::string_view backend_name() const override { return "async_host"; }

  absl::StatusOr<std::unique_ptr<Executable>> compile(mlir::ModuleOp module, Backend& backend,
                                                      const RuntimeOptions& options) override {
    auto step = module.lookupSymbol<mlir::func::FuncOp>("step");
    if (!step) return absl::InvalidArgumentError("async_host backend: the module has no func @step");
    MSTEP_ASSIGN_OR_RETURN(TraceGraph graph, export_trace_graph(step));
    std::vector<TensorType> outputs;
    for (ValueRef v : graph.outputs) outputs.push_back(graph.nodes[v.node].results[v.index]);
    std::vector<TensorType> inputs = graph.input_types;
    // No donation: the interpreter would judge an input free to overwrite
    // by who holds its memory, not by who holds the async_host buffer.
    graph.donated_to.assign(graph.donated_to.size(), -1);
    MSTEP_ASSIGN_OR_RETURN(std::unique_ptr<Executable> ref, ref::make_ref_executable(std::move(graph)));
    return std::make_unique<AsyncHostExecutable>(static_cast<AsyncHostBackend&>(backend),
                                                 std::move(inputs), std::move(outputs),
                                                 std::move(ref), options.async_host_delay_us);
  }
};

const bool registered = [] {
  CompilerRegistry::register_compiler(
      "async_host", [] { return std::unique_ptr<BackendCompiler>(new AsyncHostCompiler()); });
  return true;
}();

}  // namespace
}  // namespace mstep::async_host
