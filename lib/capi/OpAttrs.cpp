// OpAttrs: the typed, checked view of the mstep_attr list of one C API op
// call. Every problem with the list is an InvalidArgument error that names
// the op, the attribute and, where the op is in the table, its signature.
#include <cmath>
#include <cstring>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/capi/OpTable.h"
#include "mstep/core/Error.h"

namespace mstep::capi {
namespace {

const char* kind_name(int kind) {
  switch (kind) {
  case MSTEP_ATTR_INT:
    return "an int";
  case MSTEP_ATTR_FLOAT:
    return "a float";
  case MSTEP_ATTR_BOOL:
    return "a bool";
  case MSTEP_ATTR_INTS:
    return "ints";
  case MSTEP_ATTR_DTYPE:
    return "a dtype";
  case MSTEP_ATTR_STRING:
    return "a string";
  }
  return "an unknown kind";
}

/// The value of `attr` as the host wrote it, for messages.
std::string describe_value(const mstep_attr& attr) {
  switch (attr.kind) {
  case MSTEP_ATTR_INT:
    return absl::StrCat(attr.i);
  case MSTEP_ATTR_FLOAT:
    return absl::StrCat(attr.f);
  case MSTEP_ATTR_BOOL:
    return attr.i != 0 ? "true" : "false";
  case MSTEP_ATTR_INTS:
    return absl::StrCat("[", absl::StrJoin(absl::MakeConstSpan(attr.ints, attr.num_ints), ", "),
                        "]");
  case MSTEP_ATTR_DTYPE:
    return absl::StrCat("dtype ", attr.i);
  case MSTEP_ATTR_STRING:
    return absl::StrCat("\"", attr.s, "\"");
  }
  return "";
}

/// The kind field as the host wrote it. A C host may store any int in the
/// enum field; reading it as the enum would be undefined behaviour (and a
/// UBSan abort) for a value outside mstep_attr_kind, so it is copied out.
int raw_kind(const mstep_attr& attr) {
  static_assert(sizeof(attr.kind) == sizeof(int));
  int kind;
  std::memcpy(&kind, &attr.kind, sizeof kind);
  return kind;
}

/// absl::StrCat takes absl::string_view, which is not std::string_view in
/// every abseil build.
absl::string_view av(std::string_view s) { return absl::string_view(s.data(), s.size()); }

} // namespace

/// "mstep_op("sum"): <problem>", with " Signature: ..." when the op is in
/// the table, so the host sees every attribute the op takes.
static Error attr_error(absl::string_view op, absl::string_view problem) {
  std::string message = absl::StrCat("mstep_op(\"", op, "\"): ", problem);
  if (const OpEntry* entry = find_op(std::string_view(op.data(), op.size()))) {
    absl::StrAppend(&message, " Signature: ", entry->signature, ".");
  }
  return Error(absl::InvalidArgumentError(message));
}

OpAttrs::OpAttrs(std::string_view op, const mstep_attr* attrs, size_t count) : op_(op) {
  if (count > 0 && attrs == nullptr) {
    throw attr_error(op_, absl::StrCat("attrs is NULL but num_attrs is ", count,
                                       ". Pass num_attrs = 0 when there are none."));
  }
  attrs_ = absl::MakeConstSpan(attrs, count);
  used_.assign(count, false);
  absl::flat_hash_set<std::string_view> seen;
  for (size_t i = 0; i < count; ++i) {
    const mstep_attr& attr = attrs_[i];
    if (attr.name == nullptr) {
      throw attr_error(op_,
                       absl::StrCat("attribute ", i, " has a NULL name. Name every attribute."));
    }
    // Checked once here; the getters then read the kind as the enum.
    const int kind = raw_kind(attr);
    switch (kind) {
    case MSTEP_ATTR_INT:
    case MSTEP_ATTR_FLOAT:
    case MSTEP_ATTR_BOOL:
    case MSTEP_ATTR_DTYPE:
      break;
    case MSTEP_ATTR_INTS:
      if (attr.num_ints > 0 && attr.ints == nullptr) {
        throw attr_error(op_, absl::StrCat("attribute '", attr.name, "' has num_ints ",
                                           attr.num_ints, " but ints is NULL."));
      }
      break;
    case MSTEP_ATTR_STRING:
      if (attr.s == nullptr) {
        throw attr_error(op_,
                         absl::StrCat("attribute '", attr.name, "' is a string but s is NULL."));
      }
      break;
    default:
      throw attr_error(op_, absl::StrCat("attribute '", attr.name, "' has kind ", kind,
                                         ", which is not an mstep_attr_kind (MSTEP_ATTR_INT.."
                                         "MSTEP_ATTR_STRING)."));
    }
    if (!seen.insert(attr.name).second) {
      throw attr_error(op_, absl::StrCat("attribute '", attr.name,
                                         "' is given twice. Give each attribute once."));
    }
  }
}

const mstep_attr* OpAttrs::find(std::string_view name) {
  for (size_t i = 0; i < attrs_.size(); ++i) {
    if (name == attrs_[i].name) {
      used_[i] = true;
      return &attrs_[i];
    }
  }
  return nullptr;
}

bool OpAttrs::has(std::string_view name) const {
  for (const mstep_attr& attr : attrs_) {
    if (name == attr.name) return true;
  }
  return false;
}

/// The error for a missing attribute that has no default. It lists the
/// names that were given, so a misspelling shows next to the right name.
static Error missing(absl::string_view op, absl::Span<const mstep_attr> given,
                     absl::string_view name, absl::string_view kind) {
  std::string names;
  for (const mstep_attr& a : given) absl::StrAppend(&names, names.empty() ? "" : ", ", "'", a.name, "'");
  return attr_error(op, absl::StrCat("needs attribute '", name, "' (", kind, ")",
                                     names.empty() ? "" : absl::StrCat("; given: ", names), "."));
}

/// The error for an attribute whose kind does not convert to `wanted`.
static Error wrong_kind(absl::string_view op, const mstep_attr& attr, absl::string_view wanted) {
  return attr_error(op, absl::StrCat("attribute '", attr.name, "' must be ", wanted, ", got ",
                                     kind_name(attr.kind), " (", describe_value(attr), ")."));
}

int64_t OpAttrs::get_int(std::string_view name, std::optional<int64_t> fallback) {
  const mstep_attr* attr = find(name);
  if (attr == nullptr) {
    if (fallback) return *fallback;
    throw missing(op_, attrs_, av(name), "int");
  }
  if (attr->kind == MSTEP_ATTR_INT) return attr->i;
  // A float converts only when it names an integer exactly: truncating 1.5
  // to a dim or a size would hide a host bug. 2^63 is the first double past
  // the int64 range.
  if (attr->kind == MSTEP_ATTR_FLOAT && std::isfinite(attr->f) && std::trunc(attr->f) == attr->f &&
      std::fabs(attr->f) < 9223372036854775808.0) {
    return static_cast<int64_t>(attr->f);
  }
  throw wrong_kind(op_, *attr, "an int");
}

double OpAttrs::get_float(std::string_view name, std::optional<double> fallback) {
  const mstep_attr* attr = find(name);
  if (attr == nullptr) {
    if (fallback) return *fallback;
    throw missing(op_, attrs_, av(name), "float");
  }
  if (attr->kind == MSTEP_ATTR_FLOAT) return attr->f;
  if (attr->kind == MSTEP_ATTR_INT) return static_cast<double>(attr->i);
  throw wrong_kind(op_, *attr, "a float");
}

bool OpAttrs::get_bool(std::string_view name, std::optional<bool> fallback) {
  const mstep_attr* attr = find(name);
  if (attr == nullptr) {
    if (fallback) return *fallback;
    throw missing(op_, attrs_, av(name), "bool");
  }
  if (attr->kind == MSTEP_ATTR_BOOL || attr->kind == MSTEP_ATTR_INT) return attr->i != 0;
  throw wrong_kind(op_, *attr, "a bool");
}

std::vector<int64_t> OpAttrs::get_ints(std::string_view name,
                                       std::optional<std::vector<int64_t>> fallback) {
  const mstep_attr* attr = find(name);
  if (attr == nullptr) {
    if (fallback) return *std::move(fallback);
    throw missing(op_, attrs_, av(name), "ints");
  }
  if (attr->kind == MSTEP_ATTR_INTS) {
    if (attr->num_ints == 0) return {};
    return std::vector<int64_t>(attr->ints, attr->ints + attr->num_ints);
  }
  throw wrong_kind(op_, *attr, "ints (MSTEP_ATTR_INTS)");
}

/// The DType of an MSTEP_ATTR_DTYPE attribute (the two enums share their
/// order), checking the value is in the enum.
static DType to_dtype(absl::string_view op, const mstep_attr& attr) {
  if (attr.kind != MSTEP_ATTR_DTYPE) throw wrong_kind(op, attr, "a dtype (MSTEP_ATTR_DTYPE)");
  if (attr.i < MSTEP_F32 || attr.i > MSTEP_BOOL) {
    throw attr_error(op, absl::StrCat("attribute '", attr.name, "' holds ", attr.i,
                                      ", which is not an mstep_dtype (MSTEP_F32..MSTEP_BOOL)."));
  }
  return static_cast<DType>(attr.i);
}

DType OpAttrs::get_dtype(std::string_view name, std::optional<DType> fallback) {
  const mstep_attr* attr = find(name);
  if (attr == nullptr) {
    if (fallback) return *fallback;
    throw missing(op_, attrs_, av(name), "dtype");
  }
  return to_dtype(op_, *attr);
}

std::optional<DType> OpAttrs::get_optional_dtype(std::string_view name) {
  const mstep_attr* attr = find(name);
  if (attr == nullptr) return std::nullopt;
  return to_dtype(op_, *attr);
}

std::string OpAttrs::get_string(std::string_view name, std::optional<std::string> fallback) {
  const mstep_attr* attr = find(name);
  if (attr == nullptr) {
    if (fallback) return *std::move(fallback);
    throw missing(op_, attrs_, av(name), "string");
  }
  if (attr->kind == MSTEP_ATTR_STRING) return attr->s;
  throw wrong_kind(op_, *attr, "a string");
}

Scalar OpAttrs::get_scalar(std::string_view name, std::optional<Scalar> fallback) {
  const mstep_attr* attr = find(name);
  if (attr == nullptr) {
    if (fallback) return *fallback;
    throw missing(op_, attrs_, av(name), "scalar: int, float or bool");
  }
  switch (attr->kind) {
  case MSTEP_ATTR_INT:
    return Scalar(attr->i);
  case MSTEP_ATTR_BOOL:
    return Scalar(attr->i != 0);
  case MSTEP_ATTR_FLOAT:
    return Scalar(attr->f);
  default:
    throw wrong_kind(op_, *attr, "a scalar (int, float or bool)");
  }
}

void OpAttrs::finish(std::string_view signature) const {
  for (size_t i = 0; i < attrs_.size(); ++i) {
    if (used_[i]) continue;
    const absl::string_view name = attrs_[i].name;
    // A signature without ';' lists no attributes at all.
    const bool takes_attrs = signature.find(';') != std::string_view::npos;
    const std::string problem = takes_attrs ? absl::StrCat("attribute '", name, "' is not one of ",
                                                           av(signature), ". Check the spelling.")
                                            : absl::StrCat("attribute '", name, "' given, but ",
                                                           av(signature), " takes no attributes.");
    throw Error(absl::InvalidArgumentError(absl::StrCat("mstep_op(\"", op_, "\"): ", problem)));
  }
}

} // namespace mstep::capi
