// Data-movement ops: slice, cat/stack/chunk, pad, triu/tril. Each checks
// its arguments against PyTorch's rules and records one node (or, for the
// composites stack and chunk, several); nothing computes here. Indexing ops
// (gather, index_select, embedding) are in IndexingOps.cpp.
#include <algorithm>
#include <string>

#include "absl/strings/str_join.h"
#include "lib/api/OpBuilder.h"
#include "mstep/api/ShapeOps.h"
#include "mstep/runtime/TensorImpl.h"

namespace mstep {

using detail::describe;
using detail::throw_op_error;

namespace {

/// "f32[2, 3], i64[2, 4]" for messages about a list of tensors.
std::string describe_list(absl::Span<const Tensor> tensors) {
  return absl::StrJoin(tensors, ", ", [](std::string* out, const Tensor& t) {
    absl::StrAppend(out, describe(t));
  });
}

void require_defined(absl::string_view op, const Tensor& x) {
  if (!x.defined()) throw_op_error(op, "the input is undefined", "", "");
}

/// The checks torch.cat and torch.stack share: a non-empty list of defined
/// tensors.
void require_tensor_list(absl::string_view op,
                         absl::Span<const Tensor> tensors) {
  if (tensors.empty())
    throw_op_error(op, "expects a non-empty list of tensors", "an empty list",
                   "Pass at least one tensor.");
  for (size_t i = 0; i < tensors.size(); ++i)
    if (!tensors[i].defined())
      throw_op_error(op,
                     absl::StrCat("tensor ", i, " of the list is undefined"),
                     describe_list(tensors), "");
}

}  // namespace

Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end,
             int64_t step) {
  require_defined("slice", x);
  if (x.dim() == 0)
    throw_op_error("slice", "cannot slice a 0-d tensor", describe(x),
                   "Reshape it to [1] first.");
  const int64_t d = detail::normalize_dim("slice", dim, x.dim(), x);
  if (step <= 0)
    throw_op_error("slice", absl::StrCat("step must be positive, got ", step),
                   describe(x),
                   "Use step >= 1; negative steps are not supported, as in "
                   "PyTorch.");
  // Python's clamping: negative bounds count from the end, then both are
  // clamped into [0, size] and end is raised to start (an empty slice).
  const int64_t size = x.shape()[d];
  if (start < 0) start = std::max<int64_t>(start + size, 0);
  if (end < 0) end = std::max<int64_t>(end + size, 0);
  start = std::min(start, size);
  end = std::clamp(end, start, size);
  if (start == 0 && end == size && step == 1) return x;
  Shape out = x.shape();
  // ceil((end - start) / step), written so a huge step cannot overflow.
  out[d] = end == start ? 0 : (end - start - 1) / step + 1;
  return detail::record("slice", OpKind::slice, {x},
                        {{AttrName::dim, d},
                         {AttrName::start, start},
                         {AttrName::end, end},
                         {AttrName::step, step}},
                        {std::move(out), x.dtype()});
}

Tensor cat(absl::Span<const Tensor> tensors, int64_t dim) {
  require_tensor_list("cat", tensors);
  const Tensor& first = tensors.front();
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].dim() == 0)
      throw_op_error("cat",
                     absl::StrCat("tensor ", i,
                                  " is 0-d and cannot be "
                                  "concatenated"),
                     describe_list(tensors),
                     "Use stack() for 0-d tensors, or unsqueeze them first.");
    if (tensors[i].dim() != first.dim())
      throw_op_error("cat",
                     absl::StrCat("tensor ", i, " has ", tensors[i].dim(),
                                  " dims but tensor 0 has ", first.dim()),
                     describe_list(tensors),
                     "All tensors need the same rank (an empty [0] tensor "
                     "is not skipped as in old PyTorch: leave it out).");
  }
  const int64_t d = detail::normalize_dim("cat", dim, first.dim(), first);
  Shape out = first.shape();
  out[d] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    for (int64_t k = 0; k < first.dim(); ++k)
      if (k != d && tensors[i].shape()[k] != first.shape()[k])
        throw_op_error("cat",
                       absl::StrCat("sizes must match except in dim ", d,
                                    ": tensor ", i, " has size ",
                                    tensors[i].shape()[k], " in dim ", k,
                                    ", tensor 0 has ", first.shape()[k]),
                       describe_list(tensors),
                       "Make the other dims equal, e.g. with pad() or "
                       "slice().");
    out[d] += tensors[i].shape()[d];
  }
  // torch.cat promotes mixed dtypes to their common type; the graph op
  // takes one dtype, so the casts are explicit nodes.
  const DType dtype = detail::result_type(tensors);
  std::vector<Tensor> operands;
  operands.reserve(tensors.size());
  for (const Tensor& t : tensors) operands.push_back(detail::cast_to(t, dtype));
  if (operands.size() == 1) return operands.front();
  return detail::record("cat", OpKind::cat, operands, {{AttrName::dim, d}},
                        {std::move(out), dtype});
}

Tensor stack(absl::Span<const Tensor> tensors, int64_t dim) {
  require_tensor_list("stack", tensors);
  for (size_t i = 1; i < tensors.size(); ++i)
    if (tensors[i].shape() != tensors[0].shape())
      throw_op_error("stack",
                     absl::StrCat("expects tensors of one shape, but tensor ",
                                  i, " is ", tensors[i].shape().to_string(),
                                  " and tensor 0 is ",
                                  tensors[0].shape().to_string()),
                     describe_list(tensors),
                     "Reshape or pad them to the same shape first.");
  // The new dim may be anywhere in [0, rank], so wrap against rank + 1.
  const int64_t d =
      detail::normalize_dim("stack", dim, tensors[0].dim() + 1, tensors[0]);
  std::vector<Tensor> parts;
  parts.reserve(tensors.size());
  for (const Tensor& t : tensors) parts.push_back(unsqueeze(t, d));
  return cat(parts, d);
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  require_defined("chunk", x);
  if (chunks <= 0)
    throw_op_error("chunk",
                   absl::StrCat("chunks must be positive, got ", chunks),
                   describe(x), "Ask for at least one chunk.");
  if (x.dim() == 0)
    throw_op_error("chunk", "expects at least a 1-d tensor", describe(x),
                   "Reshape it to [1] first.");
  const int64_t d = detail::normalize_dim("chunk", dim, x.dim(), x);
  const int64_t size = x.shape()[d];
  std::vector<Tensor> out;
  if (size == 0) {
    // torch.chunk returns `chunks` empty pieces for an empty dim.
    for (int64_t i = 0; i < chunks; ++i) out.push_back(slice(x, d, 0, 0));
    return out;
  }
  // Pieces of ceil(size / chunks); there may be fewer than `chunks` of
  // them (torch.chunk: 6 split 4 ways is 2, 2, 2).
  const int64_t piece = (size + chunks - 1) / chunks;
  for (int64_t start = 0; start < size; start += piece)
    out.push_back(slice(x, d, start, std::min(start + piece, size)));
  return out;
}

Tensor pad(const Tensor& x, absl::Span<const int64_t> pads, double value) {
  require_defined("pad", x);
  auto got = [&] {
    return absl::StrCat(describe(x), " with pads [", absl::StrJoin(pads, ", "),
                        "]");
  };
  if (pads.size() % 2 != 0)
    throw_op_error("pad",
                   absl::StrCat("pads has ", pads.size(),
                                " entries; it must hold (before, after) pairs"),
                   got(), "Pass an even number of pads, last dim first.");
  const int64_t padded_dims = static_cast<int64_t>(pads.size()) / 2;
  if (padded_dims > x.dim())
    throw_op_error("pad",
                   absl::StrCat("pads covers ", padded_dims,
                                " dims but the input has only ", x.dim()),
                   got(), "Pass at most two pads per input dim.");
  // pads[2k], pads[2k + 1] apply to dim rank - 1 - k (torch order).
  Shape out = x.shape();
  bool noop = true;
  for (int64_t k = 0; k < padded_dims; ++k) {
    const int64_t d = x.dim() - 1 - k;
    const int64_t size = x.shape()[d] + pads[2 * k] + pads[2 * k + 1];
    if (size < 0)
      throw_op_error("pad",
                     absl::StrCat("dim ", d, " of size ", x.shape()[d],
                                  " padded by (", pads[2 * k], ", ",
                                  pads[2 * k + 1],
                                  ") would have negative size ", size),
                     got(), "Negative pads crop; crop at most the whole dim.");
    out[d] = size;
    noop &= pads[2 * k] == 0 && pads[2 * k + 1] == 0;
  }
  if (noop) return x;
  // The fill value is a 0-d constant operand of x's dtype (a host
  // constant: a new value recompiles with the same structure).
  // The fill value is a host constant operand (hashed as a constant).
  return detail::record("pad", OpKind::pad,
                        {x, detail::constant_tensor(value, x.dtype(), x.device())},
                        {{AttrName::pads, IntList(pads.begin(), pads.end())}},
                        {std::move(out), x.dtype()});
}

namespace {
Tensor triangle(absl::string_view op, OpKind kind, const Tensor& x,
                int64_t diagonal) {
  require_defined(op, x);
  if (x.dim() < 2)
    throw_op_error(op, "expects a tensor with at least 2 dims", describe(x),
                   "It works on the last two dims; unsqueeze a vector "
                   "first.");
  return detail::record(op, kind, {x}, {{AttrName::diagonal, diagonal}},
                        x.type());
}
}  // namespace

Tensor triu(const Tensor& x, int64_t diagonal) {
  return triangle("triu", OpKind::triu, x, diagonal);
}

Tensor tril(const Tensor& x, int64_t diagonal) {
  return triangle("tril", OpKind::tril, x, diagonal);
}

}  // namespace mstep
