// Autograd controls: grad mode guards and multi-root backward.
#pragma once

#include <vector>

#include "mstep/api/Tensor.h"

namespace mstep {

/// Whether ops record backward functions on this thread (default true).
bool grad_enabled();
void set_grad_enabled(bool enabled);

/// Disables gradient recording in its scope (torch.no_grad()).
class NoGradGuard {
 public:
  NoGradGuard() : previous_(grad_enabled()) { set_grad_enabled(false); }
  ~NoGradGuard() { set_grad_enabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

/// Backward from several roots at once (torch.autograd.backward).
/// `gradients` may be empty when every root is a scalar.
void backward(const std::vector<Tensor>& roots,
              const std::vector<Tensor>& gradients = {}, bool retain_graph = false);

}  // namespace mstep
