// validate(): the per-operand rules, the per-opcode rules, then the
// program-wide ones (semaphores, capacity at every point, deadlock, races).
#include "lib/backends/neuron/Validator.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/backends/neuron/ExecutionOrder.h"
#include "lib/backends/neuron/RaceCheck.h"

namespace mstep::neuron {

namespace {

/// Accumulates the first breach; later ones are ignored.
class Checker {
public:
  explicit Checker(const TileProgram& program) : program_(program) {}

  bool failed() const { return !status_.ok(); }
  absl::Status status() const { return status_; }

  template <typename... Args>
  void fail_at(int64_t index, absl::string_view rule, const Args&... values) {
    if (failed()) return;
    status_ = absl::InvalidArgumentError(
        absl::StrCat("tile program '", program_.name,
                     "': ", describe_instruction(index, program_.instructions[index]), ": rule ",
                     rule, ": ", values...));
  }
  template <typename... Args> void fail(absl::string_view rule, const Args&... values) {
    if (failed()) return;
    status_ = absl::InvalidArgumentError(
        absl::StrCat("tile program '", program_.name, "': rule ", rule, ": ", values...));
  }

  /// `one_row`: the HBM side of dma_indirect, whose partitions read rows
  /// chosen at run time: only one row's extent is checked here (the
  /// simulator checks each row index).
  void check_operand(int64_t index, absl::string_view role, const AccessPattern& ap, bool writes,
                     bool one_row = false);
  void check_instruction(int64_t index);
  void check_semaphores();
  void check_capacity();

private:
  bool engine_may(Engine engine, BufferKind kind, bool writes) const;

  const TileProgram& program_;
  absl::Status status_;
};

bool supported_dtype(DType d) {
  // boolean: a uint8 tile (nl.uint8) holding 0 or 1.
  return d == DType::bf16 || d == DType::f16 || d == DType::f32 || d == DType::i32 ||
         d == DType::boolean;
}

bool Checker::engine_may(Engine engine, BufferKind kind, bool writes) const {
  switch (engine) {
  case Engine::tensor:
    return writes ? kind == BufferKind::psum : kind == BufferKind::sbuf;
  case Engine::vector:
  case Engine::scalar:
    return kind != BufferKind::hbm;
  case Engine::gpsimd:
    return kind == BufferKind::sbuf;
  case Engine::sync:
    return kind != BufferKind::psum;
  }
  return false;
}

void Checker::check_operand(int64_t index, absl::string_view role, const AccessPattern& ap,
                            bool writes, bool one_row) {
  const Instruction& inst = program_.instructions[index];
  const std::string what = absl::StrCat(role, " ", ap.to_string());
  if (!supported_dtype(ap.dtype))
    return fail_at(index, "dtype", what, ": ", dtype_name(ap.dtype),
                   " is not bf16, fp16, fp32 or int32");
  if (ap.dims.size() > kMaxFreeDims)
    return fail_at(index, "free_dims", what, ": ", ap.dims.size(), " free dimensions > ",
                   kMaxFreeDims);
  for (const FreeDim& d : ap.dims)
    if (d.size < 1) return fail_at(index, "free_dims", what, ": free size ", d.size, " < 1");
  if (inst.engine == Engine::gpsimd && ap.kind == BufferKind::psum)
    return fail_at(index, "gpsimd_psum", what, ": GpSimd never accesses PSUM");
  if (!engine_may(inst.engine, ap.kind, writes))
    return fail_at(index, "engine_memory", what, ": ", engine_name(inst.engine), " may not ",
                   writes ? "write " : "read ", buffer_kind_name(ap.kind));
  if (ap.partitions < 1 || ap.partitions > kPartitions)
    return fail_at(index, "partition_count", what, ": ", ap.partitions, " partitions, not 1..",
                   kPartitions);
  const int64_t esize = static_cast<int64_t>(element_size(ap.dtype));
  if (ap.kind == BufferKind::hbm) {
    if (ap.buffer < 0 || ap.buffer >= static_cast<int32_t>(program_.hbm.size()))
      return fail_at(index, "buffer", what, ": no HBM tensor ", ap.buffer);
    const HbmTensor& t = program_.hbm[ap.buffer];
    if (t.dtype != ap.dtype)
      return fail_at(index, "buffer", what, ": HBM tensor '", t.name, "' holds ",
                     dtype_name(t.dtype));
    if (one_row && ap.partition_stride < 1)
      return fail_at(index, "indirect", what, ": the row length (partition stride) ",
                     ap.partition_stride, " is not positive");
    const int64_t rows_span = one_row ? 0 : (ap.partitions - 1) * ap.partition_stride;
    const int64_t lo = ap.min_offset() + std::min<int64_t>(0, rows_span);
    const int64_t hi = ap.max_offset() + std::max<int64_t>(0, rows_span);
    if (lo < 0 || hi >= t.elements)
      return fail_at(index, "bounds", what, ": elements [", lo, ", ", hi, "] outside HBM tensor '",
                     t.name, "' of ", t.elements);
    return;
  }
  const int32_t s = ap.start_partition;
  const bool aligned = ap.partitions > 64   ? s == 0
                       : ap.partitions > 32 ? (s == 0 || s == 64)
                                            : (s == 0 || s == 32 || s == 64 || s == 96);
  if (!aligned)
    return fail_at(index, "partition_start", what, ": ", ap.partitions,
                   " partitions may not start at partition ", s,
                   " (> 64 start at 0; 33-64 at 0 or 64; <= 32 at 0, 32, 64 or 96)");
  const int64_t limit = ap.kind == BufferKind::psum ? kMaxPsumFreeElements : kMaxSbufFreeElements;
  if (ap.free_elements() > limit)
    return fail_at(index, "free_size", what, ": ", ap.free_elements(), " free elements > ", limit,
                   " in ", buffer_kind_name(ap.kind));
  if (ap.buffer < 0 || ap.buffer >= static_cast<int32_t>(program_.allocations.size()) ||
      program_.allocations[ap.buffer].kind != ap.kind)
    return fail_at(index, "buffer", what, ": no ", buffer_kind_name(ap.kind), " allocation ",
                   ap.buffer);
  const Allocation& a = program_.allocations[ap.buffer];
  if (!a.live_at(index))
    return fail_at(index, "allocation_live", what, ": allocation '", a.name,
                   "' is live for instructions [", a.allocated_at, ", ", a.released_at, ")");
  const int64_t lo = ap.min_offset() * esize, hi = (ap.max_offset() + 1) * esize;
  if (lo < 0 || hi > a.bytes_per_partition)
    return fail_at(index, "bounds", what, ": bytes [", lo, ", ", hi,
                   ") of each partition outside allocation '", a.name, "' of ",
                   a.bytes_per_partition);
}

bool same_shape(const AccessPattern& a, const AccessPattern& b) {
  return a.partitions == b.partitions && a.free_elements() == b.free_elements();
}

std::string shape_text(const AccessPattern& a) {
  return absl::StrCat("[", a.partitions, ", ", a.free_elements(), "]");
}

void Checker::check_instruction(int64_t index) {
  const Instruction& inst = program_.instructions[index];
  // 1. The engine runs the opcode.
  bool engine_ok = false;
  switch (inst.opcode) {
  case Opcode::dma_copy:
  case Opcode::dma_indirect:
    engine_ok = inst.engine == Engine::sync;
    break;
  case Opcode::nc_matmul:
    engine_ok = inst.engine == Engine::tensor;
    break;
  case Opcode::activation:
    engine_ok = inst.engine == Engine::scalar;
    break;
  case Opcode::tensor_tensor:
  case Opcode::tensor_scalar:
  case Opcode::tensor_reduce:
    engine_ok = inst.engine == Engine::vector || inst.engine == Engine::gpsimd;
    break;
  case Opcode::tensor_copy:
    engine_ok = inst.engine == Engine::vector || inst.engine == Engine::scalar ||
                inst.engine == Engine::gpsimd;
    break;
  case Opcode::iota:
  case Opcode::affine_select:
  case Opcode::philox_uniform:
    engine_ok = inst.engine == Engine::gpsimd;
    break;
  case Opcode::bn_stats:
  case Opcode::bn_aggr:
  case Opcode::select:
    engine_ok = inst.engine == Engine::vector;
    break;
  }
  if (!engine_ok)
    return fail_at(index, "engine_opcode", opcode_name(inst.opcode), " does not run on ",
                   engine_name(inst.engine));
  // 2. Operand count and each operand.
  const size_t want_srcs = inst.opcode == Opcode::iota     ? 0
                           : inst.opcode == Opcode::select ? 3
                           : inst.opcode == Opcode::nc_matmul ||
                                   inst.opcode == Opcode::tensor_tensor ||
                                   inst.opcode == Opcode::dma_indirect
                               ? 2
                               : 1;
  if (inst.srcs.size() != want_srcs)
    return fail_at(index, "operands", inst.srcs.size(), " source operands, ",
                   opcode_name(inst.opcode), " takes ", want_srcs);
  if ((inst.bias || inst.accum || inst.scale_column) && inst.opcode != Opcode::activation)
    return fail_at(index, "operands", "scale/bias/accum operands belong to activation only");
  const bool indirect = inst.opcode == Opcode::dma_indirect;
  check_operand(index, "dst", inst.dst, true, indirect);
  for (size_t k = 0; k < inst.srcs.size(); ++k)
    check_operand(index, indirect && k == 1 ? std::string("index") : absl::StrCat("src", k),
                  inst.srcs[k], false, indirect && k == 0);
  if (inst.bias) check_operand(index, "bias", *inst.bias, false);
  if (inst.scale_column) check_operand(index, "scale", *inst.scale_column, false);
  if (inst.accum) check_operand(index, "accum", *inst.accum, true);
  if (failed()) return;
  for (const SemaphoreWait& w : inst.waits)
    if (w.semaphore < 0 || w.semaphore >= program_.num_semaphores)
      return fail_at(index, "semaphore", "waits on semaphore ", w.semaphore, ", the program has ",
                     program_.num_semaphores);
  for (int32_t s : inst.signals)
    if (s < 0 || s >= program_.num_semaphores)
      return fail_at(index, "semaphore", "signals semaphore ", s, ", the program has ",
                     program_.num_semaphores);
  const AccessPattern& dst = inst.dst;
  const AccessPattern& src = inst.srcs.empty() ? inst.dst : inst.srcs[0];
  // 3. Per opcode.
  switch (inst.opcode) {
  case Opcode::dma_copy:
    if (inst.dma_engine < 0 || inst.dma_engine >= kDmaEngines)
      return fail_at(index, "dma_engine", "DMA engine ", inst.dma_engine, " is not 0..",
                     kDmaEngines - 1);
    if (dst.dtype != src.dtype)
      return fail_at(index, "operands", "DMA does not convert: dst ", dtype_name(dst.dtype),
                     ", src ", dtype_name(src.dtype));
    if (!same_shape(dst, src))
      return fail_at(index, "shape", "dst ", shape_text(dst), " and src ", shape_text(src),
                     " differ");
    return;
  case Opcode::dma_indirect: {
    if (inst.dma_engine < 0 || inst.dma_engine >= kDmaEngines)
      return fail_at(index, "dma_engine", "DMA engine ", inst.dma_engine, " is not 0..",
                     kDmaEngines - 1);
    const bool gathers = src.kind == BufferKind::hbm && dst.kind == BufferKind::sbuf;
    const bool scatters = dst.kind == BufferKind::hbm && src.kind == BufferKind::sbuf;
    if (!gathers && !scatters)
      return fail_at(index, "indirect", "dst ", buffer_kind_name(dst.kind), " and src ",
                     buffer_kind_name(src.kind),
                     ": one side is HBM (rows picked by the "
                     "index), the other SBUF");
    if (dst.dtype != src.dtype)
      return fail_at(index, "operands", "DMA does not convert: dst ", dtype_name(dst.dtype),
                     ", src ", dtype_name(src.dtype));
    if (!same_shape(dst, src))
      return fail_at(index, "shape", "dst ", shape_text(dst), " and src ", shape_text(src),
                     " differ");
    const AccessPattern& idx = inst.srcs[1];
    if (idx.kind != BufferKind::sbuf || idx.dtype != DType::i32 ||
        idx.partitions != src.partitions || idx.free_elements() != 1)
      return fail_at(index, "indirect", "index ", idx.to_string(), " is not an SBUF int32 [",
                     src.partitions, ", 1]: one row index per partition");
    if (inst.accumulate && (gathers || dst.dtype == DType::i32))
      return fail_at(index, "indirect", "accumulate adds into HBM floats: dst ", dst.to_string());
    return;
  }
  case Opcode::philox_uniform:
    if (dst.dtype != DType::f32)
      return fail_at(index, "operands", "philox_uniform writes fp32, dst is ",
                     dtype_name(dst.dtype));
    if (src.kind != BufferKind::sbuf || src.dtype != DType::i32 ||
        src.partitions != dst.partitions || src.free_elements() != 4)
      return fail_at(index, "operands", "state ", src.to_string(), " is not an SBUF int32 [",
                     dst.partitions, ", 4] (seed lo, hi; offset lo, hi)");
    if (inst.affine.steps.size() != dst.dims.size())
      return fail_at(index, "operands", "philox_uniform has ", inst.affine.steps.size(),
                     " affine steps for ", dst.dims.size(), " free dims of dst");
    return;
  case Opcode::nc_matmul: {
    const AccessPattern& stat = inst.srcs[0];
    const AccessPattern& mov = inst.srcs[1];
    const int64_t k = stat.partitions, m = stat.free_elements(), n = mov.free_elements();
    if (mov.partitions != k)
      return fail_at(index, "matmul_shape", "stationary K = ", k,
                     " but moving K = ", mov.partitions);
    if (k > kMatmulMaxK) return fail_at(index, "matmul_shape", "K = ", k, " > ", kMatmulMaxK);
    if (m > kMatmulMaxM)
      return fail_at(index, "matmul_shape", "stationary M = ", m, " > ", kMatmulMaxM);
    if (n > kMatmulMaxN)
      return fail_at(index, "matmul_shape", "moving N = ", n, " > ", kMatmulMaxN);
    if (dst.partitions != m || dst.free_elements() != n)
      return fail_at(index, "matmul_shape", "dst ", shape_text(dst), " is not [M, N] = [", m, ", ",
                     n, "]");
    if (dst.dtype != DType::f32)
      return fail_at(index, "matmul_shape", "PSUM dst is ", dtype_name(dst.dtype),
                     ", the Tensor engine writes fp32");
    if (stat.dtype != mov.dtype || stat.dtype == DType::i32)
      return fail_at(index, "operands", "stationary ", dtype_name(stat.dtype), " and moving ",
                     dtype_name(mov.dtype), " must be one floating dtype");
    const Allocation& a = program_.allocations[dst.buffer];
    const int64_t lo = a.byte_offset + dst.min_offset() * 4,
                  hi = a.byte_offset + (dst.max_offset() + 1) * 4;
    if (lo / kPsumBankBytes != (hi - 1) / kPsumBankBytes)
      return fail_at(index, "psum_bank", "dst covers PSUM bytes [", lo, ", ", hi,
                     ") of a partition, across banks ", lo / kPsumBankBytes, " and ",
                     (hi - 1) / kPsumBankBytes, " (", kPsumBankBytes, " B each)");
    return;
  }
  case Opcode::tensor_tensor:
    if (inst.engine == Engine::vector && inst.srcs[0].kind == BufferKind::psum &&
        inst.srcs[1].kind == BufferKind::psum)
      return fail_at(index, "tensor_tensor_psum",
                     "both inputs are in PSUM; copy one to SBUF first");
    if (!same_shape(dst, inst.srcs[0]) || !same_shape(dst, inst.srcs[1]))
      return fail_at(index, "shape", "dst ", shape_text(dst), ", a ", shape_text(inst.srcs[0]),
                     ", b ", shape_text(inst.srcs[1]), " differ");
    return;
  case Opcode::select:
    if (!same_shape(dst, inst.srcs[0]) || !same_shape(dst, inst.srcs[1]) ||
        !same_shape(dst, inst.srcs[2]))
      return fail_at(index, "shape", "dst ", shape_text(dst), ", pred ", shape_text(inst.srcs[0]),
                     ", on_true ", shape_text(inst.srcs[1]), ", on_false ",
                     shape_text(inst.srcs[2]), " differ");
    return;
  case Opcode::tensor_reduce: {
    if (inst.alu == AluOp::subtract || inst.alu == AluOp::divide || inst.alu == AluOp::is_ge ||
        inst.alu == AluOp::is_equal || inst.alu == AluOp::not_equal)
      return fail_at(index, "operands", "tensor_reduce with ", alu_op_name(inst.alu),
                     "; reductions are add, multiply, max or min");
    const int64_t inner = src.dims.empty() ? 1 : src.dims.back().size;
    if (dst.partitions != src.partitions || dst.free_elements() * inner != src.free_elements())
      return fail_at(index, "shape", "dst ", shape_text(dst), " is not src ", shape_text(src),
                     " without its innermost free dim (", inner, ")");
    return;
  }
  case Opcode::bn_stats:
  case Opcode::bn_aggr: {
    const bool stats = inst.opcode == Opcode::bn_stats;
    const int64_t want = stats ? kBnStatsRecord : 2, free = src.free_elements();
    if (stats && free > kBnStatsMaxFree)
      return fail_at(index, "bn_stats", "src ", shape_text(src), " has ", free, " free elements > ",
                     kBnStatsMaxFree);
    if (!stats && free % kBnStatsRecord != 0)
      return fail_at(index, "bn_stats", "src ", shape_text(src), " is not whole records of ",
                     kBnStatsRecord);
    if (dst.partitions != src.partitions || dst.free_elements() != want || dst.dtype != DType::f32)
      return fail_at(index, "shape", "dst ", shape_text(dst), " ", dtype_name(dst.dtype),
                     " is not fp32 [", src.partitions, ", ", want, "]");
    return;
  }
  case Opcode::activation:
    for (const auto* col : {inst.bias ? &*inst.bias : nullptr, inst.accum ? &*inst.accum : nullptr,
                            inst.scale_column ? &*inst.scale_column : nullptr}) {
      if (col && (col->partitions != src.partitions || col->free_elements() != 1))
        return fail_at(index, "shape", "scale/bias/accum ", shape_text(*col), " is not [",
                       src.partitions, ", 1]");
    }
    [[fallthrough]];
  case Opcode::tensor_scalar:
  case Opcode::tensor_copy:
    if (!same_shape(dst, src))
      return fail_at(index, "shape", "dst ", shape_text(dst), " and src ", shape_text(src),
                     " differ");
    return;
  case Opcode::iota:
  case Opcode::affine_select:
    if (inst.affine.steps.size() != dst.dims.size())
      return fail_at(index, "operands", opcode_name(inst.opcode), " has ", inst.affine.steps.size(),
                     " affine steps for ", dst.dims.size(), " free dims of dst");
    if (!same_shape(dst, src))
      return fail_at(index, "shape", "dst ", shape_text(dst), " and src ", shape_text(src),
                     " differ");
    return;
  }
}

void Checker::check_semaphores() {
  std::vector<int64_t> signals(program_.num_semaphores, 0);
  for (const Instruction& inst : program_.instructions)
    for (int32_t s : inst.signals) ++signals[s];
  for (int64_t i = 0; i < static_cast<int64_t>(program_.instructions.size()); ++i)
    for (const SemaphoreWait& w : program_.instructions[i].waits)
      if (w.value > signals[w.semaphore])
        return fail_at(i, "semaphore", "waits for semaphore ", w.semaphore, " >= ", w.value,
                       " but only ", signals[w.semaphore], " instructions signal it");
}

void Checker::check_capacity() {
  // Each allocation is checked at the point it becomes live, against the
  // allocations already live there, so the one that does not fit is named.
  const int64_t n = static_cast<int64_t>(program_.instructions.size());
  for (size_t id = 0; id < program_.allocations.size(); ++id) {
    const Allocation& a = program_.allocations[id];
    const int64_t capacity =
        a.kind == BufferKind::psum ? kPsumBytesPerPartition : kSbufBytesPerPartition;
    const int64_t at = std::min(a.allocated_at, std::max<int64_t>(n - 1, 0));
    auto fail_here = [&](absl::string_view rule, const std::string& text) {
      if (n == 0) return fail(rule, text);
      fail_at(at, rule, text);
    };
    const std::string name = absl::StrCat(buffer_kind_name(a.kind), " allocation '", a.name, "'");
    if (a.bytes_per_partition < 1 || a.byte_offset < 0)
      return fail_here("capacity", absl::StrCat(name, " has ", a.bytes_per_partition,
                                                " bytes at offset ", a.byte_offset));
    int64_t live_bytes = a.bytes_per_partition;
    for (size_t other = 0; other < program_.allocations.size(); ++other) {
      const Allocation& b = program_.allocations[other];
      // The allocations live when `a` arrives: made before it, not yet released.
      const bool before =
          b.allocated_at < a.allocated_at || (b.allocated_at == a.allocated_at && other < id);
      if (b.kind != a.kind || !before || a.allocated_at >= b.released_at) continue;
      live_bytes += b.bytes_per_partition;
      if (a.byte_offset < b.byte_offset + b.bytes_per_partition &&
          b.byte_offset < a.byte_offset + a.bytes_per_partition)
        return fail_here("allocation_overlap",
                         absl::StrCat(name, " bytes [", a.byte_offset, ", ",
                                      a.byte_offset + a.bytes_per_partition, ") overlap live '",
                                      b.name, "' [", b.byte_offset, ", ",
                                      b.byte_offset + b.bytes_per_partition, ")"));
    }
    if (a.byte_offset + a.bytes_per_partition > capacity || live_bytes > capacity)
      return fail_here("capacity",
                       absl::StrCat(name, " needs bytes [", a.byte_offset, ", ",
                                    a.byte_offset + a.bytes_per_partition, ") per partition, ",
                                    live_bytes, " live in all; capacity ", capacity));
  }
}

} // namespace

absl::Status validate(const TileProgram& program) {
  Checker checker(program);
  checker.check_capacity();
  for (int64_t i = 0; i < static_cast<int64_t>(program.instructions.size()) && !checker.failed();
       ++i)
    checker.check_instruction(i);
  if (!checker.failed()) checker.check_semaphores();
  if (checker.failed()) return checker.status();
  absl::StatusOr<std::vector<int64_t>> order = execution_order(program);
  if (!order.ok()) return order.status();
  return check_races(program, *order);
}

} // namespace mstep::neuron
