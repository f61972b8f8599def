// StrictJson: the subset of JSON a safetensors header uses, read and
// written without LLVM: objects, arrays, strings and integers. The reader
// is for untrusted bytes: anything outside the subset (true, false, null,
// fractions, exponents), a duplicate key, invalid UTF-8, a bad escape or a
// nesting deeper than kMaxDepth is an error naming the byte offset, never
// a crash. Library-internal; SafetensorsFile.cpp is its user.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mstep::json {

/// Arrays and objects nested deeper than this are rejected, so a hostile
/// header cannot exhaust the stack (a safetensors header needs 3).
inline constexpr int kMaxDepth = 32;

struct Member;

/// One JSON value of the subset. A plain struct: only the fields of its
/// kind are meaningful.
struct Value {
  enum class Kind : uint8_t { kObject, kArray, kString, kInteger };

  Kind kind = Kind::kObject;
  std::string string;          // kString: UTF-8, escapes decoded
  uint64_t magnitude = 0;      // kInteger: the absolute value
  bool negative = false;       // kInteger: below zero (never for 0)
  std::vector<Value> items;    // kArray
  std::vector<Member> members; // kObject, in file order, keys unique

  static Value object(std::vector<Member> members = {});
  static Value array(std::vector<Value> items = {});
  static Value str(std::string s);
  static Value uint(uint64_t v);

  /// The member named `key` of an object, or null.
  const Value* find(absl::string_view key) const;
  /// The value of a non-negative integer, or nullopt for any other value.
  std::optional<uint64_t> as_uint() const;
  /// "an object", "an array", "a string", "an integer": for messages.
  const char* kind_name() const;
};

struct Member {
  std::string key;
  Value value;
};

/// Parses `text` as one value of the subset, surrounded by optional
/// whitespace. An error is InvalidArgument with "at byte N: <problem>".
absl::StatusOr<Value> parse(absl::string_view text);

/// Compact JSON text (no whitespace), members in their order. Strings must
/// be valid UTF-8 (check with is_utf8); '"', '\\' and control characters
/// are escaped, everything else is written as is.
std::string serialize(const Value& value);

/// Whether `s` is well-formed UTF-8: no overlong forms, no surrogates,
/// nothing above U+10FFFF.
bool is_utf8(absl::string_view s);

} // namespace mstep::json
