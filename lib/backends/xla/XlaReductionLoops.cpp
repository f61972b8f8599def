// sum, mean, max, min, argmax, var and logsumexp as loops (XlaOpLoops.h),
// with the
// ref kernels' semantics (lib/backends/ref/RefReduction.cpp): f32 sums and
// means accumulate in f64 and round once, i64 sums in i64; NaN wins max,
// min and argmax; the first maximum wins argmax; var takes two passes in
// f64 (the mean, then the squared deviations) over max(0, n - correction);
// logsumexp is log(sum(exp(x - m))) + m in f64 with m the row maximum (0
// when infinite). bf16 elements are read as f32 and results rounded
// f64 -> f32 -> bf16 (XlaElementTypes.h), as the ref kernels round them.
//
// The input is viewed as [outer, reduced, inner] after dropping size-1 dims
// and merging neighbours of the same kind, which needs the reduced dims to
// be one block (every reduction of a step so far: a bias gradient's
// leading dims, a last dim, all dims). Other patterns stay callouts.
// Output (o, i) reduces input (o * reduced + r) * inner + i over r.
#include <limits>

#include "absl/strings/str_cat.h"
#include "lib/backends/xla/XlaElementTypes.h"
#include "lib/backends/xla/XlaLoopBuilder.h"
#include "lib/backends/xla/XlaOpLoops.h"

namespace mstep::xla {

namespace {

struct Layout {
  int64_t outer = 1, reduced = 1, inner = 1;
};

/// The [outer, reduced, inner] view, or nullopt when the reduced dims are
/// not one block.
std::optional<Layout> layout_of(const Shape& shape, const IntList& dims) {
  struct Group {
    bool reduced;
    int64_t extent;
  };
  std::vector<Group> groups;
  for (int64_t d = 0; d < shape.rank(); ++d) {
    if (shape[d] == 1) continue;
    const bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (!groups.empty() && groups.back().reduced == reduced)
      groups.back().extent *= shape[d];
    else
      groups.push_back({reduced, shape[d]});
  }
  Layout l;
  size_t at = 0;
  if (at < groups.size() && !groups[at].reduced) l.outer = groups[at++].extent;
  if (at < groups.size() && groups[at].reduced) l.reduced = groups[at++].extent;
  if (at < groups.size() && !groups[at].reduced) l.inner = groups[at++].extent;
  if (at != groups.size()) return std::nullopt;
  return l;
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
  const bool float_in = is_f32_or_bf16(in.dtype);
  const DType want_out = op == OpKind::argmax ? DType::i64 : in.dtype;
  if (!integer_sum && !(float_in && out_dtype == want_out)) return std::nullopt;
  if (in.numel() == 0) return std::nullopt; // the ref kernel's empty-row rules
  std::optional<Layout> layout = layout_of(in.shape, attr_ints(n.attrs, AttrName::dims));
  if (!layout || layout->outer * layout->inner != n.results[0].numel()) return std::nullopt;
  const Layout l = *layout;

  const std::string name = absl::StrCat("mstep_xla_", op_name(op), "_", node);
  if ((op == OpKind::sum || op == OpKind::mean) && !integer_sum) {
    LoopBuilder rows(module, name, 1, 1, LoopBuilder::Rows{});
    const int64_t count = emit_f32_sum(rows, l, op == OpKind::mean, in.dtype);
    return OpLoop{rows.finish(), false, count, 1, in.numel()};
  }
  LoopBuilder lb(module, name, 1, 1);
  auto& b = lb.b();
  llvm::Value* x = lb.operand(0);
  llvm::Value* y = lb.result(0);
  // Float elements are read as f32 and results stored as `out_dtype`.
  auto load = [&](llvm::Value* at) { return load_f32(lb, in.dtype, x, at); };
  auto store = [&](llvm::Value* v, llvm::Value* at) { store_f32(lb, out_dtype, v, y, at); };
  lb.loop(l.outer, [&](llvm::Value* o) {
    lb.loop(l.inner, [&](llvm::Value* i) {
      // Input position of (o, r, i) and output position of (o, i).
      auto at = [&](llvm::Value* r) {
        return b.CreateAdd(
            b.CreateMul(b.CreateAdd(b.CreateMul(o, lb.i64(l.reduced)), r), lb.i64(l.inner)), i);
      };
      llvm::Value* out = b.CreateAdd(b.CreateMul(o, lb.i64(l.inner)), i);
      switch (op) {
      case OpKind::sum:
      case OpKind::mean: {
        llvm::AllocaInst* acc =
            lb.local(integer_sum ? lb.i64() : lb.f64(), integer_sum ? lb.i64(0) : lb.f64(0));
        lb.loop(l.reduced, [&](llvm::Value* r) {
          llvm::Value* v = integer_sum ? lb.load(lb.i64(), x, at(r)) : load(at(r));
          lb.set(acc, integer_sum ? b.CreateAdd(lb.get(acc), v)
                                  : b.CreateFAdd(lb.get(acc), lb.to_f64(v)));
        });
        llvm::Value* total = lb.get(acc);
        if (op == OpKind::mean) total = b.CreateFDiv(total, lb.f64(static_cast<double>(l.reduced)));
        if (integer_sum)
          lb.store(total, y, out);
        else
          store(lb.to_f32(total), out);
        break;
      }
      case OpKind::var: {
        const int64_t correction = attr_int(n.attrs, AttrName::correction);
        llvm::AllocaInst* sum = lb.local(lb.f64(), lb.f64(0));
        lb.loop(l.reduced, [&](llvm::Value* r) {
          lb.set(sum, b.CreateFAdd(lb.get(sum), lb.to_f64(load(at(r)))));
        });
        llvm::Value* mean = b.CreateFDiv(lb.get(sum), lb.f64(static_cast<double>(l.reduced)));
        llvm::AllocaInst* ssd = lb.local(lb.f64(), lb.f64(0));
        lb.loop(l.reduced, [&](llvm::Value* r) {
          llvm::Value* d = b.CreateFSub(lb.to_f64(load(at(r))), mean);
          lb.set(ssd, b.CreateFAdd(lb.get(ssd), b.CreateFMul(d, d)));
        });
        const double divisor = static_cast<double>(std::max<int64_t>(0, l.reduced - correction));
        store(lb.to_f32(b.CreateFDiv(lb.get(ssd), lb.f64(divisor))), out);
        break;
      }
      case OpKind::logsumexp: {
        // m = std::max over the row (a NaN never replaces it), as the ref.
        llvm::AllocaInst* m =
            lb.local(lb.f64(), lb.f64(-std::numeric_limits<double>::infinity()));
        lb.loop(l.reduced, [&](llvm::Value* r) {
          llvm::Value* v = lb.to_f64(load(at(r)));
          lb.set(m, b.CreateSelect(b.CreateFCmpOLT(lb.get(m), v), v, lb.get(m)));
        });
        llvm::Value* shift = b.CreateSelect(
            b.CreateFCmpOEQ(lb.call(llvm::Intrinsic::fabs, lb.get(m)),
                            lb.f64(std::numeric_limits<double>::infinity())),
            lb.f64(0), lb.get(m));
        llvm::AllocaInst* s = lb.local(lb.f64(), lb.f64(0));
        lb.loop(l.reduced, [&](llvm::Value* r) {
          llvm::Value* v = lb.to_f64(load(at(r)));
          lb.set(s, b.CreateFAdd(lb.get(s), lb.call(llvm::Intrinsic::exp, b.CreateFSub(v, shift))));
        });
        store(lb.to_f32(b.CreateFAdd(lb.call(llvm::Intrinsic::log, lb.get(s)), shift)), out);
        break;
      }
      case OpKind::max:
      case OpKind::min: {
        // NaN wins: once the best is NaN it stays.
        llvm::AllocaInst* best = lb.local(lb.f32(), load(at(lb.i64(0))));
        lb.loop(l.reduced, [&](llvm::Value* r) {
          llvm::Value* v = load(at(r));
          llvm::Value* current = lb.get(best);
          llvm::Value* better =
              op == OpKind::max ? b.CreateFCmpOGT(v, current) : b.CreateFCmpOLT(v, current);
          llvm::Value* take =
              b.CreateAnd(b.CreateNot(lb.is_nan(current)), b.CreateOr(lb.is_nan(v), better));
          lb.set(best, b.CreateSelect(take, v, current));
        });
        store(lb.get(best), out);
        break;
      }
      default: { // argmax: the first maximum, or the first NaN
        llvm::AllocaInst* best = lb.local(lb.f32(), load(at(lb.i64(0))));
        llvm::AllocaInst* index = lb.local(lb.i64(), lb.i64(0));
        llvm::AllocaInst* found_nan = lb.local(b.getInt1Ty(), b.getFalse());
        lb.loop(l.reduced, [&](llvm::Value* r) {
          llvm::Value* v = load(at(r));
          llvm::Value* nan = lb.is_nan(v);
          llvm::Value* found = lb.get(found_nan);
          llvm::Value* take =
              b.CreateAnd(b.CreateNot(found), b.CreateOr(nan, b.CreateFCmpOGT(v, lb.get(best))));
          lb.set(best, b.CreateSelect(take, v, lb.get(best)));
          lb.set(index, b.CreateSelect(take, r, lb.get(index)));
          lb.set(found_nan, b.CreateOr(found, nan));
        });
        lb.store(lb.get(index), y, out);
        break;
      }
      }
    });
  });
  return OpLoop{lb.finish(), false};
}

} // namespace mstep::xla
