// ptxas -v reports: a fixed report read field by field, and the reports
// the build wrote for the test kernels (sm_80, sm_90) read with sane
// numbers: every kernel there, a register count ptxas can give (1 to 255),
// no spills, no shared memory.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "lib/backends/cuda/PtxasReport.h"
#include "test/cuda/TestKernels.h"

namespace mstep::cuda {
namespace {

using ::testing::HasSubstr;

TEST(PtxasReportTest, ReadsEveryField) {
  const char* text = R"(ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'reduce' for 'sm_90'
ptxas info    : Function properties for reduce
    16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 4096 bytes smem, 392 bytes cmem[0]
ptxas info    : Compile time = 2.000 ms
ptxas info    : Compiling entry function 'tiny' for 'sm_90'
ptxas info    : Function properties for tiny
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 4 registers, used 0 barriers
)";
  auto reports = parse_ptxas_report(text);
  ASSERT_TRUE(reports.ok()) << reports.status();
  ASSERT_EQ(reports->size(), 2u);
  const PtxasKernelReport& reduce = (*reports)[0];
  EXPECT_EQ(reduce.kernel, "reduce");
  EXPECT_EQ(reduce.arch, "sm_90");
  EXPECT_EQ(reduce.registers, 40);
  EXPECT_EQ(reduce.barriers, 1);
  EXPECT_EQ(reduce.stack_bytes, 16);
  EXPECT_EQ(reduce.spill_store_bytes, 8);
  EXPECT_EQ(reduce.spill_load_bytes, 4);
  EXPECT_EQ(reduce.shared_bytes, 4096);
  EXPECT_EQ(reduce.constant_bytes, 392);
  EXPECT_EQ((*reports)[1].registers, 4);
  EXPECT_EQ((*reports)[1].constant_bytes, 0);
}

TEST(PtxasReportTest, TextWithoutEntriesIsAnError) {
  auto reports = parse_ptxas_report("ptxas info    : 0 bytes gmem\n");
  ASSERT_FALSE(reports.ok());
  EXPECT_THAT(std::string(reports.status().message()),
              HasSubstr("no \"Compiling entry function\" line"));
}

TEST(PtxasReportTest, EntryWithoutRegistersIsAnError) {
  auto reports = parse_ptxas_report("ptxas info    : Compiling entry function 'k' for 'sm_80'\n");
  ASSERT_FALSE(reports.ok());
  EXPECT_THAT(std::string(reports.status().message()),
              HasSubstr("entry function k for sm_80 has no"));
}

TEST(PtxasReportTest, TestKernelsReportsAreSane) {
  for (const char* arch : {"sm_80", "sm_90"}) {
    SCOPED_TRACE(arch);
    std::string text =
        testing::read_test_kernel(std::string("test_kernels.") + arch + ".ptxas.txt");
    auto reports = parse_ptxas_report(text);
    ASSERT_TRUE(reports.ok()) << reports.status() << "\n" << text;
    std::set<std::string> kernels;
    for (const PtxasKernelReport& report : *reports) {
      SCOPED_TRACE(report.kernel);
      kernels.insert(report.kernel);
      EXPECT_EQ(report.arch, arch);
      EXPECT_GE(report.registers, 1);
      EXPECT_LE(report.registers, 255);
      EXPECT_EQ(report.spill_store_bytes, 0);
      EXPECT_EQ(report.spill_load_bytes, 0);
      EXPECT_EQ(report.shared_bytes, 0);
    }
    EXPECT_EQ(kernels, (std::set<std::string>{"saxpy", "empty_kernel", "write_out_of_bounds"}));
  }
}

} // namespace
} // namespace mstep::cuda
