#include "mstep/api/Autocast.h"

#include "absl/strings/str_cat.h"
#include "lib/api/OpBuilder.h"
#include "mstep/api/Elementwise.h"
#include "mstep/core/Error.h"

namespace mstep {

namespace {
thread_local std::optional<DType> g_autocast;
}  // namespace

AutocastScope::AutocastScope(std::optional<DType> dtype) : previous_(g_autocast) {
  g_autocast = dtype;
}
AutocastScope::~AutocastScope() { g_autocast = previous_; }

AutocastScope autocast(DType dtype) {
  if (dtype != DType::bf16 && dtype != DType::f16)
    throw Error(absl::InvalidArgumentError(absl::StrCat(
        "mstep::autocast: ", dtype_name(dtype),
        " is not a lower-precision float type. Use DType::bf16 (or DType::f16).")));
  return AutocastScope(dtype);
}

std::optional<DType> autocast_dtype() { return g_autocast; }

namespace detail {

std::optional<DType> autocast_target(std::initializer_list<const Tensor*> operands) {
  if (!g_autocast) return std::nullopt;
  for (const Tensor* t : operands)
    if (t->defined() && t->dtype() == DType::f32) return g_autocast;
  return std::nullopt;
}

Tensor autocast_operand(const Tensor& t, DType dtype) {
  return t.defined() && t.dtype() == DType::f32 ? to(t, dtype) : t;
}

}  // namespace detail
}  // namespace mstep
