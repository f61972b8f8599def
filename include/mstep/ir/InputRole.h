// InputRole: what a graph input (a materialized tensor) is to the program.
#pragma once

#include <cstdint>

#include "absl/strings/string_view.h"

namespace mstep {

/// What a graph input is to the program that traced it. The importer
/// writes it on the MLIR function argument (`mstep.role`); the memory
/// planner and backends use it (parameters and optimizer state are
/// long-lived and may be updated in place).
enum class InputRole : uint8_t {
  input,            // any other materialized tensor (a batch, a mask, ...)
  parameter,        // a tensor that requires grad (a model weight)
  optimizer_state,  // an optimizer's moment, step counter, ...
  rng_state,        // the Philox (seed, offset) pair
  device_scalar,    // a Tensor::scalar (lr, betas, ...): changes without recompiling
};
inline constexpr int kNumInputRoles = 5;
absl::string_view input_role_name(InputRole role);

}  // namespace mstep
