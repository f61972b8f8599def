// The examples' MNIST reader (examples/common/mnist_data.c): IDX files
// gzipped or not read alike, Fashion-MNIST as the default when installed,
// and every bad file (truncated, corrupt, wrong magic number, mismatched
// counts, missing) reported with the file's path and what is wrong, after
// which loading good files still works.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <array>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "examples/common/mnist_data.h"

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using Bytes = std::vector<unsigned char>;

constexpr int kImages = 5;

void append_be32(Bytes& b, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) b.push_back(static_cast<unsigned char>(v >> shift));
}

/// An IDX image file of `n` 28x28 images: pixel p of image i is (7 i + p) % 256.
Bytes image_file(uint32_t n, uint32_t magic = 2051) {
  Bytes b;
  append_be32(b, magic);
  append_be32(b, n);
  append_be32(b, 28);
  append_be32(b, 28);
  for (uint32_t i = 0; i < n; ++i)
    for (uint32_t p = 0; p < 784; ++p) b.push_back(static_cast<unsigned char>((7 * i + p) % 256));
  return b;
}

/// An IDX label file: label i is (3 i) % 10, or `labels` when given.
Bytes label_file(uint32_t n, std::vector<unsigned char> labels = {}) {
  Bytes b;
  append_be32(b, 2049);
  append_be32(b, n);
  for (uint32_t i = 0; i < n; ++i)
    b.push_back(labels.empty() ? static_cast<unsigned char>(3 * i % 10) : labels[i]);
  return b;
}

/// Gzip-compressed `data`, as gzip(1) writes it (header, deflate, CRC-32, length).
Bytes gzipped(const Bytes& data) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  Bytes out(deflateBound(&z, data.size()) + 64);
  z.next_in = const_cast<unsigned char*>(data.data());
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

class MnistDataTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           (std::string("mstep_mnist_data_") + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    mnist_dataset_free(&train_);
    mnist_dataset_free(&test_);
    fs::remove_all(dir_);
  }

  std::string write(const std::string& name, const Bytes& data) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(data.data()),
               static_cast<std::streamsize>(data.size()));
    return path;
  }

  /// The four files of a good data set: kImages train and 2 test images.
  void write_good_set(bool gzip) {
    auto put = [&](const std::string& name, const Bytes& b) {
      write(gzip ? name + ".gz" : name, gzip ? gzipped(b) : b);
    };
    put("train-images-idx3-ubyte", image_file(kImages));
    put("train-labels-idx1-ubyte", label_file(kImages));
    put("t10k-images-idx3-ubyte", image_file(2));
    put("t10k-labels-idx1-ubyte", label_file(2));
  }

  /// mnist_load on `dir` (NULL: the default data): 0 or -1, with what_
  /// and error_ filled.
  int load_from(const char* dir, int synthetic) {
    mnist_dataset_free(&train_);
    mnist_dataset_free(&test_);
    what_[0] = error_[0] = '\0';
    return mnist_load(dir, synthetic, &train_, &test_, what_, sizeof what_, error_, sizeof error_);
  }
  int load(int synthetic = 0) { return load_from(dir_.c_str(), synthetic); }

  /// The error of mnist_read_idx on two files in dir_; "" when it succeeds.
  std::string read_error(const std::string& images, const std::string& labels) {
    mnist_dataset d{};
    char error[512] = "";
    const int status =
        mnist_read_idx((dir_ / images).c_str(), (dir_ / labels).c_str(), &d, error, sizeof error);
    mnist_dataset_free(&d);
    return status == 0 ? "" : error;
  }

  /// After a bad file, a good set still loads (no state is left behind).
  void expect_good_set_loads() {
    const fs::path bad = dir_;
    dir_ = bad / "good";
    fs::create_directories(dir_);
    write_good_set(true);
    EXPECT_EQ(load(), 0) << error_;
    EXPECT_EQ(train_.size, kImages);
    dir_ = bad;
  }

  fs::path dir_;
  mnist_dataset train_{}, test_{};
  char what_[512] = "", error_[512] = "";
};

TEST_F(MnistDataTest, ReadsGzippedAndPlainFilesAlike) {
  for (bool gzip : {false, true}) {
    SCOPED_TRACE(gzip ? "gzipped" : "plain");
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    write_good_set(gzip);
    ASSERT_EQ(load(), 0) << error_;
    EXPECT_THAT(what_, HasSubstr(dir_.string()));
    EXPECT_THAT(what_, HasSubstr("5 train and 2 test images"));
    ASSERT_EQ(train_.size, kImages);
    ASSERT_EQ(test_.size, 2);
    for (int i = 0; i < kImages; ++i) {
      EXPECT_EQ(train_.labels[i], 3 * i % 10);
      for (int p : {0, 1, 300, 783}) {
        // The PyTorch MNIST example's normalization of the byte (7 i + p) % 256.
        const double want = ((7 * i + p) % 256 / 255.0 - 0.1307) / 0.3081;
        EXPECT_NEAR(train_.images[i * MNIST_PIXELS + p], want, 1e-5) << "image " << i;
      }
    }
  }
}

TEST_F(MnistDataTest, TruncatedGzipNamesTheFile) {
  Bytes gz = gzipped(image_file(kImages));
  gz.resize(gz.size() / 2);
  const std::string path = write("images.gz", gz);
  write("labels", label_file(kImages));
  const std::string error = read_error("images.gz", "labels");
  EXPECT_THAT(error, HasSubstr(path + " is truncated or corrupt"));
  EXPECT_THAT(error, HasSubstr("its header says 5 images"));
  EXPECT_THAT(error, HasSubstr("unexpected end of file"));
  expect_good_set_loads();
}

TEST_F(MnistDataTest, TruncatedPlainFileNamesTheFile) {
  Bytes plain = image_file(kImages);
  plain.resize(plain.size() - 100);
  const std::string path = write("images", plain);
  write("labels", label_file(kImages));
  EXPECT_THAT(read_error("images", "labels"),
              HasSubstr(path + " is truncated or corrupt: its header says 5 images"));
  expect_good_set_loads();
}

TEST_F(MnistDataTest, CorruptGzipDataNamesTheFile) {
  write("images", image_file(kImages));
  // Deflate data overwritten in the middle of the stream.
  Bytes gz = gzipped(label_file(kImages));
  const Bytes garbage = {0xff, 0x00, 0xde, 0xad};
  std::copy(garbage.begin(), garbage.end(), gz.begin() + 12);
  const std::string path = write("labels.gz", gz);
  const std::string error = read_error("images", "labels.gz");
  EXPECT_THAT(error, HasSubstr(path));
  EXPECT_THAT(error, HasSubstr("corrupt"));
  expect_good_set_loads();
}

TEST_F(MnistDataTest, GzipChecksumMismatchNamesTheFile) {
  write("images", image_file(kImages));
  Bytes gz = gzipped(label_file(kImages));
  gz[gz.size() - 8] ^= 1; // the CRC-32 of the trailer
  const std::string path = write("labels.gz", gz);
  const std::string error = read_error("images", "labels.gz");
  EXPECT_THAT(error, HasSubstr(path));
  EXPECT_THAT(error, HasSubstr("corrupt"));
  EXPECT_THAT(error, HasSubstr("incorrect data check"));
  expect_good_set_loads();
}

TEST_F(MnistDataTest, WrongMagicNumberSaysWhichFileAndWhatToDo) {
  // A label file given as the image file: magic 2049, not 2051.
  const std::string path = write("images.gz", gzipped(label_file(kImages)));
  write("labels", label_file(kImages));
  const std::string error = read_error("images.gz", "labels");
  EXPECT_THAT(error, HasSubstr(path + " is not an IDX image file (magic number 2049, want 2051)"));
  EXPECT_THAT(error, HasSubstr("give --data the directory"));
  expect_good_set_loads();
}

TEST_F(MnistDataTest, NotGzipNorIdx) {
  const std::string path = write("images", Bytes{'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l'});
  write("labels", label_file(kImages));
  EXPECT_THAT(read_error("images", "labels"), HasSubstr(path + " is not an IDX image file"));
  expect_good_set_loads();
}

TEST_F(MnistDataTest, CountMismatchBadLabelAndTrailingData) {
  write("images", image_file(kImages));
  write("labels4", label_file(4));
  EXPECT_THAT(read_error("images", "labels4"),
              HasSubstr((dir_ / "labels4").string() + " holds 4 labels but " +
                        (dir_ / "images").string() + " holds 5 images"));
  write("labels_bad", label_file(kImages, {1, 2, 10, 3, 4}));
  EXPECT_THAT(read_error("images", "labels_bad"),
              HasSubstr("label 10 of sample 2 is not a class in [0, 10)"));
  Bytes long_labels = label_file(kImages);
  long_labels.push_back(0);
  write("labels_long.gz", gzipped(long_labels));
  EXPECT_THAT(read_error("images", "labels_long.gz"),
              HasSubstr("labels_long.gz has data after the 5 labels its header announces"));
  expect_good_set_loads();
}

TEST_F(MnistDataTest, MissingFileListsTheNamesItLooksFor) {
  write_good_set(true);
  fs::remove(dir_ / "t10k-labels-idx1-ubyte.gz");
  EXPECT_EQ(load(), -1);
  EXPECT_THAT(error_, HasSubstr(dir_.string() + " holds neither t10k-labels-idx1-ubyte nor "
                                                "t10k-labels-idx1-ubyte.gz"));
  EXPECT_EQ(train_.size, 0); // nothing left allocated
  expect_good_set_loads();
}

TEST_F(MnistDataTest, SyntheticFlagWinsOverData) {
  write_good_set(false);
  ASSERT_EQ(load(/*synthetic=*/1), 0) << error_;
  EXPECT_EQ(train_.size, 12000);
  EXPECT_EQ(test_.size, 2000);
  EXPECT_THAT(what_, HasSubstr("SYNTHETIC"));
  EXPECT_THAT(what_, HasSubstr("--synthetic"));
}

TEST_F(MnistDataTest, FashionMnistIsTheDefaultWhenInstalled) {
  if (mnist_default_dir() == nullptr)
    GTEST_SKIP() << "Fashion-MNIST is not installed in " MNIST_DEFAULT_DIR
                    " (scripts/setup.sh installs dataset-fashion-mnist)";
  ASSERT_EQ(load_from(nullptr, 0), 0) << error_; // no --data
  EXPECT_THAT(what_, HasSubstr("Fashion-MNIST from " MNIST_DEFAULT_DIR));
  // Fashion-MNIST's published split: 60000 train and 10000 test images,
  // 6000 and 1000 of each of the 10 classes.
  ASSERT_EQ(train_.size, 60000);
  ASSERT_EQ(test_.size, 10000);
  std::array<int, MNIST_CLASSES> train_counts{}, test_counts{};
  for (int64_t i = 0; i < train_.size; ++i) ++train_counts[train_.labels[i]];
  for (int64_t i = 0; i < test_.size; ++i) ++test_counts[test_.labels[i]];
  for (int c = 0; c < MNIST_CLASSES; ++c) {
    EXPECT_EQ(train_counts[c], 6000) << "class " << c;
    EXPECT_EQ(test_counts[c], 1000) << "class " << c;
  }
}

} // namespace
