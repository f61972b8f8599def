// xla_loops_bench: the xla step function's loops that were cpu-kernel
// callouts or ran on one thread until issue 20's probabilities round, each
// as one lazy step, timed on xla and on the cpu backend (the peer: its
// kernels are what xla called out to) in the same run, at each thread
// count given:
//   attention   fused_sdpa returning probabilities and dropout mask,
//               recompute = false, a float [B, H, L, S] mask that requires
//               grad; forward and backward (B 2, H 4, L = S 256, E 64)
//   attention_plain  the same without probabilities, saved probabilities
//               or mask (the loops of the round before), for scale
//   attention_fwd  attention_plain's forward alone (no grad, no dropout):
//               the backward's share is attention_plain minus it
//   embedding   index_select of 8192 tokens from a 1000 x 256 table and its
//               gradient (index_add with duplicates), cross_entropy without
//               reduction over 8192 x 1000 logits
//   clip_adamw  clip_grad_norm_ then AdamW over 2.1M parameters
//   mlp_block_fwd  a transformer's MLP block without grad, x + fc2(gelu(
//               fc1(x))) over 2048 x 256 tokens, 1024 hidden: both linears
//               fold their bias (gelu, residual) into the matmul's epilogue
//   mlp_block   the same with the backward (the weight and bias gradients;
//               fc1's gelu input is saved, so only fc2 folds)
//
//   xla_loops_bench [--steps N] [--threads 1,2] [--cases attention_plain,attention_fwd]
//
// Two warmup steps (compile), then N timed steps; prints the median step
// time as RESULT lines: metric=<case>_step_ms impl=mstep-<device>
// threads=<n>.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <memory>
#include <functional>
#include <string>
#include <vector>

#include "mstep/mstep.h"
#include "mstep/runtime/Tracer.h"

namespace {

using namespace mstep;
using Clock = std::chrono::steady_clock;

Tensor filled(Shape s, int seed, Device d) {
  std::vector<float> v(s.numel());
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>(std::sin(0.731 * static_cast<double>(i) + 1.37 * seed));
  return from_vector(v, s, DType::f32, d);
}

Tensor ids(int64_t n, int64_t size, Device d) {
  std::vector<int64_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = (i * 7919) % size;
  return from_vector(v, {n}, std::nullopt, d);
}

/// One case: builds its state on a device and returns the step to time.
using Case = std::function<std::function<void()>(Device)>;

std::function<void()> attention(Device d) {
  Tensor q = filled({2, 4, 256, 64}, 1, d).requires_grad_();
  Tensor k = filled({2, 4, 256, 64}, 2, d).requires_grad_();
  Tensor v = filled({2, 4, 256, 64}, 3, d).requires_grad_();
  Tensor mask = filled({2, 4, 256, 256}, 4, d).requires_grad_();
  Tensor w = filled({2, 4, 256, 64}, 5, d);
  return [=]() mutable {
    for (Tensor* t : {&q, &k, &v, &mask}) t->set_grad(Tensor{});
    SdpaOptions o;
    o.attn_mask = mask;
    o.dropout_p = 0.1;
    o.recompute = false;
    o.return_attn_probs = true;
    o.return_dropout_mask = true;
    SdpaResult r = fused_sdpa(q, k, v, o);
    (sum(r.out * w) + sum(r.attn_probs.detach())).backward();
    mark_step();
  };
}

/// The same shapes without [L, S] results or operands (the loops of the
/// round before), for scale.
std::function<void()> attention_plain(Device d) {
  Tensor q = filled({2, 4, 256, 64}, 1, d).requires_grad_();
  Tensor k = filled({2, 4, 256, 64}, 2, d).requires_grad_();
  Tensor v = filled({2, 4, 256, 64}, 3, d).requires_grad_();
  Tensor w = filled({2, 4, 256, 64}, 5, d);
  return [=]() mutable {
    for (Tensor* t : {&q, &k, &v}) t->set_grad(Tensor{});
    SdpaOptions o;
    o.dropout_p = 0.1;
    sum(scaled_dot_product_attention(q, k, v, o) * w).backward();
    mark_step();
  };
}

/// attention_plain's shapes, forward only: the sdpa loops without the
/// backward's.
std::function<void()> attention_fwd(Device d) {
  Tensor q = filled({2, 4, 256, 64}, 1, d);
  Tensor k = filled({2, 4, 256, 64}, 2, d);
  Tensor v = filled({2, 4, 256, 64}, 3, d);
  return [=]() mutable {
    Tensor out = scaled_dot_product_attention(q, k, v, SdpaOptions{});
    mark_step();
    (void)out;
  };
}

std::function<void()> embedding_step(Device d) {
  Tensor table = filled({1000, 256}, 1, d).requires_grad_();
  Tensor tokens = ids(8192, 1000, d);
  Tensor head = filled({256, 1000}, 2, d);
  Tensor target = ids(8192, 1000, d);
  return [=]() mutable {
    table.set_grad(Tensor{});
    Tensor logits = matmul(embedding(tokens, table), head);
    sum(cross_entropy(logits, target, Reduction::none)).backward();
    mark_step();
  };
}

std::function<void()> clip_adamw(Device d) {
  std::vector<Tensor> params = {filled({1024, 1024}, 1, d).requires_grad_(),
                                filled({1024, 1024}, 2, d).requires_grad_(),
                                filled({1024}, 3, d).requires_grad_()};
  std::vector<Tensor> weights = {filled({1024, 1024}, 4, d), filled({1024, 1024}, 5, d),
                                 filled({1024}, 6, d)};
  auto opt = std::make_shared<optim::AdamW>(params, optim::AdamWOptions{.lr = 1e-3});
  return [=]() {
    opt->zero_grad();
    Tensor loss = sum(params[0] * weights[0]);
    for (size_t i = 1; i < params.size(); ++i) loss = loss + sum(params[i] * weights[i]);
    loss.backward();
    optim::clip_grad_norm_(params, 1.0);
    opt->step();
    mark_step();
  };
}

/// The MLP block: x + fc2(gelu(fc1(x))), nn::Linear's [out, in] weights.
std::function<void()> mlp_block(Device d, bool grad) {
  Tensor x = filled({2048, 256}, 1, d);
  Tensor w1 = (filled({1024, 256}, 2, d) * 0.05).requires_grad_(grad);
  Tensor b1 = (filled({1024}, 3, d) * 0.1).requires_grad_(grad);
  Tensor w2 = (filled({256, 1024}, 4, d) * 0.05).requires_grad_(grad);
  Tensor b2 = (filled({256}, 5, d) * 0.1).requires_grad_(grad);
  mark_step();
  return [=]() mutable {
    Tensor y = x + linear(gelu(linear(x, w1, b1)), w2, b2);
    if (grad) {
      for (Tensor* t : {&w1, &b1, &w2, &b2}) t->set_grad(Tensor{});
      sum(y * y).backward();
    }
    mark_step();
  };
}

double median_ms(const std::function<void()>& step, int steps) {
  for (int i = 0; i < 2; ++i) step();
  std::vector<double> ms;
  for (int i = 0; i < steps; ++i) {
    const auto start = Clock::now();
    step();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

} // namespace

int main(int argc, char** argv) {
  int steps = 10;
  std::vector<int> threads = {1, 2};
  std::string only;  // comma-separated case names; empty runs all
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--steps")) {
      steps = std::max(1, std::atoi(argv[i + 1]));
    } else if (!std::strcmp(argv[i], "--threads")) {
      threads.clear();
      for (const char* p = argv[i + 1]; *p;) {
        threads.push_back(std::max(1, std::atoi(p)));
        p = std::strchr(p, ',');
        if (!p) break;
        ++p;
      }
    } else if (!std::strcmp(argv[i], "--cases")) {
      only = std::string(",") + argv[i + 1] + ",";
    } else {
      std::fprintf(stderr, "usage: xla_loops_bench [--steps N] [--threads 1,2] [--cases a,b]\n");
      return 2;
    }
  }
  const std::vector<std::pair<const char*, Case>> cases = {
      {"attention", attention},
      {"attention_plain", attention_plain},
      {"attention_fwd", attention_fwd},
      {"embedding", embedding_step},
      {"clip_adamw", clip_adamw},
      {"mlp_block_fwd", [](Device d) { return mlp_block(d, false); }},
      {"mlp_block", [](Device d) { return mlp_block(d, true); }}};
  for (int n : threads) {
    omp_set_num_threads(n);
    // Compiled anew per thread count: a cached cpu step keeps the count its
    // oneDNN primitives and attention scratch were made for.
    Tracer::get().cache().clear();
    for (const auto& [name, make] : cases) {
      if (!only.empty() && only.find(std::string(",") + name + ",") == std::string::npos) continue;
      for (DeviceType type : {DeviceType::cpu, DeviceType::xla}) {
        const Device d{type, 0};
        const double ms = median_ms(make(d), steps);
        std::printf("RESULT metric=%s_step_ms impl=mstep-%s value=%.3f threads=%d steps=%d\n", name,
                    std::string(device_type_name(type)).c_str(), ms, n, steps);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
