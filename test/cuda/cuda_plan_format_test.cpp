// The cuda executable's stored form (CudaPlanFormat.h): a plan serialized
// and read back is the same plan, and the executable loaded from it makes
// the same driver calls as the one compiled; a corrupt, truncated or
// foreign blob is a clear error, never a crash; the backend's
// deserialize() (the disk cache's and exported graphs' seam) loads it, and
// a device without a cubin of its architecture gets the PTX.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/backends/cuda/CudaExecutable.h"
#include "lib/backends/cuda/CudaPlanFormat.h"
#include "lib/compiler/Compiler.h"
#include "mstep/core/ByteStream.h"
#include "test/cuda/CudaStepText.h"
#include "test/cuda/FakeCudaDriver.h"
#include "test/cuda/LinearReluStep.h"

namespace mstep::cuda {
namespace {

using ::testing::HasSubstr;
using testing::plan_of;

std::string address_bytes(CUdeviceptr pointer) {
  return std::string(reinterpret_cast<const char*>(&pointer), sizeof pointer);
}

TEST(CudaPlanFormat, ARoundTripGivesTheSamePlan) {
  for (const char* text : {testing::kFourChainStep, testing::kChainStep, testing::kFusionStep,
                           testing::kLinearTanhStep}) {
    auto plan = plan_of(text);
    ASSERT_TRUE(plan.ok()) << plan.status();
    // What the comparison covers: PTX, two cubins and their reports, the
    // arena (the last launch is a kernel's; linear_tanh's first kernel is
    // its bias epilogue's fallback, PTX only, which the comparison covers
    // too).
    ASSERT_FALSE(plan->kernels.empty());
    const CudaKernelInfo& kernel = plan->kernels[plan->launches.back().kernel];
    EXPECT_FALSE(kernel.ptx.empty());
    EXPECT_EQ(kernel.cubins.size(), 2u);
    EXPECT_FALSE(kernel.reports.empty());
    EXPECT_EQ(plan->arena_offsets.size(), plan->values.size());
    const std::string blob = serialize_cuda_plan(*plan);
    EXPECT_EQ(blob.substr(0, 8), "MSTEPCUD");
    auto back = deserialize_cuda_plan(blob);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(*back == *plan) << describe_cuda_plan(*back) << "\nvs\n"
                                << describe_cuda_plan(*plan);
    EXPECT_EQ(serialize_cuda_plan(*back), blob);
  }
  // The matmul step's fields too.
  auto plan = plan_of(testing::kLinearReluStep);
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto back = deserialize_cuda_plan(serialize_cuda_plan(*plan));
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->matmuls.size(), 1u);
  EXPECT_EQ(back->matmuls[0].shape.k, 96);
  EXPECT_EQ(back->matmuls[0].origin, "mstep.matmul #0");
}

/// A small plan of every kind of record, for mutation: a kernel launch, a
/// cuBLASLt step, a cuDNN SDPA step, an NCCL step, an arena value.
CudaPlan small_plan() {
  CudaPlan plan;
  plan.values = {TensorType{Shape({2, 2}), DType::f32}, TensorType{Shape({2, 2}), DType::f32},
                 TensorType{Shape({2, 2}), DType::f32}};
  plan.num_inputs = 1;
  CudaKernelInfo kernel{.name = "k",
                        .origin = "mstep.exp #0",
                        .grid = {1, 1, 1},
                        .block = {4, 1, 1},
                        .ptx = ".version 8.0"};
  kernel.cubins.push_back({"sm_90", "\x7f"
                                    "ELF"});
  kernel.reports.push_back({.kernel = "k", .arch = "sm_90", .registers = 8});
  plan.kernels.push_back(kernel);
  CudaMatmulInfo matmul{.origin = "mstep.matmul #1"};
  matmul.shape.m = matmul.shape.n = matmul.shape.k = 2;
  plan.matmuls.push_back(matmul);
  plan.launches.push_back({.kernel = 0, .args = {0, 1}, .writes = {1}});
  plan.launches.push_back({.matmul = 0, .args = {1, 1}, .writes = {2}});
  // q = k = v %3 (bf16 [1, 1, 8, 8]), out %4, stats %5 (f32 [1, 1, 8, 1]).
  plan.values.push_back(TensorType{Shape({8, 8}), DType::bf16});
  plan.values.push_back(TensorType{Shape({8, 8}), DType::bf16});
  plan.values.push_back(TensorType{Shape({8, 1}), DType::f32});
  CudaAttentionInfo attention{.origin = "mstep.sdpa #2"};
  attention.config.seq_q = attention.config.seq_kv = attention.config.head_dim = 8;
  attention.config.causal = true;
  plan.attentions.push_back(attention);
  plan.launches.push_back({.kernel = 0, .args = {0, 3}, .writes = {3}});
  plan.launches.push_back({.attention = 0, .args = {3, 3, 3}, .writes = {4, 5}});
  // An NCCL all_gather of %2 into %6 (f32 [4, 2]).
  plan.values.push_back(TensorType{Shape({4, 2}), DType::f32});
  plan.collectives.push_back({.origin = "mstep.all_gather #3",
                              .op = OpKind::all_gather,
                              .world_size = 2});
  plan.launches.push_back({.collective = 0, .args = {2}, .writes = {6}});
  plan.outputs = {2};
  plan.arena_offsets = {-1, 0, -1, -1, -1, -1, -1};
  plan.arena_bytes = 256;
  return plan;
}

TEST(CudaPlanFormat, AMatmulsF32ResultRoundTrips) {
  // Version 10: a 16-bit matmul that writes f32 (an f16 convolution's
  // product before its bias, CudaConvLowering.h).
  CudaPlan plan = small_plan();
  plan.matmuls[0].shape.dtype = DType::f16;
  plan.matmuls[0].shape.f32_result = true;
  auto back = deserialize_cuda_plan(serialize_cuda_plan(plan));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->matmuls[0].shape.f32_result);
  EXPECT_TRUE(*back == plan);
  // An f32 result of f32 operands is no call cuBLASLt is asked for.
  plan.matmuls[0].shape.dtype = DType::f32;
  EXPECT_THAT(deserialize_cuda_plan(serialize_cuda_plan(plan)).status().message(),
              HasSubstr("an f32 result goes with bf16 or f16 operands"));
}

TEST(CudaPlanFormat, ACorruptOrTruncatedBlobIsAClearError) {
  auto plan = plan_of(testing::kFourChainStep);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::string blob = serialize_cuda_plan(*plan);
  auto error = [](absl::string_view bytes) { return deserialize_cuda_plan(bytes).status(); };

  std::string flipped = blob;
  flipped[blob.size() / 2] ^= 0x20;
  EXPECT_EQ(error(flipped).code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(error(flipped).message(), HasSubstr("cuda executable: checksum mismatch"));

  for (size_t size : {size_t{9}, size_t{20}, blob.size() / 2, blob.size() - 1}) {
    EXPECT_EQ(error(blob.substr(0, size)).code(), absl::StatusCode::kDataLoss) << size;
    EXPECT_THAT(error(blob.substr(0, size)).message(), HasSubstr("truncated")) << size;
  }
  std::string newer = blob;
  newer[8] = static_cast<char>(kCudaPlanFormatVersion + 1);
  EXPECT_THAT(error(newer).message(),
              HasSubstr(absl::StrCat("format version ", kCudaPlanFormatVersion + 1,
                                     ", this build reads version ", kCudaPlanFormatVersion)));
  // Not this format at all (module text): Unimplemented, so the loader
  // takes it for module text.
  EXPECT_EQ(error("module {\n}").code(), absl::StatusCode::kUnimplemented);
  // Sealed with a good checksum but not a plan that checks: DataLoss too.
  CudaPlan overlapping = *plan;
  overlapping.arena_offsets[2] = overlapping.arena_offsets[1];
  EXPECT_EQ(error(serialize_cuda_plan(overlapping)).code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(error(serialize_cuda_plan(overlapping)).message(),
              HasSubstr("cuda executable: cuda plan: values %1 and %2 overlap in the arena"));
}

TEST(CudaPlanFormat, EveryMutatedOrCutBodyIsAnErrorOrAPlanThatChecks) {
  const std::string blob = serialize_cuda_plan(small_plan());
  auto body = unseal(blob, "MSTEPCUD", kCudaPlanFormatVersion, "test");
  ASSERT_TRUE(body.ok()) << body.status();
  // Resealed, so the checksum passes and the decoder itself is tested.
  auto check = [](const std::string& changed, absl::string_view what) {
    auto plan = deserialize_cuda_plan(seal("MSTEPCUD", kCudaPlanFormatVersion, changed));
    if (plan.ok())
      EXPECT_TRUE(validate_cuda_plan(*plan).ok()) << what;
    else
      EXPECT_EQ(plan.status().code(), absl::StatusCode::kDataLoss) << what << plan.status();
  };
  for (size_t i = 0; i < body->size(); ++i)
    for (uint8_t mask : {0x01, 0x80, 0xff}) {
      std::string changed(*body);
      changed[i] = static_cast<char>(changed[i] ^ mask);
      check(changed, absl::StrCat("byte ", i, " ^ ", int{mask}));
    }
  for (size_t size = 0; size < body->size(); ++size)
    check(std::string(body->substr(0, size)), absl::StrCat("cut to ", size));
  check(std::string(*body) + "x", "a trailing byte");
}

class CudaPlanLoadTest : public ::testing::Test {
protected:
  void SetUp() override { backend_ = make_backend(); }
  /// A backend over the fake that loads executables as the registry's does.
  std::unique_ptr<CudaBackend> make_backend() {
    CudaBackendOptions options;
    options.load_executable = [](CudaBackend& backend, absl::string_view blob) {
      return load_cuda_executable(backend, blob);
    };
    auto backend = CudaBackend::create(fake_.driver(), options);
    EXPECT_TRUE(backend.ok()) << backend.status();
    return backend.ok() ? std::move(*backend) : nullptr;
  }
  void add_kernels(const CudaPlan& plan) {
    for (const CudaLaunchStep& launch : plan.launches)
      fake_.add_kernel(plan.kernels[launch.kernel].name, launch.args.size());
  }
  /// Calls [from, to) as text, each device address replaced by its name
  /// in `names` (arena base + offset, the input, the outputs).
  std::vector<std::string> calls(size_t from, size_t to,
                                 const std::map<std::string, std::string>& names) const {
    std::vector<std::string> out;
    for (size_t i = from; i < to; ++i) {
      const testing::FakeCall& call = fake_.calls[i];
      std::vector<std::string> args;
      for (const std::string& arg : call.args) {
        auto name = names.find(arg);
        args.push_back(name != names.end() ? name->second : "?");
      }
      out.push_back(
          absl::StrCat(call.name, " ", call.kernel, " grid ", absl::StrJoin(call.grid, ","),
                       " block ", absl::StrJoin(call.block, ","), " bytes ", call.bytes,
                       call.stream == backend_->context().stream() ? " on the stream" : "", " (",
                       absl::StrJoin(args, ", "), ")"));
    }
    return out;
  }
  /// Names for the arena of `exe`'s plan at `base`.
  static void name_arena(const CudaPlan& plan, CUdeviceptr base,
                         std::map<std::string, std::string>& names) {
    for (int64_t offset : plan.arena_offsets)
      if (offset >= 0) names[address_bytes(base + offset)] = absl::StrCat("arena+", offset);
  }
  testing::FakeCudaDriver fake_;
  std::unique_ptr<CudaBackend> backend_;
};

TEST_F(CudaPlanLoadTest, TheLoadedExecutableMakesTheSameDriverCalls) {
  auto plan = plan_of(testing::kFourChainStep);
  ASSERT_TRUE(plan.ok()) << plan.status();
  add_kernels(*plan);
  auto x = backend_->allocate({Shape({8, 64}), DType::f32});
  ASSERT_TRUE(x.ok()) << x.status();

  // Compiled, then loaded from its bytes: each created and run once. Both
  // are kept alive, so neither reuses the other's cached device memory.
  struct Log {
    std::vector<std::string> create, run;
    std::unique_ptr<Executable> exe;
    std::vector<BufferPtr> outputs;
  };
  auto create_and_run = [&](auto make) -> Log {
    const size_t start = fake_.calls.size();
    std::unique_ptr<Executable> exe = make();
    EXPECT_NE(exe, nullptr);
    if (exe == nullptr) return {};
    const size_t created = fake_.calls.size();
    auto outputs = exe->run({*x});
    EXPECT_TRUE(outputs.ok()) << outputs.status();
    if (!outputs.ok()) return {};
    auto* cuda = dynamic_cast<CudaExecutable*>(exe.get());
    std::map<std::string, std::string> names;
    name_arena(cuda->plan(), cuda->arena_pointer(), names);
    names[address_bytes(CudaBackend::device_pointer(**x))] = "x";
    names[address_bytes(CudaBackend::device_pointer(*(*outputs)[0]))] = "output";
    return {calls(start, created, names), calls(created, fake_.calls.size(), names), std::move(exe),
            std::move(*outputs)};
  };
  std::string blob;
  Log compiled = create_and_run([&]() -> std::unique_ptr<Executable> {
    auto exe = CudaExecutable::create(*backend_, *plan);
    EXPECT_TRUE(exe.ok()) << exe.status();
    if (!exe.ok()) return nullptr;
    auto bytes = (*exe)->serialize("module text, not needed");
    EXPECT_TRUE(bytes.ok()) << bytes.status();
    blob = bytes.ok() ? *bytes : "";
    return std::move(*exe);
  });
  Log loaded = create_and_run([&]() -> std::unique_ptr<Executable> {
    auto exe = backend_->deserialize(blob, RuntimeOptions{});
    EXPECT_TRUE(exe.ok()) << exe.status();
    if (!exe.ok()) return nullptr;
    EXPECT_TRUE(dynamic_cast<CudaExecutable&>(**exe).plan() == *plan);
    return std::move(*exe);
  });
  ASSERT_FALSE(compiled.run.empty());
  EXPECT_EQ(loaded.create, compiled.create);
  EXPECT_EQ(loaded.run, compiled.run);
  // The run's launches read and write the arena by name: base + offset.
  EXPECT_THAT(
      absl::StrJoin(compiled.run, "\n"),
      HasSubstr(absl::StrCat("cuLaunchKernel ", plan->kernels[1].name,
                             " grid 2,1,1 block 256,1,1 bytes 0 on the stream (arena+",
                             plan->arena_offsets[1], ", arena+", plan->arena_offsets[2], ")")));
}

TEST_F(CudaPlanLoadTest, TheCompiledModuleLoaderTakesTheNativeForm) {
  auto plan = plan_of(testing::kChainStep);
  ASSERT_TRUE(plan.ok()) << plan.status();
  add_kernels(*plan);
  const std::string blob = serialize_cuda_plan(*plan);
  // What the disk cache and Graph::load do with a stored executable.
  auto exe = load_compiled_module(blob, *backend_, RuntimeOptions{});
  ASSERT_TRUE(exe.ok()) << exe.status();
  EXPECT_TRUE(dynamic_cast<CudaExecutable&>(**exe).plan() == *plan);
  // A corrupt one is its DataLoss error, not an attempt to parse it.
  std::string corrupt = blob;
  corrupt.back() ^= 0x01;
  auto bad = load_compiled_module(corrupt, *backend_, RuntimeOptions{});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(bad.status().message(), HasSubstr("cuda executable: checksum mismatch"));
}

TEST_F(CudaPlanLoadTest, ABackendWithoutALoaderTakesTheBlobForModuleText) {
  auto plain = CudaBackend::create(fake_.driver());
  ASSERT_TRUE(plain.ok()) << plain.status();
  auto exe = (*plain)->deserialize("MSTEPCUD...", RuntimeOptions{});
  ASSERT_FALSE(exe.ok());
  EXPECT_EQ(exe.status().code(), absl::StatusCode::kUnimplemented);
}

TEST_F(CudaPlanLoadTest, ADeviceWithoutItsCubinLoadsThePtx) {
  auto plan = plan_of(testing::kChainStep);
  ASSERT_TRUE(plan.ok()) << plan.status();
  add_kernels(*plan);
  const std::string blob = serialize_cuda_plan(*plan);
  // Cubins are for sm_80 and sm_90; this device is sm_86.
  fake_.compute_major = 8;
  fake_.compute_minor = 6;
  std::unique_ptr<CudaBackend> sm86 = make_backend();
  ASSERT_NE(sm86, nullptr);
  const size_t before = fake_.calls.size();
  auto exe = sm86->deserialize(blob, RuntimeOptions{});
  ASSERT_TRUE(exe.ok()) << exe.status();
  std::vector<std::string> kinds;
  for (size_t i = before; i < fake_.calls.size(); ++i)
    if (fake_.calls[i].name == "cuLibraryLoadData") kinds.push_back(fake_.calls[i].kernel);
  EXPECT_EQ(kinds, std::vector<std::string>(plan->kernels.size(), "ptx"));
  // And where the JIT fails too, the error names the op and the cubins.
  fake_.ptx_error = "the JIT says no";
  auto refused = sm86->deserialize(blob, RuntimeOptions{});
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("cubins for sm_80, sm_90"));
  EXPECT_THAT(refused.status().message(), HasSubstr("the JIT says no"));
}

} // namespace
} // namespace mstep::cuda
