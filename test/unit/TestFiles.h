// Whole-file reads and writes for tests that corrupt, truncate or inspect
// cache entries and exported graphs.
#pragma once

#include <sys/stat.h>

#include <fstream>
#include <iterator>
#include <string>

namespace mstep::testing {

/// The file's bytes ("" if it cannot be read).
inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// Replaces the file's bytes; the file is left readable and writable by its
/// owner only, as the disk cache's trust rule wants.
inline void write_private_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  ::chmod(path.c_str(), 0600);
}

} // namespace mstep::testing
