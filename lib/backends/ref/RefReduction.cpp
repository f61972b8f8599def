// Ref kernels for reductions: sum, mean, max, min, argmax, logsumexp, var.
// The node's `dims` are sorted and non-negative (the API normalizes them).
// Floating inputs accumulate in double and round once on store, so f32,
// bf16 and f16 results are as exact as their dtype allows; integer sums
// accumulate in i64.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/backends/ref/RefKernels.h"

namespace mstep::ref {

namespace {

/// Input offsets of every index over `dims` (row-major strides of
/// `shape`), enumerated in row-major order of those dims. An empty `dims`
/// gives the single offset 0; a size-0 dim gives no offsets.
std::vector<int64_t> offsets_over(const Shape& shape, const Shape::Dims& strides,
                                  absl::Span<const int64_t> dims) {
  int64_t count = 1;
  for (int64_t d : dims) count *= shape[d];
  std::vector<int64_t> out;
  out.reserve(count);
  Shape::Dims idx(dims.size(), 0);
  int64_t off = 0;
  for (int64_t i = 0; i < count; ++i) {
    out.push_back(off);
    for (int64_t k = static_cast<int64_t>(dims.size()) - 1; k >= 0; --k) {
      const int64_t d = dims[k];
      if (++idx[k] < shape[d]) {
        off += strides[d];
        break;
      }
      off -= strides[d] * (shape[d] - 1);
      idx[k] = 0;
    }
  }
  return out;
}

/// Splits the input into rows: `outer[o]` is where output element o's row
/// starts and `inner` the offsets of the row's elements from there. Kept
/// dims keep their order, so outputs come out row-major with or without
/// keepdim.
struct RowLayout {
  std::vector<int64_t> outer, inner;
};

RowLayout row_layout(const Shape& shape, const IntList& reduced) {
  IntList kept;
  for (int64_t d = 0, next = 0; d < shape.rank(); ++d) {
    if (next < static_cast<int64_t>(reduced.size()) && reduced[next] == d)
      ++next;
    else
      kept.push_back(d);
  }
  const Shape::Dims strides = shape.strides();
  return {offsets_over(shape, strides, kept),
          offsets_over(shape, strides, reduced)};
}

/// The elements one output reduces over, read in the compute type.
template <typename T>
struct Row {
  using Elem = T;
  const T* base;
  absl::Span<const int64_t> offsets;

  int64_t size() const { return static_cast<int64_t>(offsets.size()); }
  Compute<T> operator[](int64_t i) const {
    return static_cast<Compute<T>>(base[offsets[i]]);
  }
};

template <typename T>
constexpr bool kFloating = std::is_floating_point_v<Compute<T>>;

/// Accumulator: double for floating dtypes, i64 for integers and bool.
template <typename T>
using Acc = std::conditional_t<kFloating<T>, double, int64_t>;

template <typename T>
bool is_nan(Compute<T> v) {
  if constexpr (kFloating<T>) return std::isnan(v); else return false;
}

/// Runs `f(row)` for every output element and stores the result, rounded
/// once to the output dtype. The output has the input dtype, or i64
/// (argmax). `needs_element`: the reduction has no identity, so an empty
/// row is an error (the API rejects it first; this guards other callers).
template <typename F>
absl::Status reduce_rows(const KernelArgs& a, bool needs_element, F f) {
  const HostBuffer& in = a.in(0);
  HostBuffer& out = a.out();
  const RowLayout layout =
      row_layout(in.type().shape, attr_ints(a.node.attrs, AttrName::dims));
  if (needs_element && layout.inner.empty() && !layout.outer.empty())
    return absl::InvalidArgumentError(absl::StrCat(
        op_name(a.node.op), ": cannot reduce over a size-0 dim of ",
        in.type().to_string()));
  const bool index_result = out.type().dtype != in.type().dtype;
  if (index_result && out.type().dtype != DType::i64)
    return absl::InternalError(absl::StrCat(
        op_name(a.node.op), ": unexpected result dtype ", out.type().to_string()));
  dispatch(in.type().dtype, [&]<typename T>() {
    auto run = [&]<typename U>() {
      U* y = out.data<U>();
      for (size_t o = 0; o < layout.outer.size(); ++o) {
        Row<T> row{in.data<T>() + layout.outer[o], layout.inner};
        y[o] = static_cast<U>(static_cast<Compute<U>>(f(row)));
      }
    };
    if (index_result)
      run.template operator()<int64_t>();
    else
      run.template operator()<T>();
  });
  return absl::OkStatus();
}

absl::Status sum_kernel(const KernelArgs& a) {
  return reduce_rows(a, false, []<typename T>(Row<T> row) {
    Acc<T> acc = 0;
    for (int64_t i = 0; i < row.size(); ++i) acc += row[i];
    return acc;
  });
}

absl::Status mean_kernel(const KernelArgs& a) {
  // An empty row gives 0/0 = NaN, as PyTorch.
  return reduce_rows(a, false, []<typename T>(Row<T> row) {
    double acc = 0;
    for (int64_t i = 0; i < row.size(); ++i) acc += static_cast<double>(row[i]);
    return acc / static_cast<double>(row.size());
  });
}

absl::Status var_kernel(const KernelArgs& a) {
  // Two passes (mean, then squared deviations) in double: no cancellation
  // from the one-pass E[x^2] - E[x]^2 form. The divisor is
  // max(0, n - correction), so n <= correction gives inf or NaN (PyTorch).
  const int64_t correction = attr_int(a.node.attrs, AttrName::correction);
  return reduce_rows(a, false, [correction]<typename T>(Row<T> row) {
    const int64_t n = row.size();
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(row[i]);
    const double mean = sum / static_cast<double>(n);
    double ssd = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double d = static_cast<double>(row[i]) - mean;
      ssd += d * d;
    }
    return ssd / static_cast<double>(std::max<int64_t>(0, n - correction));
  });
}

/// max (kMax) or min of a row; NaN wins, as PyTorch.
template <bool kMax>
absl::Status extremum_kernel(const KernelArgs& a) {
  return reduce_rows(a, true, []<typename T>(Row<T> row) {
    Compute<T> best = row[0];
    for (int64_t i = 0; i < row.size(); ++i) {
      const Compute<T> v = row[i];
      if (is_nan<T>(v)) return v;
      if (kMax ? v > best : v < best) best = v;
    }
    return best;
  });
}

absl::Status argmax_kernel(const KernelArgs& a) {
  // The index is row-major over the reduced dims: the index along the one
  // dim, or the flattened index when every dim is reduced. The first
  // maximum wins; a NaN counts as the maximum (PyTorch).
  return reduce_rows(a, true, []<typename T>(Row<T> row) {
    int64_t best = 0;
    for (int64_t i = 0; i < row.size(); ++i) {
      const Compute<T> v = row[i];
      if (is_nan<T>(v)) return i;
      if (v > row[best]) best = i;
    }
    return best;
  });
}

absl::Status logsumexp_kernel(const KernelArgs& a) {
  // log(sum(exp(x - m))) + m with m the row maximum, so exp never
  // overflows. An infinite m shifts by 0 instead (PyTorch), which keeps
  // all -inf rows at -inf and rows holding +inf at +inf. An empty row is
  // log(0) = -inf.
  return reduce_rows(a, false, []<typename T>(Row<T> row) {
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t i = 0; i < row.size(); ++i)
      m = std::max(m, static_cast<double>(row[i]));
    if (std::isinf(m)) m = 0;
    double s = 0;
    for (int64_t i = 0; i < row.size(); ++i)
      s += std::exp(static_cast<double>(row[i]) - m);
    return std::log(s) + m;
  });
}

}  // namespace

void register_reduction_kernels(KernelTable& t) {
  t[static_cast<int>(OpKind::sum)] = sum_kernel;
  t[static_cast<int>(OpKind::mean)] = mean_kernel;
  t[static_cast<int>(OpKind::max)] = extremum_kernel<true>;
  t[static_cast<int>(OpKind::min)] = extremum_kernel<false>;
  t[static_cast<int>(OpKind::argmax)] = argmax_kernel;
  t[static_cast<int>(OpKind::logsumexp)] = logsumexp_kernel;
  t[static_cast<int>(OpKind::var)] = var_kernel;
}

}  // namespace mstep::ref
