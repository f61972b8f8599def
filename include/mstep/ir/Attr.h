// Node attributes: a short list of named values stored inline in the node.
//
// Floating-point values are *host constants*: they are hashed into the
// node's constant hash, not its structural hash, so the cache can tell
// "same graph, different constant" from "different graph" and warn about a
// constant that forces recompiles.
#pragma once

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"
#include <variant>

#include "absl/container/inlined_vector.h"
#include "absl/types/span.h"
#include "mstep/core/DType.h"

namespace mstep {

#define MSTEP_ATTR_NAMES(X)                                                  \
  X(index) X(value) X(shape) X(start) X(step) X(offset) X(approximate)       \
  X(dtype) X(dims) X(keepdim) X(correction) X(perm) X(dim) X(end) X(pads)    \
  X(diagonal) X(stride) X(padding) X(dilation) X(groups) X(kernel)           \
  X(ceil_mode) X(count_include_pad) X(normalized_ndim) X(eps) X(p)           \
  X(is_causal) X(scale) X(has_mask) X(has_valid_len) X(padding_side)         \
  X(return_probs) X(return_mask) X(softmax_mode) X(recompute)                \
  X(ignore_index) X(reduction) X(has_weight) X(has_bias) X(dropout_p)        \
  X(kind) X(nesterov) X(amsgrad) X(maximize) X(max_grad_norm)                \
  X(grad_norm_type) X(operand_segments) X(result_segments) X(custom_op)      \
  X(custom_attr) X(reduce_op) X(root) X(world_size)

enum class AttrName : uint8_t {
#define MSTEP_ATTR_ENUM(n) n,
  MSTEP_ATTR_NAMES(MSTEP_ATTR_ENUM)
#undef MSTEP_ATTR_ENUM
};

inline constexpr int kNumAttrNames = 0
#define MSTEP_ATTR_COUNT(n) +1
    MSTEP_ATTR_NAMES(MSTEP_ATTR_COUNT)
#undef MSTEP_ATTR_COUNT
    ;

absl::string_view attr_name(AttrName name);

using IntList = absl::InlinedVector<int64_t, 4>;

/// int64 (also used for flags and enums), double (a host constant), an int
/// list, or a dtype.
using AttrValue = std::variant<int64_t, double, IntList, DType>;

struct Attr {
  AttrName name;
  AttrValue value;
};

using AttrList = absl::InlinedVector<Attr, 2>;

/// Typed lookups. The op builders guarantee presence, so a missing
/// attribute is a programming error and asserts.
int64_t attr_int(const AttrList& attrs, AttrName name);
double attr_double(const AttrList& attrs, AttrName name);
const IntList& attr_ints(const AttrList& attrs, AttrName name);
DType attr_dtype(const AttrList& attrs, AttrName name);
/// The int attribute, or `fallback` when absent.
int64_t attr_int_or(const AttrList& attrs, AttrName name, int64_t fallback);

/// Structural hash of the attributes: everything except double values.
uint64_t hash_attrs_structural(const AttrList& attrs);
/// Hash of the double (constant) values only; 0 when there are none.
uint64_t hash_attrs_constants(const AttrList& attrs);

/// An immutable attribute list that many nodes hold by reference instead of
/// each copying it, with its two hashes computed once: a custom op's
/// attributes as a call site keeps them (lib/api/CustomOps.cpp), recorded
/// on every call. Held by std::shared_ptr; safe to share between threads.
class SharedAttrs {
 public:
  explicit SharedAttrs(AttrList attrs);
  const AttrList& list() const { return attrs_; }
  /// hash_attrs_structural(list())
  uint64_t structural_hash() const { return structural_hash_; }
  /// hash_attrs_constants(list())
  uint64_t constant_hash() const { return constant_hash_; }

 private:
  AttrList attrs_;
  uint64_t structural_hash_;
  uint64_t constant_hash_;
};

/// "dims=[0, 1], keepdim=1"
std::string attrs_to_string(const AttrList& attrs);

}  // namespace mstep
