// check_races: vector clocks from queue order and semaphores, then the
// unordered access pairs of each memory region (RaceCheck.h).
#include "lib/backends/neuron/RaceCheck.h"

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/container/node_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace mstep::neuron {

namespace {

/// Per completion queue, how many of its instructions are known complete.
using VectorClock = std::array<int32_t, kCompletionQueues>;

void join(VectorClock& into, const VectorClock& other) {
  for (int q = 0; q < kCompletionQueues; ++q) into[q] = std::max(into[q], other[q]);
}

/// Happens-before over a program's instructions.
struct HappensBefore {
  std::vector<VectorClock> start; ///< what is complete when the instruction starts its work
  std::vector<int32_t> queue;     ///< completion queue
  std::vector<int32_t> ordinal;   ///< 1-based place in that queue

  /// Whether `a` completes before `b` starts (a != b).
  bool before(int64_t a, int64_t b) const { return start[b][queue[a]] >= ordinal[a]; }
};

/// The signallers of one semaphore on one queue, in queue order, each
/// with the queue's count of signals once it completes.
struct QueueSignals {
  int32_t queue = 0;
  std::vector<std::pair<int64_t, int64_t>> cumulative; ///< (count, instruction)
};

/// Passes over the program until no clock grows (each pass may learn that
/// more signals come after a wait, which orders the wait after more).
constexpr int kMaxPasses = 16;

class ClockBuilder {
public:
  explicit ClockBuilder(const TileProgram& program);

  /// One pass in `order`, the signals known to follow a wait taken from
  /// the previous pass's clocks; whether another pass may order more: some
  /// clock grew and some wait counted signals of several queues (a wait on
  /// one queue's signals needs the same signal whatever the clocks).
  absl::StatusOr<bool> pass(absl::Span<const int64_t> order);
  HappensBefore take() { return std::move(hb_); }

private:
  /// The signals of `qs` that may complete before `w` starts: those not
  /// known to follow it (its own queue's from `w` on; Sync issues in
  /// program order, so a later DMA cannot help an earlier one's wait).
  size_t usable(const QueueSignals& qs, int64_t w) const;

  const TileProgram& program_;
  HappensBefore hb_;
  std::vector<VectorClock> next_; ///< the clocks a pass computes (then swapped into hb_)
  std::vector<absl::InlinedVector<QueueSignals, 1>> signals_; ///< per semaphore
};

ClockBuilder::ClockBuilder(const TileProgram& program) : program_(program) {
  const int64_t n = static_cast<int64_t>(program.instructions.size());
  hb_.start.assign(n, VectorClock{});
  next_.assign(n, VectorClock{});
  hb_.queue.resize(n);
  hb_.ordinal.resize(n);
  std::array<int32_t, kCompletionQueues> issued{};
  signals_.resize(program.num_semaphores);
  for (int64_t i = 0; i < n; ++i) {
    const Instruction& inst = program.instructions[i];
    hb_.queue[i] = completion_queue(inst);
    hb_.ordinal[i] = ++issued[hb_.queue[i]];
    for (int32_t s : inst.signals) {
      auto& queues = signals_[s];
      auto it = std::find_if(queues.begin(), queues.end(),
                             [&](const QueueSignals& qs) { return qs.queue == hb_.queue[i]; });
      if (it == queues.end()) it = queues.insert(queues.end(), {hb_.queue[i], {}});
      auto& c = it->cumulative;
      if (!c.empty() && c.back().second == i)
        ++c.back().first; // signals s more than once
      else
        c.push_back({(c.empty() ? 0 : c.back().first) + 1, i});
    }
  }
}

size_t ClockBuilder::usable(const QueueSignals& qs, int64_t w) const {
  const auto& c = qs.cumulative;
  const int qw = hb_.queue[w];
  // Queue order keeps clocks monotone: the signallers known to follow w are a suffix.
  size_t end = std::partition_point(c.begin(), c.end(),
                                    [&](const std::pair<int64_t, int64_t>& e) {
                                      return hb_.start[e.second][qw] < hb_.ordinal[w];
                                    }) -
               c.begin();
  const bool issued_after = program_.instructions[w].engine == Engine::sync && qs.queue >= 4;
  if (qs.queue == qw || issued_after)
    end = std::min<size_t>(
        end, std::partition_point(c.begin(), c.end(), [&](const std::pair<int64_t, int64_t>& e) {
               return e.second < w;
             }) - c.begin());
  return end;
}

absl::StatusOr<bool> ClockBuilder::pass(absl::Span<const int64_t> order) {
  const int64_t n = static_cast<int64_t>(program_.instructions.size());
  std::vector<VectorClock>& start = next_; // every instruction's is written below
  std::vector<bool> processed(n, false);
  std::array<VectorClock, kCompletionQueues> queue_done{}; ///< after each queue's latest
  VectorClock sync_issued{}; ///< the waits met by every Sync instruction issued so far
  absl::InlinedVector<size_t, 2> ends;
  bool shared = false; // a wait counted signals of several queues
  for (int64_t i : order) {
    const Instruction& inst = program_.instructions[i];
    VectorClock clock{};
    // Orders i after signaller j's completion; an error if the order ran j later.
    auto follow = [&](int64_t j, const SemaphoreWait& w) -> absl::Status {
      if (j < 0 || !processed[j])
        return absl::InternalError(absl::StrCat(
            "tile program '", program_.name, "': race check: ", describe_instruction(i, inst),
            " waits for semaphore ", w.semaphore, " >= ", w.value,
            ", a signal the execution order has not run"));
      join(clock, start[j]);
      clock[hb_.queue[j]] = std::max(clock[hb_.queue[j]], hb_.ordinal[j]);
      return absl::OkStatus();
    };
    for (const SemaphoreWait& w : inst.waits) {
      const auto& queues = signals_[w.semaphore];
      if (queues.size() == 1) { // one queue's signals: the w.value-th, whatever the clocks
        if (w.value <= 0) continue;
        const auto& c = queues[0].cumulative;
        const auto it = std::lower_bound(
            c.begin(), c.end(), w.value,
            [](const std::pair<int64_t, int64_t>& e, int64_t v) { return e.first < v; });
        if (it == c.end()) return follow(-1, w);
        if (absl::Status s = follow(it->second, w); !s.ok()) return s;
        continue;
      }
      ends.clear();
      int64_t available = 0;
      for (const QueueSignals& qs : queues) {
        ends.push_back(usable(qs, i));
        available += ends.back() == 0 ? 0 : qs.cumulative[ends.back() - 1].first;
      }
      for (size_t k = 0; k < queues.size(); ++k) {
        const auto& c = queues[k].cumulative;
        const int64_t mine = ends[k] == 0 ? 0 : c[ends[k] - 1].first;
        // What the other queues can give at most; the rest must come from this one.
        const int64_t need = w.value - (available - mine);
        shared |= available > mine;
        if (need <= 0) continue;
        const auto it = std::lower_bound(
            c.begin(), c.begin() + ends[k], need,
            [](const std::pair<int64_t, int64_t>& e, int64_t v) { return e.first < v; });
        if (it == c.begin() + ends[k]) return follow(-1, w);
        if (absl::Status s = follow(it->second, w); !s.ok()) return s;
      }
    }
    if (inst.engine == Engine::sync) { // issued in order: it follows every earlier DMA's waits
      join(sync_issued, clock);
      clock = sync_issued;
    }
    const int q = hb_.queue[i];
    join(clock, queue_done[q]);
    start[i] = clock;
    clock[q] = hb_.ordinal[i];
    queue_done[q] = clock;
    processed[i] = true;
  }
  const bool again = shared && start != hb_.start;
  std::swap(hb_.start, next_);
  return again;
}

absl::StatusOr<HappensBefore> happens_before(const TileProgram& program,
                                             absl::Span<const int64_t> order) {
  ClockBuilder builder(program);
  for (int p = 0; p < kMaxPasses; ++p) {
    absl::StatusOr<bool> again = builder.pass(order);
    if (!again.ok()) return again.status();
    if (!*again) break;
  }
  return builder.take();
}

/// Bytes [lo, hi).
struct Range {
  int64_t lo = 0, hi = 0;
};

/// One operand of one instruction.
struct Access {
  int64_t instruction = 0;
  const AccessPattern* pattern = nullptr;
  absl::string_view role;
  bool writes = false;
  bool whole_tensor = false; ///< dma_indirect's HBM side: rows picked at run time
  Range bounds;              ///< the bytes from the first to past the last it touches
};

/// Where `ap` starts: its allocation's first byte on chip, 0 in HBM.
int64_t base_of(const TileProgram& program, const AccessPattern& ap) {
  return ap.kind == BufferKind::hbm ? 0 : program.allocations[ap.buffer].byte_offset;
}

Range bounds_of(const TileProgram& program, const Access& a) {
  const AccessPattern& ap = *a.pattern;
  const int64_t esize = static_cast<int64_t>(element_size(ap.dtype));
  if (a.whole_tensor) return {0, program.hbm[ap.buffer].elements * esize};
  const int64_t rows = ap.kind == BufferKind::hbm ? (ap.partitions - 1) * ap.partition_stride : 0;
  const int64_t base = base_of(program, ap);
  return {base + (ap.min_offset() + std::min<int64_t>(0, rows)) * esize,
          base + (ap.max_offset() + std::max<int64_t>(0, rows) + 1) * esize};
}

std::vector<Access> accesses_of(const TileProgram& program) {
  std::vector<Access> out;
  out.reserve(3 * program.instructions.size());
  auto add = [&](int64_t i, const AccessPattern& ap, absl::string_view role, bool writes,
                 bool whole_tensor) {
    Access a{i, &ap, role, writes, whole_tensor, {}};
    a.bounds = bounds_of(program, a);
    out.push_back(a);
  };
  for (int64_t i = 0; i < static_cast<int64_t>(program.instructions.size()); ++i) {
    const Instruction& inst = program.instructions[i];
    const bool indirect = inst.opcode == Opcode::dma_indirect;
    add(i, inst.dst, "dst", true, indirect && inst.dst.kind == BufferKind::hbm);
    static constexpr absl::string_view kSrc[] = {"src0", "src1", "src2"};
    for (size_t k = 0; k < inst.srcs.size(); ++k)
      add(i, inst.srcs[k], indirect && k == 1 ? "index" : kSrc[std::min<size_t>(k, 2)], false,
          indirect && k == 0 && inst.srcs[k].kind == BufferKind::hbm);
    if (inst.bias) add(i, *inst.bias, "bias", false, false);
    if (inst.scale_column) add(i, *inst.scale_column, "scale", false, false);
    if (inst.accum) add(i, *inst.accum, "accum", true, false);
  }
  return out;
}

/// Past this many runs a footprint is its bounding range (conservative: it
/// may report a race between interleaved patterns that do not overlap).
/// Only unordered pairs whose bounding ranges meet are expanded.
constexpr int64_t kMaxRuns = int64_t{1} << 16;

/// The bytes `a` touches: in each of its partitions (on chip, from the
/// allocation's first byte `base`) or in its HBM tensor (rows included),
/// sorted and merged; its bounding range past kMaxRuns runs.
std::vector<Range> footprint(const TileProgram& program, const Access& a) {
  const AccessPattern& ap = *a.pattern;
  const int64_t esize = static_cast<int64_t>(element_size(ap.dtype));
  if (a.whole_tensor) return {a.bounds};
  const int64_t base = base_of(program, ap);
  // The footprint is a set: the dims' order does not matter, a negative
  // stride walks the same elements from the other end, a zero one repeats.
  absl::InlinedVector<FreeDim, kMaxFreeDims + 1> dims;
  const bool hbm = ap.kind == BufferKind::hbm;
  int64_t offset = ap.offset;
  auto add = [&](FreeDim d) {
    if (d.size <= 1 || d.stride == 0) return;
    if (d.stride < 0) {
      offset += (d.size - 1) * d.stride;
      d.stride = -d.stride;
    }
    dims.push_back(d);
  };
  if (hbm) add({ap.partitions, ap.partition_stride});
  for (const FreeDim& d : ap.dims) add(d);
  std::sort(dims.begin(), dims.end(),
            [](const FreeDim& x, const FreeDim& y) { return x.stride > y.stride; });
  int64_t run = 1; // contiguous elements the smallest strides walk
  while (!dims.empty() && dims.back().stride <= run) {
    run = dims.back().stride * (dims.back().size - 1) + run; // overlapping steps: still one run
    dims.pop_back();
  }
  int64_t count = 1;
  for (const FreeDim& d : dims) count = std::min(count * d.size, kMaxRuns + 1);
  if (count > kMaxRuns || count == 1) return {a.bounds};
  std::vector<Range> runs;
  runs.reserve(count);
  std::array<int64_t, kMaxFreeDims + 1> index{};
  for (int64_t k = 0; k < count; ++k) {
    int64_t off = offset;
    for (size_t d = 0; d < dims.size(); ++d) off += index[d] * dims[d].stride;
    runs.push_back({base + off * esize, base + (off + run) * esize});
    for (size_t d = dims.size(); d-- > 0;) { // odometer, innermost fastest
      if (++index[d] < dims[d].size) break;
      index[d] = 0;
    }
  }
  // Nested dims (each stride past the inner ones' extent) come out sorted already.
  auto by_start = [](Range x, Range y) { return x.lo < y.lo; };
  if (!std::is_sorted(runs.begin(), runs.end(), by_start))
    std::sort(runs.begin(), runs.end(), by_start);
  std::vector<Range> merged;
  for (Range r : runs)
    if (!merged.empty() && r.lo <= merged.back().hi)
      merged.back().hi = std::max(merged.back().hi, r.hi);
    else
      merged.push_back(r);
  return merged;
}

/// The first range two sorted, merged footprints share.
std::optional<Range> first_overlap(const std::vector<Range>& x, const std::vector<Range>& y) {
  size_t i = 0, j = 0;
  while (i < x.size() && j < y.size()) {
    const int64_t lo = std::max(x[i].lo, y[j].lo), hi = std::min(x[i].hi, y[j].hi);
    if (lo < hi) return Range{lo, hi};
    (x[i].hi < y[j].hi ? i : j)++;
  }
  return std::nullopt;
}

/// Connected groups of same-memory allocations whose bytes overlap (live
/// at different times): one region each, so reused bytes are compared.
std::vector<int32_t> alias_groups(const TileProgram& program, int32_t& groups) {
  std::vector<int32_t> group(program.allocations.size(), -1);
  for (BufferKind kind : {BufferKind::sbuf, BufferKind::psum}) {
    std::vector<int32_t> ids;
    for (size_t a = 0; a < program.allocations.size(); ++a)
      if (program.allocations[a].kind == kind) ids.push_back(static_cast<int32_t>(a));
    std::sort(ids.begin(), ids.end(), [&](int32_t x, int32_t y) {
      return program.allocations[x].byte_offset < program.allocations[y].byte_offset;
    });
    int64_t end = -1;
    for (int32_t id : ids) {
      const Allocation& a = program.allocations[id];
      if (a.byte_offset >= end) ++groups;
      group[id] = groups - 1;
      end = std::max(end, a.byte_offset + a.bytes_per_partition);
    }
  }
  return group;
}

class RaceFinder {
public:
  RaceFinder(const TileProgram& program, const HappensBefore& hb)
      : program_(program), hb_(hb), accesses_(accesses_of(program)) {}

  absl::Status run();

private:
  struct Race {
    int32_t first = -1, second = -1; ///< accesses, first the earlier in program order
    int32_t start_partition = 0, end_partition = 0;
    Range bytes;
  };

  void compare(int32_t b, int32_t a);
  const std::vector<Range>& footprint_of(int32_t access);
  std::string who(const Access& a) const;
  absl::Status report(const Race& race) const;

  const TileProgram& program_;
  const HappensBefore& hb_;
  std::vector<Access> accesses_;
  std::optional<Race> race_;
  /// The accesses expanded so far (a node map: references stay valid).
  absl::node_hash_map<int32_t, std::vector<Range>> footprints_;
};

absl::Status RaceFinder::run() {
  int32_t groups = 0;
  const std::vector<int32_t> group = alias_groups(program_, groups);
  const int32_t hbm = static_cast<int32_t>(program_.hbm.size());
  const int32_t lists = (hbm + groups) * kCompletionQueues;
  // Per memory region and queue, its accesses (all; the writes) in queue
  // order: one flat array each, list `region * kCompletionQueues + queue`
  // from first[list] to first[list + 1].
  std::vector<int32_t> list_of(accesses_.size());
  std::vector<int32_t> all_first(lists + 1, 0), writes_first(lists + 1, 0);
  for (size_t k = 0; k < accesses_.size(); ++k) {
    const Access& a = accesses_[k];
    const int32_t region =
        a.pattern->kind == BufferKind::hbm ? a.pattern->buffer : hbm + group[a.pattern->buffer];
    list_of[k] = region * kCompletionQueues + hb_.queue[a.instruction];
    ++all_first[list_of[k] + 1];
    if (a.writes) ++writes_first[list_of[k] + 1];
  }
  for (int32_t l = 0; l < lists; ++l) {
    all_first[l + 1] += all_first[l];
    writes_first[l + 1] += writes_first[l];
  }
  std::vector<int32_t> all(accesses_.size()), writes(writes_first[lists]);
  {
    std::vector<int32_t> all_next(all_first.begin(), all_first.end() - 1),
        writes_next(writes_first.begin(), writes_first.end() - 1);
    for (int32_t k = 0; k < static_cast<int32_t>(accesses_.size()); ++k) {
      all[all_next[list_of[k]]++] = k;
      if (accesses_[k].writes) writes[writes_next[list_of[k]]++] = k;
    }
  }
  absl::InlinedVector<int, kCompletionQueues> used;
  for (int32_t l0 = 0; l0 < lists; l0 += kCompletionQueues) {
    used.clear();
    for (int q = 0; q < kCompletionQueues; ++q)
      if (all_first[l0 + q + 1] > all_first[l0 + q]) used.push_back(q);
    for (size_t ub = 1; ub < used.size(); ++ub)
      for (int32_t x = all_first[l0 + used[ub]]; x < all_first[l0 + used[ub] + 1]; ++x) {
        const int32_t b = all[x];
        const int64_t bi = accesses_[b].instruction;
        // Each pair once, from the later queue: any access against the
        // writes, a write against everything.
        const bool against_all = accesses_[b].writes;
        const std::vector<int32_t>& pool = against_all ? all : writes;
        const std::vector<int32_t>& first = against_all ? all_first : writes_first;
        for (size_t ua = 0; ua < ub; ++ua) {
          const int qa = used[ua];
          const auto begin = pool.begin() + first[l0 + qa], end = pool.begin() + first[l0 + qa + 1];
          if (begin == end) continue;
          // Queue qa's instructions up to start[b][qa] complete before b: skip them.
          auto it = std::upper_bound(begin, end, hb_.start[bi][qa], [&](int32_t known, int32_t k) {
            return known < hb_.ordinal[accesses_[k].instruction];
          });
          // Those that follow b close the window (queue order keeps clocks monotone).
          for (; it != end && !hb_.before(bi, accesses_[*it].instruction); ++it) compare(b, *it);
        }
      }
  }
  return race_ ? report(*race_) : absl::OkStatus();
}

const std::vector<Range>& RaceFinder::footprint_of(int32_t access) {
  auto [it, added] = footprints_.try_emplace(access);
  if (added) it->second = footprint(program_, accesses_[access]);
  return it->second;
}

void RaceFinder::compare(int32_t b, int32_t a) {
  const AccessPattern& pa = *accesses_[a].pattern;
  const AccessPattern& pb = *accesses_[b].pattern;
  Race race;
  if (pa.kind != BufferKind::hbm) {
    race.start_partition = std::max(pa.start_partition, pb.start_partition);
    race.end_partition =
        std::min(pa.start_partition + pa.partitions, pb.start_partition + pb.partitions);
    if (race.start_partition >= race.end_partition) return;
  }
  const Range& ra = accesses_[a].bounds;
  const Range& rb = accesses_[b].bounds;
  if (ra.hi <= rb.lo || rb.hi <= ra.lo) return;
  const std::optional<Range> bytes = first_overlap(footprint_of(a), footprint_of(b));
  if (!bytes) return;
  const bool a_first = accesses_[a].instruction < accesses_[b].instruction;
  race.first = a_first ? a : b;
  race.second = a_first ? b : a;
  race.bytes = *bytes;
  // Report the race whose later instruction comes first in the program.
  auto key = [&](const Race& r) {
    return std::make_pair(accesses_[r.second].instruction, accesses_[r.first].instruction);
  };
  if (!race_ || key(race) < key(*race_)) race_ = race;
}

std::string RaceFinder::who(const Access& a) const {
  const Instruction& inst = program_.instructions[a.instruction];
  std::string s = describe_instruction(a.instruction, inst);
  if (inst.engine == Engine::sync) absl::StrAppend(&s, " (DMA engine ", inst.dma_engine, ")");
  absl::StrAppend(&s, a.writes ? " writes " : " reads ", a.role, " ", a.pattern->to_string());
  return s;
}

absl::Status RaceFinder::report(const Race& race) const {
  const Access& first = accesses_[race.first];
  const Access& second = accesses_[race.second];
  const AccessPattern& ap = *first.pattern;
  std::string where;
  if (ap.kind == BufferKind::hbm) {
    const HbmTensor& t = program_.hbm[ap.buffer];
    const int64_t esize = static_cast<int64_t>(element_size(t.dtype));
    where = absl::StrCat("HBM tensor '", t.name, "' elements [", race.bytes.lo / esize, ", ",
                         (race.bytes.hi + esize - 1) / esize, ")");
  } else {
    const Allocation& a = program_.allocations[ap.buffer];
    const Allocation& b = program_.allocations[second.pattern->buffer];
    where = absl::StrCat(buffer_kind_name(a.kind), " '", a.name, "'");
    if (&a != &b) absl::StrAppend(&where, " and '", b.name, "' (the same bytes)");
    // Bytes from the first allocation's start (the overlap lies inside it).
    absl::StrAppend(&where, " partitions [", race.start_partition, ", ", race.end_partition,
                    ") bytes [", race.bytes.lo - a.byte_offset, ", ", race.bytes.hi - a.byte_offset,
                    ") of each partition");
  }
  return absl::InvalidArgumentError(
      absl::StrCat("tile program '", program_.name, "': rule race: ", who(first), " and ",
                   who(second), " are not ordered by any semaphore and overlap in ", where,
                   ": unordered access by two engines: add a semaphore wait"));
}

} // namespace

absl::Status check_races(const TileProgram& program, absl::Span<const int64_t> order) {
  absl::StatusOr<HappensBefore> hb = happens_before(program, order);
  if (!hb.ok()) return hb.status();
  return RaceFinder(program, *hb).run();
}

} // namespace mstep::neuron
