// Custom ops with CUDA C++ kernels (issue 22 §3), without a GPU: the
// compile half compiles the op's registered source with NVRTC and ptxas
// (real ones, here), the plan holds the kernel with its parameters in the
// registered order (pointers, attributes, computed scalars), its launch
// shape and cubins with ptxas's report; the executable launches it on the
// fake driver with exactly those argument bytes, also inside a captured
// CUDA graph; the plan's stored form keeps it. Bad kernels and ops without
// one are errors naming the op (and, for NVRTC, the entry and its log).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "examples/custom_ops/giou_loss/GiouOps.h"
#include "lib/backends/cuda/CudaExecutable.h"
#include "lib/backends/cuda/CudaGraph.h"
#include "lib/backends/cuda/CudaNvrtc.h"
#include "lib/backends/cuda/CudaPlanFormat.h"
#include "mstep/core/ByteStream.h"
#include "mstep/runtime/CudaCustomKernel.h"
#include "test/cuda/CudaStepText.h"
#include "test/cuda/FakeCudaBackendTest.h"

namespace mstep::cuda {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;

template <typename T> std::string bytes_of(const T& value) {
  return std::string(reinterpret_cast<const char*>(&value), sizeof value);
}
std::string pointer_bytes(const Buffer& buffer) {
  return bytes_of(CudaBackend::device_pointer(buffer));
}

/// y = alpha * x (+ 1 when `shift`), over n elements: its parameters mix
/// pointers, an f32 attribute, a computed i64 and an i32 from a bool.
constexpr const char* kScaleSource = R"(
template <typename T>
__global__ void scale(const T* x, float alpha, T* y, long long n, int shift) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = alpha * x[i] + (shift ? T(1) : T(0));
}
)";

CudaLaunchShape blocks_of_128(const CudaKernelCall& call) {
  const auto n = static_cast<unsigned>(call.input_types[0].shape.numel());
  return {.grid = {(n + 127) / 128, 1, 1}, .block = {128, 1, 1}, .shared_bytes = 64};
}

CudaSourceKernelDef scale_kernel() {
  return {.source = kScaleSource,
          .entry = "scale<float>",
          .launch = [](const CudaKernelCall& c) -> absl::StatusOr<CudaLaunchShape> {
            return blocks_of_128(c);
          },
          .args = {
              CudaKernelArg::input(0), CudaKernelArg::attr("alpha", CudaScalarType::f32),
              CudaKernelArg::output(0),
              CudaKernelArg::scalar("n", CudaScalarType::i64,
                                    [](const CudaKernelCall& c) -> absl::StatusOr<CudaScalarValue> {
                                      return c.input_types[0].shape.numel();
                                    }),
              CudaKernelArg::attr("shift", CudaScalarType::i32)}};
}

/// Registers op `name`: x f32 -> same type, attributes alpha (float),
/// shift (bool) and tag (string), with `cuda` as its "cuda" kernel (none
/// when null) and a ref kernel.
void register_scale(const std::string& name, std::shared_ptr<const CustomKernel> cuda) {
  CustomOpDef def{
      .name = name,
      .schema = {.inputs = {{"x", {DType::f32}}},
                 .attrs = {{"alpha", CustomAttrType::float64, 1.0},
                           {"shift", CustomAttrType::boolean, false},
                           {"tag", CustomAttrType::string, std::string("t")}}},
      .shape_rule = same_type_as_input(),
      .kernels = {{"ref", host_kernel([](const HostKernelCall&) { return absl::OkStatus(); })}}};
  if (cuda != nullptr) def.kernels.push_back({"cuda", std::move(cuda)});
  ASSERT_TRUE(CustomOpRegistry::global().add(std::move(def)).ok());
}

/// The step y = name(x) {alpha = 2.5, shift = true} on f32[1000].
std::string scale_step(const std::string& name) {
  return R"(
func.func @step(%x: tensor<1000xf32>) -> tensor<1000xf32> {
  %y = mstep.custom ")" +
         name + R"("(%x) {user_attrs = {alpha = 2.5 : f64, shift = true}}
      : (tensor<1000xf32>) -> tensor<1000xf32>
  return %y : tensor<1000xf32>
}
)";
}

absl::StatusOr<CudaPlan> compile_step(const std::string& text) {
  testing::CudaStepContext step(text.c_str());
  MSTEP_ASSIGN_OR_RETURN(CompiledCudaStep compiled,
                         compile_cuda_step(step.module(), default_cuda_compile_options()));
  return std::move(compiled.plan);
}

class CudaCustomOpTest : public testing::FakeCudaBackendTest {};

TEST_F(CudaCustomOpTest, TheSourceIsCompiledToAPlanKernelWithItsParametersInOrder) {
  register_scale("nvrtc_scale", cuda_source_kernel(scale_kernel()));
  auto plan = compile_step(scale_step("nvrtc_scale"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_THAT(plan->kernels, SizeIs(1));
  const CudaKernelInfo& k = plan->kernels[0];
  // The template instance's mangled name, as the PTX declares its entry.
  EXPECT_THAT(k.name, HasSubstr("scale"));
  EXPECT_THAT(k.ptx, HasSubstr(".entry " + k.name));
  EXPECT_THAT(k.ptx, HasSubstr(".target sm_80"));
  EXPECT_THAT(k.origin, HasSubstr("nvrtc_scale"));
  EXPECT_THAT(k.grid, ElementsAre(8u, 1u, 1u)); // ceil(1000 / 128)
  EXPECT_THAT(k.block, ElementsAre(128u, 1u, 1u));
  EXPECT_EQ(k.shared_bytes, 64u);
  ASSERT_THAT(k.cubins, SizeIs(2));
  EXPECT_EQ(k.cubins[0].arch, "sm_80");
  EXPECT_EQ(k.cubins[1].arch, "sm_90");
  for (const CudaCubin& cubin : k.cubins) EXPECT_EQ(cubin.image.substr(1, 3), "ELF");
  // ptxas -v's report, per architecture, for this kernel.
  ASSERT_THAT(k.reports, SizeIs(2));
  for (const PtxasKernelReport& report : k.reports) {
    EXPECT_EQ(report.kernel, k.name);
    EXPECT_GT(report.registers, 0);
    EXPECT_EQ(report.spill_store_bytes, 0);
  }
  // x, alpha = 2.5f, y, n = 1000, shift = 1.
  ASSERT_THAT(k.slots, SizeIs(5));
  EXPECT_EQ(k.slots[0], (CudaKernelSlot{.arg = 0}));
  const float alpha = 2.5f;
  uint32_t alpha_bits;
  std::memcpy(&alpha_bits, &alpha, 4);
  EXPECT_EQ(k.slots[1],
            (CudaKernelSlot{.arg = -1, .bytes = 4, .floating = true, .bits = alpha_bits}));
  EXPECT_EQ(k.slots[2], (CudaKernelSlot{.arg = 1}));
  EXPECT_EQ(k.slots[3], (CudaKernelSlot{.arg = -1, .bytes = 8, .bits = 1000}));
  EXPECT_EQ(k.slots[4], (CudaKernelSlot{.arg = -1, .bytes = 4, .bits = 1}));
  ASSERT_THAT(plan->launches, SizeIs(1));
  EXPECT_THAT(plan->launches[0].args, ElementsAre(0, 1));
  EXPECT_THAT(plan->launches[0].writes, ElementsAre(1));
  EXPECT_THAT(describe_cuda_plan(*plan),
              HasSubstr("params (%0, 2.5, %1, 1000, 1) dynamic smem 64"));

  // The stored form keeps every field; version-3 (no error word) and
  // version-2 (no slots) blobs still read.
  auto back = deserialize_cuda_plan(serialize_cuda_plan(*plan));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, *plan);
  CudaPlan plain = *plan;
  plain.kernels[0].slots.clear();
  plain.kernels[0].shared_bytes = 0;
  const std::string blob = serialize_cuda_plan(plain);
  auto body = unseal(blob, "MSTEPCUD", kCudaPlanFormatVersion, "test");
  ASSERT_TRUE(body.ok());
  // Version 7 appends a u8 per matmul, version 6 a u32 collective count and
  // an i64 per launch, version 5 a u32 alias count, version 4 the error
  // word's value (an i64); version 3 per kernel a u32 slot count and the u32
  // shared bytes.
  const std::string v6(body->substr(0, body->size() - plain.matmuls.size()));
  auto six = deserialize_cuda_plan(seal("MSTEPCUD", 6, v6));
  ASSERT_TRUE(six.ok()) << six.status();
  EXPECT_EQ(*six, plain);
  const std::string v5(v6.substr(0, v6.size() - 4 - 8 * plain.launches.size()));
  auto five = deserialize_cuda_plan(seal("MSTEPCUD", 5, v5));
  ASSERT_TRUE(five.ok()) << five.status();
  EXPECT_EQ(*five, plain);
  const std::string v4(v5.substr(0, v5.size() - 4));
  auto four = deserialize_cuda_plan(seal("MSTEPCUD", 4, v4));
  ASSERT_TRUE(four.ok()) << four.status();
  EXPECT_EQ(*four, plain);
  const std::string v3(v4.substr(0, v4.size() - 8));
  auto three = deserialize_cuda_plan(seal("MSTEPCUD", 3, v3));
  ASSERT_TRUE(three.ok()) << three.status();
  EXPECT_EQ(*three, plain);
  const std::string v2(v3.substr(0, v3.size() - 8));
  auto old = deserialize_cuda_plan(seal("MSTEPCUD", 2, v2));
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(*old, plain);
}

TEST_F(CudaCustomOpTest, TheExecutableLaunchesItWithThoseBytesAlsoInsideACapturedGraph) {
  register_scale("nvrtc_scale_run", cuda_source_kernel(scale_kernel()));
  auto plan = compile_step(scale_step("nvrtc_scale_run"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  add_kernels(*plan);
  auto exe = CudaExecutable::create(*backend_, *plan);
  ASSERT_TRUE(exe.ok()) << exe.status();
  const TensorType type{Shape({1000}), DType::f32};
  BufferPtr x = input(type), y = input(type);
  auto expect_launch = [&](const testing::FakeCall& call) {
    EXPECT_EQ(call.kernel, plan->kernels[0].name);
    EXPECT_THAT(call.grid, ElementsAre(8u, 1u, 1u));
    EXPECT_THAT(call.block, ElementsAre(128u, 1u, 1u));
    EXPECT_EQ(call.shared_bytes, 64u);
    EXPECT_THAT(call.args, ElementsAre(pointer_bytes(*x), bytes_of(2.5f), pointer_bytes(*y),
                                       bytes_of(int64_t{1000}), bytes_of(int32_t{1})));
  };
  auto run = [&]() -> absl::Status {
    auto out = (*exe)->run({x}, {.inputs = {}, .outputs = {y}});
    return out.status();
  };
  ASSERT_TRUE(run().ok());
  ASSERT_THAT(fake_.calls_named("cuLaunchKernel"), SizeIs(1));
  expect_launch(fake_.calls_named("cuLaunchKernel")[0]);

  // Captured: one kernel node with the same bytes, replayed per launch.
  auto graph = CudaGraph::record(*backend_, run);
  ASSERT_TRUE(graph.ok()) << graph.status();
  ASSERT_THAT(fake_.last_captured, SizeIs(1));
  expect_launch(fake_.last_captured[0]);
  const size_t before = fake_.calls.size();
  ASSERT_TRUE((*graph)->launch().ok());
  std::vector<testing::FakeCall> replayed;
  for (size_t i = before; i < fake_.calls.size(); ++i)
    if (fake_.calls[i].graph_launch == 1 && fake_.calls[i].name == "cuLaunchKernel")
      replayed.push_back(fake_.calls[i]);
  ASSERT_THAT(replayed, SizeIs(1));
  expect_launch(replayed[0]);
}

/// The GIoU loss and its backward on n boxes, as a training step calls them.
std::string giou_step(int n, const std::string& reduction) {
  const std::string boxes = "tensor<" + std::to_string(n) + "x4xf32>";
  const std::string loss =
      reduction == "none" ? "tensor<" + std::to_string(n) + "xf32>" : "tensor<f32>";
  return "func.func @step(%p: " + boxes + ", %t: " + boxes + ", %g: " + loss + ") -> (" + loss +
         ", " + boxes + ", " + boxes + ") {\n" +
         "  %l = mstep.custom \"giou_loss\"(%p, %t) {user_attrs = {reduction = \"" + reduction +
         "\"}} : (" + boxes + ", " + boxes + ") -> " + loss + "\n" +
         "  %d:2 = mstep.custom \"giou_loss_backward\"(%p, %t, %g) {user_attrs = {reduction = \"" +
         reduction + "\"}} : (" + boxes + ", " + boxes + ", " + loss + ") -> (" + boxes + ", " +
         boxes + ")\n" + "  return %l, %d#0, %d#1 : " + loss + ", " + boxes + ", " + boxes +
         "\n}\n";
}

TEST_F(CudaCustomOpTest, TheGiouKernelsLaunchWithTheBoxCountAndReductionMode) {
  ASSERT_TRUE(examples::register_giou_ops().ok());
  for (const auto& [reduction, mode, forward_grid] :
       {std::tuple{"none", 0, 4u}, std::tuple{"mean", 1, 1u}, std::tuple{"sum", 2, 1u}}) {
    SCOPED_TRACE(reduction);
    auto plan = compile_step(giou_step(1000, reduction));
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_THAT(plan->kernels, SizeIs(2));
    const CudaKernelInfo& forward = plan->kernels[0];
    const CudaKernelInfo& backward = plan->kernels[1];
    EXPECT_THAT(forward.name, HasSubstr("giou_forward"));
    EXPECT_THAT(backward.name, HasSubstr("giou_backward"));
    EXPECT_THAT(forward.grid, ElementsAre(forward_grid, 1u, 1u));
    EXPECT_THAT(backward.grid, ElementsAre(4u, 1u, 1u)); // one thread per box, 256 a block
    for (const CudaKernelInfo* k : {&forward, &backward}) {
      EXPECT_THAT(k->block, ElementsAre(256u, 1u, 1u));
      ASSERT_GE(k->slots.size(), 2u);
      EXPECT_EQ(k->slots[k->slots.size() - 2],
                (CudaKernelSlot{.arg = -1, .bytes = 8, .bits = 1000}));
      EXPECT_EQ(k->slots.back(),
                (CudaKernelSlot{.arg = -1, .bytes = 4, .bits = static_cast<uint64_t>(mode)}));
      ASSERT_THAT(k->reports, SizeIs(2));
      EXPECT_EQ(k->reports[0].spill_store_bytes, 0);
    }

    add_kernels(*plan);
    auto exe = CudaExecutable::create(*backend_, *plan);
    ASSERT_TRUE(exe.ok()) << exe.status();
    const TensorType boxes{Shape({1000, 4}), DType::f32};
    BufferPtr p = input(boxes), t = input(boxes), g = input(plan->values[2]);
    const size_t before = fake_.calls.size();
    auto out = (*exe)->run({p, t, g});
    ASSERT_TRUE(out.ok()) << out.status();
    std::vector<testing::FakeCall> launches;
    for (size_t i = before; i < fake_.calls.size(); ++i)
      if (fake_.calls[i].name == "cuLaunchKernel") launches.push_back(fake_.calls[i]);
    ASSERT_THAT(launches, SizeIs(2));
    const std::string n = bytes_of(int64_t{1000}), m = bytes_of(int32_t{mode});
    EXPECT_THAT(launches[0].args,
                ElementsAre(pointer_bytes(*p), pointer_bytes(*t), pointer_bytes(*(*out)[0]), n, m));
    EXPECT_THAT(launches[1].args,
                ElementsAre(pointer_bytes(*p), pointer_bytes(*t), pointer_bytes(*g),
                            pointer_bytes(*(*out)[1]), pointer_bytes(*(*out)[2]), n, m));
  }
}

TEST(CudaCustomOpErrors, AnOpWithoutACudaKernelNamesItAndTheBackendsThatHaveOne) {
  register_scale("nvrtc_no_cuda", nullptr);
  auto plan = compile_step(scale_step("nvrtc_no_cuda"));
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(plan.status().message(),
              AllOf(HasSubstr("custom op 'nvrtc_no_cuda'"), HasSubstr("has no CUDA kernel"),
                    HasSubstr("kernels for: ref"), HasSubstr("cuda_source_kernel"),
                    HasSubstr("no host fallback")));
}

TEST(CudaCustomOpErrors, ANvrtcCompileErrorNamesTheOpTheEntryAndNvrtcsLog) {
  CudaSourceKernelDef def = scale_kernel();
  def.source = "__global__ void scale(const float* x) { undeclared_thing(x); }";
  def.entry = "scale";
  register_scale("nvrtc_broken", cuda_source_kernel(def));
  auto plan = compile_step(scale_step("nvrtc_broken"));
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(plan.status().message(),
              AllOf(HasSubstr("custom op 'nvrtc_broken'"), HasSubstr("kernel 'scale'"),
                    HasSubstr("NVRTC"), HasSubstr("undeclared_thing"),
                    HasSubstr("nvrtc_broken.cu")));
}

TEST(CudaCustomOpErrors, AnEntryTheSourceLacksIsAnError) {
  CudaSourceKernelDef def = scale_kernel();
  def.entry = "scale_typo<float>";
  register_scale("nvrtc_no_entry", cuda_source_kernel(def));
  auto plan = compile_step(scale_step("nvrtc_no_entry"));
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(),
              AllOf(HasSubstr("custom op 'nvrtc_no_entry'"), HasSubstr("scale_typo<float>")));
}

TEST(CudaCustomOpErrors, BadParametersAndLaunchShapesNameTheOp) {
  struct Case {
    std::string name;
    std::function<void(CudaSourceKernelDef&)> change;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"nvrtc_bad_input", [](CudaSourceKernelDef& d) { d.args[0] = CudaKernelArg::input(3); },
       "input 3 of an op with 1 inputs"},
      {"nvrtc_string_attr",
       [](CudaSourceKernelDef& d) { d.args[1] = CudaKernelArg::attr("tag", CudaScalarType::i32); },
       "attribute 'tag' is not an int, float or bool"},
      {"nvrtc_unknown_attr",
       [](CudaSourceKernelDef& d) { d.args[1] = CudaKernelArg::attr("beta", CudaScalarType::f32); },
       "beta"},
      {"nvrtc_unwritten", [](CudaSourceKernelDef& d) { d.args.erase(d.args.begin() + 2); },
       "output 0 is not among the kernel's parameters"},
      {"nvrtc_float_to_int",
       [](CudaSourceKernelDef& d) {
         d.args[1] = CudaKernelArg::attr("alpha", CudaScalarType::i32);
       },
       "an int32_t parameter got a float value"},
      {"nvrtc_big_block",
       [](CudaSourceKernelDef& d) {
         d.launch = [](const CudaKernelCall&) -> absl::StatusOr<CudaLaunchShape> {
           return CudaLaunchShape{.block = {64, 32, 1}};
         };
       },
       "2048 threads a block (1024 at most)"},
      {"nvrtc_empty_grid",
       [](CudaSourceKernelDef& d) {
         d.launch = [](const CudaKernelCall&) -> absl::StatusOr<CudaLaunchShape> {
           return CudaLaunchShape{.grid = {0, 1, 1}};
         };
       },
       "a grid with a 0 size"},
      {"nvrtc_rule_error",
       [](CudaSourceKernelDef& d) {
         d.launch = [](const CudaKernelCall&) -> absl::StatusOr<CudaLaunchShape> {
           return absl::InvalidArgumentError("too many boxes");
         };
       },
       "its launch rule: too many boxes"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    CudaSourceKernelDef def = scale_kernel();
    c.change(def);
    register_scale(c.name, cuda_source_kernel(def));
    auto plan = compile_step(scale_step(c.name));
    ASSERT_FALSE(plan.ok());
    EXPECT_THAT(plan.status().message(),
                AllOf(HasSubstr("custom op '" + c.name + "'"), HasSubstr(c.expected)));
  }
}

TEST(CudaCustomOpErrors, NvrtcThatDoesNotLoadNamesWhereItLooked) {
  auto api = load_nvrtc({.candidates = {"/nonexistent/libnvrtc.so.13", "libnvrtc_nope.so"}});
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(api.status().message(),
              AllOf(HasSubstr("nvrtc: unavailable"), HasSubstr("/nonexistent/libnvrtc.so.13"),
                    HasSubstr("libnvrtc_nope.so"), HasSubstr("LD_LIBRARY_PATH")));
  // This machine's toolkit has it.
  auto found = default_nvrtc();
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_GE((*found)->major, 12);
}

} // namespace
} // namespace mstep::cuda
