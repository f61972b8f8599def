// torch_mlp_step: the libtorch (C++ eager) peer of examples/mnist_mlp: the
// same model (Linear 784->128, ReLU, Dropout(0.5), Linear 128->10,
// log_softmax), NLL loss, Adadelta lr 0.1, batch 200, random data made
// before timing. Prints the RESULT line of bench/peers/torch_steps.py
// (median ms per step, threads, parameters, first and last loss) and, on
// stderr, the BLAS libtorch uses. --threads sets libtorch's intra-op
// threads; Debian's libtorch runs its GEMMs in OpenBLAS, whose threads
// OPENBLAS_NUM_THREADS sets (bench/peers.sh sets both).
//   torch_mlp_step --threads N [--steps N]
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bench/peers/TorchPeer.h"

int main(int argc, char** argv) {
  int steps = 100, threads = 0;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--steps") == 0) steps = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--threads") == 0) threads = std::atoi(argv[i + 1]);
  }
  if (threads < 1) {
    std::fprintf(stderr, "torch_mlp_step: give the thread count, --threads N (N >= 1)\n");
    return 2;
  }
  torch::set_num_threads(threads);
  torch::manual_seed(0);
  torch::nn::Sequential model(torch::nn::Linear(784, 128), torch::nn::ReLU(),
                              torch::nn::Dropout(0.5), torch::nn::Linear(128, 10),
                              torch::nn::LogSoftmax(1));
  // libtorch 1.13's C++ API has no Adadelta: the update below is
  // torch.optim.Adadelta's (rho 0.9, eps 1e-6, lr 0.1), eager op by op.
  std::vector<torch::Tensor> params = model->parameters(), square_avg, acc_delta;
  for (const torch::Tensor& p : params) {
    square_avg.push_back(torch::zeros_like(p));
    acc_delta.push_back(torch::zeros_like(p));
  }
  auto adadelta_step = [&] {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < params.size(); ++i) {
      const torch::Tensor& g = params[i].grad();
      square_avg[i].mul_(0.9).addcmul_(g, g, 0.1);
      torch::Tensor delta = (acc_delta[i] + 1e-6).sqrt_().div_((square_avg[i] + 1e-6).sqrt_()).mul_(g);
      acc_delta[i].mul_(0.9).addcmul_(delta, delta, 0.1);
      params[i].add_(delta, -0.1);
    }
  };
  std::vector<torch::Tensor> xs, ys;
  for (int b = 0; b < 8; ++b) {
    xs.push_back(torch::randn({200, 784}));
    ys.push_back(torch::randint(0, 10, {200}, torch::kLong));
  }
  std::vector<double> ms, losses;
  for (int s = 0; s < steps + 5; ++s) {
    const auto t0 = std::chrono::steady_clock::now();
    for (torch::Tensor& p : params) p.mutable_grad() = torch::Tensor();
    torch::Tensor loss = torch::nll_loss(model->forward(xs[s % 8]), ys[s % 8]);
    loss.backward();
    adadelta_step();
    const double step_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (s >= 5) ms.push_back(step_ms);  // after warmup
    losses.push_back(loss.item<double>());
  }
  std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
  int64_t params_count = 0;
  for (const torch::Tensor& p : params) params_count += p.numel();
  std::printf("RESULT metric=mlp_step_ms impl=libtorch-%s-eager value=%.3f threads=%d params=%lld "
              "loss=%.3f->%.3f\n",
              TORCH_VERSION, ms[ms.size() / 2], torch::get_num_threads(), (long long)params_count,
              losses.front(), losses.back());
  std::fprintf(stderr, "torch_mlp_step: BLAS %s\n", mstep::bench::torch_blas_info());
  return 0;
}
