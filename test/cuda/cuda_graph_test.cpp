// CUDA Graphs on the fake driver (issue 22 §1): a compiled step's run
// captured through CudaBackend::record_graph is recorded, not run, and
// instantiated once; each launch() is one cuGraphLaunch that replays the
// captured launches with the arguments they were captured with; update()
// re-captures over other buffers and applies it with cuGraphExecUpdate
// (no new instantiation); rebind() patches, with no capture, only the
// nodes that use a moved buffer (cuGraphExecKernelNodeSetParams and
// cuGraphExecMemcpyNodeSetParams), and leaves to update() what it cannot
// (a buffer library work uses, a driver without those calls); library
// work elsewhere in the graph does not stop a patch. What CUDA cannot
// capture (an allocation, a host sync, a call the driver refuses) fails
// the capture with an error naming it, and the backend keeps working.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "lib/backends/cuda/CudaCompiler.h"
#include "lib/backends/cuda/CudaExecutable.h"
#include "lib/backends/cuda/CudaGraph.h"
#include "test/cuda/CodegenCaseSteps.h"
#include "test/cuda/CudaStepText.h"
#include "test/cuda/FakeCudaBackendTest.h"

namespace mstep::cuda {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;

std::string pointer_bytes(const Buffer& buffer) {
  CUdeviceptr pointer = CudaBackend::device_pointer(buffer);
  return std::string(reinterpret_cast<const char*>(&pointer), sizeof pointer);
}

class CudaGraphTest : public testing::FakeCudaBackendTest {
protected:
  void SetUp() override {
    FakeCudaBackendTest::SetUp();
    testing::CudaStepContext step(testing::kChainStep);
    auto compiled = compile_cuda_step(step.module(), default_cuda_compile_options());
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    add_kernels(compiled->plan);
    plan_ = compiled->plan;
    auto exe = CudaExecutable::create(*backend_, compiled->plan);
    ASSERT_TRUE(exe.ok()) << exe.status();
    exe_ = std::move(*exe);
    x_ = input(type_), y_ = input(type_);
    outputs_ = {input(type_), input(type_)};
  }
  /// The step's run over `x`, y and the static outputs, to record.
  std::function<absl::Status()> run_over(BufferPtr x) {
    return [this, x] {
      auto results = exe_->run({x, y_}, {.inputs = {}, .outputs = outputs_});
      if (!results.ok()) return results.status();
      EXPECT_EQ((*results)[0], outputs_[0]);  // the offered buffers, not new ones
      return absl::OkStatus();
    };
  }
  /// The calls since `from` named `name` that graph launch `launch` ran.
  std::vector<testing::FakeCall> replayed(size_t from, int launch, const std::string& name) {
    std::vector<testing::FakeCall> found;
    for (size_t i = from; i < fake_.calls.size(); ++i)
      if (fake_.calls[i].graph_launch == launch && fake_.calls[i].name == name)
        found.push_back(fake_.calls[i]);
    return found;
  }
  /// A stand-in for a cuBLASLt step (named as CudaExecutable names one)
  /// that copies `from` into `into`: one copy node, which a launch really
  /// runs, and one node the fake reports as a memset (a library's node
  /// CudaGraph cannot read).
  std::function<absl::Status()> library_step(BufferPtr from, BufferPtr into) {
    return [this, from, into] {
      const Buffer* reads[] = {from.get()};
      const Buffer* writes[] = {into.get()};
      return backend_->enqueue(
          "cublasLt step (a stand-in)",
          [&] {
            MSTEP_RETURN_IF_ERROR(MSTEP_CUDA_CALL(
                backend_->context().api(), cuMemcpyDtoDAsync, CudaBackend::device_pointer(*into),
                CudaBackend::device_pointer(*from), from->type().bytes(),
                backend_->context().stream()));
            fake_.record_stream_call("cublasLtMatmul", backend_->context().stream(), "");
            return absl::OkStatus();
          },
          reads, writes);
    };
  }
  /// The calls since `from` named `name`.
  std::vector<testing::FakeCall> since(size_t from, const std::string& name) {
    std::vector<testing::FakeCall> found;
    for (size_t i = from; i < fake_.calls.size(); ++i)
      if (fake_.calls[i].name == name) found.push_back(fake_.calls[i]);
    return found;
  }
  const TensorType type_{Shape({8, 64}), DType::f32};
  CudaPlan plan_;
  std::unique_ptr<CudaExecutable> exe_;
  BufferPtr x_, y_;
  std::vector<BufferPtr> outputs_;
};

TEST_F(CudaGraphTest, ACapturedRunIsRecordedOnceAndEachLaunchReplaysItsKernels) {
  const size_t before = fake_.calls.size();
  auto graph = backend_->record_graph(run_over(x_));
  ASSERT_TRUE(graph.ok()) << graph.status();
  // Recorded, not run: three kernel nodes and nothing else (no event, no
  // allocation), one instantiation.
  EXPECT_TRUE(replayed(before, 0, "cuLaunchKernel").empty());
  ASSERT_THAT(fake_.last_captured, SizeIs(3));
  for (const testing::FakeCall& node : fake_.last_captured) EXPECT_EQ(node.name, "cuLaunchKernel");
  EXPECT_THAT(fake_.calls_named("cuGraphInstantiate"), SizeIs(1));
  EXPECT_EQ(fake_.live_graphs, 1);  // the captured graph is kept: rebind() reads its nodes
  EXPECT_FALSE(backend_->capturing());

  const size_t launched = fake_.calls.size();
  ASSERT_TRUE((*graph)->launch().ok());
  ASSERT_TRUE((*graph)->launch().ok());
  EXPECT_THAT(fake_.calls_named("cuGraphLaunch"), SizeIs(2));
  for (int launch : {1, 2}) {
    std::vector<testing::FakeCall> kernels = replayed(launched, launch, "cuLaunchKernel");
    ASSERT_THAT(kernels, SizeIs(3));
    // exp(x) -> the second output; tanh(...) -> the first (CudaExecutableTest's order).
    EXPECT_EQ(kernels[0].args[0], pointer_bytes(*x_));
    EXPECT_EQ(kernels[0].args[1], pointer_bytes(*outputs_[1]));
    EXPECT_EQ(kernels[1].args[1], pointer_bytes(*y_));
    EXPECT_EQ(kernels[2].args[1], pointer_bytes(*outputs_[0]));
  }
  // Reading an output waits for the launch that writes it.
  const size_t waits = fake_.calls_named("cuEventSynchronize").size();
  std::vector<float> host(type_.numel());
  ASSERT_TRUE(backend_->copy_out(*outputs_[0], host.data(), type_.bytes()).ok());
  EXPECT_GT(fake_.calls_named("cuEventSynchronize").size(), waits);
  graph->reset();
  EXPECT_EQ(fake_.live_graph_execs, 0);
  EXPECT_EQ(fake_.live_graphs, 0);
}

TEST_F(CudaGraphTest, AnUpdateMovesTheKernelsToNewBuffersWithoutANewInstantiation) {
  auto recorded = CudaGraph::record(*backend_, run_over(x_));
  ASSERT_TRUE(recorded.ok()) << recorded.status();
  CudaGraph& graph = **recorded;
  BufferPtr moved = input(type_);
  ASSERT_TRUE(graph.update(run_over(moved)).ok());
  EXPECT_EQ(graph.updates(), 1);
  EXPECT_EQ(graph.reinstantiations(), 0);
  EXPECT_THAT(fake_.calls_named("cuGraphExecUpdate"), SizeIs(1));
  EXPECT_THAT(fake_.calls_named("cuGraphInstantiate"), SizeIs(1));
  const size_t before = fake_.calls.size();
  ASSERT_TRUE(graph.launch().ok());
  std::vector<testing::FakeCall> kernels = replayed(before, 1, "cuLaunchKernel");
  ASSERT_THAT(kernels, SizeIs(3));
  EXPECT_EQ(kernels[0].args[0], pointer_bytes(*moved));
}

TEST_F(CudaGraphTest, WorkOfAnotherShapeIsInstantiatedAnew) {
  auto recorded = CudaGraph::record(*backend_, run_over(x_));
  ASSERT_TRUE(recorded.ok()) << recorded.status();
  // Two runs instead of one: the driver refuses the update (topology).
  auto twice = [this]() -> absl::Status {
    MSTEP_RETURN_IF_ERROR(run_over(x_)());
    return run_over(x_)();
  };
  ASSERT_TRUE((*recorded)->update(twice).ok());
  EXPECT_EQ((*recorded)->reinstantiations(), 1);
  EXPECT_THAT(fake_.calls_named("cuGraphInstantiate"), SizeIs(2));
  EXPECT_EQ(fake_.live_graph_execs, 1);
  EXPECT_EQ(fake_.live_graphs, 1);  // the new one, kept; the first destroyed
}

TEST_F(CudaGraphTest, AnAllocationInsideTheCaptureNamesTheStepAndLeavesTheBackendUsable) {
  // No buffers offered: the outputs would be allocated inside the graph;
  // the first of them is exp(x), value %2.
  auto graph = backend_->record_graph([this]() -> absl::Status {
    return exe_->run({x_, y_}).status();
  });
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(graph.status().message(), HasSubstr("allocating a buffer of f32[8, 64]"));
  EXPECT_THAT(graph.status().message(), HasSubstr("while a CUDA graph is being captured"));
  EXPECT_THAT(graph.status().message(), HasSubstr("value %2 (f32[8, 64], written by kernel"));
  EXPECT_THAT(graph.status().message(), HasSubstr("(mstep.exp #0)")) << graph.status();
  EXPECT_FALSE(backend_->capturing());
  EXPECT_EQ(fake_.live_graphs, 0);
  EXPECT_THAT(fake_.calls_named("cuGraphInstantiate"), SizeIs(0));
  // The next run runs as before.
  const size_t before = fake_.calls.size();
  auto outputs = exe_->run({x_, y_});
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  EXPECT_THAT(replayed(before, 0, "cuLaunchKernel"), SizeIs(3));
}

TEST_F(CudaGraphTest, AHostSyncInsideTheCaptureIsNamed) {
  std::vector<float> host(type_.numel());
  auto copy_out = backend_->record_graph(
      [&] { return backend_->copy_out(*x_, host.data(), type_.bytes()); });
  ASSERT_FALSE(copy_out.ok());
  EXPECT_THAT(copy_out.status().message(), HasSubstr("copy_out (a host sync)"));
  auto copy_in = backend_->record_graph(
      [&] { return backend_->copy_in(*x_, host.data(), type_.bytes()); });
  ASSERT_FALSE(copy_in.ok());
  EXPECT_THAT(copy_in.status().message(), HasSubstr("copy_in"));
  auto sync = backend_->record_graph([&] { return backend_->synchronize(); });
  ASSERT_FALSE(sync.ok());
  EXPECT_THAT(sync.status().message(), HasSubstr("synchronize (a host sync)"));
  EXPECT_TRUE(backend_->synchronize().ok());
}

TEST_F(CudaGraphTest, ACallTheDriverRefusesInvalidatesTheCapture) {
  // The raw allocator (not the backend) misses its cache: cuMemAlloc
  // inside the capture, which the driver refuses and which invalidates it.
  // (A refused call whose error is ignored: cuStreamEndCapture reports it.)
  auto graph = backend_->record_graph([&]() -> absl::Status {
    (void)backend_->allocator().allocate(size_t{3} << 20);
    return run_over(x_)();
  });
  ASSERT_FALSE(graph.ok());
  // The next captured launch fails as the driver's do after that.
  EXPECT_THAT(graph.status().message(), HasSubstr("cuLaunchKernel"));
  EXPECT_THAT(graph.status().message(), HasSubstr("CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"));
  EXPECT_FALSE(backend_->capturing());
  EXPECT_TRUE(backend_->health().ok());
}

TEST_F(CudaGraphTest, ACapturedDeviceCopyCopiesAtEachLaunch) {
  // The fake really copies (device pointers are host memory): what the
  // graph copies is the source's value at launch, not at capture.
  const TensorType type{Shape({4}), DType::f32};
  BufferPtr src = input(type), dst = input(type);
  const float first[4] = {1, 2, 3, 4}, second[4] = {5, 6, 7, 8}, zeros[4] = {};
  ASSERT_TRUE(backend_->copy_in(*src, first, sizeof first).ok());
  ASSERT_TRUE(backend_->copy_in(*dst, zeros, sizeof zeros).ok());
  auto graph = backend_->record_graph([&] { return backend_->copy_device(src, dst); });
  ASSERT_TRUE(graph.ok()) << graph.status();
  float out[4] = {};
  ASSERT_TRUE(backend_->copy_out(*dst, out, sizeof out).ok());
  EXPECT_THAT(out, ::testing::ElementsAre(0, 0, 0, 0));  // recorded, not run
  ASSERT_TRUE((*graph)->launch().ok());
  ASSERT_TRUE(backend_->copy_out(*dst, out, sizeof out).ok());
  EXPECT_THAT(out, ::testing::ElementsAre(1, 2, 3, 4));
  ASSERT_TRUE(backend_->copy_in(*src, second, sizeof second).ok());
  ASSERT_TRUE((*graph)->launch().ok());
  ASSERT_TRUE(backend_->copy_out(*dst, out, sizeof out).ok());
  EXPECT_THAT(out, ::testing::ElementsAre(5, 6, 7, 8));
}

TEST_F(CudaGraphTest, AnOfferedBufferOfTheWrongTypeIsNamed) {
  outputs_[1] = input({Shape({8, 65}), DType::f32});
  auto results = exe_->run({x_, y_}, {.inputs = {}, .outputs = outputs_});
  ASSERT_FALSE(results.ok());
  EXPECT_THAT(results.status().message(), HasSubstr("the buffer offered for output 1"));
}

// Steps whose plans keep an intermediate outside the arena (an op's
// scratch, written by one launch and read by the next): the executable
// allocates it once, when it is created, so a run recorded into a CUDA
// graph allocates nothing (an allocation there fails the capture; an H200
// run of the training steps found it).
TEST_F(CudaGraphTest, AStepWithScratchOutsideTheArenaIsRecorded) {
  int recorded = 0;
  for (const char* text : {testing::kRowSum, testing::kSoftmaxRows, testing::kNorms,
                           testing::kClippedAdadelta}) {
    testing::CudaStepContext step(text);
    auto compiled = compile_cuda_step(step.module(), default_cuda_compile_options());
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    const CudaPlan& plan = compiled->plan;
    std::vector<bool> output(plan.values.size(), false);
    for (int v : plan.outputs) output[v] = true;
    bool scratch = false;
    for (size_t v = plan.num_inputs; v < plan.values.size(); ++v)
      scratch |= !output[v] && plan.arena_offsets[v] < 0;
    if (!scratch) continue;
    add_kernels(plan);
    auto exe = CudaExecutable::create(*backend_, plan);
    ASSERT_TRUE(exe.ok()) << exe.status();
    std::vector<BufferPtr> inputs, outputs;
    for (size_t i = 0; i < plan.num_inputs; ++i) inputs.push_back(input(plan.values[i]));
    for (int v : plan.outputs) outputs.push_back(input(plan.values[v]));
    auto graph = backend_->record_graph([&]() -> absl::Status {
      return (*exe)->run(inputs, {.inputs = {}, .outputs = outputs}).status();
    });
    ASSERT_TRUE(graph.ok()) << graph.status();
    ASSERT_TRUE((*graph)->launch().ok());
    ++recorded;
  }
  EXPECT_GT(recorded, 0) << "no step here keeps an intermediate outside the arena any more";
}

// rebind(): the kernels reading x (exp(x), kernel 0, per the first test)
// are patched, with no capture, and a launch then runs what a run of the
// step over the new buffer launches.
TEST_F(CudaGraphTest, ARebindPatchesOnlyTheKernelsThatReadTheMovedInput) {
  auto recorded = CudaGraph::record(*backend_, run_over(x_));
  ASSERT_TRUE(recorded.ok()) << recorded.status();
  CudaGraph& graph = **recorded;
  const std::string exp_kernel = fake_.last_captured[0].kernel;
  BufferPtr moved = input(type_);
  const size_t before = fake_.calls.size();
  EXPECT_EQ(graph.rebind({{x_, moved}}), 1);
  std::vector<testing::FakeCall> set = since(before, "cuGraphExecKernelNodeSetParams");
  ASSERT_THAT(set, SizeIs(1));
  EXPECT_EQ(set[0].kernel, exp_kernel);
  EXPECT_EQ(set[0].args[0], pointer_bytes(*moved));
  EXPECT_EQ(set[0].args[1], pointer_bytes(*outputs_[1]));  // what it writes: unchanged
  EXPECT_THAT(since(before, "cuStreamBeginCapture"), SizeIs(0));
  EXPECT_THAT(since(before, "cuGraphExecUpdate"), SizeIs(0));
  EXPECT_THAT(since(before, "cuGraphInstantiate"), SizeIs(0));
  EXPECT_EQ(graph.updates(), 0);

  const size_t launched = fake_.calls.size();
  ASSERT_TRUE(graph.launch().ok());
  std::vector<testing::FakeCall> replay = replayed(launched, 1, "cuLaunchKernel");
  const size_t direct = fake_.calls.size();
  ASSERT_TRUE(exe_->run({moved, y_}, {.inputs = {}, .outputs = outputs_}).ok());
  std::vector<testing::FakeCall> lazy = replayed(direct, 0, "cuLaunchKernel");
  ASSERT_THAT(replay, SizeIs(3));
  ASSERT_THAT(lazy, SizeIs(3));
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(replay[k].kernel, lazy[k].kernel);
    EXPECT_EQ(replay[k].args, lazy[k].args) << "kernel " << k;
  }
}

TEST_F(CudaGraphTest, AMovedResultPatchesTheKernelThatWritesItAndTheOneThatReadsIt) {
  // outputs_[1] is exp(x): written by kernel 0, read by kernel 1 (the mul).
  auto recorded = CudaGraph::record(*backend_, run_over(x_));
  ASSERT_TRUE(recorded.ok()) << recorded.status();
  BufferPtr moved = input(type_);
  const size_t before = fake_.calls.size();
  EXPECT_EQ((*recorded)->rebind({{outputs_[1], moved}}), 2);
  std::vector<testing::FakeCall> set = since(before, "cuGraphExecKernelNodeSetParams");
  ASSERT_THAT(set, SizeIs(2));
  EXPECT_EQ(set[0].args[1], pointer_bytes(*moved));
  EXPECT_EQ(set[1].args[0], pointer_bytes(*moved));
  EXPECT_EQ(set[1].args[1], pointer_bytes(*y_));
  // Reading the new buffer waits for the launch that now writes it.
  ASSERT_TRUE((*recorded)->launch().ok());
  const size_t waits = fake_.calls_named("cuEventSynchronize").size();
  std::vector<float> host(type_.numel());
  ASSERT_TRUE(backend_->copy_out(*moved, host.data(), type_.bytes()).ok());
  EXPECT_GT(fake_.calls_named("cuEventSynchronize").size(), waits);
}

TEST_F(CudaGraphTest, ARebindPatchesACopyNodesSource) {
  const TensorType type{Shape({4}), DType::f32};
  BufferPtr src = input(type), dst = input(type), other = input(type);
  const float first[4] = {1, 2, 3, 4}, second[4] = {5, 6, 7, 8};
  ASSERT_TRUE(backend_->copy_in(*src, first, sizeof first).ok());
  ASSERT_TRUE(backend_->copy_in(*other, second, sizeof second).ok());
  auto recorded = CudaGraph::record(*backend_, [&] { return backend_->copy_device(src, dst); });
  ASSERT_TRUE(recorded.ok()) << recorded.status();
  const size_t before = fake_.calls.size();
  EXPECT_EQ((*recorded)->rebind({{src, other}}), 1);
  std::vector<testing::FakeCall> set = since(before, "cuGraphExecMemcpyNodeSetParams");
  ASSERT_THAT(set, SizeIs(1));
  EXPECT_EQ(set[0].source, CudaBackend::device_pointer(*other));
  EXPECT_EQ(set[0].target, CudaBackend::device_pointer(*dst));
  ASSERT_TRUE((*recorded)->launch().ok());
  float out[4] = {};
  ASSERT_TRUE(backend_->copy_out(*dst, out, sizeof out).ok());
  EXPECT_THAT(out, ::testing::ElementsAre(5, 6, 7, 8));
}

TEST_F(CudaGraphTest, AMoveOfABufferLibraryWorkReadsIsLeftToUpdate) {
  // A library's nodes may reach the moved buffer beyond their parameters.
  BufferPtr into = input(type_);
  auto recorded = CudaGraph::record(*backend_, library_step(x_, into));
  ASSERT_TRUE(recorded.ok()) << recorded.status();
  BufferPtr moved = input(type_);
  const size_t before = fake_.calls.size();
  EXPECT_EQ((*recorded)->rebind({{x_, moved}}), -1);
  EXPECT_THAT(since(before, "cuGraphExecMemcpyNodeSetParams"), SizeIs(0));
  // The way it takes instead: recorded again and updated.
  ASSERT_TRUE((*recorded)->update(library_step(moved, into)).ok());
  EXPECT_THAT(since(before, "cuGraphExecUpdate"), SizeIs(1));
  const size_t launched = fake_.calls.size();
  ASSERT_TRUE((*recorded)->launch().ok());
  std::vector<testing::FakeCall> copies = replayed(launched, 1, "cuMemcpyDtoDAsync");
  ASSERT_THAT(copies, SizeIs(1));
  EXPECT_EQ(copies[0].source, CudaBackend::device_pointer(*moved));
}

// DeviceReplay's layout of a step with library work: a copy of the data
// input into a static buffer at the head of the graph, which the library
// step reads. A moved input patches that copy node alone (no capture, no
// exec update), and the launch computes from the new input.
TEST_F(CudaGraphTest, LibraryWorkReadingAStaticBufferLeavesAHeadCopyPatchable) {
  const TensorType type{Shape({4}), DType::f32};
  BufferPtr x = input(type), slot = input(type), out = input(type), moved = input(type);
  const float first[4] = {1, 2, 3, 4}, second[4] = {5, 6, 7, 8};
  ASSERT_TRUE(backend_->copy_in(*x, first, sizeof first).ok());
  ASSERT_TRUE(backend_->copy_in(*moved, second, sizeof second).ok());
  auto step = [&] {
    MSTEP_RETURN_IF_ERROR(backend_->copy_device(x, slot));
    return library_step(slot, out)();
  };
  auto recorded = CudaGraph::record(*backend_, step);
  ASSERT_TRUE(recorded.ok()) << recorded.status();
  EXPECT_EQ((*recorded)->opaque_nodes(), 1) << "the stand-in's memset node, left alone";
  ASSERT_TRUE((*recorded)->launch().ok());
  float got[4] = {};
  ASSERT_TRUE(backend_->copy_out(*out, got, sizeof got).ok());
  EXPECT_THAT(got, ::testing::ElementsAre(1, 2, 3, 4));

  const size_t before = fake_.calls.size();
  EXPECT_EQ((*recorded)->rebind({{x, moved}}), 1);
  std::vector<testing::FakeCall> set = since(before, "cuGraphExecMemcpyNodeSetParams");
  ASSERT_THAT(set, SizeIs(1));
  EXPECT_EQ(set[0].source, CudaBackend::device_pointer(*moved));
  EXPECT_EQ(set[0].target, CudaBackend::device_pointer(*slot));
  EXPECT_THAT(since(before, "cuStreamBeginCapture"), SizeIs(0));
  EXPECT_THAT(since(before, "cuGraphExecUpdate"), SizeIs(0));
  EXPECT_EQ((*recorded)->updates(), 0);
  ASSERT_TRUE((*recorded)->launch().ok());
  ASSERT_TRUE(backend_->copy_out(*out, got, sizeof got).ok());
  EXPECT_THAT(got, ::testing::ElementsAre(5, 6, 7, 8));
  // The static buffer itself is the library's: moving it is left to update().
  EXPECT_EQ((*recorded)->rebind({{slot, input(type)}}), -1);
}

TEST_F(CudaGraphTest, AfterAnUpdateARebindDeclines) {
  // The captured graph's nodes no longer describe the instantiated one.
  auto recorded = CudaGraph::record(*backend_, run_over(x_));
  ASSERT_TRUE(recorded.ok()) << recorded.status();
  BufferPtr moved = input(type_), again = input(type_);
  ASSERT_TRUE((*recorded)->update(run_over(moved)).ok());
  EXPECT_EQ((*recorded)->rebind({{moved, again}}), -1);
  EXPECT_THAT(fake_.calls_named("cuGraphExecKernelNodeSetParams"), SizeIs(0));
}

TEST_F(CudaGraphTest, ADriverWithoutNodePatchingLoadsAndLeavesAMoveToUpdate) {
  auto driver = std::make_shared<CudaDriver>(*fake_.driver());
  driver->api.cuGraphExecKernelNodeSetParams = nullptr;  // an optional entry point
  ASSERT_TRUE(init_cuda_driver(driver->api).ok());
  auto backend = CudaBackend::create(driver);
  ASSERT_TRUE(backend.ok()) << backend.status();
  auto exe = CudaExecutable::create(**backend, plan_);
  ASSERT_TRUE(exe.ok()) << exe.status();
  BufferPtr x = (*backend)->allocate(type_).value(), y = (*backend)->allocate(type_).value();
  std::vector<BufferPtr> outputs = {(*backend)->allocate(type_).value(),
                                    (*backend)->allocate(type_).value()};
  auto recorded = CudaGraph::record(**backend, [&] {
    return (*exe)->run({x, y}, {.inputs = {}, .outputs = outputs}).status();
  });
  ASSERT_TRUE(recorded.ok()) << recorded.status();
  BufferPtr moved = (*backend)->allocate(type_).value();
  EXPECT_EQ((*recorded)->rebind({{x, moved}}), -1);
}

}  // namespace
}  // namespace mstep::cuda
