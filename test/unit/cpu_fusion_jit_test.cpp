// The cpu backend's fusion JIT (lib/backends/cpu/FusionJit.h): each case
// is a step module of mstep.fusion ops, written as text. Every kernel runs
// on the same inputs as the ref backend running the module, and their
// results must agree: exactly for integers and bools, within a few ulps of
// the dtype for floats (the JIT's f32 exp, log, tanh and erf are
// polynomial approximations; bf16/f16 round once per op, as the ref does).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "lib/backends/cpu/FusionJit.h"
#include "lib/backends/cpu/HostCpuFeatures.h"
#include "lib/compiler/Compiler.h"
#include "mstep/core/HalfTypes.h"
#include "mstep/runtime/Backend.h"

extern char** environ;

namespace mstep::cpu {
namespace {

using ::testing::HasSubstr;

/// One tensor's bytes in host memory.
struct HostTensor {
  TensorType type;
  std::vector<uint8_t> bytes;

  explicit HostTensor(TensorType t)
      : type(std::move(t)), bytes(std::max<size_t>(type.bytes(), 1)) {}
  void* data() { return bytes.data(); }

  double at(int64_t i) const {
    const uint8_t* p = bytes.data() + i * element_size(type.dtype);
    auto read = [p]<typename T>(T) {
      T v;
      std::memcpy(&v, p, sizeof(T));
      return v;
    };
    switch (type.dtype) {
    case DType::f32:
      return read(float{});
    case DType::f64:
      return read(double{});
    case DType::bf16:
      return static_cast<float>(read(BFloat16{}));
    case DType::f16:
      return static_cast<float>(read(Float16{}));
    case DType::i32:
      return read(int32_t{});
    case DType::i64:
      return static_cast<double>(read(int64_t{}));
    case DType::boolean:
      return read(uint8_t{});
    }
    return 0;
  }

  void set(int64_t i, double value) {
    uint8_t* p = bytes.data() + i * element_size(type.dtype);
    auto write = [p](auto v) { std::memcpy(p, &v, sizeof(v)); };
    switch (type.dtype) {
    case DType::f32:
      return write(static_cast<float>(value));
    case DType::f64:
      return write(value);
    case DType::bf16:
      return write(BFloat16(static_cast<float>(value)));
    case DType::f16:
      return write(Float16(static_cast<float>(value)));
    case DType::i32:
      return write(static_cast<int32_t>(value));
    case DType::i64:
      return write(static_cast<int64_t>(value));
    case DType::boolean:
      return write(static_cast<uint8_t>(value != 0));
    }
  }
};

/// How the inputs of a case are filled.
struct InputRange {
  double low = -3, high = 3;
  /// Sprinkle NaN, +-inf and +-0 over float inputs.
  bool special = false;
};

/// Deterministic values in [low, high]: integers rounded, bools 0/1.
HostTensor random_tensor(const TensorType& type, uint64_t seed, const InputRange& range) {
  HostTensor t(type);
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  auto next = [&] {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return static_cast<double>(state >> 11) / static_cast<double>(1ull << 53);
  };
  const double specials[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0};
  for (int64_t i = 0; i < type.numel(); ++i) {
    double v = range.low + (range.high - range.low) * next();
    if (!is_floating(type.dtype)) v = std::round(v);
    if (type.dtype == DType::boolean) v = next() < 0.5;
    if (range.special && is_floating(type.dtype) && i % 7 == 3) v = specials[(i / 7) % 5];
    t.set(i, v);
  }
  return t;
}

struct Tolerance {
  double rtol, atol;
};

Tolerance default_tolerance(DType dtype) {
  switch (dtype) {
  case DType::f32:
    return {2e-6, 1e-6};
  case DType::f64:
    return {1e-13, 1e-14};
  case DType::bf16:
    return {1.6e-2, 1e-2}; // two bf16 ulps: a last-op rounding flip
  case DType::f16:
    return {2e-3, 1e-3};
  default:
    return {0, 0};
  }
}

void expect_close(const HostTensor& got, const HostTensor& want, const std::string& what,
                  std::optional<Tolerance> tolerance = std::nullopt) {
  ASSERT_EQ(got.type, want.type) << what;
  const Tolerance tol = tolerance.value_or(default_tolerance(want.type.dtype));
  int reported = 0;
  int64_t bad = 0;
  for (int64_t i = 0; i < want.type.numel(); ++i) {
    const double g = got.at(i), w = want.at(i);
    const bool ok = (std::isnan(g) && std::isnan(w)) || g == w ||
                    (std::isfinite(w) && std::abs(g - w) <= tol.atol + tol.rtol * std::abs(w));
    if (ok) continue;
    ++bad;
    if (reported++ < 5)
      ADD_FAILURE() << what << " " << want.type.to_string() << " element " << i << ": jit " << g
                    << ", ref " << w;
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << want.type.numel() << " elements differ";
}

/// A step module of fusions, run on the ref backend and through FusionJit.
class StepCase {
public:
  explicit StepCase(std::string text) : text_(std::move(text)) {
    auto graph = trace_graph_from_mlir(text_);
    EXPECT_TRUE(graph.ok()) << graph.status() << "\n" << text_;
    if (graph.ok()) graph_ = std::move(*graph);
  }

  const TraceGraph& graph() const { return graph_; }
  const std::string& text() const { return text_; }

  std::vector<HostTensor> inputs(uint64_t seed, const InputRange& range = {}) const {
    std::vector<HostTensor> inputs;
    for (size_t i = 0; i < graph_.input_types.size(); ++i)
      inputs.push_back(random_tensor(graph_.input_types[i], seed + 101 * i, range));
    return inputs;
  }

  std::vector<HostTensor> run_ref(std::vector<HostTensor> inputs) const {
    std::vector<HostTensor> outputs;
    auto ref = BackendRegistry::get(DeviceType::ref);
    EXPECT_TRUE(ref.ok()) << ref.status();
    if (!ref.ok()) return outputs;
    auto executable = load_compiled_module(text_, **ref, RuntimeOptions{});
    EXPECT_TRUE(executable.ok()) << executable.status();
    if (!executable.ok()) return outputs;
    std::vector<BufferPtr> buffers;
    for (HostTensor& input : inputs) {
      BufferPtr buffer = *(*ref)->allocate(input.type);
      EXPECT_TRUE((*ref)->copy_in(*buffer, input.data(), input.type.bytes()).ok());
      buffers.push_back(buffer);
    }
    auto results = (*executable)->run(buffers);
    EXPECT_TRUE(results.ok()) << results.status();
    if (!results.ok()) return outputs;
    for (const BufferPtr& result : *results) {
      HostTensor& out = outputs.emplace_back(result->type());
      EXPECT_TRUE((*ref)->copy_out(*result, out.data(), out.type.bytes()).ok());
    }
    return outputs;
  }

  /// Runs every fusion node with its JIT kernel (other top-level nodes are
  /// not run: their outputs stay zero) and returns the step's outputs.
  /// `in_place` maps a fusion result to the operand whose memory it takes.
  std::vector<HostTensor> run_jit(const FusionJit& jit, std::vector<HostTensor> inputs,
                                  std::vector<std::pair<int, int>> in_place = {}) const {
    std::vector<std::vector<HostTensor>> values(graph_.nodes.size());
    int k = 0;
    for (uint32_t n = 0; n < graph_.nodes.size(); ++n) {
      const GraphNode& node = graph_.nodes[n];
      if (node.op == OpKind::parameter) {
        values[n].push_back(inputs[n]);
        continue;
      }
      for (const TensorType& type : node.results) values[n].emplace_back(type);
      if (node.op != OpKind::fusion) continue;
      auto kernel = jit.kernel(k++, KernelRequest{graph_, n});
      EXPECT_TRUE(kernel.ok()) << kernel.status();
      if (!kernel.ok() || !*kernel) {
        ADD_FAILURE() << "fusion " << k - 1 << " has no kernel";
        continue;
      }
      std::vector<const void*> operands;
      std::vector<void*> results;
      for (ValueRef v : node.operands) operands.push_back(values[v.node][v.index].data());
      for (HostTensor& result : values[n]) results.push_back(result.data());
      for (auto [result, operand] : in_place) {
        HostTensor& source = values[node.operands[operand].node][node.operands[operand].index];
        results[result] = source.data();
      }
      (*kernel)->run(operands.data(), results.data());
      for (auto [result, operand] : in_place)
        std::memcpy(values[n][result].data(), results[result], values[n][result].type.bytes());
    }
    std::vector<HostTensor> outputs;
    for (ValueRef v : graph_.outputs) outputs.push_back(values[v.node][v.index]);
    return outputs;
  }

  /// Compiles, runs both and compares every output.
  void check(uint64_t seed, const InputRange& range = {},
             std::optional<Tolerance> tolerance = std::nullopt) const {
    auto jit = FusionJit::compile_text(text_);
    ASSERT_TRUE(jit.ok()) << jit.status() << "\n" << text_;
    std::vector<HostTensor> in = inputs(seed, range);
    std::vector<HostTensor> want = run_ref(in);
    std::vector<HostTensor> got = run_jit(**jit, in);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      expect_close(got[i], want[i], absl::StrCat("output ", i), tolerance);
  }

private:
  std::string text_;
  TraceGraph graph_;
};

/// `func.func @step` with one fusion: `inputs` are the argument types, the
/// region's arguments are %a0, %a1, ..., `body` are its ops and `yields`
/// the values it returns, of `result_types`.
std::string one_fusion(const std::vector<std::string>& inputs, const std::string& body,
                       const std::vector<std::string>& yields,
                       const std::vector<std::string>& result_types) {
  std::vector<std::string> args, block_args, names, returns;
  for (size_t i = 0; i < inputs.size(); ++i) {
    args.push_back(absl::StrCat("%i", i, ": ", inputs[i]));
    names.push_back(absl::StrCat("%i", i));
    block_args.push_back(absl::StrCat("%a", i, ": ", inputs[i]));
  }
  for (size_t r = 0; r < result_types.size(); ++r) returns.push_back(absl::StrCat("%f#", r));
  const std::string results = absl::StrJoin(result_types, ", ");
  return absl::StrCat("func.func @step(", absl::StrJoin(args, ", "), ") -> (", results, ") {\n",
                      "  %f:", result_types.size(), " = mstep.fusion ins(",
                      absl::StrJoin(names, ", "), " : ", absl::StrJoin(inputs, ", "), ") -> ",
                      results, " {\n  ^bb0(", absl::StrJoin(block_args, ", "), "):\n", body,
                      "    mstep.yield ", absl::StrJoin(yields, ", "), " : ", results, "\n  }\n",
                      "  return ", absl::StrJoin(returns, ", "), " : ", results, "\n}\n");
}

/// relu(a * b + c) * d with b a row, c a column and d a 0-d scalar, over
/// an [m, n] result ($S and $M, $N in `text` are replaced).
std::string broadcast_chain(int64_t m, int64_t n, absl::string_view dtype = "f32") {
  const std::string body =
      R"(    %m = mstep.mul %a0, %a1 : tensor<$Sx$T>, tensor<$Nx$T> -> tensor<$Sx$T>
    %s = mstep.add %m, %a2 : tensor<$Sx$T>, tensor<$Mx1x$T> -> tensor<$Sx$T>
    %r = mstep.relu %s : tensor<$Sx$T>
    %y = mstep.mul %r, %a3 : tensor<$Sx$T>, tensor<$T> -> tensor<$Sx$T>
    %z = mstep.add %y, %a4 : tensor<$Sx$T>, tensor<1x$Nx$T> -> tensor<$Sx$T>
)";
  std::string text = one_fusion(
      {"tensor<$Sx$T>", "tensor<$Nx$T>", "tensor<$Mx1x$T>", "tensor<$T>", "tensor<1x$Nx$T>"}, body,
      {"%z"}, {"tensor<$Sx$T>"});
  return absl::StrReplaceAll(text, {{"$S", absl::StrCat(m, "x", n)},
                                    {"$M", absl::StrCat(m)},
                                    {"$N", absl::StrCat(n)},
                                    {"$T", dtype}});
}

TEST(FusionJit, BroadcastOperandsMatchRef) {
  for (auto [m, n] : {std::pair<int64_t, int64_t>{1, 1}, {1, 7}, {7, 1}, {3, 5}, {37, 129}}) {
    SCOPED_TRACE(absl::StrCat(m, "x", n));
    StepCase(broadcast_chain(m, n)).check(m * 1000 + n);
  }
}

TEST(FusionJit, LargeOutputsSplitOverThreads) {
  // 600 rows of 300 (180K elements) split by rows; and a 1-D nest split in
  // vector-aligned chunks.
  StepCase(broadcast_chain(600, 300)).check(1);
  StepCase(broadcast_chain(2, 100003)).check(2);
  StepCase(broadcast_chain(600, 300, "f64")).check(3);
}

TEST(FusionJit, OddOneDimensionalSizes) {
  for (int64_t n : {1, 7, 1000003}) {
    SCOPED_TRACE(n);
    std::string text = one_fusion(
        {"tensor<$Nxf32>", "tensor<$Nxf32>"},
        "    %e = mstep.sigmoid %a0 : tensor<$Nxf32>\n"
        "    %p = mstep.mul %e, %a1 : tensor<$Nxf32>, tensor<$Nxf32> -> tensor<$Nxf32>\n"
        "    %q = mstep.sub %p, %a0 : tensor<$Nxf32>, tensor<$Nxf32> -> tensor<$Nxf32>\n",
        {"%q"}, {"tensor<$Nxf32>"});
    StepCase(absl::StrReplaceAll(text, {{"$N", absl::StrCat(n)}})).check(n);
  }
}

TEST(FusionJit, ZeroDimensionalFusion) {
  StepCase(one_fusion({"tensor<f32>", "tensor<f32>"},
                      "    %c = mstep.constant 2.5 : tensor<f32>\n"
                      "    %s = mstep.add %a0, %c : tensor<f32>, tensor<f32> -> tensor<f32>\n"
                      "    %d = mstep.div %s, %a1 : tensor<f32>, tensor<f32> -> tensor<f32>\n"
                      "    %g = mstep.gt %d, %a1 : tensor<f32>, tensor<f32> -> tensor<i1>\n",
                      {"%d", "%g"}, {"tensor<f32>", "tensor<i1>"}))
      .check(5);
}

TEST(FusionJit, ResultsOfOneShape) {
  StepCase(
      one_fusion(
          {"tensor<5x33xf32>", "tensor<33xf32>"},
          "    %s = mstep.add %a0, %a1 : tensor<5x33xf32>, tensor<33xf32> -> tensor<5x33xf32>\n"
          "    %t = mstep.tanh %s : tensor<5x33xf32>\n"
          "    %g = mstep.ge %t, %a1 : tensor<5x33xf32>, tensor<33xf32> -> tensor<5x33xi1>\n"
          "    %c = mstep.cast %g : tensor<5x33xi1> -> tensor<5x33xi32>\n",
          {"%t", "%g", "%s", "%c"},
          {"tensor<5x33xf32>", "tensor<5x33xi1>", "tensor<5x33xf32>", "tensor<5x33xi32>"}))
      .check(6);
}

/// Layer-norm style: rstd [M, 1] and the normalized [M, N] from one region,
/// plus a [N] result: three nests.
std::string results_of_several_shapes(int64_t m, int64_t n) {
  std::string text = one_fusion(
      {"tensor<$Mx$Nxf32>", "tensor<$Mx1xf32>", "tensor<$Mx1xf32>", "tensor<$Nxf32>"},
      "    %eps = mstep.constant 1.0e-05 : tensor<f32>\n"
      "    %v = mstep.abs %a2 : tensor<$Mx1xf32>\n"
      "    %ve = mstep.add %v, %eps : tensor<$Mx1xf32>, tensor<f32> -> tensor<$Mx1xf32>\n"
      "    %r = mstep.rsqrt %ve : tensor<$Mx1xf32>\n"
      "    %c = mstep.sub %a0, %a1 : tensor<$Mx$Nxf32>, tensor<$Mx1xf32> -> tensor<$Mx$Nxf32>\n"
      "    %y = mstep.mul %c, %r : tensor<$Mx$Nxf32>, tensor<$Mx1xf32> -> tensor<$Mx$Nxf32>\n"
      "    %w = mstep.mul %y, %a3 : tensor<$Mx$Nxf32>, tensor<$Nxf32> -> tensor<$Mx$Nxf32>\n"
      "    %e = mstep.exp %a3 : tensor<$Nxf32>\n",
      {"%r", "%w", "%e"}, {"tensor<$Mx1xf32>", "tensor<$Mx$Nxf32>", "tensor<$Nxf32>"});
  return absl::StrReplaceAll(text, {{"$M", absl::StrCat(m)}, {"$N", absl::StrCat(n)}});
}

TEST(FusionJit, ResultsOfSeveralShapes) {
  StepCase(results_of_several_shapes(9, 70)).check(7);
  StepCase(results_of_several_shapes(256, 384)).check(8);
}

TEST(FusionJit, Casts) {
  StepCase(one_fusion({"tensor<67xf32>", "tensor<67xi64>", "tensor<67xf64>", "tensor<67xi1>"},
                      "    %0 = mstep.cast %a0 : tensor<67xf32> -> tensor<67xi32>\n"
                      "    %1 = mstep.cast %a0 : tensor<67xf32> -> tensor<67xbf16>\n"
                      "    %2 = mstep.cast %1 : tensor<67xbf16> -> tensor<67xf16>\n"
                      "    %3 = mstep.cast %a0 : tensor<67xf32> -> tensor<67xi1>\n"
                      "    %4 = mstep.cast %a3 : tensor<67xi1> -> tensor<67xf32>\n"
                      "    %5 = mstep.cast %a1 : tensor<67xi64> -> tensor<67xi32>\n"
                      "    %6 = mstep.cast %a2 : tensor<67xf64> -> tensor<67xf32>\n"
                      "    %7 = mstep.cast %0 : tensor<67xi32> -> tensor<67xf64>\n"
                      "    %8 = mstep.cast %2 : tensor<67xf16> -> tensor<67xf32>\n"
                      "    %9 = mstep.cast %a1 : tensor<67xi64> -> tensor<67xbf16>\n",
                      {"%0", "%1", "%2", "%3", "%4", "%5", "%6", "%7", "%8", "%9"},
                      {"tensor<67xi32>", "tensor<67xbf16>", "tensor<67xf16>", "tensor<67xi1>",
                       "tensor<67xf32>", "tensor<67xi32>", "tensor<67xf32>", "tensor<67xf64>",
                       "tensor<67xf32>", "tensor<67xbf16>"}))
      .check(9, {-300, 300, /*special=*/false});
}

TEST(FusionJit, HalfFloatsComputeInF32) {
  for (absl::string_view dtype : {"bf16", "f16"}) {
    SCOPED_TRACE(dtype);
    std::string text = one_fusion(
        {"tensor<13x77x$T>", "tensor<77x$T>"},
        "    %m = mstep.mul %a0, %a1 : tensor<13x77x$T>, tensor<77x$T> -> tensor<13x77x$T>\n"
        "    %g = mstep.gelu %m : tensor<13x77x$T>\n"
        "    %h = mstep.gelu %a0 {approximate = #mstep.gelu_approximation<tanh>} : "
        "tensor<13x77x$T>\n"
        "    %e = mstep.exp %a1 : tensor<77x$T>\n"
        "    %s = mstep.add %g, %e : tensor<13x77x$T>, tensor<77x$T> -> tensor<13x77x$T>\n"
        "    %d = mstep.div %s, %h : tensor<13x77x$T>, tensor<13x77x$T> -> tensor<13x77x$T>\n",
        {"%s", "%h", "%d"}, {"tensor<13x77x$T>", "tensor<13x77x$T>", "tensor<13x77x$T>"});
    StepCase(absl::StrReplaceAll(text, {{"$T", dtype}})).check(10);
  }
  StepCase(broadcast_chain(300, 200, "bf16")).check(11);
}

TEST(FusionJit, ComparisonsAndLogicGiveBools) {
  StepCase(
      one_fusion(
          {"tensor<4x50xf32>", "tensor<50xf32>", "tensor<4x50xi1>"},
          "    %gt = mstep.gt %a0, %a1 : tensor<4x50xf32>, tensor<50xf32> -> tensor<4x50xi1>\n"
          "    %eq = mstep.eq %a0, %a0 : tensor<4x50xf32>, tensor<4x50xf32> -> tensor<4x50xi1>\n"
          "    %ne = mstep.ne %a0, %a1 : tensor<4x50xf32>, tensor<50xf32> -> tensor<4x50xi1>\n"
          "    %le = mstep.le %a0, %a1 : tensor<4x50xf32>, tensor<50xf32> -> tensor<4x50xi1>\n"
          "    %and = mstep.logical_and %gt, %a2 : tensor<4x50xi1>, tensor<4x50xi1> -> "
          "tensor<4x50xi1>\n"
          "    %or = mstep.logical_or %and, %le : tensor<4x50xi1>, tensor<4x50xi1> -> "
          "tensor<4x50xi1>\n"
          "    %not = mstep.logical_not %or : tensor<4x50xi1>\n"
          "    %nan = mstep.isnan %a0 : tensor<4x50xf32> -> tensor<4x50xi1>\n"
          "    %fin = mstep.isfinite %a1 : tensor<50xf32> -> tensor<50xi1>\n"
          "    %w = mstep.where %a2, %a0, %a1 : tensor<4x50xi1>, tensor<4x50xf32>, tensor<50xf32> "
          "-> tensor<4x50xf32>\n"
          "    %mx = mstep.maximum %a0, %a1 : tensor<4x50xf32>, tensor<50xf32> -> "
          "tensor<4x50xf32>\n"
          "    %bm = mstep.mul %a2, %gt : tensor<4x50xi1>, tensor<4x50xi1> -> tensor<4x50xi1>\n"
          "    %ba = mstep.add %a2, %gt : tensor<4x50xi1>, tensor<4x50xi1> -> tensor<4x50xi1>\n"
          "    %bx = mstep.maximum %a2, %ne : tensor<4x50xi1>, tensor<4x50xi1> -> "
          "tensor<4x50xi1>\n",
          {"%gt", "%eq", "%ne", "%not", "%nan", "%fin", "%w", "%mx", "%bm", "%ba", "%bx"},
          {"tensor<4x50xi1>", "tensor<4x50xi1>", "tensor<4x50xi1>", "tensor<4x50xi1>",
           "tensor<4x50xi1>", "tensor<50xi1>", "tensor<4x50xf32>", "tensor<4x50xf32>",
           "tensor<4x50xi1>", "tensor<4x50xi1>", "tensor<4x50xi1>"}))
      .check(12, {-2, 2, /*special=*/true});
}

/// Every float unary op of the dialect on one [n] input ($T: dtype).
std::string float_math(absl::string_view dtype, int64_t n) {
  std::string body;
  std::vector<std::string> yields, types;
  for (absl::string_view op : {"neg", "abs", "exp", "log", "log1p", "sqrt", "rsqrt", "sin", "cos",
                               "tanh", "sigmoid", "relu", "silu", "erf", "reciprocal", "gelu"}) {
    absl::StrAppend(&body, "    %", op, " = mstep.", op, " %a0 : tensor<$Nx$T>\n");
    yields.push_back(absl::StrCat("%", op));
    types.push_back("tensor<$Nx$T>");
  }
  absl::StrAppend(
      &body, "    %pow = mstep.pow %a0, %a1 : tensor<$Nx$T>, tensor<$T> -> tensor<$Nx$T>\n"
             "    %mn = mstep.minimum %a0, %a1 : tensor<$Nx$T>, tensor<$T> -> tensor<$Nx$T>\n");
  yields.insert(yields.end(), {"%pow", "%mn"});
  types.insert(types.end(), 2, "tensor<$Nx$T>");
  std::string text = one_fusion({"tensor<$Nx$T>", "tensor<$T>"}, body, yields, types);
  return absl::StrReplaceAll(text, {{"$N", absl::StrCat(n)}, {"$T", dtype}});
}

TEST(FusionJit, FloatMath) {
  // Wide arguments: sin and cos reduce exactly, exp over- and underflows.
  StepCase(float_math("f32", 1031)).check(13, {-100, 100, /*special=*/true});
  StepCase(float_math("f32", 1031)).check(14, {-4, 4, /*special=*/false});
  StepCase(float_math("f64", 1031)).check(15, {-30, 30, /*special=*/true});
}

TEST(FusionJit, IntegerOps) {
  for (absl::string_view dtype : {"i32", "i64"}) {
    SCOPED_TRACE(dtype);
    std::string text = one_fusion(
        {"tensor<3x41x$T>", "tensor<41x$T>", "tensor<3x1x$T>"},
        "    %add = mstep.add %a0, %a1 : tensor<3x41x$T>, tensor<41x$T> -> tensor<3x41x$T>\n"
        "    %sub = mstep.sub %add, %a2 : tensor<3x41x$T>, tensor<3x1x$T> -> tensor<3x41x$T>\n"
        "    %mul = mstep.mul %sub, %a1 : tensor<3x41x$T>, tensor<41x$T> -> tensor<3x41x$T>\n"
        "    %pow = mstep.pow %a0, %a2 : tensor<3x41x$T>, tensor<3x1x$T> -> tensor<3x41x$T>\n"
        "    %big = mstep.pow %mul, %a1 : tensor<3x41x$T>, tensor<41x$T> -> tensor<3x41x$T>\n"
        "    %max = mstep.maximum %a0, %a1 : tensor<3x41x$T>, tensor<41x$T> -> tensor<3x41x$T>\n"
        "    %min = mstep.minimum %a0, %a2 : tensor<3x41x$T>, tensor<3x1x$T> -> tensor<3x41x$T>\n"
        "    %neg = mstep.neg %mul : tensor<3x41x$T>\n"
        "    %abs = mstep.abs %neg : tensor<3x41x$T>\n"
        "    %relu = mstep.relu %sub : tensor<3x41x$T>\n"
        "    %lt = mstep.lt %a0, %a2 : tensor<3x41x$T>, tensor<3x1x$T> -> tensor<3x41xi1>\n",
        {"%add", "%sub", "%mul", "%pow", "%big", "%max", "%min", "%neg", "%abs", "%relu", "%lt"},
        {"tensor<3x41x$T>", "tensor<3x41x$T>", "tensor<3x41x$T>", "tensor<3x41x$T>",
         "tensor<3x41x$T>", "tensor<3x41x$T>", "tensor<3x41x$T>", "tensor<3x41x$T>",
         "tensor<3x41x$T>", "tensor<3x41x$T>", "tensor<3x41xi1>"});
    // Exponents from -3 (0 unless the base is +-1, never a division by
    // zero for base 0) to 9; large products wrap.
    StepCase(absl::StrReplaceAll(text, {{"$T", dtype}})).check(16, {-3, 9});
  }
}

TEST(FusionJit, CreationOpsInsideTheRegion) {
  StepCase(
      one_fusion(
          {"tensor<6x10xf32>", "tensor<f32>", "tensor<10xf32>"},
          "    %f = mstep.full %a1 : tensor<f32> -> tensor<6x10xf32>\n"
          "    %e = mstep.expand %a2 : tensor<10xf32> -> tensor<6x10xf32>\n"
          "    %c = mstep.constant -2.0 : tensor<f32>\n"
          "    %m = mstep.mul %f, %e : tensor<6x10xf32>, tensor<6x10xf32> -> tensor<6x10xf32>\n"
          "    %s = mstep.add %m, %c : tensor<6x10xf32>, tensor<f32> -> tensor<6x10xf32>\n"
          "    %t = mstep.add %s, %a0 : tensor<6x10xf32>, tensor<6x10xf32> -> tensor<6x10xf32>\n",
          {"%t", "%e"}, {"tensor<6x10xf32>", "tensor<6x10xf32>"}))
      .check(17);
}

TEST(FusionJit, ResultsWrittenOverOperands) {
  // The memory plan may give a result its same-shape operand's memory.
  StepCase chain(broadcast_chain(70, 1000));
  auto jit = FusionJit::compile_text(chain.text());
  ASSERT_TRUE(jit.ok()) << jit.status();
  std::vector<HostTensor> in = chain.inputs(18);
  expect_close(chain.run_jit(**jit, in, {{0, 0}})[0], chain.run_ref(in)[0], "in place");

  // Three nests: the [M, N] and [N] results over operands 0 and 3, which
  // the [M, N] nest reads ([N] broadcast): it must run first.
  StepCase shapes(results_of_several_shapes(64, 600));
  auto jit2 = FusionJit::compile_text(shapes.text());
  ASSERT_TRUE(jit2.ok()) << jit2.status();
  in = shapes.inputs(19);
  std::vector<HostTensor> want = shapes.run_ref(in);
  std::vector<HostTensor> got = shapes.run_jit(**jit2, in, {{1, 0}, {2, 3}, {0, 1}});
  for (size_t i = 0; i < want.size(); ++i)
    expect_close(got[i], want[i], absl::StrCat("output ", i));
}

/// Two fusions with a reduction between them, in program order.
constexpr absl::string_view kTwoFusions = R"(
func.func @step(%x: tensor<8x16xf32>, %b: tensor<16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>, tensor<8x16xi1>) {
  %f = mstep.fusion ins(%x, %b : tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32> {
  ^bb0(%a0: tensor<8x16xf32>, %a1: tensor<16xf32>):
    %s = mstep.add %a0, %a1 : tensor<8x16xf32>, tensor<16xf32> -> tensor<8x16xf32>
    %e = mstep.exp %s : tensor<8x16xf32>
    mstep.yield %e : tensor<8x16xf32>
  }
  %sum = mstep.sum %f {dims = array<i64: 0>, keepdim = false} : tensor<8x16xf32> -> tensor<16xf32>
  %g:2 = mstep.fusion ins(%f, %b : tensor<8x16xf32>, tensor<16xf32>) -> tensor<16xf32>, tensor<8x16xi1> {
  ^bb0(%a0: tensor<8x16xf32>, %a1: tensor<16xf32>):
    %n = mstep.neg %a1 : tensor<16xf32>
    %c = mstep.lt %a0, %n : tensor<8x16xf32>, tensor<16xf32> -> tensor<8x16xi1>
    mstep.yield %n, %c : tensor<16xf32>, tensor<8x16xi1>
  }
  return %f, %g#0, %g#1 : tensor<8x16xf32>, tensor<16xf32>, tensor<8x16xi1>
}
)";

TEST(FusionJit, SeveralFusionsInProgramOrder) {
  StepCase step{std::string(kTwoFusions)};
  auto jit = FusionJit::compile_text(step.text());
  ASSERT_TRUE(jit.ok()) << jit.status();
  EXPECT_EQ((*jit)->num_fusions(), 2);
  step.check(20);
}

TEST(FusionJit, ObjectRoundTripGivesIdenticalResults) {
  StepCase step(results_of_several_shapes(40, 2000));
  auto compiled = FusionJit::compile_text(step.text());
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  const std::string object = (*compiled)->object();
  auto loaded = FusionJit::load(object);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->num_fusions(), (*compiled)->num_fusions());
  EXPECT_EQ((*loaded)->object(), object);
  std::vector<HostTensor> in = step.inputs(21);
  std::vector<HostTensor> first = step.run_jit(**compiled, in);
  compiled->reset(); // the loaded code stands alone
  std::vector<HostTensor> second = step.run_jit(**loaded, in);
  ASSERT_EQ(first.size(), second.size());
  for (size_t i = 0; i < first.size(); ++i) EXPECT_EQ(first[i].bytes, second[i].bytes) << i;
}

TEST(FusionJit, CorruptObjectsAreErrors) {
  auto jit = FusionJit::compile_text(broadcast_chain(4, 9));
  ASSERT_TRUE(jit.ok()) << jit.status();
  const std::string object = (*jit)->object();
  std::vector<std::string> corrupt = {"",
                                      "garbage",
                                      std::string(1000, '\0'),
                                      object.substr(0, object.size() / 2),
                                      object.substr(0, 40),
                                      object + "x"};
  for (size_t at : {size_t{5}, size_t{20}, object.size() / 3, object.size() - 10}) {
    std::string flipped = object;
    flipped[at] ^= 0x5a;
    corrupt.push_back(flipped);
  }
  corrupt.push_back(
      absl::StrReplaceAll(object, {{"mstep-fusion-jit 2 ", "mstep-fusion-jit 999 "}}));
  for (const std::string& bytes : corrupt) {
    auto loaded = FusionJit::load(bytes);
    EXPECT_FALSE(loaded.ok()) << "loaded " << bytes.size() << " corrupt bytes";
  }
}

TEST(FusionJit, MalformedObjectCodeIsAnError) {
  // A well-formed index around code that is not a shared object.
  auto jit = FusionJit::compile_text(broadcast_chain(4, 9));
  ASSERT_TRUE(jit.ok()) << jit.status();
  auto index = parse_fusion_object((*jit)->object());
  ASSERT_TRUE(index.ok()) << index.status();
  for (std::string code :
       {std::string("not an ELF object"), index->shared_object.substr(0, 64),
        index->shared_object.substr(0, index->shared_object.size() / 2),
        std::string(index->shared_object.size(), '\x7f')}) {
    FusionObject bad = *index;
    bad.shared_object = code;
    EXPECT_FALSE(FusionJit::load(serialize_fusion_object(bad)).ok());
  }
  // A nest entry the shared object does not export.
  FusionObject renamed = *index;
  renamed.fusions[0].nests[0].symbol = "no_such_entry";
  auto loaded = FusionJit::load(serialize_fusion_object(renamed));
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(loaded.status().message(), HasSubstr("no_such_entry"));
}

/// The index of a compiled broadcast chain, to forge targets from.
FusionObject compiled_index() {
  auto jit = FusionJit::compile_text(broadcast_chain(4, 9));
  EXPECT_TRUE(jit.ok()) << jit.status();
  auto index = parse_fusion_object((*jit)->object());
  EXPECT_TRUE(index.ok()) << index.status();
  return *index;
}

TEST(FusionJit, RecordsTheTargetFeaturesOfThisHost) {
  const FusionTarget target = compiled_index().target;
  EXPECT_EQ(target.arch, host_architecture());
  EXPECT_FALSE(target.cpu.empty());
  for (const std::string& feature : target.features)
    EXPECT_TRUE(host_has_cpu_feature(feature)) << feature;
#if defined(__x86_64__)
  EXPECT_THAT(target.features, ::testing::Contains("sse2"));
#endif
}

TEST(FusionJit, CodeForACpuWithAFeatureThisHostLacksIsAnError) {
  // Forge the record: a feature this host's CPU does not have (AMD and
  // Intel each have some the other lacks), as if compiled elsewhere.
  std::string lacking;
  for (const std::string& feature : known_cpu_features())
    if (!host_has_cpu_feature(feature)) lacking = feature;
  if (lacking.empty()) GTEST_SKIP() << "this host has every feature the runtime knows";
  FusionObject forged = compiled_index();
  forged.target.features.push_back(lacking);
  auto loaded = FusionJit::load(serialize_fusion_object(forged));
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(loaded.status().message(), HasSubstr(lacking));
  EXPECT_THAT(loaded.status().message(), HasSubstr("lacks"));
}

TEST(FusionJit, CodeWithAnUncheckableFeatureOrForAnotherArchitectureIsAnError) {
  FusionObject unknown = compiled_index();
  unknown.target.features.push_back("quantum-entanglement");
  auto loaded = FusionJit::load(serialize_fusion_object(unknown));
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(loaded.status().message(), HasSubstr("quantum-entanglement"));

  FusionObject other = compiled_index();
  other.target.arch = "riscv64";
  loaded = FusionJit::load(serialize_fusion_object(other));
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(loaded.status().message(), HasSubstr("riscv64"));
}

// The child of SerializedCodeRunsTheSameInAFreshProcess: it loads the file
// the parent names and writes the outputs' bytes. Disabled, so that ctest
// does not run it alone; the parent runs it with --gtest_also_run_disabled_tests.
TEST(FusionJitChild, DISABLED_LoadsAndRuns) {
  const char* object_path = std::getenv("MSTEP_TEST_FUSION_OBJECT");
  const char* results_path = std::getenv("MSTEP_TEST_FUSION_RESULTS");
  if (!object_path || !results_path) GTEST_SKIP() << "run by the FreshProcess test";
  std::ifstream in(object_path, std::ios::binary);
  const std::string object(std::istreambuf_iterator<char>(in), {});
  auto loaded = FusionJit::load(object);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  StepCase step(results_of_several_shapes(40, 2000));
  std::ofstream out(results_path, std::ios::binary);
  for (const HostTensor& t : step.run_jit(**loaded, step.inputs(21)))
    out.write(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
  ASSERT_TRUE(out.good());
}

TEST(FusionJit, SerializedCodeRunsTheSameInAFreshProcess) {
  StepCase step(results_of_several_shapes(40, 2000));
  auto compiled = FusionJit::compile_text(step.text());
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  std::string want;
  for (const HostTensor& t : step.run_jit(**compiled, step.inputs(21)))
    want.append(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());

  std::string dir = (std::filesystem::temp_directory_path() / "mstep_fresh_XXXXXX").string();
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  const std::string object_path = dir + "/fusions.jit", results_path = dir + "/results.bin";
  {
    std::ofstream out(object_path, std::ios::binary);
    out << (*compiled)->object();
  }
  // This test binary again, running only the child test, in a process that
  // has compiled nothing.
  std::vector<std::string> env = {"MSTEP_TEST_FUSION_OBJECT=" + object_path,
                                  "MSTEP_TEST_FUSION_RESULTS=" + results_path};
  for (char** e = environ; *e; ++e) env.push_back(*e);
  std::vector<char*> envp, argv;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string exe = "/proc/self/exe", filter = "--gtest_filter=FusionJitChild.DISABLED_LoadsAndRuns",
              disabled = "--gtest_also_run_disabled_tests";
  argv = {exe.data(), filter.data(), disabled.data(), nullptr};
  pid_t pid = 0;
  ASSERT_EQ(::posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv.data(), envp.data()), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  std::ifstream in(results_path, std::ios::binary);
  const std::string got(std::istreambuf_iterator<char>(in), {});
  EXPECT_EQ(got.size(), want.size());
  EXPECT_TRUE(got == want) << "the fresh process computed different bits";
  std::filesystem::remove_all(dir);
}

TEST(FusionJit, KernelChecksTheNode) {
  auto jit = FusionJit::compile_text(broadcast_chain(4, 9));
  ASSERT_TRUE(jit.ok()) << jit.status();
  StepCase other(broadcast_chain(4, 10));
  const uint32_t fusion_node = static_cast<uint32_t>(other.graph().input_types.size());
  auto mismatched = (*jit)->kernel(0, KernelRequest{other.graph(), fusion_node});
  ASSERT_FALSE(mismatched.ok());
  EXPECT_THAT(mismatched.status().message(), HasSubstr("f32[4, 9]"));
  EXPECT_FALSE((*jit)->kernel(1, KernelRequest{other.graph(), fusion_node}).ok());
  EXPECT_FALSE((*jit)->kernel(0, KernelRequest{other.graph(), 0}).ok()); // a parameter
}

TEST(FusionJit, ModuleWithoutFusionsCompiles) {
  auto jit = FusionJit::compile_text(R"(
func.func @step(%x: tensor<4xf32>) -> tensor<f32> {
  %s = mstep.sum %x {dims = array<i64: 0>, keepdim = false} : tensor<4xf32> -> tensor<f32>
  return %s : tensor<f32>
})");
  ASSERT_TRUE(jit.ok()) << jit.status();
  EXPECT_EQ((*jit)->num_fusions(), 0);
  auto loaded = FusionJit::load((*jit)->object());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_FALSE(FusionJit::compile_text("func.func @nostep() { return }").ok());
  EXPECT_FALSE(FusionJit::compile_text("not mlir").ok());
}

} // namespace
} // namespace mstep::cpu
