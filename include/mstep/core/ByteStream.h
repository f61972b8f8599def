// Little-endian binary writing and bounds-checked reading, and the
// envelope every stored form (a graph, a backend's executable) is sealed in. The reader is for untrusted bytes: a
// read past the end or a bad value records one error (the first), after
// which every read returns zero, so a decoder checks ok() at the points
// where a value is used to index or allocate, and once at the end.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "mstep/core/TensorType.h"

namespace mstep {

class ByteWriter {
 public:
  void u8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u16(uint16_t v) { put(v, 2); }
  void u32(uint32_t v) { put(v, 4); }
  void u64(uint64_t v) { put(v, 8); }
  void i64(int64_t v) { put(static_cast<uint64_t>(v), 8); }
  /// The IEEE bits, so every value (NaN payloads, -0.0) comes back as is.
  void f64(double v);
  /// A u64 length, then the bytes.
  void bytes(absl::string_view b);

  const std::string& data() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  void put(uint64_t v, int width) {
    for (int i = 0; i < width; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  std::string out_;
};

class ByteReader {
 public:
  /// `what` starts every error message ("graph", "cpu executable").
  ByteReader(absl::string_view bytes, absl::string_view what) : in_(bytes), what_(what) {}

  /// Each read names its `field` in the error when the bytes run out.
  uint8_t u8(absl::string_view field) { return static_cast<uint8_t>(get(1, field)); }
  uint16_t u16(absl::string_view field) { return static_cast<uint16_t>(get(2, field)); }
  uint32_t u32(absl::string_view field) { return static_cast<uint32_t>(get(4, field)); }
  uint64_t u64(absl::string_view field) { return get(8, field); }
  int64_t i64(absl::string_view field) { return static_cast<int64_t>(get(8, field)); }
  double f64(absl::string_view field);
  /// What ByteWriter::bytes() wrote; a view into the input.
  absl::string_view bytes(absl::string_view field);
  /// A u32 element count, checked against the bytes left: each element
  /// takes at least `min_item_bytes`, so a corrupt count cannot make the
  /// caller allocate more than the input's size.
  uint32_t count(absl::string_view field, size_t min_item_bytes);

  /// Records `message` as the error (DataLoss, prefixed with `what` and
  /// the offset) unless one was recorded already.
  void fail(absl::string_view message);
  bool ok() const { return error_.empty(); }
  /// OK, or the first error.
  absl::Status status() const;
  size_t remaining() const { return in_.size() - pos_; }
  size_t offset() const { return pos_; }
  /// An error unless every byte was read.
  void expect_end();

 private:
  uint64_t get(int width, absl::string_view field);

  absl::string_view in_;
  size_t pos_ = 0;
  std::string what_;
  std::string error_;
};

/// Seals `body` in the envelope of a stored format:
///   magic (8 bytes, names the format) | version u32 | body size u64
///   | xxhash64(body) u64 | body
std::string seal(absl::string_view magic, uint32_t version, absl::string_view body);

/// The body of a sealed `blob` (a view into it). Unimplemented when `blob`
/// does not start with `magic` (it is not this format); DataLoss, naming
/// `what` and the failed check, for a wrong version, a truncated header, a
/// size or a checksum mismatch.
absl::StatusOr<absl::string_view> unseal(absl::string_view blob, absl::string_view magic,
                                         uint32_t version, absl::string_view what);

/// The largest rank a stored tensor type may have.
inline constexpr int kMaxStoredRank = 64;

/// A tensor type: dtype u8 | rank u8 | each dimension i64.
void write_tensor_type(ByteWriter& w, const TensorType& type);
/// What write_tensor_type wrote. A dtype out of range, a rank above
/// kMaxStoredRank, a negative dimension or a tensor above 2^48 bytes is an
/// error naming `what`.
TensorType read_tensor_type(ByteReader& r, absl::string_view what);

}  // namespace mstep
