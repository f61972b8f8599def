// ScalarValue forms of custom ops (mstep/runtime/CustomScalarForm.h): the
// builder, equality and fingerprint, and the registration check against
// the op's schema (check_scalar_form, declared in CustomOp.h).
#include "mstep/runtime/CustomScalarForm.h"

#include <algorithm>
#include <bit>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "mstep/core/Hash.h"
#include "mstep/runtime/CustomOp.h"

namespace mstep {

namespace {

constexpr absl::string_view kNames[] = {
    "input", "constant", "attr", "neg", "abs", "exp", "log", "log1p", "sqrt", "rsqrt", "sin", "cos",
    "tanh", "erf", "sigmoid", "silu", "relu", "reciprocal", "add", "sub", "mul", "div", "pow",
    "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or",
    "logical_not", "where"};
static_assert(std::size(kNames) == static_cast<size_t>(ScalarOp::where) + 1);

bool is_comparison(ScalarOp op) { return op >= ScalarOp::eq && op <= ScalarOp::ge; }
bool is_logical(ScalarOp op) { return op >= ScalarOp::logical_and && op <= ScalarOp::logical_not; }

} // namespace

absl::string_view scalar_op_name(ScalarOp op) { return kNames[static_cast<size_t>(op)]; }

bool ScalarNode::operator==(const ScalarNode& other) const {
  return op == other.op && args == other.args && input == other.input &&
         std::bit_cast<uint64_t>(value) == std::bit_cast<uint64_t>(other.value) &&
         attr == other.attr && predicate == other.predicate;
}

uint64_t CustomScalarForm::fingerprint() const {
  uint64_t h = hash_string("mstep.scalar_form");
  for (const ScalarNode& n : nodes) {
    h = hash_combine(h, static_cast<uint64_t>(n.op));
    for (int32_t a : n.args) h = hash_combine(h, static_cast<uint64_t>(static_cast<int64_t>(a)));
    h = hash_combine(h, static_cast<uint64_t>(n.input));
    h = hash_combine(h, hash_double(n.value));
    h = hash_combine(h, hash_string(n.attr));
  }
  for (int32_t o : outputs) h = hash_combine(h, static_cast<uint64_t>(static_cast<int64_t>(o)));
  return h;
}

std::string CustomScalarForm::to_string() const {
  std::vector<std::string> text(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    const ScalarNode& n = nodes[i];
    auto arg = [&](int k) { return n.args[k] >= 0 ? text[n.args[k]] : std::string("?"); };
    switch (n.op) {
      case ScalarOp::input: text[i] = absl::StrCat("in", n.input); break;
      case ScalarOp::constant: text[i] = absl::StrCat(n.value); break;
      case ScalarOp::attr: text[i] = absl::StrCat("attr(", n.attr, ")"); break;
      case ScalarOp::where:
        text[i] = absl::StrCat("where(", arg(0), ", ", arg(1), ", ", arg(2), ")");
        break;
      default:
        text[i] = n.args[1] >= 0
                      ? absl::StrCat(scalar_op_name(n.op), "(", arg(0), ", ", arg(1), ")")
                      : absl::StrCat(scalar_op_name(n.op), "(", arg(0), ")");
    }
  }
  std::vector<std::string> out;
  for (int32_t o : outputs) out.push_back(o >= 0 && o < static_cast<int32_t>(text.size()) ? text[o] : "?");
  return absl::StrCat("[", absl::StrJoin(out, ", "), "]");
}

// ---- ScalarFormBuilder ----

void ScalarFormBuilder::fail(std::string message) {
  if (form_.error.empty()) form_.error = std::move(message);
}

ScalarValue ScalarFormBuilder::push(ScalarNode node) {
  form_.nodes.push_back(std::move(node));
  return ScalarValue(this, static_cast<int32_t>(form_.nodes.size() - 1));
}

int32_t ScalarFormBuilder::use(ScalarValue x, bool predicate, ScalarOp by) {
  if (x.owner_ != this || x.index_ < 0) {
    fail(absl::StrCat(scalar_op_name(by), " is given a value that this scalar form's builder did "
                                          "not make"));
    return -1;
  }
  if (form_.nodes[x.index_].predicate != predicate)
    fail(absl::StrCat(scalar_op_name(by), " needs ", predicate ? "a predicate" : "a number",
                      " and is given ", predicate ? "a number" : "a predicate (a comparison)",
                      predicate ? "; compare it first (e.g. x > 0.0)"
                                : "; select numbers with where(p, a, b)"));
  return x.index_;
}

ScalarValue ScalarFormBuilder::input(int64_t index) {
  if (index < 0) fail(absl::StrCat("input(", index, ") has a negative index"));
  return push({.op = ScalarOp::input, .input = index});
}

ScalarValue ScalarFormBuilder::constant(double value) {
  return push({.op = ScalarOp::constant, .value = value});
}

ScalarValue ScalarFormBuilder::attr(absl::string_view name) {
  return push({.op = ScalarOp::attr, .attr = std::string(name)});
}

ScalarValue ScalarFormBuilder::unary(ScalarOp op, ScalarValue x) {
  const bool logical = op == ScalarOp::logical_not;
  return push({.op = op, .args = {use(x, logical, op), -1, -1}, .predicate = logical});
}

ScalarValue ScalarFormBuilder::binary(ScalarOp op, ScalarValue a, ScalarValue b) {
  const bool logical = is_logical(op);
  return push({.op = op,
               .args = {use(a, logical, op), use(b, logical, op), -1},
               .predicate = logical || is_comparison(op)});
}

ScalarValue ScalarFormBuilder::where(ScalarValue condition, ScalarValue a, ScalarValue b) {
  return push({.op = ScalarOp::where,
               .args = {use(condition, true, ScalarOp::where), use(a, false, ScalarOp::where),
                        use(b, false, ScalarOp::where)}});
}

CustomScalarForm ScalarFormBuilder::build(const std::vector<ScalarValue>& outputs) && {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const ScalarValue& o = outputs[i];
    if (o.owner_ != this || o.index_ < 0) {
      fail(absl::StrCat("output ", i, " is not a value of this scalar form"));
      form_.outputs.push_back(-1);
      continue;
    }
    if (form_.nodes[o.index_].predicate)
      fail(absl::StrCat("output ", i, " is a predicate; outputs are numbers (use where(p, 1.0, "
                                      "0.0) for a 0/1 mask)"));
    form_.outputs.push_back(o.index_);
  }
  return std::move(form_);
}

CustomScalarForm make_scalar_form(
    absl::FunctionRef<std::vector<ScalarValue>(ScalarFormBuilder&)> fn) {
  ScalarFormBuilder builder;
  std::vector<ScalarValue> outputs = fn(builder);
  return std::move(builder).build(outputs);
}

// ---- operators ----

namespace {

ScalarFormBuilder* builder_of(ScalarValue a, ScalarValue b) { return a.builder() ? a.builder() : b.builder(); }

/// `op` on a and b through their builder; without one (two default
/// Scalars) there is nothing to record into, and build() reports the
/// output that is not a value of the form.
template <typename Fn> ScalarValue apply(ScalarValue a, ScalarValue b, Fn fn) {
  ScalarFormBuilder* f = builder_of(a, b);
  return f ? fn(*f) : ScalarValue();
}

ScalarValue constant_for(ScalarValue other, double v) {
  return other.builder() ? other.builder()->constant(v) : ScalarValue();
}

} // namespace

ScalarValue operator+(ScalarValue a, ScalarValue b) { return apply(a, b, [&](auto& f) { return f.add(a, b); }); }
ScalarValue operator-(ScalarValue a, ScalarValue b) { return apply(a, b, [&](auto& f) { return f.sub(a, b); }); }
ScalarValue operator*(ScalarValue a, ScalarValue b) { return apply(a, b, [&](auto& f) { return f.mul(a, b); }); }
ScalarValue operator/(ScalarValue a, ScalarValue b) { return apply(a, b, [&](auto& f) { return f.div(a, b); }); }
ScalarValue operator-(ScalarValue a) { return apply(a, a, [&](auto& f) { return f.neg(a); }); }
ScalarValue operator+(ScalarValue a, double b) { return a + constant_for(a, b); }
ScalarValue operator-(ScalarValue a, double b) { return a - constant_for(a, b); }
ScalarValue operator*(ScalarValue a, double b) { return a * constant_for(a, b); }
ScalarValue operator/(ScalarValue a, double b) { return a / constant_for(a, b); }
ScalarValue operator+(double a, ScalarValue b) { return constant_for(b, a) + b; }
ScalarValue operator-(double a, ScalarValue b) { return constant_for(b, a) - b; }
ScalarValue operator*(double a, ScalarValue b) { return constant_for(b, a) * b; }
ScalarValue operator/(double a, ScalarValue b) { return constant_for(b, a) / b; }
ScalarValue operator<(ScalarValue a, ScalarValue b) { return apply(a, b, [&](auto& f) { return f.lt(a, b); }); }
ScalarValue operator<=(ScalarValue a, ScalarValue b) { return apply(a, b, [&](auto& f) { return f.le(a, b); }); }
ScalarValue operator>(ScalarValue a, ScalarValue b) { return apply(a, b, [&](auto& f) { return f.gt(a, b); }); }
ScalarValue operator>=(ScalarValue a, ScalarValue b) { return apply(a, b, [&](auto& f) { return f.ge(a, b); }); }
ScalarValue operator<(ScalarValue a, double b) { return a < constant_for(a, b); }
ScalarValue operator<=(ScalarValue a, double b) { return a <= constant_for(a, b); }
ScalarValue operator>(ScalarValue a, double b) { return a > constant_for(a, b); }
ScalarValue operator>=(ScalarValue a, double b) { return a >= constant_for(a, b); }

// ---- the check at registration ----

absl::Status check_scalar_form(absl::string_view op, const CustomOpSchema& schema) {
  if (!schema.scalar_form) return absl::OkStatus();
  const CustomScalarForm& form = *schema.scalar_form;
  auto bad = [&](auto&&... parts) {
    return absl::InvalidArgumentError(
        absl::StrCat("custom op '", op, "': its scalar form ", parts...));
  };
  if (!form.error.empty()) return bad("is malformed: ", form.error);
  if (static_cast<int>(form.outputs.size()) != schema.num_outputs)
    return bad("gives ", form.outputs.size(), " outputs; the schema declares ",
               schema.num_outputs);
  for (const ScalarNode& n : form.nodes) {
    if (n.op == ScalarOp::input && n.input >= static_cast<int64_t>(schema.inputs.size()))
      return bad("reads input ", n.input, "; the schema declares ", schema.inputs.size(),
                 " inputs");
    if (n.op == ScalarOp::attr) {
      auto spec = std::find_if(schema.attrs.begin(), schema.attrs.end(),
                               [&](const CustomAttrSpec& a) { return a.name == n.attr; });
      if (spec == schema.attrs.end())
        return bad("reads attribute '", n.attr, "', which the schema does not declare");
      if (spec->type != CustomAttrType::float64 && spec->type != CustomAttrType::int64 &&
          spec->type != CustomAttrType::boolean)
        return bad("reads attribute '", n.attr, "' of type ", custom_attr_type_name(spec->type),
                   "; a scalar form reads float, int and bool attributes (as constants)");
    }
  }
  for (size_t i = 0; i < schema.inputs.size(); ++i) {
    const CustomInputSpec& in = schema.inputs[i];
    const std::string label = in.name.empty() ? absl::StrCat(i) : absl::StrCat(i, " ('", in.name, "')");
    if (in.dtypes.empty())
      return bad("computes in floating point, but input ", label,
                 " accepts any dtype; list its floating dtypes (f32, f64, bf16, f16)");
    for (DType t : in.dtypes)
      if (!is_floating(t))
        return bad("computes in floating point, but input ", label, " accepts ", dtype_name(t),
                   "; a scalar form covers floating inputs only (f32, f64, bf16, f16)");
  }
  return absl::OkStatus();
}

} // namespace mstep
