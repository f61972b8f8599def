// Ref and cpu executables through their native forms (no MLIR on load):
// serialize -> deserialize -> run gives bitwise the outputs of the
// original on the MLP training step; corrupt and hostile blobs are clean
// errors.
#include <cstring>
#include <string>
#include <vector>

#include "lib/backends/cpu/NativeFormat.h"
#include "lib/backends/ref/RefExecutableFormat.h"
#include "mstep/core/ByteStream.h"
#include "mstep/ir/GraphSerialize.h"
#include "test/unit/GraphSerializeCases.h"

namespace mstep {
namespace {

using ::testing::HasSubstr;

/// The bytes of every buffer.
std::vector<std::string> host_bytes(Backend& backend, absl::Span<const BufferPtr> buffers) {
  std::vector<std::string> out;
  for (const BufferPtr& b : buffers) {
    std::string& bytes = out.emplace_back(b->type().bytes(), '\0');
    EXPECT_TRUE(backend.copy_out(*b, bytes.data(), bytes.size()).ok());
  }
  return out;
}

/// Runs `exe` on fresh buffers holding `inputs` (a run may update donated
/// inputs in place) and returns the outputs' bytes.
std::vector<std::string> run_on(Backend& backend, Executable& exe, const TraceGraph& graph,
                                const std::vector<std::string>& inputs) {
  std::vector<BufferPtr> buffers;
  for (size_t i = 0; i < inputs.size(); ++i) {
    BufferPtr b = *backend.allocate(graph.input_types[i]);
    EXPECT_TRUE(backend.copy_in(*b, inputs[i].data(), inputs[i].size()).ok());
    buffers.push_back(std::move(b));
  }
  absl::StatusOr<std::vector<BufferPtr>> outputs = exe.run(buffers);
  EXPECT_TRUE(outputs.ok()) << outputs.status();
  return outputs.ok() ? host_bytes(backend, *outputs) : std::vector<std::string>{};
}

class ExecutableSerialize : public ::testing::TestWithParam<DeviceType> {};

TEST_P(ExecutableSerialize, LoadedTrainingStepGivesBitwiseTheSameOutputs) {
  const Device device{GetParam(), 0};
  Backend& backend = **BackendRegistry::get(device.type);
  testing::RecordedStep step = testing::mlp_training_step(device);
  std::shared_ptr<const TraceGraph> graph = step.graph;
  ASSERT_NE(graph, nullptr);
  const std::vector<std::string> inputs = host_bytes(backend, step.inputs);
  ASSERT_EQ(inputs.size(), graph->input_types.size());

  absl::StatusOr<CompiledGraph> compiled = compile_graph(*graph, backend, {}, RuntimeOptions{});
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  absl::StatusOr<std::string> blob = compiled->executable->serialize("unused module text");
  ASSERT_TRUE(blob.ok()) << blob.status();
  absl::StatusOr<std::unique_ptr<Executable>> loaded = backend.deserialize(*blob, RuntimeOptions{});
  ASSERT_TRUE(loaded.ok()) << loaded.status();

  EXPECT_EQ(run_on(backend, **loaded, *graph, inputs),
            run_on(backend, *compiled->executable, *graph, inputs));
  EXPECT_EQ((*loaded)->num_kernels(), compiled->executable->num_kernels());
  EXPECT_EQ((*loaded)->host_fallbacks().size(), compiled->executable->host_fallbacks().size());
  // Serializing the loaded executable gives the same blob.
  absl::StatusOr<std::string> again = (*loaded)->serialize("");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *blob);
}

TEST_P(ExecutableSerialize, EveryTruncationAndFlippedByteIsAnError) {
  const Device device{GetParam(), 0};
  Backend& backend = **BackendRegistry::get(device.type);
  std::shared_ptr<const TraceGraph> graph = testing::mlp_training_step_graph(device);
  ASSERT_NE(graph, nullptr);
  absl::StatusOr<CompiledGraph> compiled = compile_graph(*graph, backend, {}, RuntimeOptions{});
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  const std::string blob = *compiled->executable->serialize("");
  // A blob without the backend's magic is not its native form
  // (Unimplemented: load_compiled_module then reads it as module text).
  for (size_t n = 0; n < blob.size(); n += 1 + n / 64) {
    absl::StatusOr<std::unique_ptr<Executable>> loaded =
        backend.deserialize(blob.substr(0, n), RuntimeOptions{});
    ASSERT_FALSE(loaded.ok()) << "a prefix of " << n << " bytes loaded";
    ASSERT_EQ(loaded.status().code(),
              n < 8 ? absl::StatusCode::kUnimplemented : absl::StatusCode::kDataLoss)
        << loaded.status();
  }
  for (size_t i = 8; i < blob.size(); i += 1 + i / 64) {
    std::string corrupt = blob;
    corrupt[i] = static_cast<char>(corrupt[i] ^ 0x10);
    absl::StatusOr<std::unique_ptr<Executable>> loaded = backend.deserialize(corrupt, RuntimeOptions{});
    ASSERT_FALSE(loaded.ok()) << "byte " << i << " flipped loaded";
    ASSERT_EQ(loaded.status().code(), absl::StatusCode::kDataLoss) << loaded.status();
  }
  EXPECT_EQ(backend.deserialize("module {}", RuntimeOptions{}).status().code(),
            absl::StatusCode::kUnimplemented);
}

INSTANTIATE_TEST_SUITE_P(RefAndCpu, ExecutableSerialize,
                         ::testing::Values(DeviceType::ref, DeviceType::cpu),
                         [](const auto& info) { return info.param == DeviceType::ref ? "ref" : "cpu"; });

TEST(ExecutableSerialize, RefBlobWithAGraphItHasNoKernelForIsAnError) {
  TraceGraph g;
  const TensorType t{{2}, DType::f32};
  g.input_types = {t};
  g.nodes.push_back({OpKind::parameter, {{AttrName::index, int64_t{0}}}, {}, {t}, nullptr});
  g.nodes.push_back({OpKind::data, {}, {}, {t}, nullptr});  // trace-DAG only
  g.outputs = {{1, 0}};
  Backend& ref = **BackendRegistry::get(DeviceType::ref);
  absl::StatusOr<std::unique_ptr<Executable>> loaded =
      ref.deserialize(ref::write_ref_executable(g), RuntimeOptions{});
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(loaded.status().message(), HasSubstr("no kernel for op 'data'"));
}

TEST(ExecutableSerialize, CpuBlobWithAHostilePlanIsAnErrorThatNamesIt) {
  const Device cpu{DeviceType::cpu, 0};
  Backend& backend = **BackendRegistry::get(cpu.type);
  std::shared_ptr<const TraceGraph> traced = testing::mlp_training_step_graph(cpu);
  ASSERT_NE(traced, nullptr);
  absl::StatusOr<CompiledGraph> compiled = compile_graph(*traced, backend, {}, RuntimeOptions{});
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  const std::string blob = *compiled->executable->serialize("");
  absl::StatusOr<cpu::NativeParts> parts = cpu::read_native_format(blob);
  ASSERT_TRUE(parts.ok()) << parts.status();
  absl::StatusOr<TraceGraph> graph = deserialize_graph(parts->graph);
  ASSERT_TRUE(graph.ok()) << graph.status();
  absl::StatusOr<cpu::ArenaPlan> plan = cpu::deserialize_arena_plan(parts->plan, *graph);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // The first arena-placed result of the plan.
  size_t op = 0, result = 0;
  while (op < plan->ops.size() && (plan->ops[op].offsets.empty() || plan->ops[op].offsets[0] < 0))
    ++op;
  ASSERT_LT(op, plan->ops.size());
  const size_t num_args = graph->input_types.size();

  struct Case {
    const char* name;
    std::function<void(cpu::ArenaPlan&)> corrupt;
    const char* error;
  };
  const Case cases[] = {
      {"offset past the arena", [&](cpu::ArenaPlan& p) { p.ops[op].offsets[result] = p.arena_bytes; },
       "inside the"},
      {"unaligned offset", [&](cpu::ArenaPlan& p) { p.ops[op].offsets[result] += 4; },
       "is not at an aligned offset"},
      {"donated argument out of range",
       [&](cpu::ArenaPlan& p) {
         p.ops[op].offsets[result] = -1;
         p.ops[op].aliased_arg[result] = static_cast<int64_t>(num_args);
       },
       "has offset -1 and donated argument"},
      {"missing op", [](cpu::ArenaPlan& p) { p.ops.pop_back(); }, "the plan covers"},
      {"missing placement",
       [&](cpu::ArenaPlan& p) {
         p.ops[op].offsets.pop_back();
         p.ops[op].aliased_arg.pop_back();
       },
       "placements for"},
      {"negative arena", [](cpu::ArenaPlan& p) { p.arena_bytes = -5; }, "arena size -5"},
      {"alignment not a power of two", [](cpu::ArenaPlan& p) { p.alignment = 48; },
       "alignment 48"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    cpu::ArenaPlan bad = *plan;
    c.corrupt(bad);
    absl::StatusOr<std::unique_ptr<Executable>> loaded = backend.deserialize(
        cpu::write_native_format(*graph, bad, parts->object), RuntimeOptions{});
    ASSERT_FALSE(loaded.ok());
    EXPECT_EQ(loaded.status().code(), absl::StatusCode::kDataLoss) << loaded.status();
    EXPECT_THAT(loaded.status().message(), HasSubstr(c.error));
  }
  // A fusion object that does not load.
  absl::StatusOr<std::unique_ptr<Executable>> loaded =
      backend.deserialize(cpu::write_native_format(*graph, *plan, "not an object"), RuntimeOptions{});
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(loaded.status().message(), HasSubstr("fusion object does not load"));
}

}  // namespace
}  // namespace mstep
