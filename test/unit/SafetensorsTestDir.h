// A fresh directory per test, and raw safetensors files written into it
// byte by byte (for headers mstep's own writer would never produce). Shared
// by the checkpoint and safetensors codec tests.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

namespace mstep::testing {

class SafetensorsTestDir : public ::testing::Test {
 protected:
  explicit SafetensorsTestDir(std::string prefix) : prefix_(std::move(prefix)) {}

  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           (prefix_ + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  /// Writes an 8-byte header length (`length`, else the header's size),
  /// the header and the data; returns the file's path.
  std::string write_raw(const std::string& name, const std::string& header, const std::string& data,
                        std::optional<uint64_t> length = {}) {
    std::ofstream out(path(name), std::ios::binary);
    const uint64_t n = length.value_or(header.size());
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << header << data;
    return path(name);
  }

  std::filesystem::path dir_;

 private:
  std::string prefix_;
};

}  // namespace mstep::testing
