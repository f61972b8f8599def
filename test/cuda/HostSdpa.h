// A cuDNN SDPA step (CudaAttentionInfo) run on host buffers, so that plans
// with cuDNN steps (bf16 / f16 attention: GPT-mini under autocast) run on
// the host too. It reads and writes each tensor at the step's strides (the
// heads' views of the projections, CudaAttentionViews), which is what it
// checks: the plan's wiring around cuDNN. It follows mstep's attention
// semantics (ref's), in double, each result rounded once to its dtype;
// what cuDNN itself computes (its own order and roundings, its backward's
// D = dO . O from the stored out, what it writes for a padded row) only a
// GPU run shows.
//
// Forward: s_ij = scale * q_i . k_j [+ mask_ij], -inf where the causal
// rule (j > i) or valid_seq_len (i or j >= len) excludes it; out_i =
// softmax(s_i) . v (0 for a row with no key); stats_i = max + log(sum)
// (f32). Backward as ref: P recomputed, dP = dO v^T, dS = P (dP -
// rowsum(P dP)), dQ = scale dS k, dK = scale dS^T q, dV = P^T dO; the
// out and stats it is given (cuDNN's inputs) must be the forward's: stats
// within an f32 rounding, out within a bf16 one.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "lib/backends/cuda/CudaPlan.h"
#include "test/cuda/HostElements.h"

namespace mstep::cuda::testing {

/// One [B, H, rows, cols] tensor of an SDPA step in host bytes.
struct HostSdpaTensor {
  char* base = nullptr;
  DType dtype = DType::bf16;
  SdpaStrides strides{};

  int64_t at(int64_t b, int64_t h, int64_t i, int64_t d) const {
    return b * strides[0] + h * strides[1] + i * strides[2] + d * strides[3];
  }
  double get(int64_t b, int64_t h, int64_t i, int64_t d) const {
    return load_element(base, at(b, h, i, d), dtype);
  }
  void set(int64_t b, int64_t h, int64_t i, int64_t d, double value) const {
    store_element(base, at(b, h, i, d), dtype, static_cast<float>(value));
  }
};

/// Runs the cuDNN SDPA `launch` of `plan` on `values` (host bytes per
/// value; aliases in their roots', TiledHost.h's host_bytes).
inline void run_sdpa_on_host(const CudaPlan& plan, const CudaLaunchStep& launch,
                             std::vector<std::vector<char>>& values) {
  const CudaAttentionInfo& info = plan.attentions[launch.attention];
  const CudnnSdpaConfig& c = info.config;
  const int64_t B = c.batch, H = c.heads, L = c.seq_q, S = c.seq_kv, E = c.head_dim, Ev = c.dv();
  std::map<std::string, int> role;
  const std::vector<std::string> args = attention_arg_roles(info), writes =
                                                                       attention_write_roles(info);
  for (size_t i = 0; i < args.size(); ++i) role[args[i]] = launch.args[i];
  for (size_t i = 0; i < writes.size(); ++i) role[writes[i]] = launch.writes[i];
  auto bytes = [&](const std::string& name) {
    const int v = role.at(name);
    if (const CudaAlias* alias = plan.alias_of(v))
      return values[alias->root].data() + alias->byte_offset;
    return values[v].data();
  };
  const SdpaLayout& layout = c.layout;
  auto tensor = [&](const std::string& name, const SdpaStrides& strides, int64_t rows,
                    int64_t cols) {
    return HostSdpaTensor{bytes(name), c.dtype, sdpa_strides_or_packed(strides, H, rows, cols)};
  };
  const HostSdpaTensor q = tensor("q", layout.q, L, E), k = tensor("k", layout.k, S, E),
                       v = tensor("v", layout.v, S, Ev);
  const HostSdpaTensor stats{bytes("stats"), DType::f32, sdpa_strides_or_packed({}, H, L, 1)};
  ASSERT_NE(c.padding, SdpaPadding::left) << "cuDNN takes right padding only";
  std::vector<int32_t> lengths(B, static_cast<int32_t>(std::max(L, S)));
  if (c.padding == SdpaPadding::right)
    std::memcpy(lengths.data(), bytes("valid_seq_len"), B * sizeof(int32_t));
  const double minus_inf = -std::numeric_limits<double>::infinity();
  // The scores of row i of (b, h), -inf where excluded.
  auto scores = [&](int64_t b, int64_t h, int64_t i) {
    std::vector<double> s(S, minus_inf);
    if (i >= lengths[b]) return s;
    const HostSdpaTensor mask{c.mask == SdpaMaskKind::additive ? bytes("mask") : nullptr, c.dtype,
                              {c.mask_per_batch ? (c.mask_per_head ? H : 1) * L * S : 0,
                               c.mask_per_head ? L * S : 0, S, 1}};
    for (int64_t j = 0; j < S; ++j) {
      if (j >= lengths[b] || (c.causal && j > i)) continue;
      double dot = 0;
      for (int64_t d = 0; d < E; ++d) dot += q.get(b, h, i, d) * k.get(b, h, j, d);
      s[j] = c.scale * dot + (mask.base ? mask.get(b, h, i, j) : 0.0);
    }
    return s;
  };
  if (!info.backward) {
    const HostSdpaTensor out = tensor("out", layout.out, L, Ev);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < L; ++i) {
          std::vector<double> s = scores(b, h, i);
          double max = minus_inf, sum = 0;
          for (double x : s) max = std::max(max, x);
          for (double& x : s) sum += (x = max == minus_inf ? 0 : std::exp(x - max));
          for (int64_t d = 0; d < Ev; ++d) {
            double o = 0;
            for (int64_t j = 0; j < S; ++j) o += s[j] * v.get(b, h, j, d);
            out.set(b, h, i, d, sum > 0 ? o / sum : 0);
          }
          stats.set(b, h, i, 0, sum > 0 ? max + std::log(sum) : minus_inf);
        }
    return;
  }
  const HostSdpaTensor out = tensor("out", layout.out, L, Ev),
                       grad_out = tensor("grad_out", layout.grad_out, L, Ev),
                       grad_q = tensor("grad_q", layout.grad_q, L, E),
                       grad_k = tensor("grad_k", layout.grad_k, S, E),
                       grad_v = tensor("grad_v", layout.grad_v, S, Ev);
  int inconsistent = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      std::vector<double> dk(S * E, 0), dv(S * Ev, 0);
      for (int64_t i = 0; i < L; ++i) {
        // P recomputed in double, as ref does; the forward's out and stats
        // (which cuDNN reads) are checked against it, not used.
        std::vector<double> p = scores(b, h, i);
        double max = minus_inf, sum = 0;
        for (double x : p) max = std::max(max, x);
        for (double& x : p) sum += (x = max == minus_inf ? 0 : std::exp(x - max));
        for (double& x : p) x = sum > 0 ? x / sum : 0;
        if (sum > 0) {
          const double lse = max + std::log(sum), stored = stats.get(b, h, i, 0);
          if (!(std::fabs(stored - lse) <= 1e-6 * (1 + std::fabs(lse))) && inconsistent++ < 3)
            ADD_FAILURE() << info.origin << ": stats[" << b << ", " << h << ", " << i
                          << "] = " << stored << ", the forward's is " << lse;
          for (int64_t d = 0; d < Ev; ++d) {
            double o = 0;
            for (int64_t j = 0; j < S; ++j) o += p[j] * v.get(b, h, j, d);
            const double stored_out = out.get(b, h, i, d);
            if (!(std::fabs(stored_out - o) <= std::ldexp(std::fabs(o), -8) + 1e-30) &&
                inconsistent++ < 3)
              ADD_FAILURE() << info.origin << ": out[" << b << ", " << h << ", " << i << ", " << d
                            << "] = " << stored_out << ", the forward's is " << o;
          }
        }
        // dP_ij = dO_i . v_j; dS = P (dP - sum_j P dP).
        std::vector<double> dp(S, 0);
        double rowsum = 0;
        for (int64_t j = 0; j < S; ++j) {
          if (p[j] == 0) continue;
          for (int64_t d = 0; d < Ev; ++d) {
            dp[j] += grad_out.get(b, h, i, d) * v.get(b, h, j, d);
            dv[j * Ev + d] += p[j] * grad_out.get(b, h, i, d);
          }
          rowsum += p[j] * dp[j];
        }
        std::vector<double> dq(E, 0);
        for (int64_t j = 0; j < S; ++j) {
          if (p[j] == 0) continue;
          const double ds = p[j] * (dp[j] - rowsum);
          for (int64_t d = 0; d < E; ++d) {
            dq[d] += c.scale * ds * k.get(b, h, j, d);
            dk[j * E + d] += c.scale * ds * q.get(b, h, i, d);
          }
        }
        for (int64_t d = 0; d < E; ++d) grad_q.set(b, h, i, d, dq[d]);
      }
      for (int64_t j = 0; j < S; ++j) {
        for (int64_t d = 0; d < E; ++d) grad_k.set(b, h, j, d, dk[j * E + d]);
        for (int64_t d = 0; d < Ev; ++d) grad_v.set(b, h, j, d, dv[j * Ev + d]);
      }
    }
}

}  // namespace mstep::cuda::testing
