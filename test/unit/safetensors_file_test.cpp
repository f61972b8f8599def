// SafetensorsFile (mstep/runtime/SafetensorsFile.h): the host-bytes codec
// with no Tensor. Round trips of every dtype, the exact bytes it writes,
// and, for untrusted files, one clear error per kind of damage (bad
// header, bad entry, offsets that overlap, leave gaps or run out of the
// file, every truncation), naming the file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "mstep/runtime/SafetensorsFile.h"
#include "test/unit/SafetensorsTestDir.h"

namespace mstep {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;

/// `n` bytes of pattern, so a misplaced byte shows.
std::string pattern(size_t n, int seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(i * 7 + seed * 31 + 1);
  return s;
}

HostTensor host(DType dtype, Shape shape, int seed) {
  HostTensor t{dtype, shape, ""};
  t.bytes = pattern(static_cast<size_t>(t.type().bytes()), seed);
  if (dtype == DType::boolean)
    for (char& b : t.bytes) b = static_cast<char>(b & 1);
  return t;
}

/// A fresh directory per test.
class SafetensorsFileTest : public testing::SafetensorsTestDir {
 protected:
  SafetensorsFileTest() : SafetensorsTestDir("mstep_safetensors_file_") {}

  std::string read_all(const std::string& file) {
    std::ifstream in(file, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
};

TEST_F(SafetensorsFileTest, RoundTripsEveryDtypeAndMetadata) {
  const std::map<std::string, HostTensor> tensors = {
      {"f32", host(DType::f32, {2, 3}, 1)},   {"f64", host(DType::f64, {3}, 2)},
      {"bf16", host(DType::bf16, {5}, 3)},    {"f16", host(DType::f16, {1, 1, 2}, 4)},
      {"i32", host(DType::i32, {4}, 5)},      {"i64", host(DType::i64, {2, 1}, 6)},
      {"bool", host(DType::boolean, {7}, 7)}, {"scalar", host(DType::f32, {}, 8)},
      {"empty", host(DType::i64, {0, 5}, 9)}, {"ü 😀 \"q\"", host(DType::f32, {1}, 10)},
  };
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"}, {"note", "héllo\n\"😀\""}, {"", ""}};
  ASSERT_TRUE(write_safetensors(path("all.safetensors"), tensors, metadata).ok());

  absl::StatusOr<SafetensorsContents> back = read_safetensors(path("all.safetensors"));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->tensors, tensors);
  EXPECT_EQ(back->metadata, metadata);
  EXPECT_EQ(*read_safetensors_metadata(path("all.safetensors")), metadata);
  // No temporary file is left beside it.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(SafetensorsFileTest, WritesTheLayoutItAlwaysHas) {
  // Metadata first, tensors in name order with contiguous offsets, compact
  // JSON padded with spaces to 8 bytes: the bytes llvm::json produced.
  ASSERT_TRUE(write_safetensors(path("x.safetensors"),
                                {{"b", HostTensor{DType::i32, {1}, std::string("\1\0\0\0", 4)}},
                                 {"a", HostTensor{DType::boolean, {2}, std::string("\1\0", 2)}}},
                                {{"k", "v"}})
                  .ok());
  const std::string header =
      R"({"__metadata__":{"k":"v"},"a":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]},)"
      R"("b":{"dtype":"I32","shape":[1],"data_offsets":[2,6]}})";
  std::string padded = header + std::string((8 - header.size() % 8) % 8, ' ');
  const uint64_t n = padded.size();
  const std::string want = std::string(reinterpret_cast<const char*>(&n), 8) + padded +
                           std::string("\1\0", 2) + std::string("\1\0\0\0", 4);
  EXPECT_EQ(read_all(path("x.safetensors")), want);

  // No metadata: no __metadata__ key. No tensors: an empty object.
  ASSERT_TRUE(write_safetensors(path("empty.safetensors"), {}).ok());
  EXPECT_EQ(read_all(path("empty.safetensors")), std::string("\x08\0\0\0\0\0\0\0{}      ", 16));
  absl::StatusOr<SafetensorsContents> empty = read_safetensors(path("empty.safetensors"));
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->tensors.empty() && empty->metadata.empty());
}

TEST_F(SafetensorsFileTest, DecodesEscapedNamesAndNormalizesBools) {
  // Names as json.dumps writes them (\u escapes, a surrogate pair); BOOL
  // bytes other than 0 and 1 read as 1; whitespace and key order are free.
  const std::string header =
      "{ \"caf\\u00e9\" : {\"shape\": [2], \"data_offsets\": [0, 2], \"dtype\": \"BOOL\", "
      "\"extra\": [\"ignored\"]},\n \"\\ud83d\\ude00\": {\"dtype\": \"I32\", \"shape\": [], "
      "\"data_offsets\": [2, 6]}}   ";
  absl::StatusOr<SafetensorsContents> file =
      read_safetensors(write_raw("names", header, std::string("\0\x07\x05\0\0\0", 6)));
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ(file->tensors.size(), 2u);
  EXPECT_EQ(file->tensors.at("café").bytes, std::string("\0\1", 2));
  EXPECT_EQ(file->tensors.at("😀").type(), (TensorType{Shape{}, DType::i32}));
  EXPECT_EQ(file->tensors.at("😀").bytes, std::string("\5\0\0\0", 4));
}

TEST_F(SafetensorsFileTest, DamagedFilesGiveOneClearErrorEach) {
  const std::string f32x2 = R"({"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::string data8(8, '\0');
  // A tensor "t" whose entry is `entry`, with `data`.
  const auto one = [&](const std::string& name, const std::string& entry, const std::string& data) {
    return write_raw(name, "{\"t\":" + entry + "}", data);
  };
  struct Bad {
    std::string name, file, problem;
    absl::StatusCode code = absl::StatusCode::kDataLoss;
  };
  std::vector<Bad> cases = {
      {"missing", path("does_not_exist"), "cannot open the file (No such file or directory)",
       absl::StatusCode::kNotFound},
      {"directory", dir_.string(), "not a regular file", absl::StatusCode::kInvalidArgument},
      {"no_header", write_raw("no_header", "", "", 0),
       "the header is not valid JSON: at byte 0: expected a value"},
      {"huge_header", write_raw("huge_header", "{}", "", 1ull << 40),
       "the header length 1099511627776 exceeds the 104857600-byte limit"},
      {"max_header", write_raw("max_header", "{}", "", ~uint64_t{0}), "exceeds the"},
      {"long_header", write_raw("long_header", "{}", "", 1000),
       "the header length 1000 runs past the end of the file (10 bytes)"},
      {"json", write_raw("json", "{\"t\": [1, 2", ""),
       "the header is not valid JSON: at byte 11: expected ',' or ']'"},
      {"json_float",
       one("json_float", R"({"dtype":"F32","shape":[2.0],"data_offsets":[0,8]})", data8),
       "not valid JSON: at byte 29: a number with a fraction or exponent"},
      {"json_utf8", write_raw("json_utf8", "{\"\xC3\x28\":{}}", ""),
       "not valid JSON: at byte 2: invalid UTF-8 (byte 0xC3)"},
      {"duplicate", write_raw("duplicate", "{\"t\":" + f32x2 + ",\"t\":" + f32x2 + "}", data8),
       "duplicate key \"t\""},
      {"not_object", write_raw("not_object", "[1, 2]", ""),
       "the header is an array, not a JSON object"},
      {"entry", one("entry", "[]", ""), "tensor 't' is an array, not a JSON object"},
      {"no_dtype", one("no_dtype", R"({"shape":[2],"data_offsets":[0,8]})", data8),
       "tensor 't' has no dtype string"},
      {"dtype_int", one("dtype_int", R"({"dtype":1,"shape":[2],"data_offsets":[0,8]})", data8),
       "tensor 't' has no dtype string"},
      {"dtype",
       one("dtype", R"({"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,2]})",
           std::string(2, '\0')),
       "tensor 't' has dtype 'F8_E4M3', which mstep does not support",
       absl::StatusCode::kInvalidArgument},
      {"no_shape", one("no_shape", R"({"dtype":"F32","data_offsets":[0,8]})", data8),
       "tensor 't' has no shape array"},
      {"shape_string",
       one("shape_string", R"({"dtype":"F32","shape":"2","data_offsets":[0,8]})", data8),
       "tensor 't' has no shape array"},
      {"shape_negative",
       one("shape_negative", R"({"dtype":"F32","shape":[-2],"data_offsets":[0,8]})", data8),
       "tensor 't' has a shape that is not a list of non-negative sizes"},
      {"shape_nested",
       one("shape_nested", R"({"dtype":"F32","shape":[[2]],"data_offsets":[0,8]})", data8),
       "not a list of non-negative sizes"},
      {"shape_int64",
       one("shape_int64", R"({"dtype":"BOOL","shape":[9223372036854775808],"data_offsets":[0,8]})",
           data8),
       "not a list of non-negative sizes"},
      {"shape_overflow",
       one("shape_overflow",
           R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]})", data8),
       "tensor 't' has shape [4294967296, 4294967296], more elements than 64 bits count"},
      {"shape_overflow_empty",
       one("shape_overflow_empty",
           R"({"dtype":"F32","shape":[4294967296,0,4294967296],"data_offsets":[0,0]})", ""),
       "more elements than 64 bits count"},
      {"no_offsets", one("no_offsets", R"({"dtype":"F32","shape":[2]})", data8),
       "tensor 't' has no data_offsets pair of non-negative integers"},
      {"three_offsets",
       one("three_offsets", R"({"dtype":"F32","shape":[2],"data_offsets":[0,8,8]})", data8),
       "no data_offsets pair"},
      {"negative_offset",
       one("negative_offset", R"({"dtype":"F32","shape":[2],"data_offsets":[-8,0]})", data8),
       "no data_offsets pair"},
      {"offsets", one("offsets", R"({"dtype":"F32","shape":[2],"data_offsets":[0,64]})", data8),
       "tensor 't' has data_offsets [0, 64] outside the data section of 8 bytes"},
      {"huge_offsets",
       one("huge_offsets",
           R"({"dtype":"F32","shape":[2],"data_offsets":[18446744073709551615,18446744073709551615]})",
           data8),
       "outside the data section of 8 bytes"},
      {"reversed", one("reversed", R"({"dtype":"F32","shape":[2],"data_offsets":[8,0]})", data8),
       "outside the data section"},
      {"size", one("size", R"({"dtype":"F32","shape":[2],"data_offsets":[0,4]})", data8),
       "tensor 't' (f32[2]) needs 8 bytes but its data_offsets [0, 4] span 4"},
      {"truncated", one("truncated", f32x2, data8.substr(0, 5)),
       "outside the data section of 5 bytes"},
      {"overlap",
       write_raw("overlap",
                 R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                 R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                 std::string(12, '\0')),
       "tensor 'b' (data_offsets [4, 12]) overlaps tensor 'a' (data_offsets [0, 8])"},
      {"same_bytes",
       write_raw("same_bytes",
                 R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                 R"("b":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})",
                 data8),
       "tensor 'b' (data_offsets [0, 8]) overlaps tensor 'a'"},
      {"gap",
       write_raw("gap",
                 R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                 R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                 std::string(12, '\0')),
       "bytes [4, 8) of the data section belong to no tensor"},
      {"trailing", one("trailing", f32x2, std::string(9, '\0')),
       "bytes [8, 9) at the end of the data section belong to no tensor"},
      {"metadata", write_raw("metadata", R"({"__metadata__":{"n":3}})", ""),
       "__metadata__ entry 'n' is not a string"},
      {"metadata_null", write_raw("metadata_null", R"({"__metadata__":null})", ""),
       "'null' is not allowed"},
      {"metadata_array", write_raw("metadata_array", R"({"__metadata__":["a"]})", ""),
       "__metadata__ is an array, not a JSON object"},
  };
  {
    std::ofstream tiny(path("tiny"), std::ios::binary);
    tiny << "abc";
  }
  cases.push_back({"tiny", path("tiny"), "the file has 3 bytes, fewer than the 8-byte header"});
  // A FIFO with no writer: refused at once, not waited on.
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  cases.push_back({"fifo", path("fifo"), "not a regular file", absl::StatusCode::kInvalidArgument});
  for (const Bad& c : cases) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<SafetensorsContents> file = read_safetensors(c.file);
    ASSERT_FALSE(file.ok());
    EXPECT_EQ(file.status().code(), c.code);
    EXPECT_THAT(std::string(file.status().message()),
                StartsWith("safetensors file '" + c.file + "': "));
    EXPECT_THAT(std::string(file.status().message()), HasSubstr(c.problem));
    // The header-only reader checks the same.
    EXPECT_EQ(read_safetensors_metadata(c.file).status(), file.status());
  }
}

TEST_F(SafetensorsFileTest, EveryTruncationOfAGoodFileIsAnError) {
  ASSERT_TRUE(write_safetensors(path("good.safetensors"),
                                {{"a", host(DType::f32, {3}, 1)}, {"b", host(DType::i64, {2}, 2)}},
                                {{"format", "pt"}})
                  .ok());
  const std::string good = read_all(path("good.safetensors"));
  for (size_t n = 0; n < good.size(); ++n) {
    SCOPED_TRACE(n);
    const std::string cut = path("cut");
    std::ofstream(cut, std::ios::binary | std::ios::trunc) << good.substr(0, n);
    absl::StatusOr<SafetensorsContents> file = read_safetensors(cut);
    ASSERT_FALSE(file.ok());
    EXPECT_EQ(file.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(std::string(file.status().message()), HasSubstr("write it again"));
  }
  EXPECT_TRUE(read_safetensors(path("good.safetensors")).ok());
}

TEST_F(SafetensorsFileTest, WriteErrorsNameTheFileAndKeepTheOldOne) {
  const std::string file = path("x.safetensors");
  ASSERT_TRUE(write_safetensors(file, {{"old", host(DType::f32, {1}, 1)}}).ok());
  const std::string old = read_all(file);
  struct Bad {
    std::string name;
    std::map<std::string, HostTensor> tensors;
    std::map<std::string, std::string> metadata;
    std::string problem;
  };
  const std::vector<Bad> cases = {
      {"empty_name", {{"", host(DType::f32, {1}, 1)}}, {}, "invalid tensor name ''"},
      {"metadata_name",
       {{"__metadata__", host(DType::f32, {1}, 1)}},
       {},
       "invalid tensor name '__metadata__'"},
      {"utf8_name", {{"a\xFF", host(DType::f32, {1}, 1)}}, {}, "invalid tensor name"},
      {"utf8_key", {}, {{"k\xC0\x80", "v"}}, "metadata entry 'k\xC0\x80' is not UTF-8"},
      {"utf8_value", {}, {{"k", "\xED\xA0\x80"}}, "metadata entry 'k' is not UTF-8"},
      {"short_bytes",
       {{"t", HostTensor{DType::f32, {2}, "abc"}}},
       {},
       "tensor 't' (f32[2]) has 3 bytes of data, which does not match"},
      {"negative_dim",
       {{"t", HostTensor{DType::f32, Shape{-1}, ""}}},
       {},
       "tensor 't' (f32[-1]) has 0 bytes"},
  };
  for (const Bad& c : cases) {
    SCOPED_TRACE(c.name);
    absl::Status st = write_safetensors(file, c.tensors, c.metadata);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(st.message()), StartsWith("safetensors file '" + file + "': "));
    EXPECT_THAT(std::string(st.message()), HasSubstr(c.problem));
    EXPECT_EQ(read_all(file), old);
  }
  // A directory that does not exist, and one this user cannot write to.
  absl::Status st = write_safetensors(path("no_dir/x.safetensors"), {});
  EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(st.message()), HasSubstr("cannot create"));
  EXPECT_THAT(std::string(st.message()), HasSubstr("No such file or directory"));
  // Renaming onto a directory fails after the data is written: the
  // temporary file is removed.
  fs::create_directories(path("a_directory/inside"));
  st = write_safetensors(path("a_directory"), {{"t", host(DType::f32, {1}, 1)}});
  EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(st.message()), HasSubstr("cannot replace the file"));
  EXPECT_EQ(read_all(file), old);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 2)
      << "a temporary file was left behind";
}

TEST(SafetensorsDTypeCodeTest, EveryDTypeHasACodeThatMapsBack) {
  for (int i = 0; i < kNumDTypes; ++i) {
    const DType dtype = static_cast<DType>(i);
    EXPECT_EQ(dtype_of_safetensors_code(safetensors_dtype_code(dtype)), dtype);
  }
  EXPECT_EQ(safetensors_dtype_code(DType::boolean), "BOOL");
  EXPECT_EQ(dtype_of_safetensors_code("f32"), std::nullopt); // codes are upper case
  EXPECT_EQ(dtype_of_safetensors_code("U8"), std::nullopt);
}

} // namespace
} // namespace mstep
