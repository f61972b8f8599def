// mnist_mlp: the HPU-Graphs MNIST training example from the Gaudi
// documentation, in mstep's lazy mode.
//
// Model: Linear 784->128, ReLU, Dropout(0.5), Linear 128->10, log_softmax,
// NLL loss; Adadelta with lr 0.1; batch 200; mark_step() after backward
// and after the optimizer step, as the Gaudi example does.
//
//   mnist_mlp [--data DIR] [--epochs N] [--max-steps N]
//
// With --data, DIR holds the MNIST IDX files (train-images-idx3-ubyte,
// train-labels-idx1-ubyte, t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte).
// Nothing can be downloaded on these machines, so without it the example
// makes a synthetic, learnable data set and says so.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "examples/models/Mlp.h"
#include "mstep/mstep.h"

using namespace mstep;

namespace {

constexpr int64_t kPixels = 784, kClasses = 10, kBatch = 200;

struct Dataset {
  std::vector<float> images;  // [n, 784], normalized
  std::vector<int64_t> labels;
  int64_t size() const { return static_cast<int64_t>(labels.size()); }
};

uint32_t read_be32(std::ifstream& in) {
  unsigned char b[4] = {};
  in.read(reinterpret_cast<char*>(b), 4);
  return (uint32_t(b[0]) << 24) | (uint32_t(b[1]) << 16) | (uint32_t(b[2]) << 8) | b[3];
}

[[noreturn]] void fail(const std::string& message) {
  std::fprintf(stderr, "mnist_mlp: %s\n", message.c_str());
  std::exit(2);
}

/// Reads an IDX image file and its label file, normalized as in the
/// PyTorch MNIST example ((x / 255 - 0.1307) / 0.3081).
Dataset read_idx(const std::string& images_path, const std::string& labels_path) {
  std::ifstream images(images_path, std::ios::binary), labels(labels_path, std::ios::binary);
  if (!images) fail("cannot open " + images_path);
  if (!labels) fail("cannot open " + labels_path);
  if (read_be32(images) != 2051) fail(images_path + " is not an IDX image file (magic 2051)");
  if (read_be32(labels) != 2049) fail(labels_path + " is not an IDX label file (magic 2049)");
  const uint32_t n = read_be32(images), rows = read_be32(images), cols = read_be32(images);
  if (rows * cols != kPixels) fail(images_path + ": images are not 28x28");
  if (read_be32(labels) != n) fail(labels_path + ": label count differs from the image count");
  std::vector<unsigned char> pixels(size_t(n) * kPixels), raw_labels(n);
  images.read(reinterpret_cast<char*>(pixels.data()), std::streamsize(pixels.size()));
  labels.read(reinterpret_cast<char*>(raw_labels.data()), n);
  if (!images || !labels) fail("truncated IDX file in " + images_path + " or " + labels_path);
  Dataset d;
  d.images.reserve(pixels.size());
  for (unsigned char p : pixels) d.images.push_back((p / 255.0f - 0.1307f) / 0.3081f);
  d.labels.assign(raw_labels.begin(), raw_labels.end());
  return d;
}

/// Ten Gaussian clusters in 784 dimensions, one per class: learnable, but
/// noisy enough that the first steps are far from perfect.
Dataset synthetic(int64_t n, uint64_t seed) {
  std::mt19937_64 proto_rng(1234);  // the same class centres for train and test
  std::normal_distribution<float> unit(0.f, 1.f);
  std::vector<float> centres(kClasses * kPixels);
  for (float& c : centres) c = 0.3f * unit(proto_rng);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> label_dist(0, kClasses - 1);
  Dataset d;
  d.images.resize(n * kPixels);
  d.labels.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    d.labels[i] = label_dist(rng);
    for (int64_t p = 0; p < kPixels; ++p)
      d.images[i * kPixels + p] = centres[d.labels[i] * kPixels + p] + unit(rng);
  }
  return d;
}

std::pair<Tensor, Tensor> batch_at(const Dataset& d, const std::vector<int64_t>& order,
                                   int64_t first) {
  std::vector<float> x(kBatch * kPixels);
  std::vector<int64_t> y(kBatch);
  for (int64_t i = 0; i < kBatch; ++i) {
    int64_t row = order[first + i];
    std::copy_n(d.images.begin() + row * kPixels, kPixels, x.begin() + i * kPixels);
    y[i] = d.labels[row];
  }
  return {from_vector(x, {kBatch, kPixels}), from_vector(y, {kBatch})};
}

double accuracy(examples::Mlp& model, const Dataset& test) {
  NoGradGuard no_grad;
  model.eval();
  std::vector<int64_t> order(test.size());
  std::iota(order.begin(), order.end(), 0);
  int64_t correct = 0, seen = 0;
  for (int64_t first = 0; first + kBatch <= test.size(); first += kBatch) {
    auto [x, y] = batch_at(test, order, first);
    std::vector<int64_t> pred = argmax(model.forward(x), 1).to_vector<int64_t>();
    std::vector<int64_t> want = y.to_vector<int64_t>();
    for (int64_t i = 0; i < kBatch; ++i) correct += pred[i] == want[i];
    seen += kBatch;
  }
  model.train();
  return seen ? double(correct) / seen : 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string data_dir;
  int64_t epochs = 1, max_steps = -1;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--data") data_dir = argv[i + 1];
    else if (flag == "--epochs") epochs = std::atoll(argv[i + 1]);
    else if (flag == "--max-steps") max_steps = std::atoll(argv[i + 1]);
    else fail("unknown flag " + flag + " (use --data DIR, --epochs N, --max-steps N)");
  }

  Dataset train, test;
  if (!data_dir.empty()) {
    train = read_idx(data_dir + "/train-images-idx3-ubyte", data_dir + "/train-labels-idx1-ubyte");
    test = read_idx(data_dir + "/t10k-images-idx3-ubyte", data_dir + "/t10k-labels-idx1-ubyte");
    std::printf("mnist_mlp: MNIST from %s: %lld train, %lld test images\n", data_dir.c_str(),
                (long long)train.size(), (long long)test.size());
  } else {
    train = synthetic(12000, 1);
    test = synthetic(2000, 2);
    std::printf("mnist_mlp: no --data DIR given and nothing can be downloaded here, so this run "
                "uses a SYNTHETIC, learnable data set (10 Gaussian clusters in 784-d): %lld train, "
                "%lld test samples\n",
                (long long)train.size(), (long long)test.size());
  }

  manual_seed(0);
  examples::Mlp model;
  optim::Adadelta opt(model.parameters(), {.lr = 0.1});
  std::printf("model: Linear 784->128, ReLU, Dropout(0.5), Linear 128->10, log_softmax; "
              "Adadelta lr 0.1, batch %lld\n", (long long)kBatch);
  std::printf("test accuracy before training: %.1f%%\n", 100 * accuracy(model, test));

  reset_metrics();
  std::mt19937_64 shuffle_rng(0);
  std::vector<int64_t> order(train.size());
  std::iota(order.begin(), order.end(), 0);
  int64_t step = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t epoch = 0; epoch < epochs; ++epoch) {
    std::shuffle(order.begin(), order.end(), shuffle_rng);
    for (int64_t first = 0; first + kBatch <= train.size(); first += kBatch) {
      if (max_steps >= 0 && step >= max_steps) break;
      auto [x, y] = batch_at(train, order, first);
      opt.zero_grad();
      Tensor loss = nll_loss(model.forward(x), y);
      loss.backward();
      mark_step();  // as in the Gaudi example: after backward ...
      opt.step();
      mark_step();  // ... and after the optimizer step
      ++step;
      if (step == 1 || step % 10 == 0) {
        const double secs =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const Metrics m = metrics();
        std::printf("epoch %lld step %4lld  loss %.4f  %.1f steps/s  %.0f samples/s  "
                    "compiles %lld  cache hits %lld\n",
                    (long long)epoch + 1, (long long)step, loss.item(), step / secs,
                    step * kBatch / secs, (long long)m.cache_misses, (long long)m.cache_hits);
      }
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double acc = accuracy(model, test);
  std::printf("test accuracy after %lld steps: %.1f%%  (%.2f s, %.1f steps/s)\n", (long long)step,
              100 * acc, secs, step / secs);
  return acc > 0.5 ? 0 : 1;
}
