// The three memories a tile program addresses: HBM (off chip, the only one
// copy_in/copy_out reach), SBUF (state buffer) and PSUM (partial sums, the
// Tensor engine's output).
#pragma once

#include "absl/strings/string_view.h"

namespace mstep::neuron {

enum class BufferKind : uint8_t { hbm, sbuf, psum };

inline absl::string_view buffer_kind_name(BufferKind kind) {
  switch (kind) {
  case BufferKind::hbm:
    return "HBM";
  case BufferKind::sbuf:
    return "SBUF";
  case BufferKind::psum:
    return "PSUM";
  }
  return "?";
}

} // namespace mstep::neuron
