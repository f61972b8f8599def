// Attribute lookup, hashing and printing.
#include "mstep/ir/Attr.h"

#include <cassert>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "mstep/core/Hash.h"

namespace mstep {

absl::string_view attr_name(AttrName name) {
  static constexpr absl::string_view kNames[] = {
#define MSTEP_ATTR_STR(n) #n,
      MSTEP_ATTR_NAMES(MSTEP_ATTR_STR)
#undef MSTEP_ATTR_STR
  };
  return kNames[static_cast<int>(name)];
}

namespace {
const AttrValue* find(const AttrList& attrs, AttrName name) {
  for (const Attr& a : attrs)
    if (a.name == name) return &a.value;
  return nullptr;
}
}  // namespace

int64_t attr_int(const AttrList& attrs, AttrName name) {
  const AttrValue* v = find(attrs, name);
  assert(v && std::holds_alternative<int64_t>(*v));
  return std::get<int64_t>(*v);
}

int64_t attr_int_or(const AttrList& attrs, AttrName name, int64_t fallback) {
  const AttrValue* v = find(attrs, name);
  return v ? std::get<int64_t>(*v) : fallback;
}

double attr_double(const AttrList& attrs, AttrName name) {
  const AttrValue* v = find(attrs, name);
  assert(v && std::holds_alternative<double>(*v));
  return std::get<double>(*v);
}

const IntList& attr_ints(const AttrList& attrs, AttrName name) {
  const AttrValue* v = find(attrs, name);
  assert(v && std::holds_alternative<IntList>(*v));
  return std::get<IntList>(*v);
}

DType attr_dtype(const AttrList& attrs, AttrName name) {
  const AttrValue* v = find(attrs, name);
  assert(v && std::holds_alternative<DType>(*v));
  return std::get<DType>(*v);
}

uint64_t hash_attrs_structural(const AttrList& attrs) {
  uint64_t h = 0;
  for (const Attr& a : attrs) {
    h = hash_combine(h, static_cast<uint64_t>(a.name));
    if (auto* i = std::get_if<int64_t>(&a.value)) {
      h = hash_combine(h, static_cast<uint64_t>(*i));
    } else if (auto* l = std::get_if<IntList>(&a.value)) {
      h = hash_combine(h, l->size());
      for (int64_t x : *l) h = hash_combine(h, static_cast<uint64_t>(x));
    } else if (auto* d = std::get_if<DType>(&a.value)) {
      h = hash_combine(h, 0x100 + static_cast<uint64_t>(*d));
    }
    // double: a host constant, hashed by hash_attrs_constants().
  }
  return h;
}

uint64_t hash_attrs_constants(const AttrList& attrs) {
  uint64_t h = 0;
  for (const Attr& a : attrs)
    if (auto* d = std::get_if<double>(&a.value))
      h = hash_combine(h ? h : 1, hash_double(*d));
  return h;
}

SharedAttrs::SharedAttrs(AttrList attrs)
    : attrs_(std::move(attrs)),
      structural_hash_(hash_attrs_structural(attrs_)),
      constant_hash_(hash_attrs_constants(attrs_)) {}

std::string attrs_to_string(const AttrList& attrs) {
  std::string out;
  for (const Attr& a : attrs) {
    if (!out.empty()) out += ", ";
    absl::StrAppend(&out, attr_name(a.name), "=");
    if (auto* i = std::get_if<int64_t>(&a.value)) {
      absl::StrAppend(&out, *i);
    } else if (auto* d = std::get_if<double>(&a.value)) {
      absl::StrAppend(&out, *d);
    } else if (auto* l = std::get_if<IntList>(&a.value)) {
      absl::StrAppend(&out, "[", absl::StrJoin(*l, ", "), "]");
    } else {
      absl::StrAppend(&out, dtype_name(std::get<DType>(a.value)));
    }
  }
  return out;
}

}  // namespace mstep
