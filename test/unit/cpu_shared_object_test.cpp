// The fusion JIT's shared objects: linked by the system linker
// (SharedObjectLink.h) in a private directory that is removed afterwards,
// with the linker's output in the error when it fails; loaded from memory
// (SharedLibrary.h), with a clear error for bytes that are not a shared
// object for this machine.
#include <elf.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "lib/backends/cpu/FusionJit.h"
#include "lib/backends/cpu/SharedLibrary.h"
#include "lib/backends/cpu/SharedObjectLink.h"

namespace mstep::cpu {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

/// A module with one elementwise fusion.
constexpr absl::string_view kFusion = R"(
func.func @step(%x: tensor<64xf32>, %y: tensor<64xf32>) -> tensor<64xf32> {
  %f = mstep.fusion ins(%x, %y : tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%a: tensor<64xf32>, %b: tensor<64xf32>):
    %s = mstep.add %a, %b : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
    mstep.yield %s : tensor<64xf32>
  }
  return %f : tensor<64xf32>
}
)";

/// The compiled fusion's index and shared object.
FusionObject compiled() {
  auto jit = FusionJit::compile_text(kFusion);
  EXPECT_TRUE(jit.ok()) << jit.status();
  auto index = parse_fusion_object((*jit)->object());
  EXPECT_TRUE(index.ok()) << index.status();
  return *index;
}

/// Points TMPDIR at a fresh directory for the test's lifetime.
class PrivateTmpdir {
public:
  PrivateTmpdir() {
    std::string templ = (fs::temp_directory_path() / "mstep_link_test_XXXXXX").string();
    EXPECT_NE(::mkdtemp(templ.data()), nullptr);
    path_ = templ;
    const char* old = std::getenv("TMPDIR");
    had_old_ = old != nullptr;
    if (had_old_) old_ = old;
    ::setenv("TMPDIR", path_.c_str(), 1);
  }
  ~PrivateTmpdir() {
    if (had_old_)
      ::setenv("TMPDIR", old_.c_str(), 1);
    else
      ::unsetenv("TMPDIR");
    fs::remove_all(path_);
  }
  bool empty() const { return fs::is_empty(path_); }

private:
  std::string path_, old_;
  bool had_old_ = false;
};

TEST(SharedObjectLink, LeavesNoFilesBehind) {
  PrivateTmpdir tmp;
  EXPECT_FALSE(compiled().shared_object.empty()); // linked in a directory under TMPDIR
  EXPECT_TRUE(tmp.empty());
  EXPECT_FALSE(link_shared_object("not an object").ok());
  EXPECT_TRUE(tmp.empty());
}

TEST(SharedObjectLink, ALinkerFailureShowsTheLinkersOutput) {
  auto linked = link_shared_object("not an object");
  ASSERT_FALSE(linked.ok());
  EXPECT_THAT(linked.status().message(), HasSubstr("the linker '" + system_linker() + "' failed"));
  // GNU ld and lld both name the input they could not read.
  EXPECT_THAT(linked.status().message(), HasSubstr("fusions.o"));
}

TEST(SharedObjectLink, AMissingLinkerIsAnError) {
  auto linked = link_shared_object("anything", "/nonexistent/bin/ld");
  ASSERT_FALSE(linked.ok());
  EXPECT_THAT(linked.status().message(), HasSubstr("cannot run the linker '/nonexistent/bin/ld'"));
}

TEST(SharedLibrary, LoadsAndLooksUpEntries) {
  const FusionObject index = compiled();
  auto library = SharedLibrary::load(index.shared_object, "the test's code");
  ASSERT_TRUE(library.ok()) << library.status();
  EXPECT_TRUE((*library)->symbol(index.fusions[0].nests[0].symbol).ok());
  auto missing = (*library)->symbol("no_such_symbol");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("the test's code has no symbol 'no_such_symbol'"));
  // A second copy of the same bytes is a library of its own.
  auto second = SharedLibrary::load(index.shared_object, "the second copy");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_NE(*(*library)->symbol(index.fusions[0].nests[0].symbol),
            *(*second)->symbol(index.fusions[0].nests[0].symbol));
}

TEST(SharedLibrary, BytesThatAreNotASharedObjectForThisMachineAreErrors) {
  const std::string code = compiled().shared_object;
  auto expect_error = [](const std::string& bytes, absl::string_view why) {
    auto library = SharedLibrary::load(bytes, "the bytes");
    ASSERT_FALSE(library.ok()) << why;
    EXPECT_THAT(library.status().message(), HasSubstr(why));
  };
  expect_error("", "shorter than an ELF header");
  expect_error(std::string(100, 'x'), "no ELF magic");
  std::string relocatable = code;
  const uint16_t rel = ET_REL;
  std::memcpy(relocatable.data() + offsetof(Elf64_Ehdr, e_type), &rel, sizeof rel);
  expect_error(relocatable, "not a shared object");
  std::string foreign = code;
  const uint16_t riscv = EM_RISCV;
  std::memcpy(foreign.data() + offsetof(Elf64_Ehdr, e_machine), &riscv, sizeof riscv);
  expect_error(foreign, "machine code for ELF machine 243");
  // Cut short: mapping it would fault past the end, so it is refused.
  expect_error(code.substr(0, 200), "truncated");
  expect_error(code.substr(0, code.size() / 2), "truncated");
}

} // namespace
} // namespace mstep::cpu
