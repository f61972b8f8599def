// libtorch eager peers for the benchmarks.
#include "bench/peers/TorchPeer.h"

#include <torch/torch.h>

namespace mstep::bench {

double torch_elementwise_chain(int64_t ops) {
  torch::NoGradGuard no_grad;
  static torch::Tensor a = torch::full({8}, 0.999f);
  static torch::Tensor b = torch::full({8}, 0.001f);
  torch::Tensor y = torch::ones({8});
  for (int64_t i = 0; i < ops; i += 4) {
    y = y * a;
    y = y + b;
    y = torch::tanh(y);
    y = y - b;
  }
  return y[0].item<double>();
}

const char* torch_blas_info() {
  static std::string info = at::globalContext().hasMKL() ? "MKL" : "system BLAS (see ldd libtorch_cpu.so)";
  return info.c_str();
}

}  // namespace mstep::bench
