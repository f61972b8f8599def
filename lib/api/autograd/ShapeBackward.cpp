// Backward formulas: shape and data-movement ops. Each gradient moves the
// output gradient back to where its elements came from: reshape and
// permute invert, expand sums (sum_to), slice/cat/pad cut or place, the
// indexing ops scatter back with accumulation (duplicate indices add up),
// and the scatter ops gather. Integer and bool inputs get no gradient.
// Composites (stack, chunk, flatten, squeeze, embedding, ...) are covered
// through the primitives they record.
#include "lib/api/autograd/Formulas.h"
#include "mstep/mstep.h"

namespace mstep::autograd {

namespace {

using Grads = std::vector<Tensor>;

bool floating(const Tensor& t) { return is_floating(t.dtype()); }

int64_t dim_attr(const BackwardContext& c) { return attr_int(c.attrs, AttrName::dim); }

/// The zero tensor a placing op writes the gradient into.
Tensor zeros_of(const Tensor& like) { return zeros(like.shape(), like.dtype(), like.device()); }

Grads reshape_bw(const BackwardContext& c) {
  const Tensor& x = c.input(0);
  if (!floating(x)) return {Tensor()};
  return {reshape(c.grad(), x.shape().dims())};
}

Grads permute_bw(const BackwardContext& c) {
  if (!floating(c.input(0))) return {Tensor()};
  const IntList& perm = attr_ints(c.attrs, AttrName::perm);
  IntList inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[perm[i]] = static_cast<int64_t>(i);
  return {permute(c.grad(), inverse)};
}

Grads expand_bw(const BackwardContext& c) {
  const Tensor& x = c.input(0);
  if (!floating(x)) return {Tensor()};
  return {sum_to(c.grad(), x.shape())};
}

Grads slice_bw(const BackwardContext& c) {
  const Tensor& x = c.input(0);
  if (!floating(x)) return {Tensor()};
  // The slice's attrs are already normalized, so slice_scatter places the
  // gradient exactly where the forward read.
  return {slice_scatter(zeros_of(x), c.grad(), dim_attr(c), attr_int(c.attrs, AttrName::start),
                        attr_int(c.attrs, AttrName::end), attr_int(c.attrs, AttrName::step))};
}

Grads cat_bw(const BackwardContext& c) {
  const int64_t d = dim_attr(c);
  Tensor g = c.grad();
  Grads out(c.inputs.size());
  int64_t offset = 0;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const Tensor& x = c.input(i);
    const int64_t size = x.shape()[d];
    if (c.needs_grad(i) && floating(x)) out[i] = slice(g, d, offset, offset + size);
    offset += size;
  }
  return out;
}

Grads gather_bw(const BackwardContext& c) {
  const Tensor& x = c.input(0);
  if (!floating(x)) return {Tensor(), Tensor()};
  return {scatter_add(zeros_of(x), dim_attr(c), c.input(1), c.grad()), Tensor()};
}

Grads index_select_bw(const BackwardContext& c) {
  const Tensor& x = c.input(0);
  if (!floating(x)) return {Tensor(), Tensor()};
  return {index_add(zeros_of(x), dim_attr(c), c.input(1), c.grad()), Tensor()};
}

Grads pad_bw(const BackwardContext& c) {
  const Tensor& x = c.input(0);
  if (!floating(x)) return {Tensor(), Tensor()};
  // Negated pads undo the forward: they crop what it padded and pad with
  // zeros what it cropped (a negative forward pad), restoring x's shape.
  // The fill value (input 1) is a host constant: no gradient.
  IntList pads = attr_ints(c.attrs, AttrName::pads);
  for (int64_t& p : pads) p = -p;
  return {pad(c.grad(), pads), Tensor()};
}

template <bool kUpper> Grads triangle_bw(const BackwardContext& c) {
  if (!floating(c.input(0))) return {Tensor()};
  const int64_t diagonal = attr_int(c.attrs, AttrName::diagonal);
  return {kUpper ? triu(c.grad(), diagonal) : tril(c.grad(), diagonal)};
}

Grads scatter_add_bw(const BackwardContext& c) {
  const Tensor& x = c.input(0);
  const Tensor& index = c.input(1);
  const Tensor& src = c.input(2);
  if (!floating(x)) return {Tensor(), Tensor(), Tensor()};
  Tensor g = c.grad();
  Grads out(3);
  if (c.needs_grad(0)) out[0] = g;
  if (c.needs_grad(2)) {
    if (index.numel() == 0) {
      out[2] = zeros_of(src);
    } else {
      // Each src element the index covers went to one output element; the
      // ones outside the index's extent (it may be smaller than src) were
      // not used and get zeros.
      Tensor picked = gather(g, dim_attr(c), index);
      IntList pads;
      for (int64_t k = src.dim() - 1; k >= 0; --k) {
        pads.push_back(0);
        pads.push_back(src.shape()[k] - index.shape()[k]);
      }
      out[2] = pad(picked, pads);
    }
  }
  return out;
}

Grads index_add_bw(const BackwardContext& c) {
  if (!floating(c.input(0))) return {Tensor(), Tensor(), Tensor()};
  Tensor g = c.grad();
  Grads out(3);
  if (c.needs_grad(0)) out[0] = g;
  if (c.needs_grad(2)) out[2] = index_select(g, dim_attr(c), c.input(1));
  return out;
}

Grads slice_scatter_bw(const BackwardContext& c) {
  if (!floating(c.input(0))) return {Tensor(), Tensor()};
  const int64_t d = dim_attr(c);
  const int64_t start = attr_int(c.attrs, AttrName::start);
  const int64_t end = attr_int(c.attrs, AttrName::end);
  const int64_t step = attr_int(c.attrs, AttrName::step);
  Tensor g = c.grad();
  Grads out(2);
  // The slice's old values were overwritten: they get no gradient.
  if (c.needs_grad(0)) out[0] = slice_scatter(g, zeros_of(c.input(1)), d, start, end, step);
  if (c.needs_grad(1)) out[1] = slice(g, d, start, end, step);
  return out;
}

}  // namespace

void register_shape_formulas(FormulaTable& t) {
  t[static_cast<int>(OpKind::reshape)] = reshape_bw;
  t[static_cast<int>(OpKind::permute)] = permute_bw;
  t[static_cast<int>(OpKind::expand)] = expand_bw;
  t[static_cast<int>(OpKind::slice)] = slice_bw;
  t[static_cast<int>(OpKind::cat)] = cat_bw;
  t[static_cast<int>(OpKind::gather)] = gather_bw;
  t[static_cast<int>(OpKind::index_select)] = index_select_bw;
  t[static_cast<int>(OpKind::pad)] = pad_bw;
  t[static_cast<int>(OpKind::triu)] = triangle_bw<true>;
  t[static_cast<int>(OpKind::tril)] = triangle_bw<false>;
  t[static_cast<int>(OpKind::scatter_add)] = scatter_add_bw;
  t[static_cast<int>(OpKind::index_add)] = index_add_bw;
  t[static_cast<int>(OpKind::slice_scatter)] = slice_scatter_bw;
}

}  // namespace mstep::autograd
