// SpecialValueGuard's input scan and its ref-kernel fallback.
#include "lib/backends/cpu/OneDnnSpecialValueGuard.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "lib/backends/cpu/HostFallbackKernel.h"

namespace mstep::cpu::onednn {

namespace {

/// Special iff not strictly inside (-FLT_MAX, FLT_MAX); an int `|=` (not
/// `||`) keeps the loop branch-free so it vectorizes.
bool scan_f32(const float* x, int64_t n) {
  constexpr float kMax = std::numeric_limits<float>::max();
  int found = 0;
#pragma omp parallel for reduction(| : found) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) found |= !(std::fabs(x[i]) < kMax);
  return found != 0;
}

/// The same on bf16 bits: the exponent all ones (inf or NaN). No finite
/// bf16 value reaches FLT_MAX.
bool scan_bf16(const uint16_t* x, int64_t n) {
  int found = 0;
#pragma omp parallel for reduction(| : found) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) found |= (x[i] & 0x7F80) == 0x7F80;
  return found != 0;
}

}  // namespace

bool has_special_values(const void* data, DType dtype, int64_t n) {
  if (dtype == DType::bf16) return scan_bf16(static_cast<const uint16_t*>(data), n);
  return scan_f32(static_cast<const float*>(data), n);
}

void SpecialValueGuard::run(const void* const* operands, void* const* results) {
  for (const Scanned& s : scanned_)
    if (has_special_values(operands[s.operand], s.dtype, s.numel)) {
      exact_->run(operands, results);
      return;
    }
  fast_->run(operands, results);
}

absl::StatusOr<std::unique_ptr<CpuKernel>> guard_special_values(
    const KernelRequest& request, absl::StatusOr<std::unique_ptr<CpuKernel>> fast) {
  if (!fast.ok() || *fast == nullptr) return fast;
  absl::StatusOr<std::unique_ptr<CpuKernel>> exact = make_host_fallback_kernel(request);
  if (!exact.ok()) return exact.status();
  std::vector<SpecialValueGuard::Scanned> scanned;
  const GraphNode& node = request.node();
  for (size_t i = 0; i < node.operands.size(); ++i) {
    const TensorType& type = request.graph.type_of(node.operands[i]);
    scanned.push_back({static_cast<int>(i), type.dtype, type.numel()});
  }
  return std::make_unique<SpecialValueGuard>(*std::move(fast), *std::move(exact),
                                             std::move(scanned));
}

}  // namespace mstep::cpu::onednn
