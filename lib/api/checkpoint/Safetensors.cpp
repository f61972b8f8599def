// The safetensors format for Tensors: save_safetensors and
// load_safetensors, a thin layer over the host-bytes codec
// (mstep/runtime/SafetensorsFile.h) that moves the bytes in and out of
// tensors and turns its Status into mstep::Error.
#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/api/OpBuilder.h"
#include "mstep/api/Checkpoint.h"
#include "mstep/mstep.h"
#include "mstep/runtime/SafetensorsFile.h"

namespace mstep {

namespace {

/// Throws the codec's error with the public op in front:
/// "mstep::load_safetensors: safetensors file '<path>': ...".
void throw_if_error_in(absl::string_view op, const absl::Status& status) {
  if (!status.ok())
    throw Error(absl::Status(status.code(), absl::StrCat("mstep::", op, ": ", status.message())));
}

template <typename T> T value_or_throw_in(absl::string_view op, absl::StatusOr<T> result) {
  throw_if_error_in(op, result.status());
  return *std::move(result);
}

} // namespace

void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  constexpr char kSave[] = "save_safetensors";
  for (const auto& [name, t] : tensors)
    if (!t.defined())
      throw Error(absl::InvalidArgumentError(
          absl::StrCat("mstep::", kSave, ": '", path, "': tensor '", name, "' is undefined.")));
  // Reading each tensor's bytes is a sync point for the pending ones.
  std::map<std::string, HostTensor> host;
  for (const auto& [name, t] : tensors) {
    const std::vector<std::byte> bytes = detail::host_bytes(t);
    host.emplace(
        name, HostTensor{t.dtype(), t.shape(),
                         std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size())});
  }
  throw_if_error_in(kSave, write_safetensors(path, host, metadata));
}

std::map<std::string, Tensor> load_safetensors(const std::string& path) {
  SafetensorsContents file = value_or_throw_in("load_safetensors", read_safetensors(path));
  std::map<std::string, Tensor> out;
  for (const auto& [name, t] : file.tensors)
    out.emplace(name, from_buffer(t.bytes.data(), t.type()));
  return out;
}

std::map<std::string, std::string> load_safetensors_metadata(const std::string& path) {
  return value_or_throw_in("load_safetensors_metadata", read_safetensors_metadata(path));
}

} // namespace mstep
