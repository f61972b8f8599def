// sum, mean, max, min, argmax, var and logsumexp as loops (XlaOpLoops.h),
// with the
// ref kernels' semantics (lib/backends/ref/RefReduction.cpp): f32 sums and
// means accumulate in f64 and round once, i64 sums in i64; NaN wins max,
// min and argmax; the first maximum wins argmax; var takes two passes in
// f64 (the mean, then the squared deviations) over max(0, n - correction);
// logsumexp is log(sum(exp(x - m))) + m in f64 with m the row maximum (0
// when infinite). max, min and argmax also take i64 and i32 inputs. bf16
// elements are read as f32 and results rounded f64 -> f32 -> bf16
// (XlaElementTypes.h), as the ref kernels round them.
//
// Each output reduces its row: the reduced elements in row-major order of
// the reduced dims, as the ref kernel reads them. The dims are grouped
// after dropping size-1 dims and merging neighbours of the same kind
// (Groups). When the reduced dims are one block the input is viewed as
// [outer, reduced, inner] and f32 sums and means take vector loops
// (emit_f32_sum); otherwise (a broadcast operand's gradient over dims 0
// and 2, ...) each output's row is walked with div/rem over the groups.
// Every reduction is a row function over its outputs (or their blocks),
// split over the OpenMP threads when large; each output is computed as
// one call computes it, so the split changes no result.
#include <algorithm>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/backends/xla/XlaElementTypes.h"
#include "lib/backends/xla/XlaLoopBuilder.h"
#include "lib/backends/xla/XlaOpLoops.h"

namespace mstep::xla {

namespace {

struct Layout {
  int64_t outer = 1, reduced = 1, inner = 1;
};

/// A run of neighbouring dims of one kind, as one dim of `extent`
/// elements `stride` apart (the stride of its last dim).
struct Group {
  bool reduced;
  int64_t extent, stride;
};

/// The input's groups, outermost first: size-1 dims dropped, neighbours of
/// the same kind merged (row-major dims merge).
std::vector<Group> groups_of(const Shape& shape, const IntList& dims) {
  std::vector<Group> groups;
  const Shape::Dims strides = shape.strides();
  for (int64_t d = 0; d < shape.rank(); ++d) {
    if (shape[d] == 1) continue;
    const bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (!groups.empty() && groups.back().reduced == reduced) {
      groups.back().extent *= shape[d];
      groups.back().stride = strides[d];
    } else {
      groups.push_back({reduced, shape[d], strides[d]});
    }
  }
  return groups;
}

/// The [outer, reduced, inner] view, or nullopt when the reduced dims are
/// not one block.
std::optional<Layout> layout_of(const std::vector<Group>& groups) {
  Layout l;
  size_t at = 0;
  if (at < groups.size() && !groups[at].reduced) l.outer = groups[at++].extent;
  if (at < groups.size() && groups[at].reduced) l.reduced = groups[at++].extent;
  if (at < groups.size() && !groups[at].reduced) l.inner = groups[at++].extent;
  if (at != groups.size()) return std::nullopt;
  return l;
}

/// The input offset of position `index` of the row-major walk over the
/// groups of one kind (`reduced`): the sum of each group's coordinate
/// times its stride, innermost group first.
llvm::Value* offset_of(LoopBuilder& lb, const std::vector<Group>& groups, bool reduced,
                       llvm::Value* index) {
  auto& b = lb.b();
  std::vector<Group> walked;
  for (const Group& g : groups)
    if (g.reduced == reduced) walked.push_back(g);
  llvm::Value* offset = lb.i64(0);
  for (size_t k = walked.size(); k-- > 0;) {
    const Group& g = walked[k];
    // The outermost group takes what is left (no rem): index < its extent.
    llvm::Value* coordinate = k == 0 ? index : b.CreateSRem(index, lb.i64(g.extent));
    offset = b.CreateAdd(offset, b.CreateMul(coordinate, lb.i64(g.stride)));
    if (k > 0) index = b.CreateSDiv(index, lb.i64(g.extent));
  }
  return offset;
}

/// Lanes of the vector sums: 16 f32 loads, summed in two f64 halves.
constexpr int kLanes = 16;

/// f32 (or bf16) sum or mean in f64, kLanes at a time:
/// - inner >= kLanes (a bias gradient): kLanes neighbouring outputs at
///   once, each summing its column in order, as the scalar loop would;
/// - otherwise each output's row kLanes elements at a time, lane by lane,
///   then the lanes in order (the cpu kernel's row mode).
/// `lb` builds a row function (LoopBuilder::Rows); its rows are returned:
/// the outputs, or their blocks of kLanes. Each output is summed as a
/// single call sums it, so splitting the rows changes no result.
int64_t emit_f32_sum(LoopBuilder& lb, const Layout& l, bool mean, DType dtype) {
  auto& b = lb.b();
  llvm::Value* x = lb.operand(0);
  llvm::Value* y = lb.result(0);
  auto* f32s = llvm::FixedVectorType::get(lb.f32(), kLanes);
  auto* f64s = llvm::FixedVectorType::get(lb.f64(), kLanes);
  llvm::SmallVector<uint64_t> iota_values;
  for (int i = 0; i < kLanes; ++i) iota_values.push_back(i);
  llvm::Value* iota = llvm::ConstantDataVector::get(b.getContext(), iota_values);
  llvm::Value* zeros = llvm::Constant::getNullValue(f64s);
  llvm::Type* element = storage_type(b, dtype);
  // The lanes of [at, at + kLanes) that are before `end`.
  auto lanes_before = [&](llvm::Value* at, int64_t end) {
    return b.CreateICmpSLT(b.CreateAdd(b.CreateVectorSplat(kLanes, at), iota),
                           b.CreateVectorSplat(kLanes, lb.i64(end)));
  };
  auto load = [&](llvm::Value* at, llvm::Value* mask) {
    return b.CreateFPExt(masked_load_f32(b, dtype, kLanes, b.CreateInBoundsGEP(element, x, at),
                                         mask, llvm::Constant::getNullValue(f32s)),
                         f64s);
  };
  auto finish = [&](llvm::Value* total) {
    if (mean) {
      llvm::Value* count = lb.f64(static_cast<double>(l.reduced));
      total = b.CreateFDiv(
          total, total->getType()->isVectorTy() ? b.CreateVectorSplat(kLanes, count) : count);
    }
    return b.CreateFPTrunc(total, total->getType()->isVectorTy() ? static_cast<llvm::Type*>(f32s)
                                                                 : lb.f32());
  };
  if (l.inner >= kLanes) {
    const int64_t blocks = (l.inner + kLanes - 1) / kLanes;
    lb.loop(lb.row_begin(), lb.row_end(), [&](llvm::Value* unit) {
      // unit = (o, block of kLanes outputs)
      llvm::Value* o = b.CreateSDiv(unit, lb.i64(blocks));
      llvm::Value* first = b.CreateMul(b.CreateSRem(unit, lb.i64(blocks)), lb.i64(kLanes));
      llvm::Value* mask = lanes_before(first, l.inner);
      llvm::AllocaInst* acc = lb.local(f64s, zeros);
      lb.loop(l.reduced, [&](llvm::Value* r) {
        llvm::Value* at = b.CreateAdd(
            b.CreateMul(b.CreateAdd(b.CreateMul(o, lb.i64(l.reduced)), r), lb.i64(l.inner)),
            first);
        lb.set(acc, b.CreateFAdd(lb.get(acc), load(at, mask)));
      });
      llvm::Value* out = b.CreateAdd(b.CreateMul(o, lb.i64(l.inner)), first);
      masked_store_f32(b, dtype, finish(lb.get(acc)), b.CreateInBoundsGEP(element, y, out), mask);
    });
    return l.outer * blocks;
  }
  lb.loop(lb.row_begin(), lb.row_end(), [&](llvm::Value* o) {
    // inner < kLanes: output o = (outer, inner) reads with stride inner.
    if (l.inner == 1) {
      llvm::AllocaInst* acc = lb.local(f64s, zeros);
      llvm::Value* row = b.CreateMul(o, lb.i64(l.reduced));
      lb.loop((l.reduced + kLanes - 1) / kLanes, [&](llvm::Value* q) {
        llvm::Value* first = b.CreateMul(q, lb.i64(kLanes));
        lb.set(acc, b.CreateFAdd(lb.get(acc),
                                 load(b.CreateAdd(row, first), lanes_before(first, l.reduced))));
      });
      store_f32(lb, dtype, finish(b.CreateFAddReduce(lb.f64(0), lb.get(acc))), y, o);
      return;
    }
    llvm::Value* outer = b.CreateSDiv(o, lb.i64(l.inner));
    llvm::Value* i = b.CreateSRem(o, lb.i64(l.inner));
    llvm::AllocaInst* acc = lb.local(lb.f64(), lb.f64(0));
    lb.loop(l.reduced, [&](llvm::Value* r) {
      llvm::Value* at = b.CreateAdd(
          b.CreateMul(b.CreateAdd(b.CreateMul(outer, lb.i64(l.reduced)), r), lb.i64(l.inner)), i);
      lb.set(acc, b.CreateFAdd(lb.get(acc), lb.to_f64(load_f32(lb, dtype, x, at))));
    });
    store_f32(lb, dtype, finish(lb.get(acc)), y, o);
  });
  return l.outer * l.inner;
}

} // namespace

std::optional<OpLoop> emit_reduction_loop(llvm::Module& module, const TraceGraph& graph,
                                          uint32_t node) {
  const GraphNode& n = graph.nodes[node];
  const OpKind op = n.op;
  if (op != OpKind::sum && op != OpKind::mean && op != OpKind::max && op != OpKind::min &&
      op != OpKind::argmax && op != OpKind::var && op != OpKind::logsumexp)
    return std::nullopt;
  if (n.operands.size() != 1 || n.results.size() != 1) return std::nullopt;
  const TensorType& in = graph.type_of(n.operands[0]);
  const DType out_dtype = n.results[0].dtype;
  const bool integer_sum = op == OpKind::sum && in.dtype == DType::i64 && out_dtype == DType::i64;
  // max, min and argmax of integers compare as signed integers.
  const bool integer_extremum =
      (op == OpKind::max || op == OpKind::min || op == OpKind::argmax) &&
      (in.dtype == DType::i64 || in.dtype == DType::i32) &&
      out_dtype == (op == OpKind::argmax ? DType::i64 : in.dtype);
  const bool float_in = is_loop_float(in.dtype);
  const DType want_out = op == OpKind::argmax ? DType::i64 : in.dtype;
  if (!integer_sum && !integer_extremum && !(float_in && out_dtype == want_out))
    return std::nullopt;
  if (in.numel() == 0) return std::nullopt; // the ref kernel's empty-row rules
  const std::vector<Group> groups = groups_of(in.shape, attr_ints(n.attrs, AttrName::dims));
  int64_t outputs = 1, reduced = 1;
  for (const Group& g : groups) (g.reduced ? reduced : outputs) *= g.extent;
  if (outputs != n.results[0].numel()) return std::nullopt;
  const std::optional<Layout> layout = layout_of(groups);

  const std::string name = absl::StrCat("mstep_xla_", op_name(op), "_", node);
  if ((op == OpKind::sum || op == OpKind::mean) && !integer_sum && layout) {
    LoopBuilder rows(module, name, 1, 1, LoopBuilder::Rows{});
    const int64_t count = emit_f32_sum(rows, *layout, op == OpKind::mean, in.dtype);
    return OpLoop{rows.finish(), false, count, 1, in.numel()};
  }
  // One output per row: its offset in the input, then its row's elements
  // at offsets `at(r)` from there.
  LoopBuilder lb(module, name, 1, 1, LoopBuilder::Rows{});
  auto& b = lb.b();
  llvm::Value* x = lb.operand(0);
  llvm::Value* y = lb.result(0);
  const bool integer = integer_sum || integer_extremum;
  llvm::Type* element = integer ? b.getIntNTy(static_cast<unsigned>(element_size(in.dtype) * 8))
                                : static_cast<llvm::Type*>(lb.f32());
  // Float elements are read as f32 and results stored as `out_dtype`.
  auto load = [&](llvm::Value* at) {
    return integer ? lb.load(element, x, at) : load_f32(lb, in.dtype, x, at);
  };
  auto store = [&](llvm::Value* v, llvm::Value* at) {
    if (integer || out_dtype == DType::i64)
      lb.store(v, y, at);
    else
      store_f32(lb, out_dtype, v, y, at);
  };
  int64_t reduced_groups = 0, reduced_stride = 1;
  for (const Group& g : groups)
    if (g.reduced) ++reduced_groups, reduced_stride = g.stride;
  lb.loop(lb.row_begin(), lb.row_end(), [&](llvm::Value* out) {
    {
      llvm::Value* base = offset_of(lb, groups, false, out);
      auto at = [&](llvm::Value* r) -> llvm::Value* {
        // One reduced group (or none) needs no div/rem.
        if (reduced_groups <= 1) return b.CreateAdd(base, b.CreateMul(r, lb.i64(reduced_stride)));
        return b.CreateAdd(base, offset_of(lb, groups, true, r));
      };
      const int64_t row = reduced;
      switch (op) {
      case OpKind::sum:
      case OpKind::mean: {
        llvm::AllocaInst* acc =
            lb.local(integer_sum ? lb.i64() : lb.f64(), integer_sum ? lb.i64(0) : lb.f64(0));
        lb.loop(row, [&](llvm::Value* r) {
          llvm::Value* v = load(at(r));
          lb.set(acc, integer_sum ? b.CreateAdd(lb.get(acc), v)
                                  : b.CreateFAdd(lb.get(acc), lb.to_f64(v)));
        });
        llvm::Value* total = lb.get(acc);
        if (op == OpKind::mean) total = b.CreateFDiv(total, lb.f64(static_cast<double>(row)));
        store(integer_sum ? total : lb.to_f32(total), out);
        break;
      }
      case OpKind::var: {
        const int64_t correction = attr_int(n.attrs, AttrName::correction);
        llvm::AllocaInst* sum = lb.local(lb.f64(), lb.f64(0));
        lb.loop(row, [&](llvm::Value* r) {
          lb.set(sum, b.CreateFAdd(lb.get(sum), lb.to_f64(load(at(r)))));
        });
        llvm::Value* mean = b.CreateFDiv(lb.get(sum), lb.f64(static_cast<double>(row)));
        llvm::AllocaInst* ssd = lb.local(lb.f64(), lb.f64(0));
        lb.loop(row, [&](llvm::Value* r) {
          llvm::Value* d = b.CreateFSub(lb.to_f64(load(at(r))), mean);
          lb.set(ssd, b.CreateFAdd(lb.get(ssd), b.CreateFMul(d, d)));
        });
        const double divisor = static_cast<double>(std::max<int64_t>(0, row - correction));
        store(lb.to_f32(b.CreateFDiv(lb.get(ssd), lb.f64(divisor))), out);
        break;
      }
      case OpKind::logsumexp: {
        // m = std::max over the row (a NaN never replaces it), as the ref.
        llvm::AllocaInst* m =
            lb.local(lb.f64(), lb.f64(-std::numeric_limits<double>::infinity()));
        lb.loop(row, [&](llvm::Value* r) {
          llvm::Value* v = lb.to_f64(load(at(r)));
          lb.set(m, b.CreateSelect(b.CreateFCmpOLT(lb.get(m), v), v, lb.get(m)));
        });
        llvm::Value* shift = b.CreateSelect(
            b.CreateFCmpOEQ(lb.call(llvm::Intrinsic::fabs, lb.get(m)),
                            lb.f64(std::numeric_limits<double>::infinity())),
            lb.f64(0), lb.get(m));
        llvm::AllocaInst* s = lb.local(lb.f64(), lb.f64(0));
        lb.loop(row, [&](llvm::Value* r) {
          llvm::Value* v = lb.to_f64(load(at(r)));
          lb.set(s, b.CreateFAdd(lb.get(s), lb.call(llvm::Intrinsic::exp, b.CreateFSub(v, shift))));
        });
        store(lb.to_f32(b.CreateFAdd(lb.call(llvm::Intrinsic::log, lb.get(s)), shift)), out);
        break;
      }
      case OpKind::max:
      case OpKind::min: {
        // NaN wins: once the best is NaN it stays.
        llvm::AllocaInst* best = lb.local(integer ? element : lb.f32(), load(at(lb.i64(0))));
        lb.loop(row, [&](llvm::Value* r) {
          llvm::Value* v = load(at(r));
          llvm::Value* current = lb.get(best);
          llvm::Value* take;
          if (integer)
            take = op == OpKind::max ? b.CreateICmpSGT(v, current) : b.CreateICmpSLT(v, current);
          else
            take = b.CreateAnd(b.CreateNot(lb.is_nan(current)),
                               b.CreateOr(lb.is_nan(v), op == OpKind::max
                                                            ? b.CreateFCmpOGT(v, current)
                                                            : b.CreateFCmpOLT(v, current)));
          lb.set(best, b.CreateSelect(take, v, current));
        });
        store(lb.get(best), out);
        break;
      }
      default: { // argmax: the first maximum, or the first NaN
        llvm::AllocaInst* best = lb.local(integer ? element : lb.f32(), load(at(lb.i64(0))));
        llvm::AllocaInst* index = lb.local(lb.i64(), lb.i64(0));
        llvm::AllocaInst* found_nan = lb.local(b.getInt1Ty(), b.getFalse());
        lb.loop(row, [&](llvm::Value* r) {
          llvm::Value* v = load(at(r));
          llvm::Value* nan = integer ? b.getFalse() : lb.is_nan(v);
          llvm::Value* found = lb.get(found_nan);
          llvm::Value* greater =
              integer ? b.CreateICmpSGT(v, lb.get(best)) : b.CreateFCmpOGT(v, lb.get(best));
          llvm::Value* take = b.CreateAnd(b.CreateNot(found), b.CreateOr(nan, greater));
          lb.set(best, b.CreateSelect(take, v, lb.get(best)));
          lb.set(index, b.CreateSelect(take, r, lb.get(index)));
          lb.set(found_nan, b.CreateOr(found, nan));
        });
        lb.store(lb.get(index), y, out);
        break;
      }
      }
    }
  });
  return OpLoop{lb.finish(), false, outputs, 1, in.numel()};
}

} // namespace mstep::xla
