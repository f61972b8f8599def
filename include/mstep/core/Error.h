// Error handling. Inside the library errors are absl::Status values; at the
// public C++ API they become mstep::Error exceptions.
#pragma once

#include <stdexcept>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mstep {

/// Thrown by the public API. what() names the op, the shapes and dtypes
/// involved and what to do about it. The runtime is left unchanged: the
/// failing op recorded nothing.
class Error : public std::runtime_error {
 public:
  explicit Error(const absl::Status& status)
      : std::runtime_error(std::string(status.message())),
        code_(status.code()) {}
  absl::StatusCode code() const { return code_; }

 private:
  absl::StatusCode code_;
};

/// Throws mstep::Error when `status` is not OK.
inline void throw_if_error(const absl::Status& status) {
  if (!status.ok()) throw Error(status);
}

template <typename T>
T value_or_throw(absl::StatusOr<T> s) {
  if (!s.ok()) throw Error(s.status());
  return *std::move(s);
}

}  // namespace mstep

/// Returns early from a Status-returning function when `expr` fails.
#define MSTEP_RETURN_IF_ERROR(expr)              \
  do {                                           \
    if (absl::Status _st = (expr); !_st.ok()) {  \
      return _st;                                \
    }                                            \
  } while (0)

#define MSTEP_CONCAT_INNER(a, b) a##b
#define MSTEP_CONCAT(a, b) MSTEP_CONCAT_INNER(a, b)
/// `MSTEP_ASSIGN_OR_RETURN(auto x, f());`
#define MSTEP_ASSIGN_OR_RETURN(lhs, expr) \
  MSTEP_ASSIGN_OR_RETURN_IMPL(MSTEP_CONCAT(_statusor_, __LINE__), lhs, expr)
#define MSTEP_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(*tmp)
