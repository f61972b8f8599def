// Simulator::run: per instruction, gather the sources into fp32 rows,
// compute, scatter into the destination's dtype.
#include "lib/backends/neuron/Simulator.h"

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "lib/backends/neuron/ExecutionOrder.h"
#include "lib/backends/neuron/TileGather.h"
#include "lib/backends/neuron/TileMath.h"
#include "lib/backends/neuron/Validator.h"
#include "mstep/core/Philox.h"

namespace mstep::neuron {

namespace {

class Machine {
public:
  Machine(const TileProgram& program, HbmContents& hbm, std::vector<std::byte>& sbuf,
          std::vector<std::byte>& psum)
      : program_(program), hbm_(hbm), sbuf_(sbuf), psum_(psum) {}

  PatternBase base(const AccessPattern& ap) {
    const int64_t esize = static_cast<int64_t>(element_size(ap.dtype));
    if (ap.kind == BufferKind::hbm)
      return {hbm_[ap.buffer].data() + ap.offset * esize, ap.partition_stride * esize};
    const Allocation& a = program_.allocations[ap.buffer];
    const int64_t row =
        ap.kind == BufferKind::psum ? kPsumBytesPerPartition : kSbufBytesPerPartition;
    std::byte* mem = ap.kind == BufferKind::psum ? psum_.data() : sbuf_.data();
    return {mem + ap.start_partition * row + a.byte_offset + ap.offset * esize, row};
  }

  /// The pattern as fp32 rows, in scratch slot `slot`.
  float* load(const AccessPattern& ap, int slot) {
    auto& buf = scratch_[slot];
    buf.resize(static_cast<size_t>(ap.elements()));
    gather(ap, base(ap), buf.data());
    return buf.data();
  }
  float* out(int64_t n) {
    scratch_[3].resize(static_cast<size_t>(n));
    return scratch_[3].data();
  }
  void store(const AccessPattern& ap, const float* values) { scatter(ap, base(ap), values); }

  void nan_fill(const Allocation& a) {
    const bool psum = a.kind == BufferKind::psum;
    const int64_t row = psum ? kPsumBytesPerPartition : kSbufBytesPerPartition;
    std::byte* mem = psum ? psum_.data() : sbuf_.data();
    for (int p = 0; p < kPartitions; ++p)
      std::memset(mem + p * row + a.byte_offset, 0xFF, static_cast<size_t>(a.bytes_per_partition));
  }

  /// Runs instruction `index`; a run-time breach (an indirect row index
  /// out of range) is left in status().
  int64_t execute(int64_t index, const Instruction& inst);
  const absl::Status& status() const { return status_; }

private:
  int64_t matmul(const Instruction& inst);
  int64_t dma_indirect(int64_t index, const Instruction& inst);
  int64_t philox_uniform(const Instruction& inst);
  /// The affine expression's value at element j of partition p of dst.
  static int64_t affine_value(const Instruction& inst, int64_t p, int64_t j);
  /// The raw int32 element k (in walk order) of an int32 pattern's partition p.
  int32_t int32_at(const AccessPattern& ap, int64_t p, int64_t k);

  const TileProgram& program_;
  HbmContents& hbm_;
  std::vector<std::byte>& sbuf_;
  std::vector<std::byte>& psum_;
  std::vector<float> scratch_[4];
  absl::Status status_;
};

int64_t Machine::affine_value(const Instruction& inst, int64_t p, int64_t j) {
  const AccessPattern& dst = inst.dst;
  int64_t value = inst.affine.offset + p * inst.affine.channel_multiplier, rest = j;
  for (size_t d = dst.dims.size(); d-- > 0;) {
    value += (rest % dst.dims[d].size) * inst.affine.steps[d];
    rest /= dst.dims[d].size;
  }
  return value;
}

int32_t Machine::int32_at(const AccessPattern& ap, int64_t p, int64_t k) {
  int64_t offset = 0;
  for (size_t d = ap.dims.size(); d-- > 0;) {
    offset += (k % ap.dims[d].size) * ap.dims[d].stride;
    k /= ap.dims[d].size;
  }
  int32_t v;
  std::memcpy(&v, base(ap).row(p) + offset * 4, 4);
  return v;
}

int64_t Machine::dma_indirect(int64_t index, const Instruction& inst) {
  const AccessPattern& data = inst.srcs[0];
  const AccessPattern& idx = inst.srcs[1];
  const bool gathers = data.kind == BufferKind::hbm;
  // h: the HBM side (one row per partition, picked by the index); s: SBUF.
  AccessPattern h = gathers ? data : inst.dst, s = gathers ? inst.dst : data;
  const HbmTensor& t = program_.hbm[h.buffer];
  const int64_t esize = static_cast<int64_t>(element_size(h.dtype));
  const PatternBase hb = base(h), sb = base(s);
  const int32_t partitions = s.partitions;
  h.partitions = s.partitions = 1;
  std::vector<float> a, b;
  for (int64_t p = 0; p < partitions; ++p) {
    const int64_t row = int32_at(idx, p, 0);
    const int64_t first = h.min_offset() + row * h.partition_stride,
                  last = h.max_offset() + row * h.partition_stride;
    if (row < 0 || first < 0 || last >= t.elements) {
      status_ = absl::OutOfRangeError(
          absl::StrCat("tile program '", program_.name, "': ", describe_instruction(index, inst),
                       ": rule indirect_bounds: partition ", p, " has row index ", row,
                       ", elements [", first, ", ", last, "] outside HBM tensor '", t.name, "' of ",
                       t.elements, " (", t.elements / h.partition_stride, " rows)"));
      return 0;
    }
    const PatternBase hp{hb.origin + row * h.partition_stride * esize, 0}, sp{sb.row(p), 0};
    if (gathers) {
      copy_pattern(s, sp, h, hp);
    } else if (!inst.accumulate) {
      copy_pattern(h, hp, s, sp);
    } else { // read-modify-write: fp32 add, stored in HBM's dtype
      a.resize(static_cast<size_t>(h.free_elements()));
      b.resize(a.size());
      gather(h, hp, a.data());
      gather(s, sp, b.data());
      for (size_t k = 0; k < a.size(); ++k) a[k] += b[k];
      scatter(h, hp, a.data());
    }
  }
  return inst.dst.elements();
}

int64_t Machine::philox_uniform(const Instruction& inst) {
  const AccessPattern& dst = inst.dst;
  const int64_t free = dst.free_elements();
  float* o = out(dst.elements());
  for (int64_t p = 0; p < dst.partitions; ++p) {
    auto u32 = [&](int64_t k) { return static_cast<uint32_t>(int32_at(inst.srcs[0], p, k)); };
    const uint64_t seed = u32(0) | (uint64_t{u32(1)} << 32);
    const uint64_t offset = u32(2) | (uint64_t{u32(3)} << 32);
    for (int64_t j = 0; j < free; ++j) {
      const uint64_t counter = offset + static_cast<uint64_t>(affine_value(inst, p, j));
      o[p * free + j] =
          inst.philox_word == 0
              ? Philox::uniform(seed, counter, 0)
              : static_cast<float>(Philox::block(seed, counter)[inst.philox_word & 3] >> 8) *
                    (1.0f / 16777216.0f);
    }
  }
  store(dst, o);
  return dst.elements();
}

int64_t Machine::matmul(const Instruction& inst) {
  const AccessPattern& stat = inst.srcs[0];
  const AccessPattern& mov = inst.srcs[1];
  const int64_t k = stat.partitions, m = stat.free_elements(), n = mov.free_elements();
  const float* s = load(stat, 0);
  const float* v = load(mov, 1);
  // The K-sum in fp32, added into PSUM's fp32 (or replacing it).
  float* acc = out(m * n);
  std::fill(acc, acc + m * n, 0.0f);
  // Four rows of the result per pass over a moving row (the same sum
  // order per element: kk ascending), so the inner loop does four
  // multiply-adds per load of v.
  for (int64_t kk = 0; kk < k; ++kk) {
    const float* vrow = v + kk * n;
    int64_t mm = 0;
    for (; mm + 4 <= m; mm += 4) {
      const float a0 = s[kk * m + mm], a1 = s[kk * m + mm + 1], a2 = s[kk * m + mm + 2],
                  a3 = s[kk * m + mm + 3];
      float *r0 = acc + mm * n, *r1 = r0 + n, *r2 = r1 + n, *r3 = r2 + n;
      for (int64_t nn = 0; nn < n; ++nn) {
        const float x = vrow[nn];
        r0[nn] += a0 * x;
        r1[nn] += a1 * x;
        r2[nn] += a2 * x;
        r3[nn] += a3 * x;
      }
    }
    for (; mm < m; ++mm) {
      const float a = s[kk * m + mm];
      float* arow = acc + mm * n;
      for (int64_t nn = 0; nn < n; ++nn) arow[nn] += a * vrow[nn];
    }
  }
  if (inst.accumulate) {
    const float* old = load(inst.dst, 2);
    for (int64_t i = 0; i < m * n; ++i) acc[i] += old[i];
  }
  store(inst.dst, acc);
  return k * m * n;
}

int64_t Machine::execute(int64_t index, const Instruction& inst) {
  const AccessPattern& dst = inst.dst;
  const int64_t total = dst.elements();
  switch (inst.opcode) {
  case Opcode::dma_copy:
    copy_pattern(dst, base(dst), inst.srcs[0], base(inst.srcs[0]));
    return total;
  case Opcode::nc_matmul:
    return matmul(inst);
  case Opcode::tensor_tensor: {
    const float* a = load(inst.srcs[0], 0);
    const float* b = load(inst.srcs[1], 1);
    float* o = out(total);
    alu_arrays(inst.alu, a, b, o, total);
    store(dst, o);
    return total;
  }
  case Opcode::select: {
    const float* pred = load(inst.srcs[0], 0);
    const float* a = load(inst.srcs[1], 1);
    const float* b = load(inst.srcs[2], 2);
    float* o = out(total);
    for (int64_t i = 0; i < total; ++i) o[i] = pred[i] != 0.0f ? a[i] : b[i];
    store(dst, o);
    return total;
  }
  case Opcode::tensor_scalar: {
    float* o = out(total);
    if (inst.reverse) { // s <op> x
      const std::vector<float> s(static_cast<size_t>(total), inst.scalar);
      alu_arrays(inst.alu, s.data(), load(inst.srcs[0], 0), o, total);
    } else {
      alu_scalar(inst.alu, load(inst.srcs[0], 0), inst.scalar, o, total);
    }
    if (inst.alu2) alu_scalar(*inst.alu2, o, inst.scalar2, o, total);
    store(dst, o);
    return total;
  }
  case Opcode::tensor_copy:
    store(dst, load(inst.srcs[0], 0));
    return total;
  case Opcode::activation: {
    const AccessPattern& src = inst.srcs[0];
    const int64_t free = src.free_elements();
    const float* x = load(src, 0);
    const float* bias = inst.bias ? load(*inst.bias, 1) : nullptr;
    const float* scale = inst.scale_column ? load(*inst.scale_column, 2) : nullptr;
    float* o = out(total);
    std::vector<float> sums(inst.accum ? src.partitions : 0);
    for (int64_t p = 0; p < src.partitions; ++p) {
      activate(inst.function, x + p * free, scale ? scale[p] : inst.scale,
               bias ? bias[p] : inst.bias_value, o + p * free, free);
      if (inst.accum) sums[p] = reduce_row(AluOp::add, o + p * free, free);
    }
    store(dst, o);
    if (inst.accum) store(*inst.accum, sums.data());
    return total;
  }
  case Opcode::iota:
  case Opcode::affine_select: {
    // The expression per element of dst, partitions outer, free dims in order.
    const int64_t free = dst.free_elements();
    const float* src = inst.opcode == Opcode::affine_select ? load(inst.srcs[0], 0) : nullptr;
    float* o = out(total);
    for (int64_t p = 0; p < dst.partitions; ++p)
      for (int64_t j = 0; j < free; ++j) {
        const int64_t value = affine_value(inst, p, j);
        const int64_t e = p * free + j;
        if (!src) {
          o[e] = static_cast<float>(value);
          continue;
        }
        const bool keep = inst.cmp == CmpOp::equal ? value == 0 : value >= 0;
        o[e] = keep ? src[e] : inst.scalar;
      }
    store(dst, o);
    return total;
  }
  case Opcode::bn_stats:
  case Opcode::bn_aggr: {
    const AccessPattern& src = inst.srcs[0];
    const int64_t free = src.free_elements();
    const float* x = load(src, 0);
    float* o = out(total);
    for (int64_t p = 0; p < src.partitions; ++p) {
      if (inst.opcode == Opcode::bn_stats)
        bn_stats_row(x + p * free, free, o + p * kBnStatsRecord);
      else
        bn_aggr_row(x + p * free, free / kBnStatsRecord, o + p * 2);
    }
    store(dst, o);
    return src.elements();
  }
  case Opcode::dma_indirect:
    return dma_indirect(index, inst);
  case Opcode::philox_uniform:
    return philox_uniform(inst);
  case Opcode::tensor_reduce: {
    const AccessPattern& src = inst.srcs[0];
    const int64_t inner = src.dims.empty() ? 1 : src.dims.back().size;
    const float* x = load(src, 0);
    float* o = out(total);
    for (int64_t r = 0; r < total; ++r) o[r] = reduce_row(inst.alu, x + r * inner, inner);
    store(dst, o);
    return src.elements();
  }
  }
  return 0;
}

} // namespace

Simulator::Simulator()
    : sbuf_(static_cast<size_t>(kPartitions * kSbufBytesPerPartition), std::byte{0xFF}),
      psum_(static_cast<size_t>(kPartitions * kPsumBytesPerPartition), std::byte{0xFF}) {}

absl::StatusOr<SimulationStats> Simulator::run(const TileProgram& program, HbmContents& hbm) {
  if (hbm.size() != program.hbm.size())
    return absl::InvalidArgumentError(
        absl::StrCat("tile program '", program.name, "' has ", program.hbm.size(),
                     " HBM tensors, the simulator was given ", hbm.size()));
  for (size_t t = 0; t < hbm.size(); ++t) {
    const size_t want =
        static_cast<size_t>(program.hbm[t].elements) * element_size(program.hbm[t].dtype);
    if (hbm[t].size() != want)
      return absl::InvalidArgumentError(
          absl::StrCat("tile program '", program.name, "': HBM tensor '", program.hbm[t].name,
                       "' needs ", want, " bytes, got ", hbm[t].size()));
  }
  if (absl::Status s = validate(program); !s.ok()) return s;
  absl::StatusOr<std::vector<int64_t>> order = execution_order(program);
  if (!order.ok()) return order.status();

  // Allocations by the point they become live; each is NaN-filled before
  // the first instruction at or after that point runs.
  std::vector<int32_t> by_start(program.allocations.size());
  for (size_t i = 0; i < by_start.size(); ++i) by_start[i] = static_cast<int32_t>(i);
  std::stable_sort(by_start.begin(), by_start.end(), [&](int32_t a, int32_t b) {
    return program.allocations[a].allocated_at < program.allocations[b].allocated_at;
  });
  Machine machine(program, hbm, sbuf_, psum_);
  SimulationStats stats;
  size_t next = 0;
  for (int64_t i : *order) {
    for (; next < by_start.size() && program.allocations[by_start[next]].allocated_at <= i; ++next)
      machine.nan_fill(program.allocations[by_start[next]]);
    stats.element_ops += machine.execute(i, program.instructions[i]);
    if (!machine.status().ok()) return machine.status();
    ++stats.instructions;
  }
  return stats;
}

} // namespace mstep::neuron
