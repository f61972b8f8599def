// Input checks and error messages shared by the nn modules. Errors read
// like the ops' ("mstep::nn::Linear(in_features=4, ...): expected ... Got
// f32[2, 3]. <hint>"), naming the module by its repr. The repr is built
// only when a check fails: forward() runs on every traced step.
// Library-internal.
#pragma once

#include <concepts>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "lib/api/OpBuilder.h"

namespace mstep::nn::checks {

template <typename M>
concept HasRepr = requires(const M& m) {
  { m.repr() } -> std::convertible_to<std::string>;
};

/// Throws naming the module by a fixed name ("Sequential").
[[noreturn]] inline void fail(absl::string_view module_name, absl::string_view problem,
                              absl::string_view got, absl::string_view hint) {
  mstep::detail::throw_op_error(absl::StrCat("nn::", module_name), problem, got, hint);
}

/// Throws naming the module by its repr.
template <HasRepr M>
[[noreturn]] void fail(const M& module, absl::string_view problem, absl::string_view got,
                       absl::string_view hint) {
  fail(absl::string_view(module.repr()), problem, got, hint);
}

/// "[4, 6]"
inline std::string dims(absl::Span<const int64_t> d) {
  return absl::StrCat("[", absl::StrJoin(d, ", "), "]");
}

inline std::string describe(const Tensor& t) { return mstep::detail::describe(t); }

/// Throws unless `t` is defined, naming the argument.
template <HasRepr M>
void require_defined(const M& module, const Tensor& t, absl::string_view what) {
  if (!t.defined())
    fail(module, absl::StrCat(what, " is undefined"), "undefined",
         "Pass a tensor created by an mstep op.");
}

/// Throws unless the constructor argument `value` is positive.
template <HasRepr M> void require_positive(const M& module, absl::string_view what, int64_t value) {
  if (value <= 0)
    fail(module, absl::StrCat(what, " must be positive"), absl::StrCat(what, " ", value),
         "Pass a size of at least 1.");
}

}  // namespace mstep::nn::checks
