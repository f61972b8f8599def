// StrictJson (lib/runtime/StrictJson.h): the JSON subset of safetensors
// headers. What it accepts and how it decodes escapes, what it writes, and
// a clear error with a byte offset for everything else, including every
// truncation and single-byte change of a real header.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "lib/runtime/StrictJson.h"

namespace mstep::json {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr char kHeader[] =
    R"({"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})";

TEST(StrictJsonTest, ParsesTheSubsetKeepingKeyOrder) {
  absl::StatusOr<Value> v = parse(" \t\r\n{\"b\": [1, -2, 0, 18446744073709551615], \"a\": "
                                  "{\"s\": \"x\"}, \"e\": {}, \"f\": []}\n  ");
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_EQ(v->kind, Value::Kind::kObject);
  ASSERT_EQ(v->members.size(), 4u);
  EXPECT_EQ(v->members[0].key, "b"); // file order, not sorted
  EXPECT_EQ(v->members[1].key, "a");
  const Value& b = *v->find("b");
  ASSERT_EQ(b.items.size(), 4u);
  EXPECT_EQ(b.items[0].as_uint(), 1u);
  EXPECT_TRUE(b.items[1].negative);
  EXPECT_EQ(b.items[1].magnitude, 2u);
  EXPECT_EQ(b.items[1].as_uint(), std::nullopt); // negative
  EXPECT_EQ(b.items[2].as_uint(), 0u);
  EXPECT_EQ(b.items[3].as_uint(), UINT64_MAX);
  EXPECT_EQ(v->find("a")->find("s")->string, "x");
  EXPECT_EQ(v->find("a")->find("s")->as_uint(), std::nullopt); // not an integer
  EXPECT_EQ(v->find("missing"), nullptr);
  EXPECT_FALSE(parse("-0")->negative);
}

TEST(StrictJsonTest, DecodesEscapesToUtf8) {
  absl::StatusOr<Value> v =
      parse(R"("q\" b\\ s\/ \b\f\n\r\t \u0041\u00e9\u20AC\uD83D\uDE00 \u0000end")");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->string, std::string("q\" b\\ s/ \b\f\n\r\t Aé€😀 ") + '\0' + "end");
  // Raw UTF-8 passes through unchanged.
  EXPECT_EQ(parse("\"caf\xC3\xA9 \xF0\x9F\x98\x80\"")->string, "café 😀");
}

TEST(StrictJsonTest, SerializesCompactlyAndRoundTrips) {
  Value v = Value::object(
      {{"__metadata__", Value::object({{"k", Value::str("v")}})},
       {"n\"\\\t\n\r\x01\x1f\x7f é", Value::array({Value::uint(0), Value::uint(UINT64_MAX)})}});
  // The escapes llvm::json wrote, so headers mstep writes keep their bytes.
  const std::string text = serialize(v);
  EXPECT_EQ(text, "{\"__metadata__\":{\"k\":\"v\"},\"n\\\"\\\\\\t\\n\\r\\u0001\\u001f\x7f é\":[0,"
                  "18446744073709551615]}");
  absl::StatusOr<Value> back = parse(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(serialize(*back), text);
  EXPECT_EQ(serialize(*parse(kHeader)), kHeader);
}

TEST(StrictJsonTest, RejectsEverythingElseWithTheByteAndTheProblem) {
  struct Bad {
    std::string text, problem;
  };
  const std::vector<Bad> cases = {
      {"", "at byte 0: expected a value, got the end of the header"},
      {"   ", "at byte 3: expected a value"},
      {"{", "at byte 1: expected a string key, got end of header"},
      {"{\"a\":1,}", "at byte 7: expected a string key, got '}'"},
      {"{\"a\" 1}", "at byte 5: expected ':' after a key, got '1'"},
      {"{\"a\":1 \"b\":2}", "expected ',' or '}' in an object, got '\"'"},
      {"{1:2}", "expected a string key, got '1'"},
      {"[1 2]", "at byte 3: expected ',' or ']' in an array, got '2'"},
      {"[1,]", "at byte 3: expected a value, got ']'"},
      {"[1, x]", "at byte 4: expected a value, got 'x'"},
      {"true", "'true' is not allowed"},
      {"[false]", "'false' is not allowed"},
      {"{\"a\":null}", "at byte 5: 'null' is not allowed"},
      {"1.5", "fraction or exponent"},
      {"[2e3]", "at byte 1: a number with a fraction or exponent"},
      {"1E3", "fraction or exponent"},
      {"01", "leading zero"},
      {"-", "expected a digit after '-', got end of header"},
      {"-x", "expected a digit after '-', got 'x'"},
      {"+1", "expected a value, got '+'"},
      {"18446744073709551616", "an integer above 2^64 - 1"},
      {"\"abc", "at byte 0: a string is not closed"},
      {"\"a\\x\"", "at byte 3: invalid escape \\'x'"},
      {"\"a\\", "escape cut short"},
      {"\"\\u12\"", "needs four hex digits, got '\"'"},
      {"\"\\u12", "\\u escape cut short"},
      {"\"\\uDC00\"", "\\uDC00 is a low surrogate without a high one"},
      {"\"\\uD800\"", "\\uD800 is a high surrogate not followed by a \\u low one"},
      {"\"\\uD800\\u0041\"", "\\uD800 is a high surrogate followed by \\u0041, not a low one"},
      {"\"a\nb\"", "at byte 2: control character 0x0A in a string"},
      {"\"\x01\"", "control character 0x01"},
      {"\"\xFF\"", "at byte 1: invalid UTF-8 (byte 0xFF)"},
      {"\"\xC0\x80\"", "invalid UTF-8 (byte 0xC0)"},         // overlong NUL
      {"\"\xE0\x80\xAF\"", "invalid UTF-8 (byte 0xE0)"},     // overlong '/'
      {"\"\xED\xA0\x80\"", "invalid UTF-8 (byte 0xED)"},     // a surrogate
      {"\"\xF4\x90\x80\x80\"", "invalid UTF-8 (byte 0xF4)"}, // above U+10FFFF
      {"\"\xE2\x82\"", "invalid UTF-8 (byte 0xE2)"},         // cut short
      {"\"\x80\"", "invalid UTF-8 (byte 0x80)"},             // lone continuation
      {"{\"a\":1,\"b\":2,\"a\":3}", "at byte 13: duplicate key \"a\""},
      {"[1] x", "at byte 4: unexpected 'x' after the end of the JSON value"},
      {"{} {}", "after the end"},
      {std::string("{}\0", 3), "unexpected byte 0x00 after the end"},
  };
  for (const Bad& c : cases) {
    SCOPED_TRACE(c.text);
    absl::StatusOr<Value> v = parse(c.text);
    ASSERT_FALSE(v.ok());
    EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(v.status().message()), StartsWith("at byte "));
    EXPECT_THAT(std::string(v.status().message()), HasSubstr(c.problem));
  }
}

TEST(StrictJsonTest, NestingIsBoundedSoNoHeaderExhaustsTheStack) {
  const auto nested = [](int depth) { return std::string(depth, '[') + std::string(depth, ']'); };
  EXPECT_TRUE(parse(nested(kMaxDepth)).ok());
  EXPECT_THAT(std::string(parse(nested(kMaxDepth + 1)).status().message()),
              HasSubstr("nested deeper than 32 levels"));
  EXPECT_THAT(std::string(parse(std::string(1 << 20, '[')).status().message()),
              HasSubstr("nested deeper"));
  EXPECT_THAT(std::string(parse(std::string(1 << 20, '{')).status().message()),
              HasSubstr("expected a string key"));
}

TEST(StrictJsonTest, EveryTruncationAndByteChangeOfAHeaderIsAnErrorOrParses) {
  const std::string header = kHeader;
  // Every proper prefix is incomplete JSON.
  for (size_t n = 0; n < header.size(); ++n) {
    SCOPED_TRACE(n);
    absl::StatusOr<Value> v = parse(header.substr(0, n));
    EXPECT_FALSE(v.ok());
    EXPECT_THAT(std::string(v.status().message()), StartsWith("at byte "));
  }
  // Each byte replaced by a few troublesome ones: a clean result either way
  // (ASan/UBSan builds would flag a bad read), and never an error without
  // a position.
  for (size_t i = 0; i < header.size(); ++i) {
    for (char c : {'\0', '"', '\\', '{', '}', '[', ']', ',', ':', '-', '9', 'x', '\x80', '\xFF'}) {
      std::string changed = header;
      changed[i] = c;
      absl::StatusOr<Value> v = parse(changed);
      if (!v.ok()) {
        EXPECT_THAT(std::string(v.status().message()), StartsWith("at byte ")) << changed;
      }
    }
  }
}

TEST(StrictJsonTest, Utf8Validation) {
  EXPECT_TRUE(is_utf8(""));
  EXPECT_TRUE(is_utf8("ascii"));
  EXPECT_TRUE(is_utf8("é € 😀 \xF4\x8F\xBF\xBF")); // up to U+10FFFF
  EXPECT_TRUE(is_utf8(std::string("\0", 1)));
  for (const char* bad : {"\xFF", "\xC0\xAF", "\xC2", "\xED\xBF\xBF", "\xF0\x8F\xBF\xBF",
                          "\xF5\x80\x80\x80", "a\x80"}) {
    SCOPED_TRACE(bad);
    EXPECT_FALSE(is_utf8(bad));
  }
}

} // namespace
} // namespace mstep::json
