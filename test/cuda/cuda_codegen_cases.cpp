// Build-time generator of the GPU check's compiled cases: a few steps
// compiled here by the cuda compile half (MLIR -> PTX -> cubins for sm_80
// and sm_90), written with deterministic inputs and expected outputs
// computed by plain double-precision loops in this file, or for the cases
// with inputs of other dtypes by the ref backend (not by the code under
// test), in the format of CodegenCase.h. The GPU machine has no MLIR;
// cuda_codegen_gpu_test loads these with the runtime half alone.
//   cuda_codegen_cases OUT_DIR
// Exit code 0, or 1 naming the case that did not compile or write.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "lib/backends/cuda/CudaCompiler.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mstep/compiler/BackendCompiler.h"
#include "mstep/ir/MlirImport.h"
#include "mstep/ir/MlirParse.h"
#include "test/cuda/CodegenCase.h"
#include "test/cuda/CodegenCaseSteps.h"
#include "test/cuda/LinearReluStep.h"
#include "test/cuda/RefOracle.h"

namespace mstep::cuda::testing {
namespace {

using Values = std::vector<std::vector<float>>;
/// The expected result and the error allowed per element, per output.
struct Expected {
  std::vector<float> value;
  std::vector<float> bound;
};

// f32's unit roundoff (half an ulp, relative) and ulp (relative, upper bound).
constexpr double kRoundoff = 0x1p-24;
constexpr double kUlp = 0x1p-23;
// Absolute slack for results that are (near) zero, where relative bounds
// vanish: far below any real error, far above a denormal flush.
constexpr double kTiny = 1e-30;

struct Case {
  std::string name;
  const char* step;
  /// Deterministic inputs, one per step input, sized from the plan.
  std::function<Values(const std::vector<int64_t>&)> inputs;
  /// Expected outputs (in the step's output order) from the inputs.
  std::function<std::vector<Expected>(const Values&)> expected;
  bool bandwidth = false;
  /// Instead of input files and expected outputs: input i is fills[i]
  /// everywhere, output o must be exactly expects[o] everywhere.
  std::vector<float> fills;
  std::vector<float> expects;
  /// Instead of `inputs` and `expected`: inputs of any dtype (bytes per
  /// step input), the expected outputs from the ref backend, each
  /// element within `ref_ulps` f32 ulps of ref's.
  std::function<std::vector<std::vector<char>>(const std::vector<int64_t>&)> raw_inputs;
  int ref_ulps = 0;
  /// Per output (missing: 0), the smallest magnitude whose ulps bound an
  /// element: where an output cancels (p - lr * d), its error scales with
  /// its operands, not with its value.
  std::vector<double> ref_magnitude_floor;
  /// The plan as it runs where cuBLASLt has no algorithm for its matmuls'
  /// epilogues: each call without it, then its fallback kernels
  /// (apply_epilogue_fallbacks).
  bool epilogue_fallback = false;
};

template <typename T>
std::vector<char> bytes_of(const std::vector<T>& values) {
  std::vector<char> bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

/// A deterministic value in [lo, hi): a fixed linear congruential sequence.
std::vector<float> sequence(int64_t n, uint32_t seed, float lo, float hi) {
  std::vector<float> v(n);
  uint32_t state = seed;
  for (int64_t i = 0; i < n; ++i) {
    state = state * 1664525u + 1013904223u;
    v[i] = lo + (hi - lo) * static_cast<float>(state >> 8) * 0x1p-24f;
  }
  return v;
}

/// Deterministic multiples of `step` in [-128, 127] * step: few distinct
/// values, so the big case's files compress well in the bundle (whose
/// gzip finds no repeats beyond 32 KiB).
std::vector<float> steps(int64_t n, uint32_t seed, float step) {
  std::vector<float> v(n);
  uint32_t state = seed;
  for (int64_t i = 0; i < n; ++i) {
    state = state * 1664525u + 1013904223u;
    v[i] = static_cast<float>(static_cast<int>(state >> 24) - 128) * step;
  }
  return v;
}

/// A result computed in f64 from f32 inputs and rounded once (the
/// row-wise kernels): libdevice's f64 exp/log/sqrt are within 2 ulp of a
/// double, far below f32's, so the kernel's f32 result and the rounded
/// double expectation differ by at most one f32 ulp.
float one_ulp(double expected) { return static_cast<float>(kUlp * std::fabs(expected) + kTiny); }

/// What a copy kernel may differ by: nothing (a positive bound, as the
/// format requires).
constexpr float kExact = static_cast<float>(kTiny);

/// Recursive summation of n f32 terms in any order is within
/// (n - 1) * u * sum|x_i| of the exact sum (Higham, "Accuracy and Stability
/// of Numerical Algorithms", 4.2); n * u * sum|x_i| is used.
Expected sums(const std::vector<float>& x, int64_t rows, int64_t cols, bool over_rows) {
  int64_t outputs = over_rows ? cols : rows, terms = over_rows ? rows : cols;
  Expected e{std::vector<float>(outputs), std::vector<float>(outputs)};
  for (int64_t o = 0; o < outputs; ++o) {
    double sum = 0, magnitude = 0;
    for (int64_t t = 0; t < terms; ++t) {
      double v = over_rows ? x[t * cols + o] : x[o * cols + t];
      sum += v;
      magnitude += std::fabs(v);
    }
    e.value[o] = static_cast<float>(sum);
    // + half an ulp: the expected value itself is rounded to f32.
    e.bound[o] =
        static_cast<float>(terms * kRoundoff * magnitude + kRoundoff * std::fabs(sum) + kTiny);
  }
  return e;
}

std::vector<Case> cases() {
  std::vector<Case> all;
  all.push_back({"fma_relu", kFmaRelu,
                 [](const std::vector<int64_t>& n) {
                   return Values{steps(n[0], 1, 1.f / 64), steps(n[1], 2, 1.f / 32), {0.25f}};
                 },
                 [](const Values& in) {
                   // a*b+c is two roundings, or one when the compiler
                   // contracts it to an fma: within u*|a*b| + u*|a*b+c|;
                   // relu adds no error (max(., 0) is 1-Lipschitz).
                   Expected e;
                   for (size_t i = 0; i < in[0].size(); ++i) {
                     double ab = double(in[0][i]) * in[1][i], s = ab + in[2][0];
                     e.value.push_back(static_cast<float>(std::max(s, 0.0)));
                     e.bound.push_back(static_cast<float>(
                         kRoundoff * (std::fabs(ab) + 2 * std::fabs(s)) + kTiny));
                   }
                   return std::vector<Expected>{e};
                 },
                 /*bandwidth=*/true});
  {
    // The same fusion over 2^26 + 3 elements (805 MB moved): past any L2,
    // the HBM bandwidth figure. Constant inputs (files this size
    // would not fit the bundle): 1.5 * 2 + 0.25 = 3.25 exactly, contracted
    // or not.
    Case big;
    big.name = "fma_relu_hbm";
    big.step = fma_relu_hbm_step().c_str();
    big.bandwidth = true;
    big.fills = {1.5f, 2.f, 0.25f};
    big.expects = {3.25f};
    all.push_back(std::move(big));
  }
  all.push_back({"exp_tanh_chain", kExpTanh,
                 [](const std::vector<int64_t>& n) {
                   return Values{sequence(n[0], 3, -4.f, 4.f), sequence(n[1], 4, -2.f, 2.f)};
                 },
                 [](const Values& in) {
                   // libdevice's expf and tanhf (non-fast-math) are within
                   // 2 ulp (CUDA C++ Programming Guide, "Mathematical
                   // Functions", single precision). exp(x): 2 ulp. The
                   // product z = exp(x)*y then carries relative error
                   // d <= 2 ulp + u, which tanh turns into at most
                   // |z| * sech^2(z) * d, plus tanh's own 2 ulp. Twice that
                   // is allowed (ulp of a value is at most kUlp * |value|).
                   Expected t, e;
                   for (size_t i = 0; i < in[0].size(); ++i) {
                     double ex = std::exp(double(in[0][i])), z = ex * in[1][i], th = std::tanh(z),
                            sech = 1 / std::cosh(z);
                     e.value.push_back(static_cast<float>(ex));
                     e.bound.push_back(static_cast<float>(2 * (2 * kUlp + kRoundoff) * ex + kTiny));
                     t.value.push_back(static_cast<float>(th));
                     double d = 2 * kUlp + kRoundoff;
                     t.bound.push_back(static_cast<float>(
                         2 * (std::fabs(z) * sech * sech * d + 2 * kUlp * std::fabs(th)) + kTiny));
                   }
                   return std::vector<Expected>{t, e};
                 }});
  all.push_back({"row_sum", kRowSum,
                 [](const std::vector<int64_t>& n) { return Values{sequence(n[0], 5, -1.f, 1.f)}; },
                 [](const Values& in) {
                   return std::vector<Expected>{sums(in[0], 300, 33, /*over_rows=*/false)};
                 }});
  all.push_back({"column_sum", kColumnSum,
                 [](const std::vector<int64_t>& n) { return Values{sequence(n[0], 6, -1.f, 1.f)}; },
                 [](const Values& in) {
                   return std::vector<Expected>{sums(in[0], 77, 1000, /*over_rows=*/true)};
                 }});
  all.push_back({"linear_relu", kLinearReluStep,
                 [](const std::vector<int64_t>& n) {
                   return Values{sequence(n[0], 7, -1.f, 1.f), sequence(n[1], 8, -1.f, 1.f),
                                 sequence(n[2], 9, -1.f, 1.f)};
                 },
                 [](const Values& in) {
                   // A dot product of k = 96 f32 terms accumulated in f32
                   // (cuBLASLt's COMPUTE_32F, any order or blocking) is
                   // within k * u * sum|x_l w_l| (Higham 3.1, gamma_k); the
                   // add is one more rounding of |y + b|; relu adds none.
                   // cuBLASLt may use TF32 only when asked (COMPUTE_32F_FAST_TF32),
                   // which the wrapper does not.
                   constexpr int64_t m = 64, k = 96, n = 80;
                   Expected e;
                   for (int64_t i = 0; i < m; ++i)
                     for (int64_t j = 0; j < n; ++j) {
                       double dot = 0, magnitude = 0;
                       for (int64_t l = 0; l < k; ++l) {
                         double p = double(in[0][i * k + l]) * in[1][l * n + j];
                         dot += p;
                         magnitude += std::fabs(p);
                       }
                       double y = dot + in[2][j];
                       e.value.push_back(static_cast<float>(std::max(y, 0.0)));
                       e.bound.push_back(static_cast<float>((k + 1) * kRoundoff * magnitude +
                                                            2 * kRoundoff * std::fabs(y) + kTiny));
                     }
                   return std::vector<Expected>{e};
                 }});
  // The same step as cuBLASLt runs it without the RELU_BIAS epilogue: the
  // call, then the fallback's kernel adds the bias and applies the relu in
  // place (one more rounding of y + b, which the bound has).
  Case fallback = all.back();
  fallback.name = "linear_relu_fallback";
  fallback.epilogue_fallback = true;
  all.push_back(fallback);
  all.push_back({"softmax_rows", kSoftmaxRows,
                 [](const std::vector<int64_t>& n) { return Values{sequence(n[0], 10, -6.f, 6.f)}; },
                 [](const Values& in) {
                   Expected p, l;
                   for (int r = 0; r < 300; ++r) {
                     const float* x = &in[0][r * 37];
                     double m = x[0], sum = 0;
                     for (int j = 0; j < 37; ++j) m = std::max(m, double(x[j]));
                     for (int j = 0; j < 37; ++j) sum += std::exp(x[j] - m);
                     for (int j = 0; j < 37; ++j) {
                       double e = std::exp(x[j] - m) / sum, v = x[j] - m - std::log(sum);
                       p.value.push_back(static_cast<float>(e));
                       p.bound.push_back(one_ulp(e));
                       l.value.push_back(static_cast<float>(v));
                       l.bound.push_back(one_ulp(v));
                     }
                   }
                   return std::vector<Expected>{p, l};
                 }});
  all.push_back({"norms", kNorms,
                 [](const std::vector<int64_t>& n) {
                   return Values{sequence(n[0], 11, -3.f, 3.f), sequence(n[1], 12, 0.5f, 1.5f),
                                 sequence(n[2], 13, -1.f, 1.f)};
                 },
                 [](const Values& in) {
                   Expected y, z;
                   for (int r = 0; r < 40; ++r) {
                     const float* x = &in[0][r * 96];
                     double mean = 0, var = 0, ms = 0;
                     for (int c = 0; c < 96; ++c) mean += x[c], ms += double(x[c]) * x[c];
                     mean /= 96, ms /= 96;
                     for (int c = 0; c < 96; ++c) var += (x[c] - mean) * (x[c] - mean);
                     var /= 96;
                     for (int c = 0; c < 96; ++c) {
                       double a = (x[c] - mean) / std::sqrt(var + 1e-5) * in[1][c] + in[2][c];
                       double b = x[c] / std::sqrt(ms + 1e-6) * in[1][c];
                       y.value.push_back(static_cast<float>(a));
                       y.bound.push_back(one_ulp(a) + 1e-6f);  // + the f64 rounding of the statistics
                       z.value.push_back(static_cast<float>(b));
                       z.bound.push_back(one_ulp(b) + 1e-6f);
                     }
                   }
                   return std::vector<Expected>{y, z};
                 }});
  all.push_back({"shape_copies", kShapeCopies,
                 [](const std::vector<int64_t>& n) {
                   return Values{sequence(n[0], 14, -1.f, 1.f), sequence(n[1], 15, 2.f, 3.f)};
                 },
                 [](const Values& in) {
                   const std::vector<float>& x = in[0];
                   auto at = [&](int a, int b, int c) { return x[(a * 30 + b) * 50 + c]; };
                   Expected p, c, u, r;
                   for (int k = 0; k < 50; ++k)
                     for (int a = 0; a < 8; ++a)
                       for (int b = 0; b < 30; ++b) p.value.push_back(at(a, b, k));
                   for (int a = 0; a < 8; ++a)
                     for (int j = 0; j < 9; ++j)
                       for (int k = 0; k < 50; ++k) c.value.push_back(at(a, 2 + 3 * j, k));
                   u.value = x;
                   for (int a = 0; a < 8; ++a)
                     for (int j = 0; j < 9; ++j)
                       for (int k = 0; k < 50; ++k)
                         u.value[(a * 30 + 2 + 3 * j) * 50 + k] = in[1][(a * 9 + j) * 50 + k];
                   r.value = x;
                   for (Expected* e : {&p, &c, &u, &r}) e->bound.assign(e->value.size(), kExact);
                   return std::vector<Expected>{p, c, u, r};
                 }});
  all.push_back({.name = "dropout", .step = kDropout,
                 .raw_inputs =
                     [](const std::vector<int64_t>& n) {
                       return std::vector<std::vector<char>>{
                           bytes_of(sequence(n[0], 16, -2.f, 2.f)),
                           bytes_of(std::vector<int64_t>{0x123456789ab, 77})};
                     },
                 .ref_ulps = 0});
  all.push_back({.name = "loss_embedding", .step = kLossEmbedding,
                 .raw_inputs =
                     [](const std::vector<int64_t>& n) {
                       std::vector<int64_t> tokens(n[1]);
                       for (size_t i = 0; i < tokens.size(); ++i)
                         tokens[i] = static_cast<int64_t>((i * 7) % 10);
                       return std::vector<std::vector<char>>{
                           bytes_of(sequence(n[0], 17, -3.f, 3.f)), bytes_of(tokens),
                           bytes_of(sequence(n[2], 18, -1.f, 1.f)),
                           bytes_of(sequence(n[3], 19, -1.f, 1.f))};
                     },
                 .ref_ulps = 1});
  all.push_back({.name = "clipped_adadelta", .step = kClippedAdadelta,
                 .raw_inputs =
                     [](const std::vector<int64_t>& n) {
                       std::vector<std::vector<char>> in;
                       for (int t = 0; t < 8; ++t)  // params, grads (large: clipped), states >= 0
                         in.push_back(bytes_of(sequence(n[t], 20 + t, t < 4 ? -1.f : 0.f,
                                                        t < 2 ? 1.f : t < 4 ? 5.f : 1.f)));
                       for (int t = 0; t < 2; ++t) in.push_back(bytes_of(std::vector<int64_t>{4}));
                       for (double h : {0.1, 0.9, 1e-6}) in.push_back(bytes_of(std::vector<double>{h}));
                       return in;
                     },
                 // The states (rho*s + (1-rho)*g*g, sums of non-negative
                 // terms, contracted to an fma or not) are within 2 ulps;
                 // the parameters p - lr*d cancel (an H200 run saw over 1 ulp of
                 // a 0.0015 result from p in [-1, 1]), so their ulps are
                 // those of |p| <= 1.
                 .ref_ulps = 2,
                 .ref_magnitude_floor = {1.0, 1.0}});
  return all;
}

bool fail(const std::string& what) {
  std::fprintf(stderr, "cuda_codegen_cases: %s\n", what.c_str());
  return false;
}

bool write_floats(const std::filesystem::path& path, const std::vector<float>& v) {
  return write_file_bytes(path.string(), v.data(), v.size() * sizeof(float)) ||
         fail("cannot write " + path.string());
}

/// Writes `c`'s input files and its expected outputs with their bounds.
bool write_inputs_and_expected(const Case& c, mlir::ModuleOp module, const CudaPlan& plan,
                               const CodegenCase& file, const std::vector<int64_t>& input_sizes,
                               const std::filesystem::path& dir) {
  std::vector<Expected> expected;
  if (c.raw_inputs) {
    // Bytes in, ref's outputs expected.
    std::vector<std::vector<char>> raw = c.raw_inputs(input_sizes);
    for (size_t i = 0; i < raw.size(); ++i) {
      const std::string path = (dir / ("v" + std::to_string(i) + ".in.f32")).string();
      if (!write_file_bytes(path, raw[i].data(), raw[i].size())) return fail("cannot write " + path);
    }
    absl::StatusOr<std::vector<std::vector<char>>> ref = ref_outputs(module, raw);
    if (!ref.ok()) return fail(c.name + ": ref: " + std::string(ref.status().message()));
    for (size_t o = 0; o < ref->size(); ++o) {
      const std::vector<char>& bytes = (*ref)[o];
      const double floor = o < c.ref_magnitude_floor.size() ? c.ref_magnitude_floor[o] : 0.0;
      Expected e;
      e.value.resize(bytes.size() / sizeof(float));
      std::memcpy(e.value.data(), bytes.data(), bytes.size());
      for (float v : e.value)
        e.bound.push_back(
            static_cast<float>(c.ref_ulps * kUlp * std::max<double>(std::fabs(v), floor) + kTiny));
      expected.push_back(std::move(e));
    }
  } else {
    Values inputs = c.inputs(input_sizes);
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (static_cast<int64_t>(inputs[i].size()) != input_sizes[i])
        return fail(c.name + ": input " + std::to_string(i) + " has the wrong size");
      if (!write_floats(dir / ("v" + std::to_string(i) + ".in.f32"), inputs[i])) return false;
    }
    expected = c.expected(inputs);
  }
  if (expected.size() != plan.outputs.size())
    return fail(c.name + ": " + std::to_string(plan.outputs.size()) + " outputs, " +
                std::to_string(expected.size()) + " expected");
  for (size_t o = 0; o < expected.size(); ++o) {
    int id = plan.outputs[o];
    if (static_cast<int64_t>(expected[o].value.size()) != file.elements[id])
      return fail(c.name + ": expected output " + std::to_string(o) + " has the wrong size");
    std::string stem = "v" + std::to_string(id);
    if (!write_floats(dir / (stem + ".expected.f32"), expected[o].value) ||
        !write_floats(dir / (stem + ".bound.f32"), expected[o].bound))
      return false;
  }
  return true;
}

/// Compiles `c` and writes its folder under `out`.
bool generate(const Case& c, const std::filesystem::path& out) {
  mlir::MLIRContext context(mlir::MLIRContext::Threading::DISABLED);
  register_mstep_dialects(context);
  absl::StatusOr<BackendCompiler*> compiler = CompilerRegistry::get("cuda");
  if (!compiler.ok()) return fail(std::string(compiler.status().message()));
  load_dependent_dialects(context, **compiler);
  auto module = parse_mstep_module(c.step, context, c.name);
  if (!module.ok()) return fail(c.name + ": " + std::string(module.status().message()));
  absl::StatusOr<CompiledCudaStep> compiled =
      compile_cuda_step(**module, default_cuda_compile_options());
  if (!compiled.ok()) return fail(c.name + ": " + std::string(compiled.status().message()));
  CudaPlan& plan = compiled->plan;
  if (c.epilogue_fallback) {
    std::vector<int> matmuls;
    for (size_t m = 0; m < plan.matmuls.size(); ++m)
      if (!plan.matmuls[m].fallback.empty()) matmuls.push_back(static_cast<int>(m));
    if (matmuls.empty()) return fail(c.name + ": no matmul has an epilogue fallback");
    apply_epilogue_fallbacks(plan, matmuls);
  }
  // The case format gives each value a buffer of its own.
  if (!plan.aliases.empty()) return fail(c.name + ": the case format has no aliases (views)");

  CodegenCase file;
  file.bandwidth = c.bandwidth;
  for (size_t id = 0; id < plan.values.size(); ++id) {
    const TensorType& type = plan.values[id];
    // Inputs are f32 unless given as bytes; a temporary may be of any
    // dtype (a split column sum's f64 partials), the format says its size.
    if (type.dtype != DType::f32 && !c.raw_inputs && id < plan.num_inputs)
      return fail(c.name + ": input " + std::to_string(id) + " is " + type.to_string() +
                  ", not f32");
    file.elements.push_back(type.numel());
    file.element_bytes.push_back(static_cast<int>(element_size(type.dtype)));
  }
  for (int id : plan.outputs)
    if (plan.values[id].dtype != DType::f32)
      return fail(c.name + ": output value " + std::to_string(id) + " is " +
                  plan.values[id].to_string() + ", not f32");
  std::vector<int64_t> input_sizes;
  for (size_t id = 0; id < plan.num_inputs; ++id) {
    file.inputs.push_back(static_cast<int>(id));
    input_sizes.push_back(file.elements[id]);
  }
  file.outputs = plan.outputs;

  std::filesystem::path dir = out / c.name;
  std::filesystem::create_directories(dir);
  // The error word (CudaErrorWord.h) starts at zero, as the executable
  // resets it before each run (the GPU test fills other buffers with ones,
  // which would read as an error and keep the optimizer update's inputs).
  if (plan.error_word >= 0) {
    file.inputs.push_back(plan.error_word);
    const std::vector<char> zeros(plan.values[plan.error_word].bytes(), 0);
    const std::string path = (dir / ("v" + std::to_string(plan.error_word) + ".in.f32")).string();
    if (!write_file_bytes(path, zeros.data(), zeros.size())) return fail("cannot write " + path);
  }
  for (size_t i = 0; i < plan.kernels.size(); ++i) {
    const CudaKernelInfo& kernel = plan.kernels[i];
    CodegenCaseKernel k{kernel.name, kernel.grid, kernel.block, {}};
    std::string stem = "k" + std::to_string(i);
    if (!write_file_bytes((dir / (stem + ".ptx")).string(), kernel.ptx.data(), kernel.ptx.size()))
      return fail("cannot write " + (dir / stem).string() + ".ptx");
    for (const CudaCubin& cubin : kernel.cubins) {
      k.archs.push_back(cubin.arch);
      std::string path = (dir / (stem + "." + cubin.arch + ".cubin")).string();
      if (!write_file_bytes(path, cubin.image.data(), cubin.image.size()))
        return fail("cannot write " + path);
    }
    file.kernels.push_back(k);
  }
  for (const CudaLaunchStep& launch : plan.launches) {
    if (launch.matmul < 0) {
      file.launches.push_back({launch.kernel, launch.args});
      continue;
    }
    const CudaMatmulInfo& m = plan.matmuls[launch.matmul];
    CodegenCaseLaunch l;
    l.matmul = true;
    l.args = {launch.args[0], launch.args[1], launch.writes[0]};
    l.m = m.shape.m, l.n = m.shape.n, l.k = m.shape.k, l.batch = m.batch;
    l.a_stride = m.a_stride, l.b_stride = m.b_stride, l.c_stride = m.c_stride;
    l.transpose_a = m.shape.transpose_a, l.transpose_b = m.shape.transpose_b;
    l.activation = static_cast<int>(m.shape.epilogue);
    l.bias = m.shape.bias ? launch.args[2] : -1;
    file.launches.push_back(l);
  }

  if (!c.fills.empty()) {
    // Constant inputs, exact constant outputs: no files.
    if (c.fills.size() != plan.num_inputs || c.expects.size() != plan.outputs.size())
      return fail(c.name + ": a fill per input and an expectation per output");
    for (size_t i = 0; i < c.fills.size(); ++i) file.fills.push_back({static_cast<int>(i), c.fills[i]});
    for (size_t o = 0; o < c.expects.size(); ++o) file.expects.push_back({plan.outputs[o], c.expects[o]});
  } else if (!write_inputs_and_expected(c, **module, plan, file, input_sizes, dir)) {
    return false;
  }
  std::string text = codegen_case_text(file);
  if (!write_file_bytes((dir / "case.txt").string(), text.data(), text.size()))
    return fail("cannot write " + (dir / "case.txt").string());
  std::printf("cuda_codegen_cases: %s: %zu kernel(s), %zu launch(es)\n", c.name.c_str(),
              file.kernels.size(), file.launches.size());
  return true;
}

} // namespace
} // namespace mstep::cuda::testing

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: cuda_codegen_cases OUT_DIR\n");
    return 2;
  }
  std::filesystem::path out = argv[1];
  std::vector<std::string> names;
  for (const auto& c : mstep::cuda::testing::cases()) {
    if (!mstep::cuda::testing::generate(c, out)) return 1;
    names.push_back(c.name);
  }
  // The list the GPU test runs, in this order.
  std::string list;
  for (const std::string& name : names) list += name + "\n";
  if (!mstep::cuda::testing::write_file_bytes((out / "cases.txt").string(), list.data(),
                                              list.size())) {
    std::fprintf(stderr, "cuda_codegen_cases: cannot write %s/cases.txt\n", argv[1]);
    return 1;
  }
  return 0;
}
