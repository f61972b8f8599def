// StrictJson: a recursive-descent reader and a compact writer for the
// JSON subset of safetensors headers (objects, arrays, strings, integers).
#include "lib/runtime/StrictJson.h"

#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace mstep::json {

namespace {

/// The length of the well-formed UTF-8 sequence starting at s[i], or 0
/// when there is none (RFC 3629, table 3-7 of the Unicode standard).
size_t utf8_sequence_length(absl::string_view s, size_t i) {
  const auto byte = [&](size_t k) -> unsigned {
    return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0x100;
  };
  const auto in = [](unsigned b, unsigned lo, unsigned hi) { return b >= lo && b <= hi; };
  const unsigned b0 = byte(0);
  if (b0 < 0x80) return 1;
  if (in(b0, 0xC2, 0xDF)) return in(byte(1), 0x80, 0xBF) ? 2 : 0;
  if (in(b0, 0xE0, 0xEF)) {
    const unsigned lo = b0 == 0xE0 ? 0xA0 : 0x80; // no overlong forms
    const unsigned hi = b0 == 0xED ? 0x9F : 0xBF; // no surrogates
    return in(byte(1), lo, hi) && in(byte(2), 0x80, 0xBF) ? 3 : 0;
  }
  if (in(b0, 0xF0, 0xF4)) {
    const unsigned lo = b0 == 0xF0 ? 0x90 : 0x80; // no overlong forms
    const unsigned hi = b0 == 0xF4 ? 0x8F : 0xBF; // nothing above U+10FFFF
    return in(byte(1), lo, hi) && in(byte(2), 0x80, 0xBF) && in(byte(3), 0x80, 0xBF) ? 4 : 0;
  }
  return 0;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

class Parser {
public:
  explicit Parser(absl::string_view text) : text_(text) {}

  absl::StatusOr<Value> parse_document() {
    Value value;
    skip_whitespace();
    if (!parse_value(value, 0)) return error_;
    skip_whitespace();
    if (pos_ != text_.size() &&
        !fail(absl::StrCat("unexpected ", describe_here(), " after the end of the JSON value")))
      return error_;
    return value;
  }

private:
  /// Records the first error (at the current position); returns false.
  bool fail(absl::string_view problem) { return fail_at(pos_, problem); }
  bool fail_at(size_t pos, absl::string_view problem) {
    error_ = absl::InvalidArgumentError(absl::StrCat("at byte ", pos, ": ", problem));
    return false;
  }

  /// The character at pos_ for a message: 'x', byte 0x07, or the end.
  std::string describe_here() const {
    if (pos_ >= text_.size()) return "end of header";
    const unsigned char c = static_cast<unsigned char>(text_[pos_]);
    if (c >= 0x20 && c < 0x7F) return absl::StrCat("'", std::string(1, static_cast<char>(c)), "'");
    return absl::StrFormat("byte 0x%02X", c);
  }

  void skip_whitespace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }

  bool at(char c) const { return pos_ < text_.size() && text_[pos_] == c; }

  bool parse_value(Value& out, int depth) {
    if (pos_ >= text_.size()) return fail("expected a value, got the end of the header");
    const char c = text_[pos_];
    if (c == '{') return parse_object(out, depth + 1);
    if (c == '[') return parse_array(out, depth + 1);
    if (c == '"') {
      out.kind = Value::Kind::kString;
      return parse_string(out.string);
    }
    if (c == '-' || (c >= '0' && c <= '9')) return parse_integer(out);
    for (absl::string_view literal : {"true", "false", "null"})
      if (text_.substr(pos_, literal.size()) == literal)
        return fail(absl::StrCat("'", literal,
                                 "' is not allowed: a safetensors header holds only objects, "
                                 "arrays, strings and integers"));
    return fail(absl::StrCat("expected a value, got ", describe_here()));
  }

  bool enter(int depth) {
    return depth <= kMaxDepth ||
           fail(absl::StrCat("arrays and objects nested deeper than ", kMaxDepth, " levels"));
  }

  bool parse_object(Value& out, int depth) {
    if (!enter(depth)) return false;
    out = Value::object();
    ++pos_; // '{'
    skip_whitespace();
    if (at('}')) return ++pos_, true;
    std::unordered_set<std::string> keys;
    while (true) {
      skip_whitespace();
      const size_t key_pos = pos_;
      if (!at('"')) return fail(absl::StrCat("expected a string key, got ", describe_here()));
      Member member;
      if (!parse_string(member.key)) return false;
      if (!keys.insert(member.key).second)
        return fail_at(key_pos, absl::StrCat("duplicate key \"", member.key, "\""));
      skip_whitespace();
      if (!at(':')) return fail(absl::StrCat("expected ':' after a key, got ", describe_here()));
      ++pos_;
      skip_whitespace();
      if (!parse_value(member.value, depth)) return false;
      out.members.push_back(std::move(member));
      skip_whitespace();
      if (at(',')) {
        ++pos_;
        continue;
      }
      if (at('}')) return ++pos_, true;
      return fail(absl::StrCat("expected ',' or '}' in an object, got ", describe_here()));
    }
  }

  bool parse_array(Value& out, int depth) {
    if (!enter(depth)) return false;
    out = Value::array();
    ++pos_; // '['
    skip_whitespace();
    if (at(']')) return ++pos_, true;
    while (true) {
      skip_whitespace();
      Value item;
      if (!parse_value(item, depth)) return false;
      out.items.push_back(std::move(item));
      skip_whitespace();
      if (at(',')) {
        ++pos_;
        continue;
      }
      if (at(']')) return ++pos_, true;
      return fail(absl::StrCat("expected ',' or ']' in an array, got ", describe_here()));
    }
  }

  /// Four hex digits at pos_ (after "\u").
  bool parse_hex4(uint32_t& out) {
    out = 0;
    for (int i = 0; i < 4; ++i, ++pos_) {
      if (pos_ >= text_.size()) return fail("\\u escape cut short by the end of the header");
      const char c = text_[pos_];
      int digit = c >= '0' && c <= '9'   ? c - '0'
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                         : -1;
      if (digit < 0)
        return fail(absl::StrCat("\\u escape needs four hex digits, got ", describe_here()));
      out = out * 16 + static_cast<uint32_t>(digit);
    }
    return true;
  }

  /// "\uXXXX" (pos_ after the backslash), a surrogate pair taken whole.
  bool parse_unicode_escape(std::string& out) {
    const size_t start = pos_ - 1;
    ++pos_; // 'u'
    uint32_t cp = 0;
    if (!parse_hex4(cp)) return false;
    if (cp >= 0xDC00 && cp <= 0xDFFF)
      return fail_at(start, absl::StrFormat("\\u%04X is a low surrogate without a high one", cp));
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      if (text_.substr(pos_, 2) != "\\u")
        return fail_at(start, absl::StrFormat(
                                  "\\u%04X is a high surrogate not followed by a \\u low one", cp));
      pos_ += 2;
      uint32_t low = 0;
      if (!parse_hex4(low)) return false;
      if (low < 0xDC00 || low > 0xDFFF)
        return fail_at(
            start, absl::StrFormat("\\u%04X is a high surrogate followed by \\u%04X, not a low one",
                                   cp, low));
      cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    }
    append_utf8(out, cp);
    return true;
  }

  bool parse_string(std::string& out) {
    const size_t start = pos_;
    ++pos_; // '"'
    while (true) {
      if (pos_ >= text_.size())
        return fail_at(start, "a string is not closed before the end of the header");
      const unsigned char c = static_cast<unsigned char>(text_[pos_]);
      if (c == '"') return ++pos_, true;
      if (c < 0x20)
        return fail(
            absl::StrFormat("control character 0x%02X in a string (JSON needs it escaped)", c));
      if (c == '\\') {
        ++pos_;
        if (pos_ >= text_.size()) return fail("escape cut short by the end of the header");
        const char e = text_[pos_];
        if (e == 'u') {
          if (!parse_unicode_escape(out)) return false;
          continue;
        }
        const char* decoded = nullptr;
        switch (e) {
        case '"':
          decoded = "\"";
          break;
        case '\\':
          decoded = "\\";
          break;
        case '/':
          decoded = "/";
          break;
        case 'b':
          decoded = "\b";
          break;
        case 'f':
          decoded = "\f";
          break;
        case 'n':
          decoded = "\n";
          break;
        case 'r':
          decoded = "\r";
          break;
        case 't':
          decoded = "\t";
          break;
        default:
          return fail(absl::StrCat("invalid escape \\", describe_here(), " in a string"));
        }
        out += decoded;
        ++pos_;
        continue;
      }
      const size_t n = utf8_sequence_length(text_, pos_);
      if (n == 0) return fail(absl::StrFormat("invalid UTF-8 (byte 0x%02X) in a string", c));
      out.append(text_.data() + pos_, n);
      pos_ += n;
    }
  }

  bool parse_integer(Value& out) {
    const size_t start = pos_;
    out.kind = Value::Kind::kInteger;
    const bool minus = at('-');
    if (minus) ++pos_;
    if (pos_ >= text_.size() || text_[pos_] < '0' || text_[pos_] > '9')
      return fail(absl::StrCat("expected a digit after '-', got ", describe_here()));
    if (text_[pos_] == '0' && pos_ + 1 < text_.size() && text_[pos_ + 1] >= '0' &&
        text_[pos_ + 1] <= '9')
      return fail_at(start, "a number with a leading zero is not JSON");
    uint64_t value = 0;
    for (; pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9'; ++pos_) {
      if (__builtin_mul_overflow(value, 10, &value) ||
          __builtin_add_overflow(value, static_cast<uint64_t>(text_[pos_] - '0'), &value))
        return fail_at(start, "an integer above 2^64 - 1");
    }
    if (at('.') || at('e') || at('E'))
      return fail_at(start,
                     "a number with a fraction or exponent: a safetensors header holds integers");
    out.magnitude = value;
    out.negative = minus && value != 0;
    return true;
  }

  absl::string_view text_;
  size_t pos_ = 0;
  absl::Status error_;
};

/// Appends `s` as a JSON string literal. Control characters are escaped
/// as llvm::json wrote them (\t \n \r, else \u00XX), so headers mstep
/// writes keep their bytes.
void append_quoted(std::string& out, absl::string_view s) {
  out += '"';
  for (const char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c >= 0x20) {
      out += ch;
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out += absl::StrFormat("\\u%04x", c);
    }
  }
  out += '"';
}

void serialize_to(std::string& out, const Value& v) {
  switch (v.kind) {
  case Value::Kind::kString:
    append_quoted(out, v.string);
    return;
  case Value::Kind::kInteger:
    if (v.negative) out += '-';
    absl::StrAppend(&out, v.magnitude);
    return;
  case Value::Kind::kArray:
    out += '[';
    for (size_t i = 0; i < v.items.size(); ++i) {
      if (i > 0) out += ',';
      serialize_to(out, v.items[i]);
    }
    out += ']';
    return;
  case Value::Kind::kObject:
    out += '{';
    for (size_t i = 0; i < v.members.size(); ++i) {
      if (i > 0) out += ',';
      append_quoted(out, v.members[i].key);
      out += ':';
      serialize_to(out, v.members[i].value);
    }
    out += '}';
    return;
  }
}

} // namespace

Value Value::object(std::vector<Member> members) {
  Value v;
  v.kind = Kind::kObject;
  v.members = std::move(members);
  return v;
}

Value Value::array(std::vector<Value> items) {
  Value v;
  v.kind = Kind::kArray;
  v.items = std::move(items);
  return v;
}

Value Value::str(std::string s) {
  Value v;
  v.kind = Kind::kString;
  v.string = std::move(s);
  return v;
}

Value Value::uint(uint64_t value) {
  Value v;
  v.kind = Kind::kInteger;
  v.magnitude = value;
  return v;
}

const Value* Value::find(absl::string_view key) const {
  if (kind != Kind::kObject) return nullptr;
  for (const Member& m : members)
    if (m.key == key) return &m.value;
  return nullptr;
}

std::optional<uint64_t> Value::as_uint() const {
  if (kind != Kind::kInteger || negative) return std::nullopt;
  return magnitude;
}

const char* Value::kind_name() const {
  switch (kind) {
  case Kind::kObject:
    return "an object";
  case Kind::kArray:
    return "an array";
  case Kind::kString:
    return "a string";
  case Kind::kInteger:
    return "an integer";
  }
  return "a value";
}

absl::StatusOr<Value> parse(absl::string_view text) { return Parser(text).parse_document(); }

std::string serialize(const Value& value) {
  std::string out;
  serialize_to(out, value);
  return out;
}

bool is_utf8(absl::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_sequence_length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

} // namespace mstep::json
