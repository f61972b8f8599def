// Loading cuDNN (lib/backends/cuda/CudnnApi): the search order, each
// candidate's refusal in the error, and the toolkit's real library. No GPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "lib/backends/cuda/CudnnApi.h"

namespace mstep::cuda {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

// The toolkit's cuDNN, which this machine has (the build found its header).
std::string toolkit_cudnn() {
  return CudnnLoadOptions::default_toolkit_lib_dir() + "/libcudnn.so.9";
}

/// Options whose every candidate is missing; tests then supply one.
CudnnLoadOptions nothing_there() {
  CudnnLoadOptions o;
  o.library = "libcudnn_missing_for_mstep_tests.so.9";
  o.env_variable = "MSTEP_TEST_CUDNN_LIBRARY_UNSET";
  o.toolkit_lib_dir = "/nonexistent/mstep/lib64";
  o.python = "/nonexistent/mstep/python3";
  return o;
}

/// A stand-in python that prints `dir` (where it says nvidia/cudnn/lib is).
std::string fake_python(const fs::path& folder, const std::string& dir) {
  fs::create_directories(folder);
  const fs::path script = folder / "python3";
  std::ofstream(script) << "#!/bin/sh\necho " << dir << "\n";
  fs::permissions(script, fs::perms::owner_all);
  return script.string();
}

TEST(CudnnLoad, TheToolkitLibraryLoadsWithoutAGpu) {
  if (!fs::exists(toolkit_cudnn())) GTEST_SKIP() << "no " << toolkit_cudnn();
  CudnnLoadOptions o = nothing_there();
  o.toolkit_lib_dir = CudnnLoadOptions::default_toolkit_lib_dir();
  auto api = load_cudnn(o);
  ASSERT_TRUE(api.ok()) << api.status();
  EXPECT_EQ((*api)->version / 10000, 9u);
  EXPECT_EQ((*api)->source, "toolkit");
  EXPECT_EQ((*api)->path, toolkit_cudnn());
  EXPECT_NE((*api)->cudnnBackendExecute, nullptr);
  // The message of a status, from the library.
  EXPECT_THAT(describe_cudnn_status(**api, CUDNN_STATUS_BAD_PARAM),
              HasSubstr("CUDNN_STATUS_BAD_PARAM"));
}

TEST(CudnnLoad, NoLibraryIsUnavailableWithEveryCandidateInOrder) {
  auto api = load_cudnn(nothing_there());
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.status().code(), absl::StatusCode::kUnavailable);
  const std::string m(api.status().message());
  EXPECT_THAT(m, HasSubstr("cudnn: unavailable: no usable libcudnn.so.9; tried, in order: "));
  const size_t name = m.find("name (libcudnn_missing_for_mstep_tests.so.9): ");
  const size_t env =
      m.find("MSTEP_TEST_CUDNN_LIBRARY_UNSET: MSTEP_TEST_CUDNN_LIBRARY_UNSET is not set");
  const size_t toolkit = m.find("toolkit (/nonexistent/mstep/lib64/libcudnn.so.9): ");
  const size_t python = m.find("python: /nonexistent/mstep/python3 has no nvidia.cudnn package");
  ASSERT_NE(name, std::string::npos) << m;
  ASSERT_NE(env, std::string::npos) << m;
  ASSERT_NE(toolkit, std::string::npos) << m;
  ASSERT_NE(python, std::string::npos) << m;
  EXPECT_LT(name, env);
  EXPECT_LT(env, toolkit);
  EXPECT_LT(toolkit, python);
  EXPECT_THAT(m, HasSubstr("set MSTEP_CUDNN_LIBRARY"));
}

TEST(CudnnLoad, TheEnvironmentVariableComesAfterTheNameAndBeforeTheToolkit) {
  if (!fs::exists(toolkit_cudnn())) GTEST_SKIP() << "no " << toolkit_cudnn();
  CudnnLoadOptions o = nothing_there();
  o.env_variable = "MSTEP_TEST_CUDNN_LIBRARY";
  o.toolkit_lib_dir = CudnnLoadOptions::default_toolkit_lib_dir();
  ASSERT_EQ(setenv("MSTEP_TEST_CUDNN_LIBRARY", toolkit_cudnn().c_str(), 1), 0);
  auto candidates = cudnn_library_candidates(o);
  ASSERT_EQ(candidates.size(), 4u);
  EXPECT_EQ(candidates[0].source, "name");
  EXPECT_EQ(candidates[1].source, "MSTEP_TEST_CUDNN_LIBRARY");
  EXPECT_EQ(candidates[1].path, toolkit_cudnn());
  EXPECT_EQ(candidates[2].source, "toolkit");
  EXPECT_EQ(candidates[3].source, "python");
  auto api = load_cudnn(o);
  unsetenv("MSTEP_TEST_CUDNN_LIBRARY");
  ASSERT_TRUE(api.ok()) << api.status();
  EXPECT_EQ((*api)->source, "MSTEP_TEST_CUDNN_LIBRARY");
}

TEST(CudnnLoad, PythonsCudnnWheelIsTheLastCandidate) {
  if (!fs::exists(toolkit_cudnn())) GTEST_SKIP() << "no " << toolkit_cudnn();
  // A folder laid out as the wheel's nvidia/cudnn/lib, with the toolkit's
  // library in it, and a python that names it.
  const fs::path root =
      fs::temp_directory_path() / ("mstep_cudnn_wheel_" + std::to_string(getpid()));
  fs::create_directories(root / "lib");
  fs::create_symlink(toolkit_cudnn(), root / "lib" / "libcudnn.so.9");
  CudnnLoadOptions o = nothing_there();
  o.python = fake_python(root / "bin", (root / "lib").string());
  auto api = load_cudnn(o);
  fs::remove_all(root);
  ASSERT_TRUE(api.ok()) << api.status();
  EXPECT_EQ((*api)->source, "python");
  EXPECT_EQ((*api)->path, (root / "lib" / "libcudnn.so.9").string());
}

TEST(CudnnLoad, ALibraryWithoutTheFunctionsIsRefused) {
  CudnnLoadOptions o = nothing_there();
  o.library = MSTEP_FAKE_LIBCUDA; // a real shared library, but not cuDNN
  auto api = load_cudnn(o);
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(api.status().message(),
              HasSubstr(std::string(MSTEP_FAKE_LIBCUDA) + " has no cudnnGetVersion"));
}

TEST(CudnnLoad, AHandleNeedsAGpu) {
  auto api = load_cudnn();
  if (!api.ok()) GTEST_SKIP() << api.status();
  auto handle = CudnnHandle::create(*api, nullptr);
  if (handle.ok()) GTEST_SKIP() << "this machine has a GPU";
  EXPECT_EQ(handle.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(handle.status().message(), HasSubstr("cudnn: unavailable: cudnnCreate: "));
}

} // namespace
} // namespace mstep::cuda
