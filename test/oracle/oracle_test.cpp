// Runs every oracle case (PyTorch computed the expected outputs) through
// mstep and compares, within the case's tolerance. Also checks that every
// public op is covered by at least one case.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "test/oracle/OracleCase.h"

namespace mstep::oracle {

std::map<std::string, OracleFn>& registry() {
  static std::map<std::string, OracleFn> r;
  return r;
}

namespace {

DType parse_dtype(const std::string& s) {
  static const std::map<std::string, DType> names = {
      {"f32", DType::f32}, {"f64", DType::f64}, {"bf16", DType::bf16},
      {"f16", DType::f16}, {"i32", DType::i32}, {"i64", DType::i64},
      {"bool", DType::boolean}, {"float32", DType::f32}, {"float64", DType::f64},
      {"bfloat16", DType::bf16}, {"float16", DType::f16}, {"int32", DType::i32},
      {"int64", DType::i64}};
  auto it = names.find(s);
  if (it == names.end()) throw std::runtime_error("unknown dtype " + s);
  return it->second;
}

double parse_value(const std::string& tok) {
  if (tok == "nan") return NAN;
  if (tok == "inf") return INFINITY;
  if (tok == "-inf") return -INFINITY;
  return std::stod(tok);
}

HostTensor parse_tensor(std::istringstream& in) {
  HostTensor t;
  std::string dtype;
  int64_t rank;
  in >> dtype >> rank;
  t.dtype = parse_dtype(dtype);
  for (int64_t i = 0; i < rank; ++i) {
    int64_t d;
    in >> d;
    t.shape.push_back(d);
  }
  std::string tok;
  while (in >> tok) t.values.push_back(parse_value(tok));
  return t;
}

std::vector<OracleCase> load_cases() {
  // The build writes the file; the environment may point elsewhere.
  const char* path = std::getenv("MSTEP_ORACLE_CASES");
  if (!path) path = MSTEP_ORACLE_CASES_FILE;
  std::vector<OracleCase> cases;
  std::ifstream file(path);
  std::string line;
  OracleCase current;
  while (std::getline(file, line)) {
    std::istringstream in(line);
    std::string kind;
    in >> kind;
    if (kind == "case") {
      current = OracleCase{};
      in >> current.name >> current.op >> current.rtol >> current.atol;
    } else if (kind == "attr") {
      std::string key, tok;
      in >> key;
      auto& vals = current.attrs[key];
      while (in >> tok) vals.push_back(tok);
    } else if (kind == "input") {
      current.inputs.push_back(parse_tensor(in));
    } else if (kind == "expect") {
      current.expected.push_back(parse_tensor(in));
    } else if (kind == "end") {
      cases.push_back(std::move(current));
    }
  }
  return cases;
}

const std::vector<OracleCase>& all_cases() {
  static const std::vector<OracleCase> cases = load_cases();
  return cases;
}

/// Runs a gradient case: the last input is the weight w; every floating
/// input before it requires grad; returns the forward outputs followed by
/// d sum(out0 * w) / d input for each floating input.
std::vector<Tensor> run_with_gradients(const OracleCase& c, const OracleFn& fn) {
  std::vector<Tensor> inputs;
  for (size_t i = 0; i + 1 < c.inputs.size(); ++i) {
    Tensor t = c.in(i);
    if (is_floating(t.dtype())) t.requires_grad_();
    inputs.push_back(t);
  }
  Tensor w = c.in(c.inputs.size() - 1);
  OracleCase forward_case = c;  // the op sees only the forward inputs
  forward_case.inputs.pop_back();
  forward_case.bound = inputs;
  std::vector<Tensor> outs = fn(forward_case);
  sum(outs[0] * w).backward();
  for (const Tensor& t : inputs)
    if (is_floating(t.dtype())) outs.push_back(t.grad().defined() ? t.grad() : zeros_like(t));
  return outs;
}

class OracleTest : public ::testing::TestWithParam<size_t> {};

TEST_P(OracleTest, MatchesPyTorch) {
  const OracleCase& c = all_cases()[GetParam()];
  auto it = registry().find(c.op);
  ASSERT_NE(it, registry().end()) << "no mstep call registered for op " << c.op;
  std::vector<Tensor> got;
  if (c.attr_int("backward", 0)) {
    got = run_with_gradients(c, it->second);
  } else {
    got = it->second(c);
  }
  mark_step();
  ASSERT_EQ(got.size(), c.expected.size()) << c.name;
  for (size_t k = 0; k < got.size(); ++k) {
    const HostTensor& want = c.expected[k];
    ASSERT_EQ(got[k].dtype(), want.dtype)
        << c.name << " output " << k << ": got " << got[k].type().to_string();
    ASSERT_EQ(got[k].shape(), want.shape)
        << c.name << " output " << k << ": got " << got[k].type().to_string()
        << ", want " << want.shape.to_string();
    std::vector<double> v = got[k].to_vector<double>();
    int reported = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      const double w = want.values[i];
      bool ok;
      if (std::isnan(w)) {
        ok = std::isnan(v[i]);
      } else if (std::isinf(w)) {
        ok = v[i] == w;
      } else {
        ok = std::fabs(v[i] - w) <= c.atol + c.rtol * std::fabs(w);
      }
      if (!ok && reported++ < 5)
        ADD_FAILURE() << c.name << " output " << k << " element " << i
                      << ": got " << v[i] << ", PyTorch " << w
                      << " (rtol " << c.rtol << ", atol " << c.atol << ")";
    }
  }
}

std::vector<size_t> case_indices() {
  std::vector<size_t> idx(all_cases().size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  return idx;
}

INSTANTIATE_TEST_SUITE_P(
    PyTorch, OracleTest, ::testing::ValuesIn(case_indices()),
    [](const ::testing::TestParamInfo<size_t>& info) {
      return all_cases()[info.param].name;
    });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(OracleTest);

TEST(OracleCoverage, CaseFileWasGenerated) {
  EXPECT_GT(all_cases().size(), 100u);
}

TEST(OracleCoverage, EveryRegisteredOpHasACase) {
  std::set<std::string> covered;
  for (const OracleCase& c : all_cases()) covered.insert(c.op);
  for (const auto& [op, fn] : registry())
    EXPECT_TRUE(covered.count(op)) << "op " << op << " has no oracle case";
}

TEST(OracleCoverage, EveryPublicOpIsRegistered) {
  // The op library of issue 2. Random ops (rand, randn) cannot match
  // PyTorch's generator; they are tested statistically in the unit tests.
  const char* ops[] = {
      "zeros", "ones", "full", "arange", "neg", "abs", "exp", "log", "sqrt",
      "rsqrt", "sin", "cos", "tanh", "sigmoid", "relu", "gelu", "silu", "erf",
      "reciprocal", "isnan", "isfinite", "add", "sub", "mul", "div", "pow",
      "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge", "logical_and",
      "logical_or", "logical_not", "where", "to", "sum", "mean", "max", "min",
      "argmax", "logsumexp", "var", "reshape", "view", "permute", "transpose",
      "expand", "squeeze", "unsqueeze", "slice", "cat", "stack", "chunk",
      "gather", "index_select", "embedding", "pad", "triu", "tril", "matmul",
      "bmm", "linear", "conv2d", "max_pool2d", "avg_pool2d", "softmax",
      "log_softmax", "layer_norm", "rms_norm", "dropout",
      "scaled_dot_product_attention", "cross_entropy", "nll_loss", "mse_loss",
      "binary_cross_entropy_with_logits", "scatter_add", "index_add", "slice_scatter",
      "log1p", "flatten"};
  for (const char* op : ops)
    EXPECT_TRUE(registry().count(op)) << "public op " << op << " has no oracle registration";
}

}  // namespace

Tensor OracleCase::in(size_t i) const {
  if (i < bound.size()) return bound[i];
  const HostTensor& t = inputs.at(i);
  switch (t.dtype) {
    case DType::f64:
      return from_vector(t.values, t.shape);
    case DType::i32:
    case DType::i64: {
      std::vector<int64_t> v(t.values.begin(), t.values.end());
      return from_vector(v, t.shape, t.dtype);
    }
    case DType::boolean: {
      std::vector<bool> v;
      for (double x : t.values) v.push_back(x != 0);
      return from_vector(v, t.shape);
    }
    default:
      return from_vector(t.values, t.shape, t.dtype);
  }
}

int64_t OracleCase::attr_int(const std::string& key) const {
  return std::stoll(attrs.at(key).at(0));
}
int64_t OracleCase::attr_int(const std::string& key, int64_t fallback) const {
  return has(key) ? attr_int(key) : fallback;
}
double OracleCase::attr_double(const std::string& key) const {
  return std::stod(attrs.at(key).at(0));
}
double OracleCase::attr_double(const std::string& key, double fallback) const {
  return has(key) ? attr_double(key) : fallback;
}
std::vector<int64_t> OracleCase::attr_ints(const std::string& key) const {
  std::vector<int64_t> out;
  for (const std::string& s : attrs.at(key)) out.push_back(std::stoll(s));
  return out;
}
std::string OracleCase::attr_str(const std::string& key, const std::string& fallback) const {
  return has(key) ? attrs.at(key).at(0) : fallback;
}
DType OracleCase::attr_dtype(const std::string& key) const {
  return parse_dtype(attr_str(key));
}
Scalar OracleCase::scalar() const {
  const std::string kind = attr_str("kind", "float");
  if (kind == "int") return Scalar(attr_int("scalar"));
  if (kind == "bool") return Scalar(attr_int("scalar") != 0);
  return Scalar(attr_double("scalar"));
}

}  // namespace mstep::oracle
