// SafetensorsFile: reading and writing safetensors files as host bytes,
// with no Tensor and no LLVM, for the runtime (mstep-run's --inputs and
// --outputs) and under mstep::save_safetensors / load_safetensors.
//
// A safetensors file is an 8-byte little-endian header length N, N bytes
// of JSON
//   {"<name>": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
//    "__metadata__": {"<key>": "<string>"}}
// and then the raw little-endian tensor bytes; offsets count from the end
// of the header. Supported dtypes: F32, F64, BF16, F16, I32, I64, BOOL.
//
// Files are untrusted: the reader checks the header length (at most
// 100 MiB), the JSON (StrictJson: objects, arrays, strings, integers; UTF-8;
// no duplicate keys), every entry's dtype, shape and offsets, and that the
// tensors tile the data section exactly (no gap, no overlap, nothing after
// the last), before it reads any tensor data. Every error is a Status whose
// message starts "safetensors file '<path>': " and says what is wrong.
//
// Thread-safety: the functions share no state; concurrent calls on
// different paths are safe.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "mstep/core/DType.h"
#include "mstep/core/Shape.h"
#include "mstep/core/TensorType.h"

namespace mstep {

/// One tensor's host copy: dtype, shape and `bytes` (row-major,
/// little-endian, bytes.size() == numel * element_size). BOOL bytes are 0
/// or 1. Owns its bytes.
struct HostTensor {
  DType dtype = DType::f32;
  Shape shape;
  std::string bytes;

  TensorType type() const { return TensorType{shape, dtype}; }
  friend bool operator==(const HostTensor&, const HostTensor&) = default;
};

/// A whole file: tensors by name and the "__metadata__" strings.
struct SafetensorsContents {
  std::map<std::string, HostTensor> tensors;
  std::map<std::string, std::string> metadata;
};

/// The header's dtype code ("F32", "BOOL", ...) of `dtype`.
absl::string_view safetensors_dtype_code(DType dtype);
/// The dtype of a header code, or nullopt when mstep has none for it.
std::optional<DType> dtype_of_safetensors_code(absl::string_view code);

/// Reads and checks the whole file. Errors: NotFound (cannot open),
/// DataLoss (truncated or corrupt), InvalidArgument (a dtype mstep does
/// not support). Any non-zero BOOL byte reads as 1.
absl::StatusOr<SafetensorsContents> read_safetensors(const std::string& path);

/// The "__metadata__" strings only (empty when the file has none). The
/// header and the offsets are checked as by read_safetensors; the tensor
/// data is not read.
absl::StatusOr<std::map<std::string, std::string>>
read_safetensors_metadata(const std::string& path);

/// Writes `tensors` (laid out in name order, 8-byte aligned data) and
/// `metadata` to `path`. The bytes go to a temporary file next to `path`
/// that is renamed over it at the end, so a failure never leaves a
/// half-written file and keeps any previous one. Errors: InvalidArgument
/// (a name that is empty, "__metadata__" or not UTF-8; metadata that is
/// not UTF-8; bytes that do not match dtype and shape), PermissionDenied
/// (cannot create or replace the file), DataLoss (the write failed).
absl::Status write_safetensors(const std::string& path,
                               const std::map<std::string, HostTensor>& tensors,
                               const std::map<std::string, std::string>& metadata = {});

} // namespace mstep
