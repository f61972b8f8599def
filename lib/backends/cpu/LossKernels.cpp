// Host kernel for f32, bf16 and f16 nll_loss (lib/backends/ref/RefLoss.cpp
// gives the semantics): loss i = -log_probs[i, target[i]], 0 for
// ignore_index; the mean divides by the targets not ignored (0/0 = NaN
// when all are). Losses are summed in f64 and rounded f64 -> f32 (-> bf16
// or f16), as ref rounds. The
// work is one load per row, so it runs on one thread; what it saves is
// the ref fallback's per-call overhead.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "lib/backends/cpu/HostKernels.h"
#include "mstep/core/HalfTypes.h"

#if defined(__AVX512F__) && defined(__AVX512DQ__)

namespace mstep::cpu {

namespace {

/// Over log-probs and losses of type T: float, BFloat16 or Float16.
template <typename T> class NllLossKernel final : public IndexCheckedKernel {
public:
  NllLossKernel(int64_t rows, int64_t classes, int64_t ignore_index, int64_t reduction)
      : rows_(rows), classes_(classes), ignore_index_(ignore_index), reduction_(reduction) {}

  void run(const void* const* operands, void* const* results) override {
    const auto* x = static_cast<const T*>(operands[0]);
    const auto* t = static_cast<const int64_t*>(operands[1]);
    auto* y = static_cast<T*>(results[0]);
    const int64_t outputs = reduction_ == 0 ? rows_ : 1;
    for (int64_t i = 0; i < rows_; ++i)
      if (t[i] != ignore_index_ && (t[i] < 0 || t[i] >= classes_)) {
        last_error_ = absl::InvalidArgumentError(absl::StrCat(
            "mstep::nll_loss: target ", t[i], " at position ", i,
            " is out of range for C = ", classes_, " classes (valid: 0 to ", classes_ - 1,
            ", or ignore_index ", ignore_index_, "). Check the labels and the number of classes."));
        std::fill(y, y + outputs, as_t(std::numeric_limits<float>::quiet_NaN()));
        return;
      }
    last_error_ = absl::OkStatus();
    double total = 0;
    int64_t count = 0;
    for (int64_t i = 0; i < rows_; ++i) {
      double loss = 0;
      if (t[i] != ignore_index_) {
        loss = -static_cast<double>(static_cast<float>(x[i * classes_ + t[i]]));
        ++count;
      }
      if (reduction_ == 0) y[i] = as_t(static_cast<float>(loss));
      total += loss;
    }
    if (reduction_ == 1) total /= static_cast<double>(count);
    if (reduction_ != 0) y[0] = as_t(static_cast<float>(total));
  }
  absl::string_view name() const override { return "host.nll_loss"; }

private:
  /// f32 -> T, rounded as the ref kernel stores.
  static T as_t(float v) {
    if constexpr (std::is_same_v<T, float>)
      return v;
    else
      return T(v);
  }

  int64_t rows_, classes_, ignore_index_, reduction_;
};

} // namespace

absl::StatusOr<std::unique_ptr<CpuKernel>> make_loss_kernel(const KernelRequest& request) {
  const GraphNode& node = request.node();
  if (node.op != OpKind::nll_loss || node.operands.size() != 2 || node.results.size() != 1)
    return nullptr;
  const TensorType& log_probs = request.graph.type_of(node.operands[0]);
  const TensorType& target = request.graph.type_of(node.operands[1]);
  const bool supported = log_probs.dtype == DType::f32 || log_probs.dtype == DType::bf16 ||
                         log_probs.dtype == DType::f16;
  if (!supported || node.results[0].dtype != log_probs.dtype || target.dtype != DType::i64 ||
      log_probs.shape.rank() < 1)
    return nullptr;
  const int64_t classes = log_probs.shape[log_probs.shape.rank() - 1];
  const int64_t rows = target.numel();
  if (rows * classes != log_probs.numel()) return nullptr;
  const int64_t ignore_index = attr_int(node.attrs, AttrName::ignore_index);
  const int64_t reduction = attr_int(node.attrs, AttrName::reduction);
  auto make = [&]<typename T>() -> std::unique_ptr<CpuKernel> {
    return std::make_unique<NllLossKernel<T>>(rows, classes, ignore_index, reduction);
  };
  if (log_probs.dtype == DType::bf16) return make.template operator()<BFloat16>();
  if (log_probs.dtype == DType::f16) return make.template operator()<Float16>();
  return make.template operator()<float>();
}

} // namespace mstep::cpu

#endif // __AVX512F__ && __AVX512DQ__
