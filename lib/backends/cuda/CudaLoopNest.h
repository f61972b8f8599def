// The builder the cuda loop nests share (CudaOpLoops.cpp,
// CudaOptimizerLoops.cpp): one op's loop nest in its kernel func, with
// the constants, loads and stores, parallel and serial loops and index
// arithmetic they are written in. Library-internal; MLIR.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lib/backends/cuda/CudaErrorWord.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mstep::cuda::loops {

using namespace mlir;

/// A buffer addressed by one linear (row-major) index: a 1-D view of a
/// parameter, or the parameter itself when it is 0-d.
struct Flat {
  Value memref;
  bool scalar = false;
  Type element() const { return cast<MemRefType>(memref.getType()).getElementType(); }
};

inline int64_t numel(Value value) {
  auto type = cast<ShapedType>(value.getType());
  return type.getNumElements();
}

inline ArrayRef<int64_t> shape_of(Value value) {
  return cast<ShapedType>(value.getType()).getShape();
}

/// Row-major strides of `shape`.
inline std::vector<int64_t> strides_of(ArrayRef<int64_t> shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

/// Builds the loop nest of one op in its kernel func.
class Nest {
public:
  explicit Nest(func::FuncOp func) : b(func.getLoc(), func.getContext()), func_(func) {
    b.setInsertionPointToStart(&func.getBody().front());
  }

  ImplicitLocOpBuilder b;

  Value param(unsigned i) { return func_.getArgument(i); }

  /// Parameter `i` as a 1-D buffer (a collapse_shape view at the top
  /// level, which CudaKernelGen passes to the kernel as the parameter).
  Flat flat(unsigned i) {
    Value memref = param(i);
    auto type = cast<MemRefType>(memref.getType());
    if (type.getRank() == 0) return {memref, true};
    if (type.getRank() == 1) return {memref, false};
    ReassociationIndices all;
    for (int64_t d = 0; d < type.getRank(); ++d) all.push_back(d);
    return {b.create<memref::CollapseShapeOp>(memref, ArrayRef<ReassociationIndices>{all}), false};
  }

  Value index(int64_t v) { return b.create<arith::ConstantIndexOp>(v); }
  Value f64(double v) { return b.create<arith::ConstantFloatOp>(APFloat(v), b.getF64Type()); }
  Value constant(Type type, double v) {
    if (auto f = dyn_cast<FloatType>(type)) {
      bool lost = false;
      APFloat value(v);
      value.convert(f.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
      return b.create<arith::ConstantFloatOp>(value, f);
    }
    return integer(type, static_cast<int64_t>(v));
  }
  Value integer(Type type, int64_t v) { return b.create<arith::ConstantIntOp>(v, type); }

  Value load(const Flat& buffer, Value i) {
    if (buffer.scalar) return b.create<memref::LoadOp>(buffer.memref, ValueRange{});
    return b.create<memref::LoadOp>(buffer.memref, ValueRange{i});
  }
  void store(Value value, const Flat& buffer, Value i) {
    if (buffer.scalar)
      b.create<memref::StoreOp>(value, buffer.memref, ValueRange{});
    else
      b.create<memref::StoreOp>(value, buffer.memref, ValueRange{i});
  }
  Value load0(Value memref) { return b.create<memref::LoadOp>(memref, ValueRange{}); }

  /// The executable's error word (CudaErrorWord.h): a memref<8xi64>
  /// allocated at the top of the func and marked kErrorWordAttr, which
  /// CudaKernelGen makes the plan's error word parameter (one per func).
  Value error_word() {
    if (!error_word_) {
      OpBuilder top(func_.getContext());
      top.setInsertionPointToStart(&func_.getBody().front());
      auto alloc = top.create<memref::AllocOp>(
          func_.getLoc(), MemRefType::get({error_word::kWords}, top.getI64Type()));
      alloc->setAttr(kErrorWordAttr, top.getUnitAttr());
      error_word_ = alloc;
    }
    return error_word_;
  }
  /// Whether the error word is set (an i1): some kernel of this run found
  /// bad data before this lane.
  Value error_set() {
    Value codes = b.create<memref::LoadOp>(error_word(), ValueRange{index(error_word::kCodes)});
    return b.create<arith::CmpIOp>(arith::CmpIPredicate::ne, codes, integer(b.getI64Type(), 0));
  }
  /// Where `bad` (an i1) holds: ors `code` into the error word and, in the
  /// first lane to claim it, records `value` (i64) at `position` (an
  /// index), `bound`, `extra` and this op's number (the func's "opN").
  void report_error(Value bad, error_word::Code code, Value value, Value position, int64_t bound,
                    int64_t extra) {
    using namespace error_word;
    Type i64 = b.getI64Type();
    Value word = error_word();
    auto branch = b.create<scf::IfOp>(bad, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(branch.thenBlock()->getTerminator());
    b.create<memref::AtomicRMWOp>(arith::AtomicRMWKind::ori, integer(i64, code), word,
                                  ValueRange{index(kCodes)});
    Value before = b.create<memref::AtomicRMWOp>(arith::AtomicRMWKind::assign, integer(i64, 1),
                                                 word, ValueRange{index(kClaim)});
    auto first = b.create<scf::IfOp>(
        b.create<arith::CmpIOp>(arith::CmpIPredicate::eq, before, integer(i64, 0)),
        /*withElseRegion=*/false);
    b.setInsertionPoint(first.thenBlock()->getTerminator());
    auto put = [&](Value v, Slot slot) {
      b.create<memref::StoreOp>(v, word, ValueRange{index(slot)});
    };
    put(value, kValue);
    put(b.create<arith::IndexCastOp>(i64, position), kPosition);
    put(integer(i64, bound), kBound);
    put(integer(i64, extra), kExtra);
    put(integer(i64, op_number()), kOp);
  }
  /// The attribute that marks the error word's alloc.
  static constexpr const char* kErrorWordAttr = "mstep.error_word";

  /// One lane per i in [0, n): a top-level scf.parallel, one launch.
  void parallel(int64_t n, function_ref<void(Value)> body) {
    if (n == 0) return;
    auto loop =
        b.create<scf::ParallelOp>(ValueRange{index(0)}, ValueRange{index(n)}, ValueRange{index(1)});
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(loop.getBody()->getTerminator());
    body(loop.getInductionVars()[0]);
  }

  /// A serial loop for j in [0, n) carrying `init`; `body` returns the
  /// next values.
  SmallVector<Value> loop(int64_t n, ValueRange init,
                          function_ref<SmallVector<Value>(Value, ValueRange)> body) {
    auto for_op = b.create<scf::ForOp>(index(0), index(n), index(1), init,
                                       [&](OpBuilder& nested, Location, Value j, ValueRange acc) {
                                         OpBuilder::InsertionGuard guard(b);
                                         b.setInsertionPointToEnd(nested.getInsertionBlock());
                                         b.create<scf::YieldOp>(body(j, acc));
                                       });
    return SmallVector<Value>(for_op.getResults());
  }

  /// i * scale + offset on indices.
  Value affine(Value i, int64_t scale, Value offset) {
    Value scaled = scale == 1 ? i : b.create<arith::MulIOp>(i, index(scale)).getResult();
    return offset ? b.create<arith::AddIOp>(scaled, offset).getResult() : scaled;
  }
  Value div(Value i, int64_t n) { return n == 1 ? i : b.create<arith::DivUIOp>(i, index(n)); }
  Value rem(Value i, int64_t n) {
    return n == 1 ? index(0) : b.create<arith::RemUIOp>(i, index(n));
  }

  /// base + sum of coordinate k * strides[k], the coordinates those of
  /// linear index `i` in `shape` (row-major).
  Value strided(Value i, ArrayRef<int64_t> shape, ArrayRef<int64_t> strides, int64_t base) {
    Value rest = i, at = index(base);
    for (int64_t k = static_cast<int64_t>(shape.size()) - 1; k >= 0; --k) {
      at = affine(rem(rest, shape[k]), strides[k], at);
      rest = div(rest, shape[k]);
    }
    return at;
  }

  /// A zero, or a NaN for floats: what an element read through an index
  /// out of range becomes.
  Value poison(Type type) {
    return isa<FloatType>(type) ? constant(type, std::numeric_limits<double>::quiet_NaN())
                                : integer(type, 0);
  }

  /// Element-by-element copy of parameter `from` into `to` (same size).
  void copy(unsigned from, unsigned to) {
    Flat x = flat(from), y = flat(to);
    parallel(numel(param(to)), [&](Value i) { store(load(x, i), y, i); });
  }

  /// A float widened to f64 (exact).
  Value ext(Value v) {
    return v.getType().isF64() ? v : b.create<arith::ExtFOp>(b.getF64Type(), v).getResult();
  }
  /// An f64 rounded to `type` as ref's round_to / Compute<T> casts do:
  /// through f32 for the 16-bit floats.
  Value round_to(Value v, Type type) {
    if (type.isF64()) return v;
    Value f = b.create<arith::TruncFOp>(b.getF32Type(), v);
    return type.isF32() ? f : b.create<arith::TruncFOp>(type, f).getResult();
  }

private:
  /// N of the func's name "opN" (the origin's "#N"), or -1.
  int64_t op_number() {
    const std::string name = func_.getName().str();
    if (name.size() < 3 || name.compare(0, 2, "op") != 0) return -1;
    int64_t n = 0;
    for (size_t i = 2; i < name.size(); ++i) {
      if (name[i] < '0' || name[i] > '9') return -1;
      n = n * 10 + (name[i] - '0');
    }
    return n;
  }

  func::FuncOp func_;
  Value error_word_;
};

/// Philox::uniform(seed, 0, counter) (mstep/core/Philox.h) as an f32:
/// word 0 of Philox4x32-10 for `counter` under key `seed` (both i64),
/// its top 24 bits times 2^-24. Dropout's draws (CudaOpLoops.cpp, the
/// composed attention's CudaAttentionLoops.cpp).
Value philox_uniform(Nest& nest, Value seed, Value counter);

/// The product of `dims`.
inline int64_t product(ArrayRef<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

} // namespace mstep::cuda::loops
