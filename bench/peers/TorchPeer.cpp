// libtorch eager peers for the benchmarks.
#include "bench/peers/TorchPeer.h"

#include <torch/torch.h>

#include <filesystem>
#include <string>

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
  // Debian's libtorch links libblas.so.3, which the alternatives system
  // points at the reference BLAS or at OpenBLAS.
  static std::string info = [] {
    if (at::globalContext().hasMKL()) return std::string("MKL");
    std::error_code ec;
    const std::string blas =
        std::filesystem::canonical("/lib/x86_64-linux-gnu/libblas.so.3", ec).string();
    if (blas.find("openblas") != std::string::npos) return "OpenBLAS (" + blas + ")";
    return "reference BLAS (" + blas + "); install libopenblas0-pthread for a fair peer";
  }();
  return info.c_str();
}

const char* torch_version() { return TORCH_VERSION; }

int torch_threads() { return torch::get_num_threads(); }

}  // namespace mstep::bench
