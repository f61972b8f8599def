#include "lib/backends/cpu/NativeFormat.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "lib/backends/cpu/FusionJit.h"

namespace mstep::cpu {

namespace {

constexpr absl::string_view kMagic = "MSTEPCPU";

template <typename T>
void put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

template <typename T>
bool take(absl::string_view& in, T* value) {
  if (in.size() < sizeof(T)) return false;
  std::memcpy(value, in.data(), sizeof(T));
  in.remove_prefix(sizeof(T));
  return true;
}

bool take_bytes(absl::string_view& in, absl::string_view* bytes) {
  uint64_t n = 0;
  if (!take(in, &n) || n > in.size()) return false;
  *bytes = in.substr(0, n);
  in.remove_prefix(n);
  return true;
}

}  // namespace

std::string write_native_format(absl::string_view module_text, const FusionJit* jit) {
  const std::string object = jit ? jit->object() : std::string();
  std::string out(kMagic);
  put<uint32_t>(out, kNativeFormatVersion);
  put<uint64_t>(out, module_text.size());
  out.append(module_text.data(), module_text.size());
  put<uint64_t>(out, object.size());
  out.append(object);
  return out;
}

absl::StatusOr<NativeParts> read_native_format(absl::string_view blob) {
  if (blob.substr(0, kMagic.size()) != kMagic)
    return absl::DataLossError("not a cpu-backend executable (bad magic)");
  blob.remove_prefix(kMagic.size());
  uint32_t version = 0;
  if (!take(blob, &version)) return absl::DataLossError("cpu executable: truncated header");
  if (version != kNativeFormatVersion)
    return absl::DataLossError(absl::StrCat("cpu executable format version ", version,
                                            ", this build reads version ", kNativeFormatVersion));
  NativeParts parts;
  if (!take_bytes(blob, &parts.module_text) || !take_bytes(blob, &parts.object) || !blob.empty())
    return absl::DataLossError("cpu executable: truncated or oversized section");
  return parts;
}

}  // namespace mstep::cpu
