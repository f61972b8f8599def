// The xla executable's stored form (XlaFormat.h): what serialize() writes,
// the backend's deserialize() (the runtime alone, as in mstep-run) loads
// into an executable that computes the same bits, callouts included; a
// truncated or corrupt blob is a DataLoss error naming the executable, not a
// crash, and the backend keeps working; code generated for another CPU or
// architecture is refused before it is loaded; anything else (module text)
// is Unimplemented, so the disk cache compiles it.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "lib/backends/xla/XlaExecutable.h"
#include "lib/backends/xla/XlaFormat.h"
#include "lib/compiler/Compiler.h"
#include "mstep/runtime/Backend.h"
#include "mstep/runtime/Tracer.h"
#include "test/unit/TestUtil.h"

namespace mstep {
namespace {

using ::testing::HasSubstr;

constexpr Device kXla{DeviceType::xla, 0};

Backend& xla_backend() { return **BackendRegistry::get(DeviceType::xla); }

Tensor on_xla(Shape s, int seed) {
  std::vector<float> v(s.numel());
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>(std::sin(0.731 * i + 1.37 * seed));
  return from_vector(v, s, DType::f32, kXla);
}

/// The graph of the step that computes what `body` returns (on xla).
template <typename Body>
TraceGraph graph_of(Body body) {
  Tracer::get().set_record_steps(true);
  const Tensor result = body();
  mark_step();
  const std::shared_ptr<const TraceGraph> graph = Tracer::get().last_step().graph;
  Tracer::get().set_record_steps(false);
  EXPECT_NE(graph, nullptr);
  return graph ? *graph : TraceGraph{};
}

std::unique_ptr<Executable> compile_on_xla(const TraceGraph& graph) {
  auto compiled = compile_graph(graph, xla_backend(), {}, RuntimeOptions{});
  EXPECT_TRUE(compiled.ok()) << compiled.status();
  return compiled.ok() ? std::move(compiled->executable) : nullptr;
}

/// Inputs of `graph`'s types with fixed, varied contents.
std::vector<BufferPtr> inputs_for(const TraceGraph& graph) {
  std::vector<BufferPtr> inputs;
  for (size_t i = 0; i < graph.input_types.size(); ++i) {
    const TensorType& type = graph.input_types[i];
    std::string bytes(type.bytes(), '\0');
    if (type.dtype == DType::f32)
      for (size_t e = 0; e < bytes.size() / 4; ++e) {
        const float v = static_cast<float>(std::cos(0.37 * e + i));
        std::memcpy(&bytes[4 * e], &v, 4);
      }
    BufferPtr buffer = *xla_backend().allocate(type);
    EXPECT_TRUE(xla_backend().copy_in(*buffer, bytes.data(), bytes.size()).ok());
    inputs.push_back(std::move(buffer));
  }
  return inputs;
}

/// The bytes of every result of one run (nothing donated).
std::vector<std::string> run_bytes(Executable& exe, const std::vector<BufferPtr>& inputs) {
  auto results = exe.run(inputs);
  EXPECT_TRUE(results.ok()) << results.status();
  std::vector<std::string> out;
  if (!results.ok()) return out;
  for (const BufferPtr& b : *results) {
    std::string bytes(b->type().bytes(), '\0');
    EXPECT_TRUE(xla_backend().copy_out(*b, bytes.data(), bytes.size()).ok());
    out.push_back(std::move(bytes));
  }
  return out;
}

TraceGraph mlp_forward() {
  return graph_of([] {
    return matmul(relu(matmul(on_xla({5, 7}, 1), on_xla({7, 9}, 2)) + on_xla({9}, 3)),
                  on_xla({9, 3}, 4));
  });
}

TEST(XlaStoredForm, ALoadedExecutableComputesTheSameBits) {
  const TraceGraph graph = mlp_forward();
  std::unique_ptr<Executable> compiled = compile_on_xla(graph);
  ASSERT_NE(compiled, nullptr);
  absl::StatusOr<std::string> blob = compiled->serialize("module text is not stored");
  ASSERT_TRUE(blob.ok()) << blob.status();
  EXPECT_EQ(blob->substr(0, 8), "MSTEPXLA");
  absl::StatusOr<std::unique_ptr<Executable>> loaded = xla_backend().deserialize(*blob, {});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->num_kernels(), 1u);
  const std::vector<BufferPtr> inputs = inputs_for(graph);
  EXPECT_EQ(run_bytes(**loaded, inputs), run_bytes(*compiled, inputs));
}

TEST(XlaStoredForm, AConvStepLoadsWithItsScratchAndComputesTheSameBits) {
  // The im2col + gemm convolutions' scratch lies after the planned arena;
  // the loader lays it out again from the stored plan.
  const TraceGraph graph = graph_of([] {
    return conv2d(on_xla({3, 4, 9, 9}, 1), on_xla({5, 4, 3, 3}, 2), on_xla({5}, 3), {1}, {1});
  });
  std::unique_ptr<Executable> compiled = compile_on_xla(graph);
  ASSERT_NE(compiled, nullptr);
  absl::StatusOr<std::unique_ptr<Executable>> loaded =
      xla_backend().deserialize(*compiled->serialize(""), {});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  auto* before = dynamic_cast<xla::XlaExecutable*>(compiled.get());
  auto* after = dynamic_cast<xla::XlaExecutable*>(loaded->get());
  ASSERT_NE(before, nullptr);
  ASSERT_NE(after, nullptr);
  EXPECT_EQ(after->arena_bytes(), before->arena_bytes());
  EXPECT_GE(after->arena_bytes(), 3 * 4 * 9 * 9 * 9 * 4); // the 3 samples' im2col matrices
  const std::vector<BufferPtr> inputs = inputs_for(graph);
  EXPECT_EQ(run_bytes(**loaded, inputs), run_bytes(*compiled, inputs));
}

TEST(XlaStoredForm, CalloutsAreStoredAndRunAfterALoad) {
  // An f64 softmax is a callout (the function's softmax loop takes f32,
  // bf16 and f16).
  const TraceGraph graph = graph_of([] {
    return relu(to(softmax(to(on_xla({2, 5, 7}, 1), DType::f64), 1), DType::f32));
  });
  std::unique_ptr<Executable> compiled = compile_on_xla(graph);
  ASSERT_NE(compiled, nullptr);
  absl::StatusOr<std::unique_ptr<Executable>> loaded =
      xla_backend().deserialize(*compiled->serialize(""), {});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  auto* xla = dynamic_cast<xla::XlaExecutable*>(loaded->get());
  ASSERT_NE(xla, nullptr);
  EXPECT_THAT(xla->callout_names(), ::testing::ElementsAre("softmax"));
  const std::vector<BufferPtr> inputs = inputs_for(graph);
  EXPECT_EQ(run_bytes(**loaded, inputs), run_bytes(*compiled, inputs));
}

TEST(XlaStoredForm, TruncatedOrCorruptBlobsAreDataLossErrors) {
  const TraceGraph graph = mlp_forward();
  std::unique_ptr<Executable> compiled = compile_on_xla(graph);
  ASSERT_NE(compiled, nullptr);
  const std::string blob = *compiled->serialize("");
  std::vector<std::string> bad;
  for (size_t keep : {size_t{9}, size_t{20}, size_t{40}, blob.size() / 2, blob.size() - 1})
    bad.push_back(blob.substr(0, keep));
  for (size_t at : {size_t{30}, blob.size() / 3, blob.size() - 5}) {
    std::string flipped = blob;
    flipped[at] = static_cast<char>(flipped[at] ^ 0x5a);
    bad.push_back(flipped);
  }
  for (size_t i = 0; i < bad.size(); ++i) {
    SCOPED_TRACE(i);
    absl::StatusOr<std::unique_ptr<Executable>> loaded = xla_backend().deserialize(bad[i], {});
    ASSERT_FALSE(loaded.ok());
    EXPECT_EQ(loaded.status().code(), absl::StatusCode::kDataLoss) << loaded.status();
    EXPECT_THAT(loaded.status().message(), HasSubstr("xla executable"));
  }
  // The backend keeps working.
  absl::StatusOr<std::unique_ptr<Executable>> loaded = xla_backend().deserialize(blob, {});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const std::vector<BufferPtr> inputs = inputs_for(graph);
  EXPECT_EQ(run_bytes(**loaded, inputs), run_bytes(*compiled, inputs));
}

TEST(XlaStoredForm, ModuleTextIsNotAStoredFormSoTheCacheCompilesIt) {
  absl::StatusOr<std::unique_ptr<Executable>> loaded =
      xla_backend().deserialize("module {\n  func.func @step() {\n  }\n}\n", {});
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kUnimplemented) << loaded.status();
}

TEST(XlaStoredForm, CodeForAnotherCpuIsRefusedBeforeItIsLoaded) {
  std::unique_ptr<Executable> compiled = compile_on_xla(mlp_forward());
  ASSERT_NE(compiled, nullptr);
  absl::StatusOr<xla::XlaProgram> program = xla::read_xla_format(*compiled->serialize(""));
  ASSERT_TRUE(program.ok()) << program.status();
  // Another architecture.
  xla::XlaProgram other_arch = *program;
  other_arch.target.arch = "riscv64";
  absl::StatusOr<std::unique_ptr<Executable>> loaded =
      xla_backend().deserialize(xla::write_xla_format(other_arch), {});
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kFailedPrecondition) << loaded.status();
  EXPECT_THAT(loaded.status().message(), HasSubstr("riscv64"));
  // A feature this build cannot check on the host.
  xla::XlaProgram other_cpu = *program;
  other_cpu.target.features.push_back("not-a-cpu-feature");
  loaded = xla_backend().deserialize(xla::write_xla_format(other_cpu), {});
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kFailedPrecondition) << loaded.status();
  EXPECT_THAT(loaded.status().message(), HasSubstr("not-a-cpu-feature"));
}

TEST(XlaStoredForm, ACalloutOutsideTheStepIsCorruption) {
  std::unique_ptr<Executable> compiled = compile_on_xla(mlp_forward());
  ASSERT_NE(compiled, nullptr);
  absl::StatusOr<xla::XlaProgram> program = xla::read_xla_format(*compiled->serialize(""));
  ASSERT_TRUE(program.ok()) << program.status();
  program->callouts.push_back(static_cast<uint32_t>(program->graph.nodes.size()));
  absl::StatusOr<std::unique_ptr<Executable>> loaded =
      xla_backend().deserialize(xla::write_xla_format(*program), {});
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kDataLoss) << loaded.status();
  EXPECT_THAT(loaded.status().message(), HasSubstr("callout"));
}

} // namespace
} // namespace mstep
