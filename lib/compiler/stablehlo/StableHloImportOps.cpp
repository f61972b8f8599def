// StableHLO in, the op table: each supported stablehlo op as mstep trace
// nodes. StableHLO's ops are explicit (operands of one shape, broadcasts
// spelled out), so most map onto one mstep op; broadcast_in_dim, iota,
// dot_general and reduce take a few (see each below). Every op's result
// type is checked against the one the module declares, so a malformed body
// is an error at its op, never a graph of another shape.
#include "lib/compiler/stablehlo/StableHloImportOps.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"

namespace mstep::stablehlo {

namespace {

// ---------------------------------------------------------- attributes

/// An attribute of `op`, inherent (`<{...}>`) or discardable (`{...}`).
mlir::Attribute find_attr(mlir::Operation* op, llvm::StringRef name) {
  if (auto dict = mlir::dyn_cast_or_null<mlir::DictionaryAttr>(op->getPropertiesAsAttribute()))
    if (mlir::Attribute a = dict.get(name)) return a;
  return op->getAttr(name);
}

/// `array<i64: ...>` (or the older `dense<[...]> : tensor<Nxi64>`).
std::optional<std::vector<int64_t>> i64_list(mlir::Attribute a) {
  if (auto arr = mlir::dyn_cast_or_null<mlir::DenseI64ArrayAttr>(a))
    return std::vector<int64_t>(arr.asArrayRef().begin(), arr.asArrayRef().end());
  if (auto dense = mlir::dyn_cast_or_null<mlir::DenseIntElementsAttr>(a)) {
    std::vector<int64_t> out;
    for (const llvm::APInt& v : dense.getValues<llvm::APInt>()) out.push_back(v.getSExtValue());
    return out;
  }
  return std::nullopt;
}

/// The text of a stablehlo attribute, which is opaque here: "dot<...>" of
/// `#stablehlo.dot<...>`, "comparison_direction EQ" of
/// `#stablehlo<comparison_direction EQ>`.
std::optional<std::string> opaque_text(mlir::Attribute a) {
  if (auto o = mlir::dyn_cast_or_null<mlir::OpaqueAttr>(a))
    if (o.getDialectNamespace() == "stablehlo") return o.getAttrData().str();
  return std::nullopt;
}

/// The list after `key = ` in an opaque attribute ("lhs_contracting_dimensions
/// = [1, 2]"): empty when the key is absent, nullopt when it is malformed.
std::optional<std::vector<int64_t>> opaque_list(const std::string& text, const std::string& key) {
  size_t at = 0;
  while ((at = text.find(key, at)) != std::string::npos) {
    const bool starts = at == 0 || !(std::isalnum(text[at - 1]) || text[at - 1] == '_');
    size_t p = at + key.size();
    while (p < text.size() && text[p] == ' ') ++p;
    if (!starts || p >= text.size() || text[p] != '=') {
      at += key.size();
      continue;
    }
    ++p;
    while (p < text.size() && text[p] == ' ') ++p;
    if (p >= text.size() || text[p] != '[') return std::nullopt;
    const size_t close = text.find(']', p);
    if (close == std::string::npos) return std::nullopt;
    std::vector<int64_t> out;
    std::string item;
    for (size_t i = p + 1; i <= close; ++i) {
      if (text[i] == ',' || text[i] == ']') {
        if (item.find_first_not_of(' ') == std::string::npos) {
          if (text[i] == ',') return std::nullopt;
        } else {
          char* end = nullptr;
          const long long v = std::strtoll(item.c_str(), &end, 10);
          if (end == item.c_str() || std::string(end).find_first_not_of(' ') != std::string::npos)
            return std::nullopt;
          out.push_back(v);
        }
        item.clear();
      } else {
        item += text[i];
      }
    }
    return out;
  }
  return std::vector<int64_t>{};
}

// ------------------------------------------------------------- op table

/// One op being imported: its operands' values and types, its declared
/// result type, and the located errors about it.
class OpContext {
 public:
  OpContext(mlir::Operation* op, GraphBuilder& b, ValueMap& values)
      : op_(op), b_(b), values_(values) {}

  mlir::Operation* op() const { return op_; }
  GraphBuilder& b() { return b_; }
  std::string name() const { return op_->getName().getStringRef().str(); }

  absl::Status error(const std::string& message) const {
    return located_error(op_->getLoc(), absl::StrCat("'", name(), "': ", message));
  }

  absl::Status expect_counts(unsigned operands, unsigned results) const {
    if (op_->getNumOperands() != operands || op_->getNumResults() != results)
      return error(absl::StrCat("takes ", operands, " operand(s) and has ", results,
                                " result(s), got ", op_->getNumOperands(), " and ",
                                op_->getNumResults()));
    return absl::OkStatus();
  }
  ValueRef operand(unsigned i) const { return values_.lookup(op_->getOperand(i)); }
  const TensorType& operand_type(unsigned i) const { return b_.type(operand(i)); }
  absl::StatusOr<TensorType> result_type() const {
    return tensor_type(op_->getResult(0).getType(), op_->getLoc(), absl::StrCat("'", name(), "' result"));
  }
  mlir::Attribute attr(llvm::StringRef key) const { return find_attr(op_, key); }

  absl::StatusOr<std::vector<int64_t>> i64s(llvm::StringRef key) const {
    std::optional<std::vector<int64_t>> list = i64_list(attr(key));
    if (!list) return error(absl::StrCat("has no i64 array attribute '", key.str(), "'"));
    return *list;
  }

  /// Maps the op's only result to `v`, checking that it has the declared
  /// type (a malformed body computes another).
  absl::Status finish(ValueRef v) {
    absl::StatusOr<TensorType> declared = result_type();
    if (!declared.ok()) return declared.status();
    if (b_.type(v) != *declared)
      return error(absl::StrCat("its operands give a result of ", b_.type(v).to_string(),
                                " but it declares ", declared->to_string()));
    values_[op_->getResult(0)] = v;
    return absl::OkStatus();
  }

 private:
  mlir::Operation* op_;
  GraphBuilder& b_;
  ValueMap& values_;
};

using Handler = std::function<absl::Status(OpContext&)>;

/// Operands all of the result's type (elementwise ops).
absl::Status check_same_types(OpContext& c, const TensorType& want) {
  for (unsigned i = 0; i < c.op()->getNumOperands(); ++i)
    if (c.operand_type(i) != want)
      return c.error(absl::StrCat("operand ", i, " is ", c.operand_type(i).to_string(),
                                  "; every operand must be ", want.to_string()));
  return absl::OkStatus();
}

/// What an op is imported for: `numeric` excludes i1, whose arithmetic
/// StableHLO defines as logic (add is or) and mstep does not.
enum class Operands { numeric, floating, boolean };

absl::Status check_kind(OpContext& c, DType dtype, Operands kind) {
  if (kind == Operands::numeric && dtype == DType::boolean)
    return c.error("is imported for numeric operands only, got i1 (use and / or / not)");
  if (kind == Operands::floating && !is_floating(dtype))
    return c.error(absl::StrCat("is imported for floating-point operands only, got ",
                                dtype_name(dtype)));
  if (kind == Operands::boolean && dtype != DType::boolean)
    return c.error(absl::StrCat("is imported for i1 operands only (the logical op), got ",
                                dtype_name(dtype), " (a bitwise op mstep does not have)"));
  return absl::OkStatus();
}

Handler unary(OpKind kind, Operands operands, bool bool_result = false) {
  return [=](OpContext& c) -> absl::Status {
    if (absl::Status s = c.expect_counts(1, 1); !s.ok()) return s;
    const TensorType& in = c.operand_type(0);
    if (absl::Status s = check_kind(c, in.dtype, operands); !s.ok()) return s;
    return c.finish(c.b().add(kind, {c.operand(0)}, {},
                              {in.shape, bool_result ? DType::boolean : in.dtype}));
  };
}

Handler binary(OpKind kind, Operands operands) {
  return [=](OpContext& c) -> absl::Status {
    if (absl::Status s = c.expect_counts(2, 1); !s.ok()) return s;
    const TensorType& a = c.operand_type(0);
    if (absl::Status s = check_same_types(c, a); !s.ok()) return s;
    if (absl::Status s = check_kind(c, a.dtype, operands); !s.ok()) return s;
    return c.finish(c.b().add(kind, {c.operand(0), c.operand(1)}, {}, a));
  };
}

absl::Status import_exponential_minus_one(OpContext& c) {
  if (absl::Status s = c.expect_counts(1, 1); !s.ok()) return s;
  const TensorType& in = c.operand_type(0);
  if (absl::Status s = check_kind(c, in.dtype, Operands::floating); !s.ok()) return s;
  ValueRef e = c.b().add(OpKind::exp, {c.operand(0)}, {}, in);
  return c.finish(c.b().add(OpKind::sub, {e, c.b().full(1.0, in)}, {}, in));
}

absl::Status import_compare(OpContext& c) {
  if (absl::Status s = c.expect_counts(2, 1); !s.ok()) return s;
  const TensorType& a = c.operand_type(0);
  if (absl::Status s = check_same_types(c, a); !s.ok()) return s;
  std::optional<std::string> dir = opaque_text(c.attr("comparison_direction"));
  if (!dir) return c.error("has no #stablehlo<comparison_direction ...> attribute");
  if (std::optional<std::string> type = opaque_text(c.attr("compare_type"));
      type && type->find("TOTALORDER") != std::string::npos)
    return c.error("compare_type TOTALORDER is not supported (mstep compares floats as IEEE "
                   "does, FLOAT)");
  static const std::pair<const char*, OpKind> kDirections[] = {
      {"EQ", OpKind::eq}, {"NE", OpKind::ne}, {"LT", OpKind::lt},
      {"LE", OpKind::le}, {"GT", OpKind::gt}, {"GE", OpKind::ge}};
  const std::string word = dir->substr(dir->find_last_of(' ') + 1);
  for (const auto& [name, kind] : kDirections)
    if (word == name)
      return c.finish(c.b().add(kind, {c.operand(0), c.operand(1)}, {}, {a.shape, DType::boolean}));
  return c.error(absl::StrCat("unknown comparison direction '", word, "'"));
}

absl::Status import_select(OpContext& c) {
  if (absl::Status s = c.expect_counts(3, 1); !s.ok()) return s;
  const TensorType& pred = c.operand_type(0);
  const TensorType& a = c.operand_type(1);
  if (c.operand_type(2) != a)
    return c.error(absl::StrCat("its values are ", a.to_string(), " and ",
                                c.operand_type(2).to_string(), "; they must have one type"));
  if (pred.dtype != DType::boolean || (pred.shape.rank() != 0 && pred.shape != a.shape))
    return c.error(absl::StrCat("its predicate is ", pred.to_string(), "; it must be i1 of the ",
                                "values' shape or 0-d"));
  return c.finish(c.b().add(OpKind::where, {c.operand(0), c.operand(1), c.operand(2)}, {}, a));
}

absl::Status import_convert(OpContext& c) {
  if (absl::Status s = c.expect_counts(1, 1); !s.ok()) return s;
  absl::StatusOr<TensorType> out = c.result_type();
  if (!out.ok()) return out.status();
  return c.finish(c.b().cast(c.operand(0), out->dtype));
}

absl::Status import_reshape(OpContext& c) {
  if (absl::Status s = c.expect_counts(1, 1); !s.ok()) return s;
  absl::StatusOr<TensorType> out = c.result_type();
  if (!out.ok()) return out.status();
  if (out->numel() != c.operand_type(0).numel())
    return c.error(absl::StrCat("reshapes ", c.operand_type(0).to_string(), " to ",
                                out->to_string(), ": the element counts differ"));
  return c.finish(c.b().reshape(c.operand(0), out->shape));
}

/// A permutation of 0..rank-1, or an error naming `what`.
absl::Status check_permutation(OpContext& c, const std::vector<int64_t>& perm, int64_t rank,
                               const std::string& what) {
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  bool ok = static_cast<int64_t>(sorted.size()) == rank;
  for (int64_t i = 0; ok && i < rank; ++i) ok = sorted[i] == i;
  if (!ok)
    return c.error(absl::StrCat(what, " [", absl::StrJoin(perm, ", "),
                                "] is not a permutation of the ", rank, " dims"));
  return absl::OkStatus();
}

absl::Status import_transpose(OpContext& c) {
  if (absl::Status s = c.expect_counts(1, 1); !s.ok()) return s;
  absl::StatusOr<std::vector<int64_t>> perm = c.i64s("permutation");
  if (!perm.ok()) return perm.status();
  if (absl::Status s = check_permutation(c, *perm, c.operand_type(0).shape.rank(), "permutation");
      !s.ok())
    return s;
  return c.finish(c.b().permute(c.operand(0), *perm));
}

/// broadcast_in_dim: operand dim i goes to result dim dims[i]. mstep's
/// expand aligns dims from the right, so the operand is first permuted
/// into the order of `dims`, reshaped to the result's trailing dims from
/// the first one mapped (1 where no operand dim maps) and then expanded.
absl::Status import_broadcast_in_dim(OpContext& c) {
  if (absl::Status s = c.expect_counts(1, 1); !s.ok()) return s;
  absl::StatusOr<std::vector<int64_t>> dims = c.i64s("broadcast_dimensions");
  if (!dims.ok()) return dims.status();
  absl::StatusOr<TensorType> out = c.result_type();
  if (!out.ok()) return out.status();
  const TensorType& in = c.operand_type(0);
  if (static_cast<int64_t>(dims->size()) != in.shape.rank())
    return c.error(absl::StrCat("broadcast_dimensions has ", dims->size(),
                                " entries for an operand of rank ", in.shape.rank()));
  std::vector<int64_t> order(dims->size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return (*dims)[a] < (*dims)[b]; });
  Shape lifted;
  for (int64_t i = 0; i < out->shape.rank(); ++i) lifted.push_back(1);
  for (size_t i = 0; i < dims->size(); ++i) {
    const int64_t d = (*dims)[i];
    if (d < 0 || d >= out->shape.rank())
      return c.error(absl::StrCat("broadcast dimension ", d, " is out of range for rank ",
                                  out->shape.rank()));
    if (in.shape[i] != 1 && in.shape[i] != out->shape[d])
      return c.error(absl::StrCat("operand dim ", i, " of size ", in.shape[i],
                                  " cannot broadcast to result dim ", d, " of size ",
                                  out->shape[d]));
    lifted[d] = in.shape[i];
  }
  for (size_t i = 1; i < order.size(); ++i)
    if ((*dims)[order[i]] == (*dims)[order[i - 1]])
      return c.error(absl::StrCat("broadcast dimension ", (*dims)[order[i]], " appears twice"));
  // expand adds leading dims itself: reshape only from the first mapped one.
  const int64_t first = dims->empty() ? out->shape.rank() : (*dims)[order[0]];
  ValueRef v = c.b().permute(c.operand(0), order);
  v = c.b().reshape(v, Shape(lifted.dims().subspan(first)));
  return c.finish(c.b().expand(v, out->shape));
}

absl::Status import_iota(OpContext& c) {
  if (absl::Status s = c.expect_counts(0, 1); !s.ok()) return s;
  absl::StatusOr<TensorType> out = c.result_type();
  if (!out.ok()) return out.status();
  auto dim_attr = mlir::dyn_cast_or_null<mlir::IntegerAttr>(c.attr("iota_dimension"));
  if (!dim_attr) return c.error("has no integer attribute 'iota_dimension'");
  const int64_t dim = dim_attr.getInt();
  if (dim < 0 || dim >= out->shape.rank())
    return c.error(absl::StrCat("iota_dimension ", dim, " is out of range for ", out->to_string()));
  if (out->dtype == DType::boolean) return c.error("an i1 iota is not supported");
  const int64_t n = out->shape[dim];
  ValueRef v = c.b().add(OpKind::arange, {},
                         {{AttrName::start, 0.0}, {AttrName::step, 1.0}}, {Shape{n}, out->dtype});
  Shape lifted;
  for (int64_t i = 0; i < out->shape.rank(); ++i) lifted.push_back(i == dim ? n : 1);
  v = c.b().reshape(v, lifted);
  return c.finish(c.b().expand(v, out->shape));
}

/// The largest non-splat constant built element by element; larger ones
/// become inputs (ImportedStableHlo::constants).
constexpr int64_t kMaxListConstant = 64;

/// The elements of `dense` as `dtype`'s bytes, row-major, little-endian.
std::string dense_bytes(mlir::DenseElementsAttr dense, DType dtype) {
  const size_t width = element_size(dtype);
  std::string bytes;
  bytes.reserve(dense.getNumElements() * width);
  auto append = [&](const llvm::APInt& bits) {
    const uint64_t v = bits.getZExtValue();
    for (size_t i = 0; i < width; ++i) bytes.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  if (is_floating(dtype))
    for (const llvm::APFloat& v : dense.getValues<llvm::APFloat>()) append(v.bitcastToAPInt());
  else
    for (const llvm::APInt& v : dense.getValues<llvm::APInt>()) append(v);
  return bytes;
}

absl::Status import_constant(OpContext& c) {
  if (absl::Status s = c.expect_counts(0, 1); !s.ok()) return s;
  absl::StatusOr<TensorType> out = c.result_type();
  if (!out.ok()) return out.status();
  auto dense = mlir::dyn_cast_or_null<mlir::DenseElementsAttr>(c.attr("value"));
  if (!dense) return c.error("has no dense elements attribute 'value'");
  if (!dense.isSplat() && out->numel() > kMaxListConstant)
    return c.finish(c.b().constant_input(*out, dense_bytes(dense, out->dtype)));
  std::vector<double> values;
  auto read = [&](auto range) {
    for (auto v : range) {
      if constexpr (std::is_same_v<decltype(v), llvm::APFloat>) {
        bool lost = false;
        v.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven, &lost);
        values.push_back(v.convertToDouble());
      } else {
        values.push_back(out->dtype == DType::boolean ? static_cast<double>(v.getZExtValue())
                                                      : static_cast<double>(v.getSExtValue()));
      }
      if (dense.isSplat()) break;
    }
  };
  if (is_floating(out->dtype))
    read(dense.getValues<llvm::APFloat>());
  else
    read(dense.getValues<llvm::APInt>());
  if (dense.isSplat()) return c.finish(c.b().full(values[0], *out));
  // Element by element: each a [1] constant, concatenated, reshaped.
  std::vector<ValueRef> parts;
  for (double v : values) parts.push_back(c.b().reshape(c.b().constant(v, out->dtype), Shape{1}));
  ValueRef flat = c.b().add(OpKind::cat, parts, {{AttrName::dim, int64_t{0}}},
                            {Shape{out->numel()}, out->dtype});
  return c.finish(c.b().reshape(flat, out->shape));
}

absl::Status import_slice(OpContext& c) {
  if (absl::Status s = c.expect_counts(1, 1); !s.ok()) return s;
  absl::StatusOr<std::vector<int64_t>> start = c.i64s("start_indices");
  absl::StatusOr<std::vector<int64_t>> limit = c.i64s("limit_indices");
  absl::StatusOr<std::vector<int64_t>> strides = c.i64s("strides");
  for (const auto* s : {&start, &limit, &strides})
    if (!s->ok()) return s->status();
  const TensorType& in = c.operand_type(0);
  const int64_t rank = in.shape.rank();
  if (static_cast<int64_t>(start->size()) != rank || static_cast<int64_t>(limit->size()) != rank ||
      static_cast<int64_t>(strides->size()) != rank)
    return c.error(absl::StrCat("its index lists must have one entry per dim (", rank, ")"));
  ValueRef v = c.operand(0);
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t lo = (*start)[d], hi = (*limit)[d], step = (*strides)[d];
    if (step < 1 || lo < 0 || hi > in.shape[d] || lo > hi)
      return c.error(absl::StrCat("dim ", d, ": start ", lo, ", limit ", hi, ", stride ", step,
                                  " do not fit size ", in.shape[d]));
    if (lo == 0 && hi == in.shape[d] && step == 1) continue;
    Shape shape = c.b().type(v).shape;
    shape[d] = (hi - lo + step - 1) / step;
    v = c.b().add(OpKind::slice, {v},
                  {{AttrName::dim, d}, {AttrName::start, lo}, {AttrName::end, hi},
                   {AttrName::step, step}},
                  {shape, in.dtype});
  }
  return c.finish(v);
}

absl::Status import_concatenate(OpContext& c) {
  if (c.op()->getNumOperands() < 1 || c.op()->getNumResults() != 1)
    return c.error("takes one or more operands and has one result");
  auto dim = mlir::dyn_cast_or_null<mlir::IntegerAttr>(c.attr("dimension"));
  if (!dim) return c.error("has no integer attribute 'dimension'");
  absl::StatusOr<TensorType> out = c.result_type();
  if (!out.ok()) return out.status();
  const int64_t d = dim.getInt();
  if (d < 0 || d >= out->shape.rank())
    return c.error(absl::StrCat("dimension ", d, " is out of range for ", out->to_string()));
  std::vector<ValueRef> parts;
  int64_t total = 0;
  for (unsigned i = 0; i < c.op()->getNumOperands(); ++i) {
    const TensorType& t = c.operand_type(i);
    bool fits = t.dtype == out->dtype && t.shape.rank() == out->shape.rank();
    for (int64_t k = 0; fits && k < t.shape.rank(); ++k)
      fits = k == d || t.shape[k] == out->shape[k];
    if (!fits)
      return c.error(absl::StrCat("operand ", i, " is ", t.to_string(), "; the operands must "
                                  "have the result's type and sizes except in dimension ", d));
    total += t.shape[d];
    parts.push_back(c.operand(i));
  }
  if (total != out->shape[d])
    return c.error(absl::StrCat("the operands' sizes in dimension ", d, " add up to ", total,
                                ", not the result's ", out->shape[d]));
  if (parts.size() == 1) return c.finish(parts[0]);
  return c.finish(c.b().add(OpKind::cat, parts, {{AttrName::dim, d}}, *out));
}

/// dot_general as one mstep matmul: each side is permuted to [batch, free,
/// contracting] (lhs) / [batch, contracting, free] (rhs), flattened to
/// [B, M, K] / [B, K, N] (no B without batch dims), multiplied, and the
/// [B, M, N] product reshaped to batch + lhs free + rhs free, StableHLO's
/// result order.
absl::Status import_dot_general(OpContext& c) {
  if (absl::Status s = c.expect_counts(2, 1); !s.ok()) return s;
  std::optional<std::string> text = opaque_text(c.attr("dot_dimension_numbers"));
  if (!text) return c.error("has no #stablehlo.dot<...> attribute 'dot_dimension_numbers'");
  std::optional<std::vector<int64_t>> lb = opaque_list(*text, "lhs_batching_dimensions");
  std::optional<std::vector<int64_t>> rb = opaque_list(*text, "rhs_batching_dimensions");
  std::optional<std::vector<int64_t>> lc = opaque_list(*text, "lhs_contracting_dimensions");
  std::optional<std::vector<int64_t>> rc = opaque_list(*text, "rhs_contracting_dimensions");
  if (!lb || !rb || !lc || !rc)
    return c.error(absl::StrCat("cannot read its dimension numbers '", *text, "'"));
  const TensorType& lhs = c.operand_type(0);
  const TensorType& rhs = c.operand_type(1);
  absl::StatusOr<TensorType> out = c.result_type();
  if (!out.ok()) return out.status();
  if (lhs.dtype != rhs.dtype || lhs.dtype != out->dtype || !is_floating(lhs.dtype))
    return c.error(absl::StrCat("multiplies ", lhs.to_string(), " by ", rhs.to_string(), " into ",
                                out->to_string(), "; mstep imports floating-point dot_general "
                                "with one element type throughout"));
  if (lb->size() != rb->size() || lc->size() != rc->size())
    return c.error("its lhs and rhs batching (or contracting) dimension lists differ in length");
  // free dims: the rest, in order; checks ranges and repeats.
  auto free_dims = [&](const TensorType& t, const std::vector<int64_t>& batch,
                       const std::vector<int64_t>& contract,
                       const char* side) -> absl::StatusOr<std::vector<int64_t>> {
    std::vector<int> used(t.shape.rank(), 0);
    for (const auto* list : {&batch, &contract})
      for (int64_t d : *list) {
        if (d < 0 || d >= t.shape.rank() || used[d]++)
          return c.error(absl::StrCat(side, " dimension ", d, " is out of range or repeated for ",
                                      t.to_string()));
      }
    std::vector<int64_t> rest;
    for (int64_t d = 0; d < t.shape.rank(); ++d)
      if (!used[d]) rest.push_back(d);
    return rest;
  };
  absl::StatusOr<std::vector<int64_t>> lf = free_dims(lhs, *lb, *lc, "lhs");
  if (!lf.ok()) return lf.status();
  absl::StatusOr<std::vector<int64_t>> rf = free_dims(rhs, *rb, *rc, "rhs");
  if (!rf.ok()) return rf.status();
  auto size = [](const TensorType& t, const std::vector<int64_t>& dims) {
    int64_t n = 1;
    for (int64_t d : dims) n *= t.shape[d];
    return n;
  };
  for (size_t i = 0; i < lb->size(); ++i)
    if (lhs.shape[(*lb)[i]] != rhs.shape[(*rb)[i]])
      return c.error(absl::StrCat("batching dims ", (*lb)[i], " and ", (*rb)[i], " differ in size"));
  for (size_t i = 0; i < lc->size(); ++i)
    if (lhs.shape[(*lc)[i]] != rhs.shape[(*rc)[i]])
      return c.error(absl::StrCat("contracting dims ", (*lc)[i], " and ", (*rc)[i],
                                  " differ in size"));
  const int64_t batch = size(lhs, *lb), m = size(lhs, *lf), k = size(lhs, *lc), n = size(rhs, *rf);
  const bool batched = !lb->empty();
  auto concat = [](std::initializer_list<const std::vector<int64_t>*> lists) {
    std::vector<int64_t> out;
    for (const auto* l : lists) out.insert(out.end(), l->begin(), l->end());
    return out;
  };
  auto flat = [&](std::vector<int64_t> dims) {
    Shape s;
    if (batched) s.push_back(batch);
    for (int64_t d : dims) s.push_back(d);
    return s;
  };
  ValueRef a = c.b().reshape(c.b().permute(c.operand(0), concat({&*lb, &*lf, &*lc})), flat({m, k}));
  ValueRef bm = c.b().reshape(c.b().permute(c.operand(1), concat({&*rb, &*rc, &*rf})), flat({k, n}));
  ValueRef product = c.b().add(OpKind::matmul, {a, bm}, {}, {flat({m, n}), out->dtype});
  Shape result;
  for (int64_t d : *lb) result.push_back(lhs.shape[d]);
  for (int64_t d : *lf) result.push_back(lhs.shape[d]);
  for (int64_t d : *rf) result.push_back(rhs.shape[d]);
  return c.finish(c.b().reshape(product, result));
}

/// reduce with one operand whose body applies add, maximum or minimum to
/// its two arguments: mstep's sum / max / min over `dimensions`, combined
/// with the init value unless it is that reduction's identity.
absl::Status import_reduce(OpContext& c) {
  if (c.op()->getNumOperands() != 2 || c.op()->getNumResults() != 1)
    return c.error(absl::StrCat("with ", c.op()->getNumOperands() / 2,
                                " operands is not supported; mstep imports reduce of one "
                                "operand and one init value"));
  absl::StatusOr<std::vector<int64_t>> dims = c.i64s("dimensions");
  if (!dims.ok()) return dims.status();
  const TensorType& in = c.operand_type(0);
  const TensorType& init = c.operand_type(1);
  if (init.shape.rank() != 0 || init.dtype != in.dtype)
    return c.error(absl::StrCat("its init value is ", init.to_string(), "; it must be 0-d ",
                                dtype_name(in.dtype)));
  // The body: ^bb0(%a, %b): %r = <op>(%a, %b); return %r.
  mlir::Region& region = c.op()->getRegion(0);
  if (c.op()->getNumRegions() != 1 || !region.hasOneBlock())
    return c.error("needs one body block");
  mlir::Block& body = region.front();
  std::vector<mlir::Operation*> ops;
  for (mlir::Operation& o : body) ops.push_back(&o);
  const bool simple = body.getNumArguments() == 2 && ops.size() == 2 &&
                      ops[0]->getNumOperands() == 2 && ops[0]->getNumResults() == 1 &&
                      ops[1]->getName().getStringRef() == "stablehlo.return" &&
                      ops[1]->getNumOperands() == 1 &&
                      ops[1]->getOperand(0) == ops[0]->getResult(0) &&
                      ((ops[0]->getOperand(0) == body.getArgument(0) &&
                        ops[0]->getOperand(1) == body.getArgument(1)) ||
                       (ops[0]->getOperand(0) == body.getArgument(1) &&
                        ops[0]->getOperand(1) == body.getArgument(0)));
  const std::string reducer = simple ? ops[0]->getName().getStringRef().str() : "";
  OpKind reduction, combine;
  double identity;
  const double inf = std::numeric_limits<double>::infinity();
  if (reducer == "stablehlo.add") {
    reduction = OpKind::sum, combine = OpKind::add, identity = 0;
  } else if (reducer == "stablehlo.maximum") {
    reduction = OpKind::max, combine = OpKind::maximum, identity = -inf;
  } else if (reducer == "stablehlo.minimum") {
    reduction = OpKind::min, combine = OpKind::minimum, identity = inf;
  } else {
    return c.error(absl::StrCat("with the body ", simple ? "'" + reducer + "'" : "given",
                                " is not supported; mstep imports bodies that return "
                                "stablehlo.add, maximum or minimum of the two arguments"));
  }
  if (in.dtype == DType::boolean) return c.error("an i1 reduce is not supported");
  std::vector<int64_t> sorted = *dims;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i)
    if (sorted[i] < 0 || sorted[i] >= in.shape.rank() || (i > 0 && sorted[i] == sorted[i - 1]))
      return c.error(absl::StrCat("dimensions [", absl::StrJoin(*dims, ", "),
                                  "] are out of range or repeated for ", in.to_string()));
  ValueRef v = c.operand(0);
  if (!sorted.empty()) {
    Shape shape;
    for (int64_t d = 0; d < in.shape.rank(); ++d)
      if (!std::binary_search(sorted.begin(), sorted.end(), d)) shape.push_back(in.shape[d]);
    // Integer sums accumulate in i64 in mstep (as PyTorch): cast back.
    const DType acc = reduction == OpKind::sum && is_integral(in.dtype) ? DType::i64 : in.dtype;
    v = c.b().add(reduction, {c.b().cast(v, acc)},
                  {{AttrName::dims, IntList(sorted.begin(), sorted.end())},
                   {AttrName::keepdim, int64_t{0}}},
                  {shape, acc});
    v = c.b().cast(v, in.dtype);
  }
  // The integer identities of max / min are the dtype's extremes.
  std::optional<double> start = c.b().constant_value(c.operand(1));
  const bool is_identity =
      start && (*start == identity ||
                (is_integral(in.dtype) && reduction == OpKind::max &&
                 *start <= (in.dtype == DType::i32 ? std::numeric_limits<int32_t>::min()
                                                   : static_cast<double>(INT64_MIN))) ||
                (is_integral(in.dtype) && reduction == OpKind::min &&
                 *start >= (in.dtype == DType::i32 ? std::numeric_limits<int32_t>::max()
                                                   : static_cast<double>(INT64_MAX))));
  if (!is_identity) {
    const TensorType& t = c.b().type(v);
    v = c.b().add(combine, {v, c.b().expand(c.operand(1), t.shape)}, {}, t);
  }
  return c.finish(v);
}

const llvm::StringMap<Handler>& handlers() {
  static const auto* table = new llvm::StringMap<Handler>{
      {"stablehlo.constant", import_constant},
      {"stablehlo.iota", import_iota},
      {"stablehlo.add", binary(OpKind::add, Operands::numeric)},
      {"stablehlo.subtract", binary(OpKind::sub, Operands::numeric)},
      {"stablehlo.multiply", binary(OpKind::mul, Operands::numeric)},
      {"stablehlo.divide", binary(OpKind::div, Operands::floating)},
      {"stablehlo.maximum", binary(OpKind::maximum, Operands::numeric)},
      {"stablehlo.minimum", binary(OpKind::minimum, Operands::numeric)},
      {"stablehlo.power", binary(OpKind::pow, Operands::floating)},
      {"stablehlo.and", binary(OpKind::logical_and, Operands::boolean)},
      {"stablehlo.or", binary(OpKind::logical_or, Operands::boolean)},
      {"stablehlo.negate", unary(OpKind::neg, Operands::numeric)},
      {"stablehlo.abs", unary(OpKind::abs, Operands::numeric)},
      {"stablehlo.exponential", unary(OpKind::exp, Operands::floating)},
      {"stablehlo.exponential_minus_one", import_exponential_minus_one},
      {"stablehlo.log", unary(OpKind::log, Operands::floating)},
      {"stablehlo.log_plus_one", unary(OpKind::log1p, Operands::floating)},
      {"stablehlo.sqrt", unary(OpKind::sqrt, Operands::floating)},
      {"stablehlo.rsqrt", unary(OpKind::rsqrt, Operands::floating)},
      {"stablehlo.tanh", unary(OpKind::tanh, Operands::floating)},
      {"stablehlo.logistic", unary(OpKind::sigmoid, Operands::floating)},
      {"stablehlo.sine", unary(OpKind::sin, Operands::floating)},
      {"stablehlo.cosine", unary(OpKind::cos, Operands::floating)},
      {"stablehlo.is_finite", unary(OpKind::isfinite, Operands::floating, true)},
      {"stablehlo.not", unary(OpKind::logical_not, Operands::boolean)},
      {"stablehlo.compare", import_compare},
      {"stablehlo.select", import_select},
      {"stablehlo.convert", import_convert},
      {"stablehlo.broadcast_in_dim", import_broadcast_in_dim},
      {"stablehlo.reshape", import_reshape},
      {"stablehlo.transpose", import_transpose},
      {"stablehlo.slice", import_slice},
      {"stablehlo.concatenate", import_concatenate},
      {"stablehlo.dot_general", import_dot_general},
      {"stablehlo.reduce", import_reduce},
  };
  return *table;
}

}  // namespace

absl::Status import_op(mlir::Operation* op, GraphBuilder& b, ValueMap& values) {
  OpContext c(op, b, values);
  const std::string name = c.name();
  for (mlir::Value v : op->getResults())
    if (absl::StatusOr<TensorType> t = tensor_type(v.getType(), op->getLoc(), "'" + name + "' result");
        !t.ok())
      return t.status();
  if (name == "stablehlo.custom_call") {
    std::string target;
    if (auto s = mlir::dyn_cast_or_null<mlir::StringAttr>(c.attr("call_target_name")))
      target = s.getValue().str();
    return c.error(absl::StrCat("custom call '", target,
                                "' is not supported: mstep cannot run a target it does not know"));
  }
  auto it = handlers().find(name);
  if (it == handlers().end())
    return located_error(op->getLoc(),
                         absl::StrCat("'", name, "' is not supported by mstep's StableHLO import"));
  return it->second(c);
}

}  // namespace mstep::stablehlo
