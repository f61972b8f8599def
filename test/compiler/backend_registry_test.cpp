// BackendRegistry: backends by name, created once under concurrent first
// use, and device names (MSTEP_DEVICE) accepted for any registered backend.
// Also the compile halves' registry (CompilerRegistry), by backend name.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "mstep/compiler/BackendCompiler.h"
#include "mstep/runtime/Backend.h"
#include "mstep/runtime/Options.h"

namespace mstep {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

/// A backend that does nothing: the registry only creates and hands it out.
class NullBackend final : public Backend {
 public:
  absl::string_view name() const override { return "null"; }
  DeviceType device_type() const override { return DeviceType::xla; }
  absl::StatusOr<BufferPtr> allocate(const TensorType&) override {
    return absl::UnimplementedError("null");
  }
  absl::Status copy_in(Buffer&, const void*, size_t) override { return absl::OkStatus(); }
  absl::Status copy_out(const Buffer&, void*, size_t) override { return absl::OkStatus(); }
  absl::Status synchronize() override { return absl::OkStatus(); }
  bool supports(OpKind, DType) const override { return false; }
};

std::atomic<int> g_null_created{0};

/// Slow, so that threads starting together all ask before it returns.
std::unique_ptr<Backend> make_null_slowly() {
  g_null_created.fetch_add(1);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return std::make_unique<NullBackend>();
}

/// Runs `fn(i)` on `n` threads released together; returns the results.
template <typename F>
std::vector<Backend*> on_threads(int n, F fn) {
  std::vector<Backend*> got(n, nullptr);
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i)
    threads.emplace_back([&, i] {
      while (!go.load()) std::this_thread::yield();
      got[i] = fn(i);
    });
  go.store(true);
  for (auto& t : threads) t.join();
  return got;
}

TEST(BackendRegistry, ListsTheBuiltInBackendsInDeviceTypeOrder) {
#if MSTEP_WITH_CUDA_RUNTIME
  // cuda's runtime half is built in: registered, created (or found
  // unavailable) only on first use.
  EXPECT_THAT(BackendRegistry::registered_backends(),
              ElementsAre("ref", "cpu", "cuda", "xla", "neuron"));
  EXPECT_THAT(BackendRegistry::available(),
              ElementsAre(DeviceType::ref, DeviceType::cpu, DeviceType::cuda, DeviceType::xla,
                          DeviceType::neuron));
#else
  EXPECT_THAT(BackendRegistry::registered_backends(), ElementsAre("ref", "cpu", "xla", "neuron"));
  EXPECT_THAT(BackendRegistry::available(),
              ElementsAre(DeviceType::ref, DeviceType::cpu, DeviceType::xla, DeviceType::neuron));
#endif
  EXPECT_EQ(*BackendRegistry::device_type("cpu"), DeviceType::cpu);
  EXPECT_EQ(*BackendRegistry::device_type("ref"), DeviceType::ref);
}

#if MSTEP_WITH_CUDA_COMPILER
constexpr const char* kCompilers = "compilers: cpu, cuda, neuron, ref, xla";
#else
constexpr const char* kCompilers = "compilers: cpu, neuron, ref, xla";
#endif

TEST(CompilerRegistry, EveryBuiltInBackendHasACompileHalf) {
#if MSTEP_WITH_CUDA_COMPILER
  EXPECT_THAT(CompilerRegistry::names(), ElementsAre("cpu", "cuda", "neuron", "ref", "xla"));
#else
  EXPECT_THAT(CompilerRegistry::names(), ElementsAre("cpu", "neuron", "ref", "xla"));
#endif
  for (const char* name : {"ref", "cpu", "xla", "neuron"}) {
    absl::StatusOr<BackendCompiler*> compiler = CompilerRegistry::get(name);
    ASSERT_TRUE(compiler.ok()) << compiler.status();
    EXPECT_EQ((*compiler)->backend_name(), name);
    EXPECT_EQ(*CompilerRegistry::get(name), *compiler) << "created once";
  }
  absl::StatusOr<BackendCompiler*> missing = CompilerRegistry::get("null");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("no compiler for backend 'null'"));
  EXPECT_THAT(missing.status().message(), HasSubstr(kCompilers));
}

#if MSTEP_WITH_CUDA_COMPILER
TEST(CompilerRegistry, CudaHasACompileHalf) {
  absl::StatusOr<BackendCompiler*> cuda = CompilerRegistry::get("cuda");
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  EXPECT_EQ((*cuda)->backend_name(), "cuda");
}
#elif MSTEP_WITH_CUDA_RUNTIME
TEST(CompilerRegistry, ABackendWithoutACompileHalfSaysSo) {
  absl::StatusOr<BackendCompiler*> cuda = CompilerRegistry::get("cuda");
  ASSERT_FALSE(cuda.ok());
  EXPECT_EQ(cuda.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(cuda.status().message(),
              HasSubstr("no compiler for backend 'cuda' is built into this library: 'cuda' is a "
                        "registered backend without a compile half, so no step can be compiled "
                        "for it; compilers: cpu, neuron, ref, xla"));
}
#endif

TEST(BackendRegistry, NameAndTypeGiveTheSameBackend) {
  for (const char* name : {"ref", "cpu", "xla", "neuron"}) {
    Backend* by_name = *BackendRegistry::get(absl::string_view(name));
    EXPECT_EQ(by_name->name(), name);
    EXPECT_EQ(*BackendRegistry::get(by_name->device_type()), by_name);
  }
}

TEST(BackendRegistry, ConcurrentFirstUseGetsOneInstance) {
  // Each test runs in its own process under ctest, so this is the first use.
  std::vector<Backend*> got = on_threads(8, [](int i) {
    return i % 2 ? *BackendRegistry::get(DeviceType::cpu)
                 : *BackendRegistry::get(absl::string_view("cpu"));
  });
  for (Backend* b : got) EXPECT_EQ(b, got[0]);
  EXPECT_EQ(got[0]->name(), "cpu");
}

TEST(BackendRegistry, ConcurrentFirstUseRunsTheFactoryOnce) {
  BackendRegistry registry;
  ASSERT_TRUE(registry.add("null", DeviceType::xla, make_null_slowly).ok());
  g_null_created = 0;
  std::vector<Backend*> got = on_threads(8, [&](int i) {
    return i % 2 ? *registry.backend(DeviceType::xla) : *registry.backend("null");
  });
  EXPECT_EQ(g_null_created.load(), 1);
  for (Backend* b : got) EXPECT_EQ(b, got[0]);
  EXPECT_EQ(got[0]->name(), "null");
}

TEST(BackendRegistry, AnyRegisteredNameIsADevice) {
  BackendRegistry registry;
  ASSERT_TRUE(registry.add("null", DeviceType::xla, make_null_slowly).ok());
  EXPECT_EQ(*registry.lookup("null"), DeviceType::xla);
  EXPECT_THAT(registry.names(), ElementsAre("null"));
}

TEST(BackendRegistry, UnknownNameListsTheRegisteredOnes) {
  absl::StatusOr<DeviceType> type = BackendRegistry::device_type("tpu");
  ASSERT_FALSE(type.ok());
  EXPECT_EQ(type.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(type.status().message(), HasSubstr("'tpu'"));
  EXPECT_THAT(type.status().message(), HasSubstr("available: ref, cpu"));
  EXPECT_THAT(BackendRegistry::get(absl::string_view("tpu")).status().message(),
              HasSubstr("available: ref, cpu"));
  // async_host is registered only by the test binaries that link it.
  EXPECT_THAT(BackendRegistry::get(DeviceType::async_host).status().message(),
              HasSubstr("available: ref, cpu"));
}

TEST(BackendRegistry, ATakenNameOrTypeIsRefused) {
  BackendRegistry registry;
  ASSERT_TRUE(registry.add("null", DeviceType::xla, make_null_slowly).ok());
  absl::Status name = registry.add("null", DeviceType::neuron, make_null_slowly);
  EXPECT_EQ(name.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(name.message(), HasSubstr("that name"));
  absl::Status type = registry.add("other", DeviceType::xla, make_null_slowly);
  EXPECT_EQ(type.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(type.message(), HasSubstr("that device type"));
  EXPECT_THAT(registry.names(), ElementsAre("null"));
}

TEST(BackendRegistry, AFactoryThatFailsIsAnError) {
  BackendRegistry registry;
  ASSERT_TRUE(registry.add("broken", DeviceType::xla, [] { return std::unique_ptr<Backend>(); })
                  .ok());
  absl::StatusOr<Backend*> b = registry.backend("broken");
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(b.status().message(), HasSubstr("'broken' failed to start"));
}

/// MSTEP_DEVICE set for one scope.
class ScopedDeviceEnv {
 public:
  explicit ScopedDeviceEnv(const char* value) { setenv("MSTEP_DEVICE", value, 1); }
  ~ScopedDeviceEnv() { unsetenv("MSTEP_DEVICE"); }
};

TEST(BackendRegistry, MstepDeviceTakesARegisteredName) {
  ScopedDeviceEnv env("cpu");
  EXPECT_EQ(RuntimeOptions::from_env().default_device, DeviceType::cpu);
}

TEST(BackendRegistry, MstepDeviceUnknownWarnsWithTheRegisteredNames) {
  ScopedDeviceEnv env("tpu");
  ::testing::internal::CaptureStderr();
  RuntimeOptions o = RuntimeOptions::from_env();
  std::string warning = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(o.default_device, DeviceType::ref);
  EXPECT_THAT(warning, HasSubstr("MSTEP_DEVICE=tpu"));
  EXPECT_THAT(warning, HasSubstr("available: ref, cpu"));
  EXPECT_THAT(warning, HasSubstr("using 'ref'"));
}

}  // namespace
}  // namespace mstep
