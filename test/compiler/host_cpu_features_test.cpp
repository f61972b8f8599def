// The runtime's CPU feature detection (HostCpuFeatures.h, cpuid without
// LLVM) against LLVM's on this host: every feature LLVM detects means the
// same to both, so a feature the fusion JIT generated code with is one the
// runtime checks correctly. And the JIT's target is exactly those features.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "lib/backends/cpu/FusionJitLowering.h"
#include "lib/backends/cpu/HostCpuFeatures.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/TargetParser/Host.h"

namespace mstep::cpu {
namespace {

TEST(HostCpuFeatures, AgreeWithLlvmOnThisHost) {
#if !defined(__x86_64__)
  GTEST_SKIP() << "the runtime detects x86 features only";
#endif
  const llvm::StringMap<bool> llvm_features = llvm::sys::getHostCPUFeatures();
  ASSERT_FALSE(llvm_features.empty());
  for (const auto& feature : llvm_features) {
    const std::string name = feature.getKey().str();
    EXPECT_TRUE(knows_cpu_feature(name)) << name << ": LLVM detects it, the runtime cannot";
    EXPECT_EQ(host_has_cpu_feature(name), feature.getValue()) << name;
  }
}

// Nothing LLVM detects here is left off the target: the kernels use every
// instruction this host has.
TEST(HostCpuFeatures, TheJitTargetIsEverythingLlvmDetects) {
  const FusionTarget target = host_target();
  EXPECT_EQ(target.arch, host_architecture());
  EXPECT_EQ(target.cpu, llvm::sys::getHostCPUName().str());
  std::vector<std::string> enabled;
  for (const auto& feature : llvm::sys::getHostCPUFeatures())
    if (feature.getValue()) enabled.push_back(feature.getKey().str());
  EXPECT_THAT(target.features, ::testing::UnorderedElementsAreArray(enabled));
  EXPECT_TRUE(std::is_sorted(target.features.begin(), target.features.end()));
}

} // namespace
} // namespace mstep::cpu
