#include "lib/backends/cpu/CollectiveKernel.h"

#include "absl/strings/str_cat.h"

namespace mstep::cpu {

namespace {

class CollectiveStart final : public CpuKernel {
 public:
  CollectiveStart(std::shared_ptr<dist::CollectiveRun> run)
      : run_(std::move(run)), name_(absl::StrCat("mpi.", op_name(run_->collective().op))) {}
  void run(const void* const* operands, void* const* results) override {
    status_ = run_->start(operands[0], results[0]);
  }
  absl::string_view name() const override { return name_; }
  bool can_fail() const override { return true; }
  absl::Status last_error() const override { return status_; }

 private:
  std::shared_ptr<dist::CollectiveRun> run_;
  std::string name_;
  absl::Status status_;
};

class CollectiveWait final : public CpuKernel {
 public:
  CollectiveWait(std::shared_ptr<dist::CollectiveRun> run) : run_(std::move(run)) {}
  void run(const void* const*, void* const*) override { status_ = run_->wait(); }
  absl::string_view name() const override { return "mpi.wait"; }
  bool can_fail() const override { return true; }
  absl::Status last_error() const override { return status_; }
  bool has_effects() const override { return true; }

 private:
  std::shared_ptr<dist::CollectiveRun> run_;
  absl::Status status_;
};

}  // namespace

CollectiveKernels make_collective_kernels(const KernelRequest& request) {
  const GraphNode& node = request.node();
  auto run = std::make_shared<dist::CollectiveRun>(
      dist::Collective::of(node, request.graph.type_of(node.operands[0])));
  return {std::make_unique<CollectiveStart>(run), std::make_unique<CollectiveWait>(run), run};
}

}  // namespace mstep::cpu
