// The safetensors format: writing and reading a file of named tensors.
// The only file that includes LLVM (llvm::json parses and writes the
// header), so the rest of the library stays free of LLVM headers.
#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <unistd.h>

#include "lib/api/OpBuilder.h"
#include "absl/strings/str_cat.h"
#include "mstep/api/Checkpoint.h"
#include "mstep/mstep.h"
#include "mstep/runtime/Tracer.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

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

const char* dtype_code(DType dtype) {
  for (const auto& [d, code] : kDTypeCodes)
    if (d == dtype) return code;
  return "?";
}

std::optional<DType> dtype_of_code(llvm::StringRef code) {
  for (const auto& [d, c] : kDTypeCodes)
    if (code == c) return d;
  return std::nullopt;
}

[[noreturn]] void fail(absl::StatusCode code, absl::string_view op, const std::string& path,
                       absl::string_view problem, absl::string_view hint = "") {
  std::string msg = absl::StrCat("mstep::", op, ": '", path, "': ", problem, ".");
  if (!hint.empty()) absl::StrAppend(&msg, " ", hint);
  throw Error(absl::Status(code, msg));
}

constexpr char kLoad[] = "load_safetensors";
constexpr char kCorruptHint[] = "The file is truncated or not a safetensors file; write it again.";


/// A parsed, checked header entry.
struct Entry {
  std::string name;
  TensorType type;
  uint64_t begin = 0, end = 0;
};

struct ParsedFile {
  std::vector<char> bytes;
  uint64_t data_start = 0;
  std::vector<Entry> entries;
  std::map<std::string, std::string> metadata;
};

std::optional<uint64_t> as_uint(const llvm::json::Value& v) {
  if (auto i = v.getAsInteger(); i && *i >= 0) return static_cast<uint64_t>(*i);
  return std::nullopt;
}

/// Reads and checks the whole file: every entry's dtype, shape and
/// offsets, before any tensor is created.
ParsedFile parse_file(const std::string& path, absl::string_view op) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in)
    fail(absl::StatusCode::kNotFound, op, path,
         absl::StrCat("cannot open the file (", std::strerror(errno), ")"));
  ParsedFile file;
  const std::streamoff size = in.tellg();
  file.bytes.resize(static_cast<size_t>(size));
  in.seekg(0);
  if (size > 0 && !in.read(file.bytes.data(), size))
    fail(absl::StatusCode::kDataLoss, op, path, "reading the file failed");

  const uint64_t total = file.bytes.size();
  if (total < 8)
    fail(absl::StatusCode::kDataLoss, op, path,
         absl::StrCat("the file has ", total, " bytes, fewer than the 8-byte header length"),
         kCorruptHint);
  uint64_t header_len = 0;
  std::memcpy(&header_len, file.bytes.data(), 8);
  if (header_len > kMaxHeaderBytes)
    fail(absl::StatusCode::kDataLoss, op, path,
         absl::StrCat("the header length ", header_len, " exceeds the ", kMaxHeaderBytes,
                      "-byte limit"),
         kCorruptHint);
  if (header_len > total - 8)
    fail(absl::StatusCode::kDataLoss, op, path,
         absl::StrCat("the header length ", header_len, " runs past the end of the file (", total,
                      " bytes)"),
         kCorruptHint);
  file.data_start = 8 + header_len;
  const uint64_t data_size = total - file.data_start;

  llvm::StringRef header(file.bytes.data() + 8, header_len);
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(header);
  if (!parsed)
    fail(absl::StatusCode::kDataLoss, op, path,
         "the header is not valid JSON: " + llvm::toString(parsed.takeError()), kCorruptHint);
  const llvm::json::Object* root = parsed->getAsObject();
  if (!root)
    fail(absl::StatusCode::kDataLoss, op, path, "the header is not a JSON object", kCorruptHint);

  std::vector<std::string> names;
  for (const auto& kv : *root) names.push_back(kv.first.str());
  std::sort(names.begin(), names.end());  // deterministic order and errors
  for (const std::string& name : names) {
    const llvm::json::Value& value = *root->get(name);
    if (name == "__metadata__") {
      const llvm::json::Object* meta = value.getAsObject();
      if (!meta) fail(absl::StatusCode::kDataLoss, op, path, "__metadata__ is not a JSON object");
      for (const auto& [k, v] : *meta) {
        auto s = v.getAsString();
        if (!s)
          fail(absl::StatusCode::kDataLoss, op, path,
               absl::StrCat("__metadata__ entry '", k.str(), "' is not a string"));
        file.metadata[k.str()] = s->str();
      }
      continue;
    }
    const std::string where = absl::StrCat("tensor '", name, "'");
    const llvm::json::Object* obj = value.getAsObject();
    if (!obj)
      fail(absl::StatusCode::kDataLoss, op, path, where + " is not a JSON object", kCorruptHint);
    Entry e;
    e.name = name;
    auto code = obj->getString("dtype");
    if (!code) fail(absl::StatusCode::kDataLoss, op, path, where + " has no dtype string");
    auto dtype = dtype_of_code(*code);
    if (!dtype)
      fail(absl::StatusCode::kInvalidArgument, op, path,
           absl::StrCat(where, " has dtype '", code->str(), "', which mstep does not support"),
           "mstep reads F32, F64, BF16, F16, I32, I64 and BOOL; convert the tensor first.");
    e.type.dtype = *dtype;
    const llvm::json::Array* shape = obj->getArray("shape");
    if (!shape) fail(absl::StatusCode::kDataLoss, op, path, where + " has no shape array");
    uint64_t bytes = element_size(*dtype);
    for (const llvm::json::Value& d : *shape) {
      auto dim = as_uint(d);
      if (!dim || __builtin_mul_overflow(bytes, *dim, &bytes))
        fail(absl::StatusCode::kDataLoss, op, path,
             where + " has a shape that is not a list of non-negative sizes", kCorruptHint);
      e.type.shape.push_back(static_cast<int64_t>(*dim));
    }
    const llvm::json::Array* offsets = obj->getArray("data_offsets");
    std::optional<uint64_t> begin, end;
    if (offsets && offsets->size() == 2) {
      begin = as_uint((*offsets)[0]);
      end = as_uint((*offsets)[1]);
    }
    if (!begin || !end)
      fail(absl::StatusCode::kDataLoss, op, path,
           where + " has no data_offsets pair of non-negative integers", kCorruptHint);
    if (*begin > *end || *end > data_size)
      fail(absl::StatusCode::kDataLoss, op, path,
           absl::StrCat(where, " has data_offsets [", *begin, ", ", *end,
                        "] outside the data section of ", data_size, " bytes"),
           kCorruptHint);
    if (*end - *begin != bytes)
      fail(absl::StatusCode::kDataLoss, op, path,
           absl::StrCat(where, " (", e.type.to_string(), ") needs ", bytes,
                        " bytes but its data_offsets [", *begin, ", ", *end, "] span ",
                        *end - *begin),
           kCorruptHint);
    e.begin = *begin;
    e.end = *end;
    file.entries.push_back(std::move(e));
  }
  return file;
}

}  // namespace

void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  constexpr char kSave[] = "save_safetensors";
  for (const auto& [name, t] : tensors) {
    if (name.empty() || name == "__metadata__" || !llvm::json::isUTF8(name))
      fail(absl::StatusCode::kInvalidArgument, kSave, path,
           absl::StrCat("invalid tensor name '", name, "'"),
           "Names must be non-empty UTF-8 and not __metadata__.");
    if (!t.defined())
      fail(absl::StatusCode::kInvalidArgument, kSave, path,
           absl::StrCat("tensor '", name, "' is undefined"), "");
  }
  for (const auto& [k, v] : metadata)
    if (!llvm::json::isUTF8(k) || !llvm::json::isUTF8(v))
      fail(absl::StatusCode::kInvalidArgument, kSave, path,
           absl::StrCat("metadata entry '", k, "' is not UTF-8"), "");

  // 1. Every tensor's bytes (sync points), in name order.
  std::vector<std::vector<std::byte>> data;
  for (const auto& [name, t] : tensors) data.push_back(detail::host_bytes(t));

  // 2. The header, laid out in the same order with contiguous offsets.
  std::string header;
  {
    llvm::raw_string_ostream os(header);
    llvm::json::OStream json(os);
    json.object([&] {
      if (!metadata.empty())
        json.attributeObject("__metadata__", [&] {
          for (const auto& [k, v] : metadata) json.attribute(k, v);
        });
      int64_t offset = 0;
      size_t i = 0;
      for (const auto& [name, t] : tensors) {
        const int64_t size = static_cast<int64_t>(data[i++].size());
        json.attributeObject(name, [&] {
          json.attribute("dtype", dtype_code(t.dtype()));
          json.attributeArray("shape", [&] {
            for (int64_t d : t.shape()) json.value(d);
          });
          json.attributeArray("data_offsets", [&] {
            json.value(offset);
            json.value(offset + size);
          });
        });
        offset += size;
      }
    });
  }
  // Pad with spaces so the data starts 8-byte aligned, as safetensors does.
  header.append((8 - header.size() % 8) % 8, ' ');

  // 3. Write a temporary file and rename it over `path`: a failure leaves
  //    any previous checkpoint intact.
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out)
      fail(absl::StatusCode::kPermissionDenied, kSave, path,
           absl::StrCat("cannot create '", tmp, "' (", std::strerror(errno), ")"));
    const uint64_t header_len = header.size();
    out.write(reinterpret_cast<const char*>(&header_len), 8);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    for (const auto& bytes : data)
      out.write(reinterpret_cast<const char*>(bytes.data()),
                static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      std::error_code ignored;
      std::filesystem::remove(tmp, ignored);
      fail(absl::StatusCode::kDataLoss, kSave, path, "writing the file failed (disk full?)");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    fail(absl::StatusCode::kPermissionDenied, kSave, path,
         "cannot replace the file (" + ec.message() + ")");
  }
}

std::map<std::string, Tensor> load_safetensors(const std::string& path) {
  ParsedFile file = parse_file(path, kLoad);
  std::map<std::string, Tensor> out;
  for (const Entry& e : file.entries) {
    char* data = file.bytes.data() + file.data_start + e.begin;
    if (e.type.dtype == DType::boolean)  // any non-zero byte is true
      for (uint64_t i = 0; i < e.end - e.begin; ++i) data[i] = data[i] != 0;
    out.emplace(e.name, from_buffer(data, e.type));
  }
  return out;
}

std::map<std::string, std::string> load_safetensors_metadata(const std::string& path) {
  return parse_file(path, "load_safetensors_metadata").metadata;
}

}  // namespace mstep
