// The engines of a NeuronCore-v2, each with its own in-order instruction
// queue. `sync` issues DMA (its transfers run on the 16 DMA engines).
#pragma once

#include <cstdint>

#include "absl/strings/string_view.h"

namespace mstep::neuron {

enum class Engine : uint8_t { tensor, vector, scalar, gpsimd, sync };

inline constexpr int kNumEngines = 5;

inline absl::string_view engine_name(Engine engine) {
  switch (engine) {
  case Engine::tensor:
    return "Tensor";
  case Engine::vector:
    return "Vector";
  case Engine::scalar:
    return "Scalar";
  case Engine::gpsimd:
    return "GpSimd";
  case Engine::sync:
    return "Sync";
  }
  return "?";
}

} // namespace mstep::neuron
