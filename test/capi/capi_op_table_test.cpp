// Unit tests for the C API's op table (lib/capi/OpTable.h), called the way
// mstep_op calls it: the table covers the C++ API and its signatures agree
// with the entries' operand counts; a representative op of each family
// called through the table gives exactly what the C++ call gives; and every
// OpAttrs error path (unknown, mistyped, missing, duplicate and NULL-named
// attributes, NULL operands).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "lib/capi/OpTable.h"
#include "mstep/mstep.h"
#include "test/unit/TestUtil.h"

namespace mstep::capi {
namespace {

using testing::error_of;
using testing::f32;
using testing::filled;
using ::testing::HasSubstr;
using testing::i64;

/// An attribute of `kind` with the other fields zero, as a C host's
/// designated initializer leaves them.
mstep_attr attr(const char* name, mstep_attr_kind kind) {
  mstep_attr a{};
  a.name = name;
  a.kind = kind;
  return a;
}
mstep_attr int_attr(const char* name, int64_t v) {
  mstep_attr a = attr(name, MSTEP_ATTR_INT);
  a.i = v;
  return a;
}
mstep_attr float_attr(const char* name, double v) {
  mstep_attr a = attr(name, MSTEP_ATTR_FLOAT);
  a.f = v;
  return a;
}
mstep_attr bool_attr(const char* name, bool v) {
  mstep_attr a = attr(name, MSTEP_ATTR_BOOL);
  a.i = v ? 1 : 0;
  return a;
}
/// `v` is the mstep_dtype value (an int, so a test can pass one outside
/// the enum).
mstep_attr dtype_attr(const char* name, int64_t v) {
  mstep_attr a = attr(name, MSTEP_ATTR_DTYPE);
  a.i = v;
  return a;
}
/// `v` must outlive the attribute.
mstep_attr ints_attr(const char* name, const std::vector<int64_t>& v) {
  mstep_attr a = attr(name, MSTEP_ATTR_INTS);
  a.ints = v.data();
  a.num_ints = v.size();
  return a;
}
mstep_attr string_attr(const char* name, const char* v) {
  mstep_attr a = attr(name, MSTEP_ATTR_STRING);
  a.s = v;
  return a;
}

/// What mstep_op does with an entry: count check, call, finish().
std::vector<Tensor> call_op(std::string_view name, std::vector<Tensor> inputs,
                            std::vector<mstep_attr> attrs = {}) {
  const OpEntry* entry = find_op(name);
  if (entry == nullptr) {
    ADD_FAILURE() << "no op " << name;
    return {};
  }
  const int n = static_cast<int>(inputs.size());
  EXPECT_GE(n, entry->min_inputs) << name;
  if (entry->max_inputs >= 0) {
    EXPECT_LE(n, entry->max_inputs) << name;
  }
  OpAttrs op_attrs(name, attrs.data(), attrs.size());
  std::vector<Tensor> results = entry->call(inputs, op_attrs);
  op_attrs.finish(entry->signature);
  return results;
}

/// The single result of call_op.
Tensor call1(std::string_view name, std::vector<Tensor> inputs,
             std::vector<mstep_attr> attrs = {}) {
  std::vector<Tensor> results = call_op(name, std::move(inputs), std::move(attrs));
  EXPECT_EQ(results.size(), 1u) << name;
  return results.empty() ? Tensor() : results[0];
}

/// Same type and exactly the same values: the table makes the same call.
void expect_same(const Tensor& got, const Tensor& want) {
  ASSERT_TRUE(got.defined());
  ASSERT_TRUE(want.defined());
  EXPECT_EQ(got.type(), want.type());
  EXPECT_EQ(got.to_vector<float>(), want.to_vector<float>());
}

// ---- The table ---------------------------------------------------------

/// Every public tensor op of the C++ API the table must hold.
const std::set<std::string>& expected_ops() {
  static const std::set<std::string> names = {
      // Elementwise.h and Tensor.h
      "neg", "abs", "exp", "log", "log1p", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "relu",
      "gelu", "silu", "erf", "reciprocal", "isnan", "isfinite", "logical_not", "to", "detach",
      "add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge",
      "logical_and", "logical_or", "where",
      // Creation.h
      "zeros", "ones", "full", "zeros_like", "ones_like", "full_like", "arange", "rand", "randn",
      // ShapeOps.h
      "reshape", "view", "flatten", "permute", "transpose", "expand", "squeeze", "unsqueeze",
      "slice", "cat", "stack", "chunk", "gather", "index_select", "embedding", "pad", "triu",
      "tril", "scatter_add", "index_add", "slice_scatter",
      // Linalg.h
      "matmul", "bmm", "linear", "conv2d", "max_pool2d", "avg_pool2d",
      // Reduction.h
      "sum", "mean", "max", "min", "argmax", "logsumexp", "var",
      // NN.h
      "softmax", "log_softmax", "layer_norm", "rms_norm", "dropout",
      // Losses.h
      "cross_entropy", "nll_loss", "mse_loss", "binary_cross_entropy_with_logits",
      // Attention.h
      "scaled_dot_product_attention", "fused_sdpa",
      // DynamicOps.h
      "nonzero", "masked_select"};
  return names;
}

TEST(CapiOpTable, SignaturesAreSortedUniqueAndMatchTheEntries) {
  std::vector<std::string> lines = absl::StrSplit(op_signatures(), '\n', absl::SkipEmpty());
  std::set<std::string> names;
  std::string previous;
  for (const std::string& line : lines) {
    SCOPED_TRACE(line);
    const size_t paren = line.find('(');
    ASSERT_NE(paren, std::string::npos);
    ASSERT_EQ(line.back(), ')');
    const std::string name = line.substr(0, paren);
    EXPECT_LT(previous, name) << "sorted, no duplicates";
    previous = name;
    names.insert(name);

    const OpEntry* entry = find_op(name);
    ASSERT_NE(entry, nullptr);
    EXPECT_EQ(std::string(entry->name), name);
    EXPECT_EQ(std::string(entry->signature), line);

    // The operand list (before ';') agrees with min_inputs/max_inputs:
    // '?' operands are optional, "..." any number.
    std::string operands = line.substr(paren + 1, line.size() - paren - 2);
    operands = operands.substr(0, operands.find(';'));
    int required = 0, total = 0;
    bool variadic = false;
    for (absl::string_view operand : absl::StrSplit(operands, ", ", absl::SkipEmpty())) {
      ++total;
      if (absl::EndsWith(operand, "...")) variadic = true;
      if (!absl::EndsWith(operand, "?")) ++required;
    }
    // A left operand a `self` scalar replaces is still passed, as NULL, so
    // the tensor after it is always there: one more than the '?' count says.
    const bool scalar_left = absl::StrContains(line, "self: scalar");
    EXPECT_EQ(entry->min_inputs, required + (scalar_left ? 1 : 0));
    EXPECT_EQ(entry->max_inputs, variadic ? -1 : total);
  }
  EXPECT_EQ(names, expected_ops());
  EXPECT_EQ(find_op("no_such_op"), nullptr);
  EXPECT_EQ(find_op(""), nullptr);
  EXPECT_EQ(find_op("ad"), nullptr);
  EXPECT_EQ(find_op("zzz"), nullptr);
}

// ---- Each family gives what the C++ API gives --------------------------

TEST(CapiOpTable, BinaryWithTensorsAndScalars) {
  Tensor x = filled({2, 3}, 1), y = filled({3}, 2);
  expect_same(call1("add", {x, y}), x + y);
  expect_same(call1("add", {x}, {float_attr("other", 2.5)}), x + 2.5);
  expect_same(call1("add", {x, Tensor()}, {float_attr("other", 2.5)}), x + 2.5);
  // An int scalar keeps its kind: i64 + int stays i64.
  Tensor n = i64({1, 2, 3}, {3});
  Tensor n2 = call1("add", {n}, {int_attr("other", 2)});
  EXPECT_EQ(n2.dtype(), DType::i64);
  expect_same(n2, add(n, Scalar(int64_t{2})));
  expect_same(call1("mul", {n}, {float_attr("other", 0.5)}), mul(n, 0.5));
  // Scalar on the left: self - b, self / b, self ** b.
  expect_same(call1("sub", {Tensor(), x}, {float_attr("self", 1.0)}), sub(1.0, x));
  expect_same(call1("div", {Tensor(), x}, {int_attr("self", 3)}), div(Scalar(int64_t{3}), x));
  expect_same(call1("pow", {x}, {int_attr("other", 2)}), pow(x, Scalar(int64_t{2})));
  expect_same(call1("gt", {x}, {float_attr("other", 0.0)}), gt(x, 0.0));
  expect_same(call1("eq", {n}, {bool_attr("other", true)}), eq(n, true));
  expect_same(call1("neg", {x}), -x);
  Tensor cond = gt(x, 0.0);
  expect_same(call1("where", {cond, x, y}), where(cond, x, y));
  expect_same(call1("where", {cond, x}, {float_attr("other", -1.0)}), where(cond, x, -1.0));
  expect_same(call1("where", {cond, Tensor(), y}, {float_attr("self", 7.0)}), where(cond, 7.0, y));
  expect_same(call1("gelu", {x}, {string_attr("approximate", "tanh")}), gelu(x, "tanh"));
}

TEST(CapiOpTable, CastAndDetach) {
  Tensor x = filled({4}, 3) * 5.0;
  Tensor as_int = call1("to", {x}, {dtype_attr("dtype", MSTEP_I64)});
  EXPECT_EQ(as_int.dtype(), DType::i64);
  expect_same(as_int, to(x, DType::i64));
  expect_same(call1("to", {x}, {dtype_attr("dtype", MSTEP_BF16)}), x.to(DType::bf16));
  Tensor w = filled({4}, 4).requires_grad_();
  Tensor d = call1("detach", {w});
  EXPECT_FALSE(d.requires_grad());
  expect_same(d, w.detach());
}

TEST(CapiOpTable, LinalgAndReductions) {
  Tensor a = filled({2, 3}, 5), b = filled({3, 4}, 6);
  expect_same(call1("matmul", {a, b}), matmul(a, b));
  Tensor w = filled({5, 3}, 7), bias = filled({5}, 8);
  expect_same(call1("linear", {a, w, bias}), linear(a, w, bias));
  expect_same(call1("linear", {a, w}), linear(a, w));
  expect_same(call1("linear", {a, w, Tensor()}), linear(a, w));

  Tensor x = filled({2, 3, 4}, 9);
  expect_same(call1("sum", {x}), sum(x));
  const std::vector<int64_t> dims = {1, -1};
  expect_same(call1("sum", {x}, {ints_attr("dims", dims), bool_attr("keepdim", true)}),
              sum(x, dims, true));
  expect_same(call1("argmax", {x}, {int_attr("dim", 2)}), argmax(x, 2));
  expect_same(call1("argmax", {x}), argmax(x));
  expect_same(call1("var", {x}, {ints_attr("dims", dims), int_attr("correction", 0)}),
              var(x, dims, 0));
}

TEST(CapiOpTable, NNAndLosses) {
  Tensor x = filled({3, 5}, 10);
  expect_same(call1("softmax", {x}, {int_attr("dim", 1)}), softmax(x, 1));
  expect_same(call1("log_softmax", {x}, {int_attr("dim", -1)}), log_softmax(x, -1));
  const std::vector<int64_t> normalized = {5};
  Tensor g = filled({5}, 11);
  expect_same(call1("layer_norm", {x, g}, {ints_attr("normalized_shape", normalized)}),
              layer_norm(x, normalized, g));
  expect_same(call1("rms_norm", {x, Tensor()},
                    {ints_attr("normalized_shape", normalized), float_attr("eps", 1e-3)}),
              rms_norm(x, normalized, {}, 1e-3));

  Tensor lp = log_softmax(x, 1);
  Tensor target = i64({4, -100, 1}, {3});
  expect_same(call1("nll_loss", {lp, target}), nll_loss(lp, target));
  expect_same(call1("nll_loss", {lp, target}, {string_attr("reduction", "sum")}),
              nll_loss(lp, target, Reduction::sum));
  Tensor target2 = i64({4, 0, 1}, {3});
  expect_same(call1("nll_loss", {lp, target2},
                    {string_attr("reduction", "none"), int_attr("ignore_index", 0)}),
              nll_loss(lp, target2, Reduction::none, 0));
  expect_same(call1("cross_entropy", {x, target2}, {float_attr("label_smoothing", 0.1)}),
              cross_entropy(x, target2, Reduction::mean, -100, 0.1));

  manual_seed(7);
  Tensor dropped = call1("dropout", {x}, {float_attr("p", 0.25)});
  manual_seed(7);
  expect_same(dropped, dropout(x, 0.25));
  expect_same(call1("dropout", {x}, {bool_attr("train", false)}), dropout(x, 0.5, false));
}

TEST(CapiOpTable, Attention) {
  Tensor q = filled({2, 4, 8}, 12), k = filled({2, 6, 8}, 13), v = filled({2, 6, 8}, 14);
  SdpaOptions options;
  expect_same(call1("scaled_dot_product_attention", {q, k, v}),
              scaled_dot_product_attention(q, k, v));
  options.is_causal = true;
  options.scale = 0.5;
  expect_same(call1("scaled_dot_product_attention", {q, k, v},
                    {bool_attr("is_causal", true), float_attr("scale", 0.5)}),
              scaled_dot_product_attention(q, k, v, options));
  Tensor mask = gt(filled({4, 6}, 15), -0.5);
  SdpaOptions masked;
  masked.attn_mask = mask;
  expect_same(call1("scaled_dot_product_attention", {q, k, v, mask}),
              scaled_dot_product_attention(q, k, v, masked));

  // fused_sdpa returns out, then the probabilities when asked.
  std::vector<Tensor> fused =
      call_op("fused_sdpa", {q, k, v}, {bool_attr("return_attn_probs", true)});
  ASSERT_EQ(fused.size(), 2u);
  SdpaOptions with_probs;
  with_probs.return_attn_probs = true;
  SdpaResult want = fused_sdpa(q, k, v, with_probs);
  expect_same(fused[0], want.out);
  expect_same(fused[1], want.attn_probs);
}

TEST(CapiOpTable, ShapeOps) {
  Tensor x = filled({2, 3, 4}, 16);
  const std::vector<int64_t> shape = {6, -1};
  expect_same(call1("reshape", {x}, {ints_attr("shape", shape)}), reshape(x, shape));
  const std::vector<int64_t> perm = {2, 0, 1};
  expect_same(call1("permute", {x}, {ints_attr("perm", perm)}), permute(x, perm));
  expect_same(call1("squeeze", {x.unsqueeze(1)}), squeeze(x.unsqueeze(1)));
  expect_same(call1("slice", {x}, {int_attr("dim", 2), int_attr("start", 1)}), slice(x, 2, 1));

  Tensor y = filled({2, 1, 4}, 17), z = filled({2, 2, 4}, 18);
  expect_same(call1("cat", {x, y, z}, {int_attr("dim", 1)}), cat({x, y, z}, 1));
  expect_same(call1("stack", {x, x}), stack({x, x}));

  std::vector<Tensor> pieces = call_op("chunk", {x}, {int_attr("chunks", 2), int_attr("dim", 2)});
  std::vector<Tensor> want = chunk(x, 2, 2);
  ASSERT_EQ(pieces.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) expect_same(pieces[i], want[i]);

  Tensor index = i64({0, 2}, {2});
  expect_same(call1("index_select", {x, index}, {int_attr("dim", 1)}), index_select(x, 1, index));
}

TEST(CapiOpTable, Creation) {
  const std::vector<int64_t> shape = {2, 3};
  Tensor z = call1("zeros", {}, {ints_attr("shape", shape)});
  expect_same(z, zeros(Shape{2, 3}));
  expect_same(call1("ones", {}, {ints_attr("shape", shape), dtype_attr("dtype", MSTEP_F64)}),
              ones(Shape{2, 3}, DType::f64));

  // full follows the scalar's kind without a dtype, as torch.full.
  Tensor fi = call1("full", {}, {ints_attr("shape", shape), int_attr("value", 2)});
  EXPECT_EQ(fi.dtype(), DType::i64);
  expect_same(fi, full(Shape{2, 3}, Scalar(int64_t{2})));
  expect_same(call1("full", {}, {ints_attr("shape", shape), float_attr("value", 2.5)}),
              full(Shape{2, 3}, 2.5));
  expect_same(call1("full", {}, {ints_attr("shape", shape), bool_attr("value", true)}),
              full(Shape{2, 3}, true));

  Tensor r = call1("arange", {}, {int_attr("end", 5)});
  EXPECT_EQ(r.dtype(), DType::i64);
  expect_same(r, arange(5));
  expect_same(call1("arange", {}, {float_attr("end", 2.0), float_attr("step", 0.5)}),
              arange(0, 2.0, 0.5));
  expect_same(call1("arange", {},
                    {int_attr("start", 1), int_attr("end", 7), int_attr("step", 2),
                     dtype_attr("dtype", MSTEP_F32)}),
              arange(1, 7, 2, DType::f32));

  manual_seed(3);
  Tensor rn = call1("randn", {}, {ints_attr("shape", shape)});
  manual_seed(3);
  expect_same(rn, randn(Shape{2, 3}));
  expect_same(call1("full_like", {rn}, {float_attr("value", 4.0)}), full_like(rn, 4.0));
}

// ---- Errors ---------------------------------------------------------------

TEST(CapiOpTable, UnknownAttributeIsRejectedByFinish) {
  Tensor x = filled({2, 3}, 19);
  EXPECT_THAT(error_of([&] { call_op("sum", {x}, {bool_attr("keepdims", true)}); }),
              HasSubstr("mstep_op(\"sum\"): attribute 'keepdims' is not one of "
                        "sum(x; dims: ints = [], keepdim: bool = false). Check the spelling."));
  EXPECT_THAT(error_of([&] { call_op("relu", {x}, {int_attr("dim", 0)}); }),
              HasSubstr("relu(x) takes no attributes"));
  // A scalar for an op without the scalar overload is an unknown attribute.
  EXPECT_THAT(error_of([&] {
                call_op("maximum", {x, x}, {float_attr("other", 1.0)});
              }),
              HasSubstr("attribute 'other' given, but maximum(a, b) takes no attributes."));
  EXPECT_THAT(
      error_of([&] {
        call_op("scaled_dot_product_attention", {x, x, x}, {bool_attr("return_attn_probs", true)});
      }),
      HasSubstr("attribute 'return_attn_probs' is not one of"));
}

TEST(CapiOpTable, WrongAttributeKind) {
  Tensor x = filled({2, 3}, 20);
  EXPECT_THAT(error_of([&] { call_op("sum", {x}, {float_attr("keepdim", 1.0)}); }),
              HasSubstr("attribute 'keepdim' must be a bool, got a float (1)"));
  EXPECT_THAT(error_of([&] { call_op("sum", {x}, {int_attr("dims", 1)}); }),
              HasSubstr("attribute 'dims' must be ints"));
  EXPECT_THAT(error_of([&] { call_op("softmax", {x}, {float_attr("dim", 0.5)}); }),
              HasSubstr("attribute 'dim' must be an int, got a float (0.5)"));
  EXPECT_THAT(error_of([&] { call_op("to", {x}, {int_attr("dtype", 1)}); }),
              HasSubstr("attribute 'dtype' must be a dtype"));
  EXPECT_THAT(error_of([&] { call_op("to", {x}, {dtype_attr("dtype", 42)}); }),
              HasSubstr("holds 42, which is not an mstep_dtype"));
  EXPECT_THAT(error_of([&] { call_op("add", {x}, {string_attr("other", "1")}); }),
              HasSubstr("attribute 'other' must be a scalar (int, float or bool), got a string"));
  EXPECT_THAT(error_of([&] {
                call_op("nll_loss", {x, x}, {string_attr("reduction", "avg")});
              }),
              HasSubstr("use \"none\", \"mean\" or \"sum\""));
  // The conversions that are allowed: int -> float, int -> bool, and a
  // float holding an integer -> int.
  expect_same(call1("sum", {x}, {ints_attr("dims", {}), int_attr("keepdim", 1)}), sum(x, {}, true));
  expect_same(call1("softmax", {x}, {float_attr("dim", 1.0)}), softmax(x, 1));
  expect_same(call1("dropout", {x}, {int_attr("p", 0), bool_attr("train", true)}), dropout(x, 0.0));
}

TEST(CapiOpTable, MissingRequiredAttribute) {
  Tensor x = filled({2, 3}, 21);
  EXPECT_THAT(error_of([&] { call_op("softmax", {x}); }),
              HasSubstr("mstep_op(\"softmax\"): needs attribute 'dim' (int). Signature: "
                        "softmax(x; dim: int)."));
  EXPECT_THAT(error_of([&] { call_op("zeros", {}); }), HasSubstr("needs attribute 'shape' (ints)"));
  EXPECT_THAT(error_of([&] { call_op("add", {x}); }), HasSubstr("needs operands 0 and 1"));
}

TEST(CapiOpTable, BadAttributeLists) {
  const mstep_attr twice[] = {int_attr("dim", 0), int_attr("dim", 1)};
  EXPECT_THAT(error_of([&] { OpAttrs attrs("softmax", twice, 2); }),
              HasSubstr("mstep_op(\"softmax\"): attribute 'dim' is given twice"));
  const mstep_attr unnamed[] = {int_attr("dim", 0), int_attr(nullptr, 1)};
  EXPECT_THAT(error_of([&] { OpAttrs attrs("softmax", unnamed, 2); }),
              HasSubstr("attribute 1 has a NULL name"));
  EXPECT_THAT(error_of([&] { OpAttrs attrs("softmax", nullptr, 1); }),
              HasSubstr("attrs is NULL but num_attrs is 1"));
  mstep_attr bad_kind = int_attr("dim", 0);
  const int kind_99 = 99; // what a C host can store in the enum field
  std::memcpy(&bad_kind.kind, &kind_99, sizeof kind_99);
  EXPECT_THAT(error_of([&] { OpAttrs attrs("softmax", &bad_kind, 1); }),
              HasSubstr("has kind 99, which is not an mstep_attr_kind"));
  mstep_attr null_ints = attr("dims", MSTEP_ATTR_INTS);
  null_ints.num_ints = 2;
  EXPECT_THAT(error_of([&] { OpAttrs attrs("sum", &null_ints, 1); }),
              HasSubstr("num_ints 2 but ints is NULL"));
  mstep_attr null_string = attr("reduction", MSTEP_ATTR_STRING);
  EXPECT_THAT(error_of([&] { OpAttrs attrs("nll_loss", &null_string, 1); }),
              HasSubstr("is a string but s is NULL"));
  OpAttrs empty("relu", nullptr, 0);
  EXPECT_FALSE(empty.has("dim"));
  empty.finish("relu(x)");
}

TEST(CapiOpTable, NullOperands) {
  Tensor x = filled({2, 3}, 22);
  EXPECT_THAT(error_of([&] {
                call_op("matmul", {x, Tensor()});
              }),
              HasSubstr("mstep_op(\"matmul\"): operand 1 is NULL or missing"));
  EXPECT_THAT(error_of([&] { call_op("cat", {x, Tensor(), x}); }), HasSubstr("operand 1 is NULL"));
  EXPECT_THAT(error_of([&] {
                call_op("add", {x, x}, {float_attr("other", 1.0)});
              }),
              HasSubstr("with attribute 'other', operand 0 must be a tensor and operand 1 NULL"));
  EXPECT_THAT(error_of([&] {
                call_op("sub", {x, x}, {float_attr("self", 1.0)});
              }),
              HasSubstr("with attribute 'self', operand 0 must be NULL"));
  EXPECT_THAT(error_of([&] {
                call_op("sub", {Tensor(), x}, {float_attr("self", 1.0), float_attr("other", 1.0)});
              }),
              HasSubstr("at most one of the scalar attributes"));
}

} // namespace
} // namespace mstep::capi
