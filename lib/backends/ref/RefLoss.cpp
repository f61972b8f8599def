// Ref kernel for nll_loss. It also makes the one check the API cannot:
// a target that is neither ignore_index nor a valid class index.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "lib/backends/ref/RefKernels.h"

namespace mstep::ref {

namespace {

absl::Status nll_loss_kernel(const KernelArgs& a) {
  // log_probs is [N, C] (or [C] with a 0-d target: N = 1); target is i64.
  // Loss i is -log_probs[i, target[i]], or 0 for ignored targets. The mean
  // divides by the number of targets that are not ignored: 0/0 = NaN when
  // all are (PyTorch).
  const HostBuffer& lp = a.in(0);
  const HostBuffer& target = a.in(1);
  const Shape& shape = lp.type().shape;
  const int64_t classes = shape[shape.rank() - 1];
  const int64_t rows = target.numel();
  const int64_t ignore_index = attr_int(a.node.attrs, AttrName::ignore_index);
  const int64_t reduction = attr_int(a.node.attrs, AttrName::reduction);
  const int64_t* t = target.data<int64_t>();
  for (int64_t i = 0; i < rows; ++i)
    if (t[i] != ignore_index && (t[i] < 0 || t[i] >= classes))
      return absl::InvalidArgumentError(absl::StrCat(
          "mstep::nll_loss: target ", t[i], " at position ", i,
          " is out of range for C = ", classes, " classes (valid: 0 to ",
          classes - 1, ", or ignore_index ", ignore_index,
          "). Check the labels and the number of classes."));
  dispatch_floating(lp.type().dtype, [&]<typename T>() {
    const T* x = lp.data<T>();
    T* y = a.out().data<T>();
    double total = 0;
    int64_t count = 0;
    for (int64_t i = 0; i < rows; ++i) {
      double loss = 0;
      if (t[i] != ignore_index) {
        loss = -static_cast<double>(x[i * classes + t[i]]);
        ++count;
      }
      if (reduction == 0) y[i] = static_cast<T>(static_cast<Compute<T>>(loss));
      total += loss;
    }
    if (reduction == 1) total /= static_cast<double>(count);
    if (reduction != 0) y[0] = static_cast<T>(static_cast<Compute<T>>(total));
  });
  return absl::OkStatus();
}

}  // namespace

void register_loss_kernels(KernelTable& t) {
  t[static_cast<int>(OpKind::nll_loss)] = nll_loss_kernel;
}

}  // namespace mstep::ref
