// load_plugin (mstep/runtime/Plugin.h): a plugin's ops are registered once
// it loads; loading it again is fine; a missing file, a file that is not a
// shared library, a library that is no plugin and a plugin whose
// registration fails are each an error naming the path and the reason.
// Its own process, with the runtime alone: the plugins' op names are used
// by other tests with other schemas.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "mstep/runtime/CustomOp.h"
#include "mstep/runtime/Plugin.h"

namespace mstep {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string error_of(const std::string& path) {
  absl::Status s = load_plugin(path);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  return std::string(s.message());
}

TEST(Plugin, RegistersItsOpsOnceLoadedAndLoadsTwice) {
  EXPECT_FALSE(CustomOpRegistry::global().find("split_rows").ok());
  ASSERT_TRUE(load_plugin(MSTEP_LIT_PLUGIN).ok());
  EXPECT_TRUE(CustomOpRegistry::global().find("split_rows", 1).ok());
  EXPECT_TRUE(CustomOpRegistry::global().find("giou_loss", 2).ok());
  EXPECT_TRUE(CustomOpRegistry::global().find("no_inputs", 1).ok());
  absl::Status again = load_plugin(MSTEP_LIT_PLUGIN);
  EXPECT_TRUE(again.ok()) << again;
}

TEST(Plugin, ABareNameIsAFileHere) {
  const fs::path file(MSTEP_LIT_PLUGIN);
  const fs::path cwd = fs::current_path();
  fs::current_path(file.parent_path());
  absl::Status s = load_plugin(file.filename().string());
  fs::current_path(cwd);
  EXPECT_TRUE(s.ok()) << s;
}

TEST(Plugin, AMissingFileNamesThePathAndDlerror) {
  const std::string message = error_of("/nonexistent/libnope.so");
  EXPECT_THAT(message, HasSubstr("cannot load plugin /nonexistent/libnope.so: "));
  EXPECT_THAT(message, HasSubstr("No such file or directory"));
}

TEST(Plugin, AFileThatIsNoSharedLibraryNamesThePathAndDlerror) {
  const std::string path =
      (fs::temp_directory_path() / ("mstep_plugin_" + std::to_string(::getpid()) + ".so")).string();
  std::ofstream(path) << "not an ELF file\n";
  const std::string message = error_of(path);
  fs::remove(path);
  EXPECT_THAT(message, HasSubstr("cannot load plugin " + path + ": " + path));
}

TEST(Plugin, ALibraryWithoutTheEntryPointIsNoPlugin) {
  EXPECT_THAT(error_of(MSTEP_NOT_A_PLUGIN),
              HasSubstr(std::string(MSTEP_NOT_A_PLUGIN) +
                        " is not an mstep plugin: it exports no mstep_plugin_init"));
}

TEST(Plugin, ARegistrationThatFailsNamesThePluginAndTheConflict) {
  ASSERT_TRUE(load_plugin(MSTEP_LIT_PLUGIN).ok());
  const std::string message = error_of(MSTEP_CONFLICTING_PLUGIN);
  EXPECT_THAT(message, HasSubstr(std::string("plugin ") + MSTEP_CONFLICTING_PLUGIN +
                                 " failed to register its custom ops: "));
  EXPECT_THAT(message, HasSubstr("'scaled_softplus'"));
  EXPECT_THAT(message, HasSubstr("another schema"));
  // The process keeps working: the first registration stands.
  auto op = CustomOpRegistry::global().find("scaled_softplus", 1);
  ASSERT_TRUE(op.ok());
  EXPECT_EQ((*op)->schema.attrs.at(0).type, CustomAttrType::float64);
}

}  // namespace
}  // namespace mstep
