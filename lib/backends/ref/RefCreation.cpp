// Ref kernels for leaves and creation ops: constant, full, arange, rand,
// randn.
#include <cmath>

#include "lib/backends/ref/RefKernels.h"
#include "mstep/core/Philox.h"

namespace mstep::ref {

namespace {

absl::Status constant(const KernelArgs& a) {
  const double v = attr_double(a.node.attrs, AttrName::value);
  dispatch(a.out().type().dtype, [&]<typename T>() {
    a.out().data<T>()[0] = static_cast<T>(static_cast<Compute<T>>(v));
  });
  return absl::OkStatus();
}

absl::Status full(const KernelArgs& a) {
  dispatch(a.out().type().dtype, [&]<typename T>() {
    const T v = a.in(0).data<T>()[0];
    T* out = a.out().data<T>();
    for (int64_t i = 0; i < a.out().numel(); ++i) out[i] = v;
  });
  return absl::OkStatus();
}

absl::Status arange(const KernelArgs& a) {
  const double start = attr_double(a.node.attrs, AttrName::start);
  const double step = attr_double(a.node.attrs, AttrName::step);
  dispatch(a.out().type().dtype, [&]<typename T>() {
    T* out = a.out().data<T>();
    for (int64_t i = 0; i < a.out().numel(); ++i)
      out[i] = static_cast<T>(static_cast<Compute<T>>(start + i * step));
  });
  return absl::OkStatus();
}

template <bool kNormal>
absl::Status random(const KernelArgs& a) {
  const int64_t* state = a.in(0).data<int64_t>();
  const auto seed = static_cast<uint64_t>(state[0]);
  const auto offset = static_cast<uint64_t>(state[1]) +
                      static_cast<uint64_t>(attr_int(a.node.attrs, AttrName::offset));
  dispatch_floating(a.out().type().dtype, [&]<typename T>() {
    // Uniform values keep only as many bits as T's significand (as
    // PyTorch's uniform_real_distribution), so rounding to a 16-bit float
    // can never reach 1.
    constexpr int kDigits = std::is_same_v<T, BFloat16> ? 8
                            : std::is_same_v<T, Float16> ? 11
                                                          : 24;
    constexpr float kGrid = static_cast<float>(1 << kDigits);
    T* out = a.out().data<T>();
    for (int64_t i = 0; i < a.out().numel(); ++i) {
      float r;
      if constexpr (kNormal) {
        r = Philox::normal(seed, offset, i);
      } else {
        r = std::floor(Philox::uniform(seed, offset, i) * kGrid) / kGrid;
      }
      out[i] = static_cast<T>(r);
    }
  });
  return absl::OkStatus();
}

}  // namespace

void register_creation_kernels(KernelTable& t) {
  t[static_cast<int>(OpKind::constant)] = constant;
  t[static_cast<int>(OpKind::full)] = full;
  t[static_cast<int>(OpKind::arange)] = arange;
  t[static_cast<int>(OpKind::rand)] = random<false>;
  t[static_cast<int>(OpKind::randn)] = random<true>;
}

}  // namespace mstep::ref
