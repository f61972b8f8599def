// Block-rows loops and their GPU mapping: see CudaBlockRows.h.
#include "lib/backends/cuda/CudaBlockRows.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/IRMapping.h"

namespace mstep::cuda::loops {

int64_t block_threads_for(int64_t n) {
  int64_t threads = 32;
  while (threads < n && threads < 256) threads *= 2;
  return threads;
}

Value BlockRow::shared(Type type) {
  // Before the loop: on the host, one buffer the rows use in turn.
  OpBuilder::InsertionGuard guard(nest_.b);
  nest_.b.setInsertionPoint(loop_);
  return nest_.b.create<memref::AllocaOp>(MemRefType::get({threads_}, type));
}

void BlockRow::phase(function_ref<void(Value)> body) {
  ImplicitLocOpBuilder& b = nest_.b;
  auto loop = b.create<scf::ParallelOp>(ValueRange{nest_.index(0)},
                                        ValueRange{nest_.index(threads_)},
                                        ValueRange{nest_.index(1)});
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(loop.getBody()->getTerminator());
  body(loop.getInductionVars()[0]);
}

SmallVector<Value> BlockRow::strided(Value t, int64_t n, ValueRange init,
                                     function_ref<SmallVector<Value>(Value, ValueRange)> body) {
  ImplicitLocOpBuilder& b = nest_.b;
  auto for_op = b.create<scf::ForOp>(t, nest_.index(n), nest_.index(threads_), init,
                                     [&](OpBuilder& nested, Location, Value j, ValueRange acc) {
                                       OpBuilder::InsertionGuard guard(b);
                                       b.setInsertionPointToEnd(nested.getInsertionBlock());
                                       b.create<scf::YieldOp>(body(j, acc));
                                     });
  return SmallVector<Value>(for_op.getResults());
}

void BlockRow::reduce(Value buffer, function_ref<Value(Value, Value)> combine, int64_t width) {
  ImplicitLocOpBuilder& b = nest_.b;
  for (int64_t s = threads_ / width / 2; s >= 1; s /= 2) {
    phase([&](Value t) {
      Value active = b.create<arith::CmpIOp>(arith::CmpIPredicate::ult, t, nest_.index(s * width));
      auto branch = b.create<scf::IfOp>(active, /*withElseRegion=*/false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(branch.thenBlock()->getTerminator());
      Value other = b.create<arith::AddIOp>(t, nest_.index(s * width));
      Value mine = b.create<memref::LoadOp>(buffer, ValueRange{t});
      Value theirs = b.create<memref::LoadOp>(buffer, ValueRange{other});
      b.create<memref::StoreOp>(combine(mine, theirs), buffer, ValueRange{t});
    });
  }
}

Value BlockRow::result(Value buffer) {
  return nest_.b.create<memref::LoadOp>(buffer, ValueRange{nest_.index(0)});
}

void block_rows(Nest& nest, int64_t rows, int64_t threads,
                function_ref<void(Value, BlockRow&)> body) {
  if (rows == 0) return;
  ImplicitLocOpBuilder& b = nest.b;
  auto loop = b.create<scf::ParallelOp>(ValueRange{nest.index(0)}, ValueRange{nest.index(rows)},
                                        ValueRange{nest.index(1)});
  loop->setAttr(kBlockThreadsAttr, b.getI64IntegerAttr(threads));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(loop.getBody()->getTerminator());
  BlockRow block(nest, threads, loop);
  body(loop.getInductionVars()[0], block);
}

void row_loops(Nest& nest, bool block, int64_t rows, int64_t n,
               function_ref<RowSpec(Value)> spec) {
  ImplicitLocOpBuilder& b = nest.b;
  auto type_of = [&b](const RowStat& stat) { return stat.type ? stat.type : b.getF64Type(); };
  auto init_of = [&nest, &type_of](const RowStat& stat) {
    return nest.constant(type_of(stat), stat.init);
  };
  if (!block) {
    nest.parallel(rows, [&](Value row) {
      RowSpec r = spec(row);
      SmallVector<Value> stats;
      for (const RowStat& stat : r.stats) {
        Value v = nest.loop(n, {init_of(stat)},
                            [&](Value j, ValueRange acc) -> SmallVector<Value> {
                              return {stat.combine(acc[0], stat.term(j, stats))};
                            })[0];
        stats.push_back(stat.finish ? stat.finish(v) : v);
      }
      if (r.output)
        nest.loop(n, {}, [&](Value j, ValueRange) -> SmallVector<Value> {
          r.output(j, stats);
          return {};
        });
      if (r.row_output) r.row_output(stats);
    });
    return;
  }
  block_rows(nest, rows, block_threads_for(n), [&](Value row, BlockRow& blk) {
    RowSpec r = spec(row);
    SmallVector<Value> buffers;
    for (const RowStat& stat : r.stats) buffers.push_back(blk.shared(type_of(stat)));
    // Within a phase: the first k statistics, finished.
    auto finished = [&](size_t k) {
      SmallVector<Value> stats;
      for (size_t i = 0; i < k; ++i) {
        Value v = blk.result(buffers[i]);
        stats.push_back(r.stats[i].finish ? r.stats[i].finish(v) : v);
      }
      return stats;
    };
    for (size_t k = 0; k < r.stats.size(); ++k) {
      const RowStat& stat = r.stats[k];
      blk.phase([&](Value t) {
        SmallVector<Value> stats = finished(k);
        Value partial = blk.strided(t, n, {init_of(stat)},
                                    [&](Value j, ValueRange acc) -> SmallVector<Value> {
                                      return {stat.combine(acc[0], stat.term(j, stats))};
                                    })[0];
        b.create<memref::StoreOp>(partial, buffers[k], ValueRange{t});
      });
      blk.reduce(buffers[k], stat.combine);
    }
    if (r.output)
      blk.phase([&](Value t) {
        SmallVector<Value> stats = finished(r.stats.size());
        blk.strided(t, n, {}, [&](Value j, ValueRange) -> SmallVector<Value> {
          r.output(j, stats);
          return {};
        });
      });
    if (r.row_output)
      blk.phase([&](Value t) {
        Value first = b.create<arith::CmpIOp>(arith::CmpIPredicate::eq, t, nest.index(0));
        auto branch = b.create<scf::IfOp>(first, /*withElseRegion=*/false);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(branch.thenBlock()->getTerminator());
        r.row_output(finished(r.stats.size()));
      });
  });
}

namespace {

/// The shared buffers of a block-rows loop: the allocas before it that
/// its body uses, in order.
SmallVector<memref::AllocaOp> shared_buffers(scf::ParallelOp loop) {
  SmallVector<memref::AllocaOp> buffers;
  loop.getBody()->walk([&](Operation* op) {
    for (Value operand : op->getOperands())
      if (auto alloca = operand.getDefiningOp<memref::AllocaOp>();
          alloca && !loop->isAncestor(alloca) && !llvm::is_contained(buffers, alloca))
        buffers.push_back(alloca);
  });
  return buffers;
}

void map_one(scf::ParallelOp loop, int64_t threads) {
  MLIRContext* context = loop.getContext();
  Location loc = loop.getLoc();
  OpBuilder b(loop);
  SmallVector<memref::AllocaOp> buffers = shared_buffers(loop);
  auto workgroup = gpu::AddressSpaceAttr::get(context, gpu::AddressSpace::Workgroup);
  SmallVector<Type> shared;
  for (memref::AllocaOp alloca : buffers) {
    MemRefType type = alloca.getType();
    shared.push_back(MemRefType::get(type.getShape(), type.getElementType(), AffineMap(), workgroup));
  }
  Value rows = loop.getUpperBound()[0];
  Value one = b.create<arith::ConstantIndexOp>(loc, 1);
  Value block = b.create<arith::ConstantIndexOp>(loc, threads);
  auto launch = b.create<gpu::LaunchOp>(loc, rows, one, one, block, one, one,
                                        /*dynamicSharedMemorySize=*/Value(),
                                        /*asyncTokenType=*/Type(), ValueRange{}, shared);
  Block& body = launch.getBody().front();
  b.setInsertionPointToEnd(&body);
  b.create<gpu::TerminatorOp>(loc);
  b.setInsertionPointToStart(&body);
  IRMapping mapping;
  mapping.map(loop.getInductionVars()[0], launch.getBlockIds().x);
  ArrayRef<BlockArgument> attributions = launch.getWorkgroupAttributions();
  for (auto [alloca, attribution] : llvm::zip(buffers, attributions))
    mapping.map(alloca.getResult(), attribution);
  size_t phases_left = 0;
  for (Operation& op : loop.getBody()->without_terminator())
    phases_left += isa<scf::ParallelOp>(op);
  for (Operation& op : loop.getBody()->without_terminator()) {
    auto phase = dyn_cast<scf::ParallelOp>(op);
    if (!phase) {
      b.clone(op, mapping);
      continue;
    }
    mapping.map(phase.getInductionVars()[0], launch.getThreadIds().x);
    for (Operation& inner : phase.getBody()->without_terminator()) b.clone(inner, mapping);
    if (--phases_left > 0) b.create<gpu::BarrierOp>(loc);
  }
  loop.erase();
  for (memref::AllocaOp alloca : buffers)
    if (alloca->use_empty()) alloca.erase();
}

} // namespace

void map_block_rows(func::FuncOp func) {
  SmallVector<std::pair<scf::ParallelOp, int64_t>> loops;
  for (Operation& op : func.getBody().front())
    if (auto loop = dyn_cast<scf::ParallelOp>(op))
      if (auto threads = loop->getAttrOfType<IntegerAttr>(kBlockThreadsAttr))
        loops.push_back({loop, threads.getInt()});
  for (auto [loop, threads] : loops) map_one(loop, threads);
}

} // namespace mstep::cuda::loops
