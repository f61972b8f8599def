// ByteWriter, ByteReader and the sealed envelope (see ByteStream.h).
#include "mstep/core/ByteStream.h"

#include <cassert>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "mstep/core/Checksum.h"

namespace mstep {

void ByteWriter::f64(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  u64(bits);
}

void ByteWriter::bytes(absl::string_view b) {
  u64(b.size());
  out_.append(b.data(), b.size());
}

uint64_t ByteReader::get(int width, absl::string_view field) {
  if (!ok()) return 0;
  if (remaining() < static_cast<size_t>(width)) {
    fail(absl::StrCat("truncated: ", width, " bytes of ", field, " needed, ", remaining(),
                      " left"));
    return 0;
  }
  uint64_t v = 0;
  for (int i = 0; i < width; ++i)
    v |= static_cast<uint64_t>(static_cast<unsigned char>(in_[pos_ + i])) << (8 * i);
  pos_ += width;
  return v;
}

double ByteReader::f64(absl::string_view field) {
  const uint64_t bits = u64(field);
  double v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

absl::string_view ByteReader::bytes(absl::string_view field) {
  const uint64_t n = u64(field);
  if (!ok()) return {};
  if (n > remaining()) {
    fail(absl::StrCat(field, " says ", n, " bytes, ", remaining(), " left"));
    return {};
  }
  absl::string_view b = in_.substr(pos_, n);
  pos_ += n;
  return b;
}

uint32_t ByteReader::count(absl::string_view field, size_t min_item_bytes) {
  const uint32_t n = u32(field);
  if (ok() && static_cast<uint64_t>(n) * min_item_bytes > remaining()) {
    fail(absl::StrCat(field, " is ", n, ", more than the ", remaining(), " bytes left can hold"));
    return 0;
  }
  return n;
}

void ByteReader::fail(absl::string_view message) {
  if (ok()) error_ = absl::StrCat(what_, ": ", message, " (at byte ", pos_, ")");
}

absl::Status ByteReader::status() const {
  return ok() ? absl::OkStatus() : absl::DataLossError(error_);
}

void ByteReader::expect_end() {
  if (ok() && remaining() != 0) fail(absl::StrCat(remaining(), " unexpected bytes after the end"));
}

namespace {
constexpr size_t kMagicBytes = 8;
constexpr size_t kSealBytes = kMagicBytes + 4 + 8 + 8;
}  // namespace

std::string seal(absl::string_view magic, uint32_t version, absl::string_view body) {
  assert(magic.size() == kMagicBytes);
  ByteWriter w;
  for (char c : magic) w.u8(static_cast<uint8_t>(c));
  w.u32(version);
  w.u64(body.size());
  w.u64(xxhash64(body));
  std::string out = w.take();
  out.append(body.data(), body.size());
  return out;
}

absl::StatusOr<absl::string_view> unseal(absl::string_view blob, absl::string_view magic,
                                         uint32_t version, absl::string_view what) {
  if (blob.substr(0, kMagicBytes) != magic)
    return absl::UnimplementedError(absl::StrCat("not a ", what, " (bad magic, no ", magic, ")"));
  if (blob.size() < kSealBytes)
    return absl::DataLossError(
        absl::StrCat(what, ": truncated header, ", blob.size(), " bytes of ", kSealBytes));
  ByteReader header(blob.substr(kMagicBytes), what);
  const uint32_t stored_version = header.u32("the version");
  const uint64_t size = header.u64("the body size");
  const uint64_t sum = header.u64("the checksum");
  if (stored_version != version)
    return absl::DataLossError(absl::StrCat(what, ": format version ", stored_version,
                                            ", this build reads version ", version));
  absl::string_view body = blob.substr(kSealBytes);
  if (body.size() != size)
    return absl::DataLossError(
        absl::StrCat(what, body.size() < size ? ": truncated" : ": trailing bytes",
                     ": the header says ", size, " body bytes, there are ", body.size()));
  if (xxhash64(body) != sum)
    return absl::DataLossError(absl::StrCat(what, ": checksum mismatch, the bytes are corrupt"));
  return body;
}

namespace {
// A stored tensor is at most this large (256 TiB): larger is corruption.
constexpr uint64_t kMaxTensorBytes = uint64_t{1} << 48;
}  // namespace

void write_tensor_type(ByteWriter& w, const TensorType& t) {
  w.u8(static_cast<uint8_t>(t.dtype));
  w.u8(static_cast<uint8_t>(t.shape.rank()));
  for (int64_t d : t.shape) w.i64(d);
}

TensorType read_tensor_type(ByteReader& r, absl::string_view what) {
  TensorType t;
  const uint8_t dtype = r.u8("a dtype");
  const uint8_t rank = r.u8("a rank");
  if (!r.ok()) return t;
  if (dtype >= kNumDTypes) {
    r.fail(absl::StrCat(what, " has dtype ", int{dtype}, ", not a valid DType"));
    return t;
  }
  if (rank > kMaxStoredRank) {
    r.fail(absl::StrCat(what, " has rank ", int{rank}, ", more than ", kMaxStoredRank));
    return t;
  }
  t.dtype = static_cast<DType>(dtype);
  uint64_t bytes = element_size(t.dtype);
  for (int d = 0; d < rank && r.ok(); ++d) {
    const int64_t size = r.i64("a dimension");
    if (!r.ok()) break;
    if (size < 0 || (size > 0 && bytes > kMaxTensorBytes / static_cast<uint64_t>(size))) {
      r.fail(absl::StrCat(what, " has dimension ", d, " of size ", size,
                          size < 0 ? " (negative)" : " (the tensor would exceed 2^48 bytes)"));
      break;
    }
    bytes = size == 0 ? 0 : bytes * static_cast<uint64_t>(size);
    t.shape.push_back(size);
  }
  return t;
}

}  // namespace mstep
