// SafetensorsFile: the safetensors codec over host bytes. Reading is
//  1. open and fstat the file (a regular file of at least 8 bytes);
//  2. read and bound the header length, read the header;
//  3. parse it with StrictJson and check every entry (dtype, shape, offsets
//     inside the data section and matching the byte size), in name order
//     so the first error reported does not depend on the file's key order;
//  4. check the entries tile the data section exactly;
//  5. only then read each tensor's bytes, straight into its HostTensor.
#include "mstep/runtime/SafetensorsFile.h"

#include "lib/runtime/TrustedPath.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/runtime/StrictJson.h"
#include "mstep/core/Error.h"

namespace mstep {

namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host would need byte swaps");

// The JSON header is capped like the reference implementation's, so a
// garbage length cannot make us allocate gigabytes.
constexpr uint64_t kMaxHeaderBytes = 100 << 20;

constexpr struct {
  DType dtype;
  const char* code;
} kDTypeCodes[] = {{DType::f32, "F32"},     {DType::f64, "F64"}, {DType::bf16, "BF16"},
                   {DType::f16, "F16"},     {DType::i32, "I32"}, {DType::i64, "I64"},
                   {DType::boolean, "BOOL"}};

constexpr char kCorruptHint[] = "The file is truncated or not a safetensors file; write it again.";

/// "safetensors file '<path>': <problem>. <hint>"
absl::Status file_error(absl::StatusCode code, const std::string& path, absl::string_view problem,
                        absl::string_view hint = "") {
  std::string msg = absl::StrCat("safetensors file '", path, "': ", problem, ".");
  if (!hint.empty()) absl::StrAppend(&msg, " ", hint);
  return absl::Status(code, msg);
}

absl::Status corrupt(const std::string& path, absl::string_view problem) {
  return file_error(absl::StatusCode::kDataLoss, path, problem, kCorruptHint);
}

/// Bytes of a tensor of `dtype` and `dims`, or nullopt when a dim is
/// negative or the element count or byte size does not fit in int64
/// (a zero dim does not excuse an overflow in the others).
std::optional<uint64_t> byte_size(DType dtype, absl::Span<const int64_t> dims) {
  int64_t nonzero = 1;
  bool empty = false;
  for (int64_t d : dims) {
    if (d < 0) return std::nullopt;
    if (d == 0) {
      empty = true;
      continue;
    }
    if (__builtin_mul_overflow(nonzero, d, &nonzero)) return std::nullopt;
  }
  int64_t bytes = 0;
  if (__builtin_mul_overflow(nonzero, static_cast<int64_t>(element_size(dtype)), &bytes))
    return std::nullopt;
  return empty ? 0 : static_cast<uint64_t>(bytes);
}

/// Closes the descriptor on every path out.
class FileDescriptor {
public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  /// Closes now; false (errno set) when close reports an error.
  bool close() {
    const int fd = fd_;
    fd_ = -1;
    return ::close(fd) == 0;
  }

private:
  int fd_;
};

/// Reads exactly `size` bytes at `offset`; an errno message on failure.
std::optional<std::string> read_exactly(int fd, uint64_t offset, char* out, uint64_t size) {
  while (size > 0) {
    const ssize_t n = ::pread(fd, out, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::string(std::strerror(errno));
    if (n == 0) return std::string("the file ended early; did it change while it was read?");
    out += n;
    offset += static_cast<uint64_t>(n);
    size -= static_cast<uint64_t>(n);
  }
  return std::nullopt;
}

/// One checked header entry.
struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin = 0, end = 0;
};

/// An open file with its checked header.
struct CheckedHeader {
  std::vector<Entry> entries; // in name order
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;
};

absl::Status check_metadata(const std::string& path, const json::Value& value,
                            std::map<std::string, std::string>& out) {
  if (value.kind != json::Value::Kind::kObject)
    return corrupt(path,
                   absl::StrCat("__metadata__ is ", value.kind_name(), ", not a JSON object"));
  for (const json::Member& m : value.members) {
    if (m.value.kind != json::Value::Kind::kString)
      return corrupt(path, absl::StrCat("__metadata__ entry '", m.key, "' is not a string"));
    out[m.key] = m.value.string;
  }
  return absl::OkStatus();
}

absl::StatusOr<Entry> check_entry(const std::string& path, const std::string& name,
                                  const json::Value& value, uint64_t data_size) {
  const std::string where = absl::StrCat("tensor '", name, "'");
  if (value.kind != json::Value::Kind::kObject)
    return corrupt(path, absl::StrCat(where, " is ", value.kind_name(), ", not a JSON object"));
  Entry e;
  e.name = name;

  const json::Value* code = value.find("dtype");
  if (code == nullptr || code->kind != json::Value::Kind::kString)
    return corrupt(path, where + " has no dtype string");
  std::optional<DType> dtype = dtype_of_safetensors_code(code->string);
  if (!dtype)
    return file_error(
        absl::StatusCode::kInvalidArgument, path,
        absl::StrCat(where, " has dtype '", code->string, "', which mstep does not support"),
        "mstep reads F32, F64, BF16, F16, I32, I64 and BOOL; convert the tensor "
        "first.");
  e.dtype = *dtype;

  const json::Value* shape = value.find("shape");
  if (shape == nullptr || shape->kind != json::Value::Kind::kArray)
    return corrupt(path, where + " has no shape array");
  for (const json::Value& d : shape->items) {
    std::optional<uint64_t> dim = d.as_uint();
    if (!dim || *dim > static_cast<uint64_t>(INT64_MAX))
      return corrupt(path, where + " has a shape that is not a list of non-negative sizes");
    e.shape.push_back(static_cast<int64_t>(*dim));
  }
  std::optional<uint64_t> bytes = byte_size(e.dtype, e.shape.dims());
  if (!bytes)
    return corrupt(path, absl::StrCat(where, " has shape ", e.shape.to_string(),
                                      ", more elements than 64 bits count"));

  const json::Value* offsets = value.find("data_offsets");
  std::optional<uint64_t> begin, end;
  if (offsets != nullptr && offsets->kind == json::Value::Kind::kArray &&
      offsets->items.size() == 2) {
    begin = offsets->items[0].as_uint();
    end = offsets->items[1].as_uint();
  }
  if (!begin || !end)
    return corrupt(path, where + " has no data_offsets pair of non-negative integers");
  if (*begin > *end || *end > data_size)
    return corrupt(path, absl::StrCat(where, " has data_offsets [", *begin, ", ", *end,
                                      "] outside the data section of ", data_size, " bytes"));
  if (*end - *begin != *bytes)
    return corrupt(path, absl::StrCat(where, " (", TensorType{e.shape, e.dtype}.to_string(),
                                      ") needs ", *bytes, " bytes but its data_offsets [", *begin,
                                      ", ", *end, "] span ", *end - *begin));
  e.begin = *begin;
  e.end = *end;
  return e;
}

/// The entries, in offset order, must cover [0, data_size) once each: a gap
/// or an overlap means a corrupt or hostile file (the reference
/// implementation refuses both, and trailing bytes).
absl::Status check_tiling(const std::string& path, const std::vector<Entry>& entries,
                          uint64_t data_size) {
  std::vector<const Entry*> by_offset;
  for (const Entry& e : entries) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(), [](const Entry* a, const Entry* b) {
    return std::tie(a->begin, a->end, a->name) < std::tie(b->begin, b->end, b->name);
  });
  uint64_t covered = 0;
  const Entry* previous = nullptr;
  for (const Entry* e : by_offset) {
    if (e->begin < covered)
      return corrupt(path,
                     absl::StrCat("tensor '", e->name, "' (data_offsets [", e->begin, ", ", e->end,
                                  "]) overlaps tensor '", previous->name, "' (data_offsets [",
                                  previous->begin, ", ", previous->end, "])"));
    if (e->begin > covered)
      return corrupt(path, absl::StrCat("bytes [", covered, ", ", e->begin,
                                        ") of the data section belong to no tensor"));
    covered = e->end;
    if (e->end > e->begin) previous = e;
  }
  if (covered != data_size)
    return corrupt(path, absl::StrCat("bytes [", covered, ", ", data_size,
                                      ") at the end of the data section belong to no tensor"));
  return absl::OkStatus();
}

/// Steps 1-4: opens `path` into `fd` and checks its header.
absl::StatusOr<CheckedHeader> read_header(const std::string& path,
                                          std::optional<FileDescriptor>& fd) {
  // O_NONBLOCK: a FIFO in place of the file must not hang the open; it
  // has no effect on reading a regular file.
  fd.emplace(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd->get() < 0)
    return file_error(absl::StatusCode::kNotFound, path,
                      absl::StrCat("cannot open the file (", std::strerror(errno), ")"));
  struct stat st {};
  if (::fstat(fd->get(), &st) != 0)
    return file_error(absl::StatusCode::kDataLoss, path,
                      absl::StrCat("cannot stat the file (", std::strerror(errno), ")"));
  if (!S_ISREG(st.st_mode))
    return file_error(absl::StatusCode::kInvalidArgument, path, "not a regular file");
  const uint64_t total = static_cast<uint64_t>(st.st_size);
  if (total < 8)
    return corrupt(
        path, absl::StrCat("the file has ", total, " bytes, fewer than the 8-byte header length"));
  uint64_t header_len = 0;
  if (auto err = read_exactly(fd->get(), 0, reinterpret_cast<char*>(&header_len), 8))
    return file_error(absl::StatusCode::kDataLoss, path, "reading the file failed (" + *err + ")");
  if (header_len > kMaxHeaderBytes)
    return corrupt(path, absl::StrCat("the header length ", header_len, " exceeds the ",
                                      kMaxHeaderBytes, "-byte limit"));
  if (header_len > total - 8)
    return corrupt(path, absl::StrCat("the header length ", header_len,
                                      " runs past the end of the file (", total, " bytes)"));
  std::string text(header_len, '\0');
  if (auto err = read_exactly(fd->get(), 8, text.data(), header_len))
    return file_error(absl::StatusCode::kDataLoss, path, "reading the file failed (" + *err + ")");

  CheckedHeader header;
  header.data_start = 8 + header_len;
  const uint64_t data_size = total - header.data_start;
  absl::StatusOr<json::Value> root = json::parse(text);
  if (!root.ok())
    return corrupt(path, absl::StrCat("the header is not valid JSON: ", root.status().message()));
  if (root->kind != json::Value::Kind::kObject)
    return corrupt(path, absl::StrCat("the header is ", root->kind_name(), ", not a JSON object"));

  std::vector<const json::Member*> members;
  for (const json::Member& m : root->members) members.push_back(&m);
  std::sort(members.begin(), members.end(),
            [](const json::Member* a, const json::Member* b) { return a->key < b->key; });
  for (const json::Member* m : members) {
    if (m->key == "__metadata__") {
      MSTEP_RETURN_IF_ERROR(check_metadata(path, m->value, header.metadata));
      continue;
    }
    MSTEP_ASSIGN_OR_RETURN(Entry e, check_entry(path, m->key, m->value, data_size));
    header.entries.push_back(std::move(e));
  }
  MSTEP_RETURN_IF_ERROR(check_tiling(path, header.entries, data_size));
  return header;
}

/// A name for the temporary file next to `path`, unique in this process.
std::string temporary_path(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  return absl::StrCat(path, ".tmp.", ::getpid(), ".", counter.fetch_add(1));
}

} // namespace

absl::string_view safetensors_dtype_code(DType dtype) {
  for (const auto& [d, code] : kDTypeCodes)
    if (d == dtype) return code;
  return "?";
}

std::optional<DType> dtype_of_safetensors_code(absl::string_view code) {
  for (const auto& [d, c] : kDTypeCodes)
    if (code == c) return d;
  return std::nullopt;
}

absl::StatusOr<SafetensorsContents> read_safetensors(const std::string& path) {
  std::optional<FileDescriptor> fd;
  MSTEP_ASSIGN_OR_RETURN(CheckedHeader header, read_header(path, fd));
  // 5. The data, each tensor read straight into its bytes.
  SafetensorsContents contents;
  contents.metadata = std::move(header.metadata);
  for (Entry& e : header.entries) {
    HostTensor t{e.dtype, std::move(e.shape), std::string(e.end - e.begin, '\0')};
    if (auto err =
            read_exactly(fd->get(), header.data_start + e.begin, t.bytes.data(), t.bytes.size()))
      return file_error(absl::StatusCode::kDataLoss, path,
                        absl::StrCat("reading tensor '", e.name, "' failed (", *err, ")"));
    if (t.dtype == DType::boolean) // any non-zero byte is true
      for (char& b : t.bytes) b = b != 0;
    contents.tensors.emplace(std::move(e.name), std::move(t));
  }
  return contents;
}

absl::StatusOr<std::map<std::string, std::string>>
read_safetensors_metadata(const std::string& path) {
  std::optional<FileDescriptor> fd;
  MSTEP_ASSIGN_OR_RETURN(CheckedHeader header, read_header(path, fd));
  return std::move(header.metadata);
}

absl::Status write_safetensors(const std::string& path,
                               const std::map<std::string, HostTensor>& tensors,
                               const std::map<std::string, std::string>& metadata) {
  // 1. Check everything before touching the disk.
  for (const auto& [name, t] : tensors) {
    if (name.empty() || name == "__metadata__" || !json::is_utf8(name))
      return file_error(absl::StatusCode::kInvalidArgument, path,
                        absl::StrCat("invalid tensor name '", name, "'"),
                        "Names must be non-empty UTF-8 and not __metadata__.");
    std::optional<uint64_t> bytes = byte_size(t.dtype, t.shape.dims());
    if (!bytes || *bytes != t.bytes.size())
      return file_error(absl::StatusCode::kInvalidArgument, path,
                        absl::StrCat("tensor '", name, "' (", t.type().to_string(), ") has ",
                                     t.bytes.size(), " bytes of data, which does not match"));
  }
  for (const auto& [k, v] : metadata)
    if (!json::is_utf8(k) || !json::is_utf8(v))
      return file_error(absl::StatusCode::kInvalidArgument, path,
                        absl::StrCat("metadata entry '", k, "' is not UTF-8"));

  // 2. The header: metadata, then the tensors in name order with
  //    contiguous offsets, padded with spaces so the data starts 8-byte
  //    aligned, as safetensors does.
  json::Value root = json::Value::object();
  if (!metadata.empty()) {
    json::Value meta = json::Value::object();
    for (const auto& [k, v] : metadata) meta.members.push_back({k, json::Value::str(v)});
    root.members.push_back({"__metadata__", std::move(meta)});
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    json::Value shape = json::Value::array();
    for (int64_t d : t.shape) shape.items.push_back(json::Value::uint(static_cast<uint64_t>(d)));
    root.members.push_back(
        {name, json::Value::object(
                   {{"dtype", json::Value::str(std::string(safetensors_dtype_code(t.dtype)))},
                    {"shape", std::move(shape)},
                    {"data_offsets",
                     json::Value::array({json::Value::uint(offset),
                                         json::Value::uint(offset + t.bytes.size())})}})});
    offset += t.bytes.size();
  }
  std::string header = json::serialize(root);
  header.append((8 - header.size() % 8) % 8, ' ');
  const uint64_t header_len = header.size();

  // 3. A temporary file renamed over `path`: a failure leaves any previous
  //    file intact.
  const std::string tmp = temporary_path(path);
  FileDescriptor fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666));
  if (fd.get() < 0)
    return file_error(absl::StatusCode::kPermissionDenied, path,
                      absl::StrCat("cannot create '", tmp, "' (", std::strerror(errno), ")"));
  absl::Status written =
      internal::write_all(fd.get(), absl::string_view(reinterpret_cast<const char*>(&header_len), 8));
  if (written.ok()) written = internal::write_all(fd.get(), header);
  for (const auto& [name, t] : tensors)
    if (written.ok()) written = internal::write_all(fd.get(), t.bytes);
  if (written.ok() && !fd.close()) written = absl::DataLossError(std::strerror(errno));
  if (!written.ok()) {
    ::unlink(tmp.c_str());
    return file_error(absl::StatusCode::kDataLoss, path,
                      absl::StrCat("writing the file failed (", written.message(), ")"));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return file_error(absl::StatusCode::kPermissionDenied, path,
                      absl::StrCat("cannot replace the file (", std::strerror(err), ")"));
  }
  return absl::OkStatus();
}

} // namespace mstep
