// Data movement on the host as copies of contiguous runs: reshape, permute
// (any order that keeps the last dim: the head split and merge of
// attention), expand, slice and slice_scatter. The ref kernels copy one
// element at a time through a strided index walk; here the output (or, for
// slice_scatter, the source) is walked as rows, dims that stay contiguous
// are merged so rows get long, each row is one memcpy (or a broadcast
// fill), and rows are split over the cores.
#include <cstring>

#include "lib/backends/cpu/HostKernels.h"
#include "lib/backends/cpu/HostSimd.h"

namespace mstep::cpu {

namespace {

/// Walks a dense row-major `shape` and, for each element, an offset
/// `base + sum(index[d] * strides[d])` into the other tensor, after
/// merging dims that are contiguous on both sides.
struct StridedView {
  std::vector<int64_t> shape, strides;  // merged; strides in elements
  int64_t base = 0;

  StridedView(const Shape& dense, Shape::Dims other_strides, int64_t offset) : base(offset) {
    for (int64_t d = 0; d < dense.rank(); ++d) {
      if (dense[d] == 1) continue;  // contributes no offset
      if (!shape.empty() && strides.back() == other_strides[d] * dense[d]) {
        shape.back() *= dense[d];  // merges into the dim before it
        strides.back() = other_strides[d];
      } else {
        shape.push_back(dense[d]);
        strides.push_back(other_strides[d]);
      }
    }
    if (shape.empty()) shape.push_back(1), strides.push_back(1);
  }
  int64_t row_length() const { return shape.back(); }
  int64_t rows() const {
    int64_t n = 1;
    for (size_t d = 0; d + 1 < shape.size(); ++d) n *= shape[d];
    return n;
  }
  /// The other tensor's element offset of row `r`'s first element.
  int64_t row_offset(int64_t r) const {
    int64_t offset = base;
    for (size_t d = shape.size() - 1; d-- > 0;) {
      offset += (r % shape[d]) * strides[d];
      r /= shape[d];
    }
    return offset;
  }
};

/// Copies between a dense tensor and a strided view of another one, a row
/// at a time. `gather`: dense out <- view of in; else view of out <- dense in.
void copy_rows(const StridedView& v, size_t es, const std::byte* in, std::byte* out, bool gather) {
  const int64_t len = v.row_length(), inner = v.strides.back();
  simd::parallel_ranges(v.rows(), v.rows() * len, [&](int, int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t other = v.row_offset(r);
      std::byte* dst = gather ? out + r * len * es : out + other * es;
      const std::byte* src = gather ? in + other * es : in + r * len * es;
      if (inner == 1) {
        std::memcpy(dst, src, len * es);
      } else if (gather) {  // a broadcast (stride 0) or strided source
        for (int64_t j = 0; j < len; ++j) std::memcpy(dst + j * es, src + j * inner * es, es);
      } else {
        for (int64_t j = 0; j < len; ++j) std::memcpy(dst + j * inner * es, src + j * es, es);
      }
    }
  });
}

class StridedCopyKernel final : public CpuKernel {
 public:
  /// out (dense) <- view of operand 0; for slice_scatter, out <- operand 0
  /// whole, then view of out <- operand 1.
  StridedCopyKernel(StridedView view, size_t element_bytes, int64_t whole_bytes, bool scatter)
      : view_(std::move(view)), es_(element_bytes), whole_bytes_(whole_bytes), scatter_(scatter) {}

  void run(const void* const* operands, void* const* results) override {
    const auto* in = static_cast<const std::byte*>(operands[0]);
    auto* out = static_cast<std::byte*>(results[0]);
    if (!scatter_) {
      if (in == out) return;  // a reshape planned over its operand: nothing moves
      return copy_rows(view_, es_, in, out, /*gather=*/true);
    }
    if (out != in) {
      const StridedView whole(Shape{whole_bytes_}, {1}, 0);
      copy_rows(whole, 1, in, out, true);
    }
    copy_rows(view_, es_, static_cast<const std::byte*>(operands[1]), out, /*gather=*/false);
  }
  absl::string_view name() const override { return scatter_ ? "host.slice_scatter" : "host.copy"; }

 private:
  StridedView view_;
  size_t es_;
  int64_t whole_bytes_;
  bool scatter_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<CpuKernel>> make_strided_copy_kernel(const KernelRequest& request) {
  const GraphNode& node = request.node();
  const TensorType& in = request.graph.type_of(node.operands[0]);
  const TensorType& out = node.results[0];
  const size_t es = element_size(out.dtype);
  const Shape::Dims in_strides = in.shape.strides();
  auto make = [&](const Shape& dense, Shape::Dims strides, int64_t base, bool scatter) {
    return std::make_unique<StridedCopyKernel>(StridedView(dense, std::move(strides), base), es,
                                               static_cast<int64_t>(out.bytes()), scatter);
  };
  switch (node.op) {
    case OpKind::reshape:
      return make(Shape{out.numel()}, {1}, 0, false);
    case OpKind::permute: {
      const IntList& perm = attr_ints(node.attrs, AttrName::perm);
      Shape::Dims strides(perm.size());
      for (size_t i = 0; i < perm.size(); ++i) strides[i] = in_strides[perm[i]];
      return make(out.shape, strides, 0, false);
    }
    case OpKind::expand: {
      Shape::Dims strides(out.shape.rank(), 0);
      const int64_t lead = out.shape.rank() - in.shape.rank();
      for (int64_t d = 0; d < in.shape.rank(); ++d)
        strides[lead + d] = in.shape[d] == 1 ? 0 : in_strides[d];
      return make(out.shape, strides, 0, false);
    }
    case OpKind::slice:
    case OpKind::slice_scatter: {
      const int64_t dim = attr_int(node.attrs, AttrName::dim);
      const int64_t start = attr_int(node.attrs, AttrName::start);
      const int64_t step = attr_int(node.attrs, AttrName::step);
      // The sliced tensor is the input of slice and the output of
      // slice_scatter (same shape as its input); the dense side is the
      // slice's result or slice_scatter's source.
      Shape::Dims strides = in_strides;
      const int64_t base = start * strides[dim];
      strides[dim] *= step;
      if (node.op == OpKind::slice) return make(out.shape, strides, base, false);
      return make(request.graph.type_of(node.operands[1]).shape, strides, base, true);
    }
    default:
      return nullptr;
  }
}

}  // namespace mstep::cpu
