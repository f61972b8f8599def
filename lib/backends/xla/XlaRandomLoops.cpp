// The creation ops arange, rand and randn and f32, bf16 and f16 dropout as loops
// (XlaOpLoops.h), drawing the ref kernels' numbers (lib/backends/ref/
// RefCreation.cpp, RefNN.cpp): element i of a stream at (seed, offset)
// takes Philox4x32-10 block(seed, offset + i) (mstep/core/Philox.h),
// computed here in integer IR, 10 rounds per element; the seed and the
// base offset are the node's rng-state operand (i64[2]) plus its `offset`
// attribute.
// - rand: (w0 >> 8) * 2^-24, exact in f32 (the ref kernel's 24-bit grid);
//   bf16 keeps 8 bits, (w0 >> 24) * 2^-8 (the ref's floor(u * 2^8) / 2^8),
//   f16 11, (w0 >> 21) * 2^-11.
// - randn: Box-Muller in f32 on (w0, w1), as Philox::normal; bf16 rounds
//   that f32 once.
// - dropout: kept iff (w0 >> 8) * 2^-24 >= p; x * (kept ? 1/(1-p) : 0) in
//   f64, rounded once (NaN stays NaN where dropped); bf16 loaded as f32 and
//   stored f64 -> f32 -> bf16, as the cpu backend's dropout kernel rounds.
// - arange: start + i * step in f64, then f32 (-> bf16; or truncated to
//   i64).
// Each is a row function over the elements (a row per element), which the
// step function splits over the threads: an element's value depends only
// on its index, so the split changes no bit. The Philox ops weigh 16 per
// element for the split's threshold (as the cpu backend's dropout kernel).
#include "absl/strings/str_cat.h"
#include "lib/backends/xla/XlaElementTypes.h"
#include "lib/backends/xla/XlaLoopBuilder.h"
#include "lib/backends/xla/XlaOpLoops.h"

namespace mstep::xla {

std::pair<llvm::Value*, llvm::Value*> philox(LoopBuilder& lb, llvm::Value* seed,
                                             llvm::Value* counter) {
  auto& b = lb.b();
  llvm::Type* i32 = b.getInt32Ty();
  llvm::Type* i64 = b.getInt64Ty();
  llvm::Value* c0 = b.CreateTrunc(counter, i32);
  llvm::Value* c1 = b.CreateTrunc(b.CreateLShr(counter, 32), i32);
  llvm::Value* c2 = b.getInt32(0);
  llvm::Value* c3 = b.getInt32(0);
  llvm::Value* k0 = b.CreateTrunc(seed, i32);
  llvm::Value* k1 = b.CreateTrunc(b.CreateLShr(seed, 32), i32);
  for (int round = 0; round < 10; ++round) {
    llvm::Value* p0 = b.CreateMul(b.getInt64(0xD2511F53u), b.CreateZExt(c0, i64));
    llvm::Value* p1 = b.CreateMul(b.getInt64(0xCD9E8D57u), b.CreateZExt(c2, i64));
    llvm::Value* hi0 = b.CreateTrunc(b.CreateLShr(p0, 32), i32);
    llvm::Value* hi1 = b.CreateTrunc(b.CreateLShr(p1, 32), i32);
    llvm::Value* n0 = b.CreateXor(b.CreateXor(hi1, c1), k0);
    llvm::Value* n1 = b.CreateTrunc(p1, i32);
    llvm::Value* n2 = b.CreateXor(b.CreateXor(hi0, c3), k1);
    llvm::Value* n3 = b.CreateTrunc(p0, i32);
    c0 = n0, c1 = n1, c2 = n2, c3 = n3;
    k0 = b.CreateAdd(k0, b.getInt32(0x9E3779B9u));
    k1 = b.CreateAdd(k1, b.getInt32(0xBB67AE85u));
  }
  return {c0, c1};
}

namespace {

/// (w >> 8) as a float, exactly.
llvm::Value* top_24_bits(LoopBuilder& lb, llvm::Value* w) {
  return lb.b().CreateUIToFP(lb.b().CreateLShr(w, 8), lb.f32());
}

} // namespace

std::optional<OpLoop> emit_random_loop(llvm::Module& module, const TraceGraph& graph,
                                       uint32_t node) {
  const GraphNode& nd = graph.nodes[node];
  const OpKind op = nd.op;
  if (op != OpKind::arange && op != OpKind::rand && op != OpKind::randn && op != OpKind::dropout)
    return std::nullopt;
  if (nd.results.size() != 1) return std::nullopt;
  const TensorType& out = nd.results[0];
  const int64_t numel = out.numel();
  size_t state_operand = 0;
  if (op == OpKind::arange) {
    if (!is_loop_float(out.dtype) && out.dtype != DType::i64) return std::nullopt;
  } else {
    if (!is_loop_float(out.dtype)) return std::nullopt;
    state_operand = op == OpKind::dropout ? 1 : 0;
    if (nd.operands.size() != state_operand + 1) return std::nullopt;
    const TensorType& state = graph.type_of(nd.operands[state_operand]);
    if (state.dtype != DType::i64 || state.numel() != 2) return std::nullopt;
    if (op == OpKind::dropout) {
      if (graph.type_of(nd.operands[0]) != out) return std::nullopt;
      const double p = attr_double(nd.attrs, AttrName::p);
      if (!(p >= 0 && p <= 1)) return std::nullopt;
    }
  }

  LoopBuilder lb(module, absl::StrCat("mstep_xla_", op_name(op), "_", node), nd.operands.size(), 1,
                 LoopBuilder::Rows{});
  OpLoop loop{nullptr, false};
  loop.rows = numel;
  loop.grain = 16; // whole vectors
  loop.work = op == OpKind::arange ? numel : numel * 16;
  auto& b = lb.b();
  llvm::Value* y = lb.result(0);
  if (op == OpKind::arange) {
    const double start = attr_double(nd.attrs, AttrName::start);
    const double step = attr_double(nd.attrs, AttrName::step);
    lb.loop(
        lb.row_begin(), lb.row_end(),
        [&](llvm::Value* i) {
          llvm::Value* v =
              b.CreateFAdd(lb.f64(start), b.CreateFMul(b.CreateSIToFP(i, lb.f64()), lb.f64(step)));
          if (out.dtype == DType::i64)
            lb.store(b.CreateFPToSI(v, lb.i64()), y, i);
          else
            store_f32(lb, out.dtype, lb.to_f32(v), y, i);
        },
        /*parallel=*/true);
    loop.function = lb.finish();
    return loop;
  }
  llvm::Value* state = lb.operand(state_operand);
  llvm::Value* seed = lb.load(lb.i64(), state, lb.i64(0));
  const int64_t offset = attr_int(nd.attrs, AttrName::offset);
  llvm::Value* first = b.CreateAdd(lb.load(lb.i64(), state, lb.i64(1)), lb.i64(offset));
  const double p = op == OpKind::dropout ? attr_double(nd.attrs, AttrName::p) : 0.0;
  lb.loop(
      lb.row_begin(), lb.row_end(),
      [&](llvm::Value* i) {
        auto [w0, w1] = philox(lb, seed, b.CreateAdd(first, i));
        llvm::Value* v = nullptr;
        const float grid = 1.0f / 16777216.0f;
        if (op == OpKind::rand && out.dtype == DType::bf16) {
          v = b.CreateFMul(b.CreateUIToFP(b.CreateLShr(w0, 24), lb.f32()), lb.f32(1.0f / 256.0f));
        } else if (op == OpKind::rand && out.dtype == DType::f16) {
          v = b.CreateFMul(b.CreateUIToFP(b.CreateLShr(w0, 21), lb.f32()), lb.f32(1.0f / 2048.0f));
        } else if (op == OpKind::rand) {
          v = b.CreateFMul(top_24_bits(lb, w0), lb.f32(grid));
        } else if (op == OpKind::randn) {
          llvm::Value* u1 = b.CreateFMul(b.CreateFAdd(top_24_bits(lb, w0), lb.f32(1.0f)),
                                         lb.f32(1.0f / 16777217.0f));
          llvm::Value* u2 = b.CreateFMul(top_24_bits(lb, w1), lb.f32(grid));
          llvm::Value* radius =
              lb.call(llvm::Intrinsic::sqrt,
                      b.CreateFMul(lb.f32(-2.0f), lb.call(llvm::Intrinsic::log, u1)));
          v = b.CreateFMul(
              radius, lb.call(llvm::Intrinsic::cos, b.CreateFMul(lb.f32(6.2831853071795864f), u2)));
        } else {
          llvm::Value* uniform = lb.to_f64(b.CreateFMul(top_24_bits(lb, w0), lb.f32(grid)));
          llvm::Value* keep = b.CreateFCmpOGE(uniform, lb.f64(p));
          llvm::Value* factor = b.CreateSelect(keep, lb.f64(1.0 / (1.0 - p)), lb.f64(0.0));
          v = lb.to_f32(
              b.CreateFMul(lb.to_f64(load_f32(lb, out.dtype, lb.operand(0), i)), factor));
          store_f32(lb, out.dtype, v, y, i);
          return;
        }
        store_f32(lb, out.dtype, v, y, i);
      },
      /*parallel=*/true);
  loop.function = lb.finish();
  return loop;
}

} // namespace mstep::xla
