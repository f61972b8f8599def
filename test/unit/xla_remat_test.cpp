// Rematerialization under a memory limit (RuntimeOptions::xla_memory_limit)
// as the compiler sees it: a
// step whose cheap value (exp of an argument, read at both ends of a chain
// of products) is recomputed runs in half the arena and computes the same
// bits as without the limit; a limit below what recomputing reaches fails
// the compile with the smallest limit that can be met, and the backend
// compiles the step again once the limit is lifted. (The pass itself:
// test/passes/mstep-xla-remat.mlir.)
#include <string>
#include <vector>

#include "lib/backends/xla/XlaExecutable.h"
#include "lib/compiler/Compiler.h"
#include "mstep/runtime/Backend.h"
#include "test/unit/TestUtil.h"

namespace mstep {
namespace {

using ::testing::HasSubstr;

constexpr char kChain[] = R"(
func.func @step(%x: tensor<64x64xf32> {mstep.role = "input"},
                %w1: tensor<2x64xf32> {mstep.role = "parameter"},
                %u: tensor<32x2xf32> {mstep.role = "parameter"},
                %w2: tensor<32x32xf32> {mstep.role = "parameter"},
                %p: tensor<32x64xf32> {mstep.role = "parameter", mstep.aliased_result = 0 : i64},
                %v: tensor<64x1xf32> {mstep.role = "input"})
    -> (tensor<32x64xf32>, tensor<64x1xf32>) {
  %e = mstep.exp %x : tensor<64x64xf32>
  %h1 = mstep.matmul %w1, %e : tensor<2x64xf32>, tensor<64x64xf32> -> tensor<2x64xf32>
  %h2 = mstep.matmul %u, %h1 : tensor<32x2xf32>, tensor<2x64xf32> -> tensor<32x64xf32>
  %h3 = mstep.matmul %w2, %h2 : tensor<32x32xf32>, tensor<32x64xf32> -> tensor<32x64xf32>
  %h4 = mstep.matmul %w2, %h3 : tensor<32x32xf32>, tensor<32x64xf32> -> tensor<32x64xf32>
  %pn = mstep.sub %p, %h4 : tensor<32x64xf32>, tensor<32x64xf32> -> tensor<32x64xf32>
  %r = mstep.matmul %e, %v : tensor<64x64xf32>, tensor<64x1xf32> -> tensor<64x1xf32>
  return %pn, %r : tensor<32x64xf32>, tensor<64x1xf32>
}
)";

Backend& xla_backend() { return **BackendRegistry::get(DeviceType::xla); }

/// kChain compiled for xla under `limit` (bytes as written; "": none).
absl::StatusOr<CompiledGraph> compile_chain(const std::string& limit = "") {
  absl::StatusOr<TraceGraph> graph = trace_graph_from_mlir(kChain);
  if (!graph.ok()) return graph.status();
  return compile_graph(*graph, xla_backend(), {}, RuntimeOptions{.xla_memory_limit = limit});
}

int64_t arena_of(const CompiledGraph& compiled) {
  auto* xla = dynamic_cast<xla::XlaExecutable*>(compiled.executable.get());
  return xla ? xla->arena_bytes() : -1;
}

/// The bytes of every result of one run on fixed inputs (nothing donated).
std::vector<std::string> run_bytes(Executable& exe) {
  absl::StatusOr<TraceGraph> graph = trace_graph_from_mlir(kChain);
  std::vector<BufferPtr> inputs;
  for (size_t i = 0; i < graph->input_types.size(); ++i) {
    const TensorType& type = graph->input_types[i];
    std::vector<float> values(type.shape.numel());
    for (size_t e = 0; e < values.size(); ++e) values[e] = 0.01f * static_cast<float>((e * 7 + i) % 23);
    BufferPtr b = *xla_backend().allocate(type);
    EXPECT_TRUE(xla_backend().copy_in(*b, values.data(), type.bytes()).ok());
    inputs.push_back(std::move(b));
  }
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

TEST(XlaRemat, RecomputingACheapValueHalvesTheArenaWithTheSameResults) {
  absl::StatusOr<CompiledGraph> free = compile_chain();
  ASSERT_TRUE(free.ok()) << free.status();
  absl::StatusOr<CompiledGraph> limited = compile_chain("17000");
  ASSERT_TRUE(limited.ok()) << limited.status();
  // %e (16 KiB) and two 8 KiB links without the limit; with it, %e's copy
  // lives only at the end, next to two small products.
  EXPECT_EQ(arena_of(*free), 32768);
  EXPECT_LE(arena_of(*limited), 17000);
  EXPECT_LE(2 * arena_of(*limited), arena_of(*free) + 1024);
  EXPECT_EQ(run_bytes(*limited->executable), run_bytes(*free->executable));
}

TEST(XlaRemat, ALimitThatCannotBeMetSaysTheSmallestThatCan) {
  {
    absl::StatusOr<CompiledGraph> compiled = compile_chain("9000");
    ASSERT_FALSE(compiled.ok());
    EXPECT_THAT(compiled.status().message(),
                HasSubstr("MSTEP_XLA_MEMORY_LIMIT=9000 bytes cannot be met"));
    EXPECT_THAT(compiled.status().message(), HasSubstr("the smallest limit that can be met is 16896"));
  }
  {
    absl::StatusOr<CompiledGraph> compiled = compile_chain("16896"); // exactly the smallest: met
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    EXPECT_EQ(arena_of(*compiled), 16896);
  }
  // Without the limit the backend compiles as before.
  absl::StatusOr<CompiledGraph> compiled = compile_chain();
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  EXPECT_EQ(arena_of(*compiled), 32768);
}

TEST(XlaRemat, ALimitThatIsNotANumberFailsTheCompileNamingTheVariableAndTheValue) {
  for (const char* bad : {"lots", "-5", "0", "12kb"}) {
    absl::StatusOr<CompiledGraph> compiled = compile_chain(bad);
    ASSERT_FALSE(compiled.ok()) << bad;
    EXPECT_THAT(compiled.status().message(),
                HasSubstr(std::string("MSTEP_XLA_MEMORY_LIMIT='") + bad +
                          "' is not a number of bytes above 0"));
  }
  // The backend keeps working.
  EXPECT_TRUE(compile_chain("16896").ok());
}

} // namespace
} // namespace mstep
