// The op cases of `export_worker stablehlo_ops_<case>` (test/interop):
// each captures a small graph of one op family on ref, forward and
// backward, and exports it as StableHLO with what ref computes on each
// replay. A case's leaves (inputs that take gradients) keep their values;
// each step feeds a new cotangent per float output, the backward of
// sum(output * cotangent) gives every leaf's gradient, and the expected
// values are every output and gradient after each step (integer outputs
// as i64, compared exactly by run_stablehlo.py).
//
// `convnet` is a whole training step instead (see convnet_case).
//
// The cases choose shapes that reach each lowering's corner: conv2d with
// groups, stride, dilation and paddings whose gradient convolutions need
// a crop; pools with ceil mode, dilation and both count_include_pad
// rules, an input full of ties and one with NaNs (max_pool2d's gradient
// must land on ref's element); argmax with ties and NaNs; a bool mask
// with a row masked out; attention with dropout returning every extra.
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <string>

#include "mstep/mstep.h"
#include "mstep/runtime/SafetensorsFile.h"

namespace mstep::export_test {

namespace {

/// The leaves and outputs of one case, and the driver that captures and
/// replays it.
class OpCase {
 public:
  explicit OpCase(uint64_t seed) : rng_(seed) {}

  /// A leaf with normal values (or small integers, for ties), recorded by
  /// name; `grad` whether its gradient is an output.
  Tensor leaf(const std::string& name, std::vector<int64_t> shape, bool ties = false,
              bool grad = true) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v(n);
    std::normal_distribution<float> normal;
    std::uniform_int_distribution<int> small(0, 2);
    for (float& x : v) x = ties ? static_cast<float>(small(rng_)) : normal(rng_);
    Tensor t = from_vector(v, Shape(shape));
    if (grad) t.requires_grad_();
    leaves_[name] = t;
    return t;
  }
  /// A leaf with the given values (NaNs placed by hand).
  Tensor leaf(const std::string& name, const std::vector<float>& values,
              std::vector<int64_t> shape) {
    Tensor t = from_vector(values, Shape(shape));
    t.requires_grad_();
    leaves_[name] = t;
    return t;
  }
  /// A tensor the case reads as it is (an index, lengths): an argument.
  void input(const std::string& name, const Tensor& t) { inputs_[name] = t; }

  /// Captures `forward` (named outputs) with its backward, exports it to
  /// `dir` and replays it `steps` times on fresh cotangents.
  int run(const std::string& dir, int64_t steps,
          const std::function<std::map<std::string, Tensor>()>& forward);

 private:
  std::mt19937_64 rng_;
  std::map<std::string, Tensor> leaves_, inputs_;
};

HostTensor host_f32(const Tensor& t) {
  const std::vector<float> v = t.to(DType::f32).to_vector<float>();
  return {DType::f32, t.shape(), std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4)};
}

HostTensor host_i64(const Tensor& t) {
  const std::vector<int64_t> v = t.to(DType::i64).to_vector<int64_t>();
  return {DType::i64, t.shape(), std::string(reinterpret_cast<const char*>(v.data()), v.size() * 8)};
}

/// Appends one step's value to a [steps, ...] stack.
void append(HostTensor& stack, int64_t steps, const HostTensor& t) {
  if (stack.bytes.empty()) {
    std::vector<int64_t> dims{steps};
    for (int64_t d : t.shape.dims()) dims.push_back(d);
    stack = {t.dtype, Shape(dims), {}};
  }
  stack.bytes += t.bytes;
}

/// The batches and the expected values, as test/interop reads them.
void write_files(const std::string& dir, const std::map<std::string, HostTensor>& inputs,
                 const std::map<std::string, HostTensor>& expected) {
  for (const auto& [file, tensors] : {std::pair{"/inputs.safetensors", &inputs},
                                      std::pair{"/expected.safetensors", &expected}})
    if (absl::Status s = write_safetensors(dir + file, *tensors); !s.ok())
      throw std::runtime_error(std::string(s.message()));
}

bool is_float(const Tensor& t) {
  return t.dtype() == DType::f32 || t.dtype() == DType::f64 || t.dtype() == DType::bf16;
}

int OpCase::run(const std::string& dir, int64_t steps,
                const std::function<std::map<std::string, Tensor>()>& forward) {
  std::map<std::string, Tensor> outs, cotangents;
  std::normal_distribution<float> normal;
  // Per step and output: the cotangent's values, drawn up front (the two
  // warmup steps and the capture use the first three).
  std::vector<std::map<std::string, std::vector<float>>> fed(steps + 3);
  auto feed = [&](int64_t i) {
    for (auto& [name, c] : cotangents) {
      auto& v = fed[i][name];
      if (v.empty()) {
        v.resize(c.numel());
        for (float& x : v) x = normal(rng_);
      }
      c.copy_(from_vector(v, c.shape()));
    }
  };
  bool differentiable = false;
  for (auto& [name, t] : leaves_) differentiable |= t.requires_grad();
  auto step = [&] {
    for (auto& [name, t] : leaves_) t.set_grad(Tensor());
    outs = forward();
    if (!differentiable) {
      mark_step();
      return;
    }
    Tensor loss;
    for (auto& [name, o] : outs) {
      if (!is_float(o) || !o.requires_grad()) continue;
      auto [it, fresh] = cotangents.try_emplace("cotangent." + name);
      if (fresh) it->second = zeros(o.shape());
      const Tensor term = sum(o * it->second);
      loss = loss.defined() ? loss + term : term;
    }
    loss.backward();
    mark_step();
  };
  step();  // makes the cotangents
  for (int64_t i = 0; i < 2; ++i) feed(i), step();
  feed(2);
  Graph graph;
  {
    CaptureGuard capture(graph);
    step();
  }
  std::map<std::string, Tensor> names = inputs_;
  for (auto& [name, t] : outs) names.emplace(name, t);
  for (auto& [name, c] : cotangents) names.emplace(name, c);
  for (auto& [name, t] : leaves_) {
    names.emplace(name, t);
    if (t.requires_grad() && t.grad().defined()) names.emplace(name + ".grad", t.grad());
  }
  graph.export_stablehlo(dir + "/step.stablehlo.mlir", names, dir + "/values.safetensors");
  std::map<std::string, HostTensor> inputs, expected;
  for (int64_t i = 0; i < steps; ++i) {
    feed(i + 3);
    for (auto& [name, c] : cotangents) append(inputs[name], steps, host_f32(c));
    graph.replay();
    for (auto& [name, t] : names) {
      if (leaves_.count(name) || inputs_.count(name) || cotangents.count(name)) continue;
      append(expected[name], steps, is_float(t) ? host_f32(t) : host_i64(t));
    }
  }
  write_files(dir, inputs, expected);
  std::printf("exported %s/step.stablehlo.mlir (%zu outputs and gradients); replayed %lld steps\n",
              dir.c_str(), expected.size(), static_cast<long long>(steps));
  return 0;
}

int conv_case(const std::string& dir, int64_t steps) {
  OpCase c(21);
  Tensor x = c.leaf("x", {2, 4, 7, 7});
  Tensor w1 = c.leaf("w1", {6, 2, 3, 3}), b1 = c.leaf("b1", {6});
  Tensor w2 = c.leaf("w2", {3, 4, 2, 2}), w3 = c.leaf("w3", {5, 4, 1, 1});
  return c.run(dir, steps, [&]() -> std::map<std::string, Tensor> {
    return {// groups 2, stride 2, padding 1
            {"grouped", conv2d(x, w1, b1, {2}, {1}, {1}, 2)},
            // stride 2 drops the last input row: the weight gradient crops
            {"strided", conv2d(x, w2, {}, {2}, {0})},
            // dilation 2, asymmetric stride and padding
            {"dilated", conv2d(x, w2, {}, {1, 2}, {2, 1}, {2})},
            // padding past the kernel's reach: the input gradient crops
            {"pointwise", conv2d(x, w3, {}, {2}, {1})}};
  });
}

/// [1, 1, 4, 4] of small integers with NaNs: windows with one NaN, two
/// (ref's max_pool2d gradient takes the last), none.
std::vector<float> with_nans() {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  return {1, nan, 2, 2,  //
          0, 1,   nan, 1,  //
          2, 2,   1, 0,  //
          nan, 0, 2, nan};
}

int pool_case(const std::string& dir, int64_t steps) {
  OpCase c(22);
  Tensor x = c.leaf("x", {2, 3, 7, 7});
  Tensor t = c.leaf("ties", {2, 2, 6, 6}, /*ties=*/true);
  Tensor n = c.leaf("nans", with_nans(), {1, 1, 4, 4});
  return c.run(dir, steps, [&]() -> std::map<std::string, Tensor> {
    return {{"max_pad", max_pool2d(x, {3}, {2}, {1})},
            {"max_ceil", max_pool2d(x, {2}, {2}, {0}, {1}, true)},
            {"max_dilated", max_pool2d(x, {2}, {1}, {0}, {2})},
            {"max_ties", max_pool2d(t, {3}, {1}, {1})},
            {"max_ties_strided", max_pool2d(t, {2}, {2})},
            {"max_nans", max_pool2d(n, {2}, {1})},
            {"avg_pad", avg_pool2d(x, {3}, {2}, {1})},
            {"avg_ceil_excl", avg_pool2d(x, {2}, {2}, {1}, true, false)},
            {"avg_ceil_incl", avg_pool2d(x, {3}, {2}, {1}, true, true)}};
  });
}

int misc_case(const std::string& dir, int64_t steps) {
  OpCase c(23);
  Tensor x = c.leaf("x", {4, 6});
  Tensor t = c.leaf("ties", {4, 6}, /*ties=*/true, /*grad=*/false);
  Tensor x3 = c.leaf("x3", {2, 3, 5});
  Tensor n = c.leaf("nans", with_nans(), {4, 4});
  Tensor gain = c.leaf("gain", {5});
  const Tensor index = from_vector(std::vector<int64_t>{5, 0, 2, 2, 1, 4, 3, 3, 0, 1, 5, 5}, {4, 3});
  const Tensor rows = from_vector(std::vector<int64_t>{3, 0, 1, 1, 2, 0, 3, 3, 1}, {3, 3});
  c.input("index", index);
  c.input("rows", rows);
  return c.run(dir, steps, [&]() -> std::map<std::string, Tensor> {
    return {{"argmax_ties", argmax(t, 1)},
            {"argmax_all", argmax(t)},
            {"argmax_keepdim", argmax(x3, 0, true)},
            {"argmax_nans", argmax(n, 1)},
            {"argmax_nans_all", argmax(n)},
            {"var_rows", var(x, {1})},
            {"var_all", var(x3, {}, 0)},
            {"var_keepdim", var(x3, {0, 2}, 1, true)},
            {"rms_norm", rms_norm(x3, {5}, gain, 1e-5)},
            {"pad", pad(x3, {2, -1, -1, 1}, 0.5)},
            {"triu", triu(x, 1)},
            {"tril", tril(x3, -1)},
            {"gather_cols", gather(x, 1, index)},
            {"gather_rows", gather(x, 0, rows)},
            {"scatter_add", scatter_add(x, 0, rows, x * 2.0)}};
  });
}

int attention_case(const std::string& dir, int64_t steps) {
  OpCase c(24);
  Tensor q = c.leaf("q", {2, 2, 5, 4}), k = c.leaf("k", {2, 2, 6, 4}), v = c.leaf("v", {2, 2, 6, 3});
  Tensor additive = c.leaf("additive", {5, 6});
  std::vector<bool> keep(2 * 5 * 6);
  for (size_t i = 0; i < keep.size(); ++i) keep[i] = (i * 7) % 3 != 0;
  for (int j = 0; j < 6; ++j) keep[6 * 2 + j] = false;  // batch 0, row 2: no key left
  const Tensor bool_mask = from_vector(keep, {2, 1, 5, 6});
  const Tensor lens = from_vector(std::vector<int64_t>{3, 7}, {2});
  c.input("bool_mask", bool_mask);
  c.input("lens", lens);
  return c.run(dir, steps, [&]() -> std::map<std::string, Tensor> {
    // Dropout with every extra result, the backward reading the saved
    // probabilities (recompute = false); the extras take no gradient.
    SdpaResult extras = fused_sdpa(q, k, v,
                                   {.dropout_p = 0.3, .valid_seq_len = lens, .return_attn_probs = true,
                                    .return_dropout_mask = true, .recompute = false});
    return {{"extras", extras.out},
            {"extras_probs", extras.attn_probs.detach()},
            {"extras_mask", extras.dropout_mask},
            {"additive", scaled_dot_product_attention(q, k, v, {.attn_mask = additive})},
            {"bool", scaled_dot_product_attention(q, k, v, {.attn_mask = bool_mask})},
            {"len_right_causal",
             scaled_dot_product_attention(q, k, v, {.is_causal = true, .valid_seq_len = lens})},
            {"len_left", scaled_dot_product_attention(
                             q, k, v, {.valid_seq_len = lens, .padding_side = PaddingSide::left})}};
  });
}

/// conv2d and the pools in bf16 (autocast's dtype), forward and backward:
/// the leaves are f32 and cast, so their gradients come back through the
/// casts. Each output is rounded to bf16 once, so one bf16 ulp (2^-8
/// relative) is the expected difference.
int bf16_case(const std::string& dir, int64_t steps) {
  OpCase c(26);
  Tensor x = c.leaf("x", {2, 4, 7, 7});
  Tensor w = c.leaf("w", {6, 2, 3, 3}), b = c.leaf("b", {6});
  return c.run(dir, steps, [&]() -> std::map<std::string, Tensor> {
    const Tensor xb = x.to(DType::bf16);
    return {{"conv", conv2d(xb, w.to(DType::bf16), b.to(DType::bf16), {2}, {1}, {1}, 2)},
            {"max", max_pool2d(xb, {3}, {2}, {1})},
            {"avg", avg_pool2d(xb, {2}, {2}, {1}, true, false)}};
  });
}

/// A whole training step of a small convolutional classifier (conv, ReLU,
/// max pool, grouped strided conv, avg pool, linear, cross entropy; SGD
/// with momentum), exported and replayed on fresh batches: expected holds
/// the loss and every weight after each step, as `stablehlo` (mnist_mlp).
int convnet_case(const std::string& dir, int64_t steps) {
  constexpr int64_t kB = 8, kSide = 12, kClasses = 10;
  OpCase init(25);
  std::map<std::string, Tensor> params{
      {"conv1.weight", init.leaf("conv1.weight", {4, 1, 3, 3})},
      {"conv1.bias", init.leaf("conv1.bias", {4})},
      {"conv2.weight", init.leaf("conv2.weight", {8, 2, 3, 3})},
      {"conv2.bias", init.leaf("conv2.bias", {8})},
      {"fc.weight", init.leaf("fc.weight", {kClasses, 32})},
      {"fc.bias", init.leaf("fc.bias", {kClasses})}};
  std::vector<Tensor> list;
  for (auto& [name, p] : params) {
    NoGradGuard no_grad;
    p.copy_(p * 0.3);
    list.push_back(p);
  }
  optim::SGD opt(list, {.lr = 0.05, .momentum = 0.9});
  Tensor x = zeros({kB, 1, kSide, kSide}), y = zeros({kB}, DType::i64), loss;
  auto step = [&] {
    opt.zero_grad();
    Tensor h = relu(conv2d(x, params["conv1.weight"], params["conv1.bias"], {1}, {1}));
    h = max_pool2d(h, {2});                                                         // [B, 4, 6, 6]
    h = relu(conv2d(h, params["conv2.weight"], params["conv2.bias"], {2}, {1}, {1}, 2));  // [B, 8, 3, 3]
    h = avg_pool2d(h, {2}, {1}).reshape({kB, 32});                                  // [B, 8, 2, 2]
    loss = cross_entropy(linear(h, params["fc.weight"], params["fc.bias"]), y);
    loss.backward();
    mark_step();
    opt.step();
    mark_step();
  };
  std::mt19937_64 rng(13);
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int64_t> label(0, kClasses - 1);
  std::vector<std::vector<float>> xs(steps + 3, std::vector<float>(kB * kSide * kSide));
  std::vector<std::vector<int64_t>> ys(steps + 3, std::vector<int64_t>(kB));
  for (auto& b : xs) for (float& v : b) v = normal(rng);
  for (auto& b : ys) for (int64_t& v : b) v = label(rng);
  auto feed = [&](int64_t i) {
    x.copy_(from_vector(xs[i], {kB, 1, kSide, kSide}));
    y.copy_(from_vector(ys[i], {kB}));
  };
  Graph graph;
  for (int64_t i = 0; i < 2; ++i) feed(i), step();
  feed(2);
  {
    CaptureGuard capture(graph);
    step();
  }
  std::map<std::string, Tensor> names = params;
  names.emplace("x", x);
  names.emplace("y", y);
  names.emplace("loss", loss);
  graph.export_stablehlo(dir + "/step.stablehlo.mlir", names, dir + "/values.safetensors");
  std::map<std::string, HostTensor> inputs, expected;
  for (int64_t i = 0; i < steps; ++i) {
    feed(i + 3);
    append(inputs["x"], steps, host_f32(x));
    append(inputs["y"], steps, host_i64(y));
    graph.replay();
    append(expected["loss"], steps, host_f32(loss));
    for (auto& [name, p] : params) append(expected[name], steps, host_f32(p));
  }
  write_files(dir, inputs, expected);
  std::printf("exported %s/step.stablehlo.mlir (conv net, %zu segments); replayed %lld steps\n",
              dir.c_str(), graph.num_segments(), static_cast<long long>(steps));
  return 0;
}

}  // namespace

/// `export_worker stablehlo_ops_<case> <dir> <steps>`; -1 for an unknown case.
int export_stablehlo_op_case(const std::string& name, const std::string& dir, int64_t steps) {
  set_default_device(Device{DeviceType::ref, 0});
  manual_seed(0);
  if (name == "conv") return conv_case(dir, steps);
  if (name == "pool") return pool_case(dir, steps);
  if (name == "misc") return misc_case(dir, steps);
  if (name == "attention") return attention_case(dir, steps);
  if (name == "convnet") return convnet_case(dir, steps);
  if (name == "bf16") return bf16_case(dir, steps);
  return -1;
}

}  // namespace mstep::export_test
