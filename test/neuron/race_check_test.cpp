// The validator's rule race (RaceCheck.h): instructions on two engines (or
// two DMA engines) that touch overlapping memory, one writing, must be
// ordered by semaphores. Each racing program is checked for the message
// (both instructions, the memory and range, the rule); the same program
// with the ordering added passes.
#include "test/neuron/NeuronTestPrograms.h"

namespace mstep::neuron {
namespace {

using testing::BaseProgram;
using testing::expect_breach;

constexpr char kRule[] = "unordered access by two engines: add a semaphore wait";

/// Valid when `ordered`; otherwise a race naming `first` and `second`.
void expect_valid_or_race(bool ordered, const TileProgram& program, const std::string& first,
                          const std::string& second) {
  if (ordered)
    EXPECT_TRUE(validate(program).ok()) << validate(program);
  else
    expect_breach(program, "race", first, second);
}

/// Two SBUF tiles "t" and "u" of [128, 64] f32 and an HBM tensor "x".
struct Tiles {
  TileBuilder b{"race"};
  int32_t x = b.hbm_tensor("x", DType::f32, 128 * 64);
  int32_t t = b.allocate(BufferKind::sbuf, 64 * 4, "t");
  int32_t u = b.allocate(BufferKind::sbuf, 64 * 4, "u");

  static AccessPattern view(int32_t alloc, int32_t p0, int32_t parts, int64_t col,
                            std::initializer_list<FreeDim> dims) {
    return tile_pattern(BufferKind::sbuf, alloc, DType::f32, p0, parts, col, dims);
  }
  static AccessPattern all(int32_t alloc) { return view(alloc, 0, 128, 0, {{64, 1}}); }
  /// Vector: dst = src + 1.
  int64_t vector(const AccessPattern& dst, const AccessPattern& src) {
    return b.tensor_scalar(Engine::vector, dst, src, AluOp::add, 1.0f);
  }
  /// GpSimd: dst = src * 2.
  int64_t gpsimd(const AccessPattern& dst, const AccessPattern& src) {
    return b.tensor_scalar(Engine::gpsimd, dst, src, AluOp::multiply, 2.0f);
  }
  /// Scalar: dst = exp(src).
  int64_t scalar(const AccessPattern& dst, const AccessPattern& src) {
    return b.activation(dst, src, ActivationFunction::exp);
  }
  void order(int64_t first, int64_t then) {
    const int32_t s = b.semaphore();
    b.signal(first, s);
    b.wait(then, s, 1);
  }
};

TEST(NeuronRaceCheck, WriteThenReadOnTwoEnginesNeedsASemaphore) {
  Tiles p; // a DMA loads t, Scalar reads it: without a wait they race
  const int64_t load = p.b.dma_copy(p.all(p.t), hbm_rows(p.x, DType::f32, 64, 0, 128, 0, 64));
  const int64_t act = p.scalar(p.all(p.u), p.all(p.t));
  expect_breach(p.b.program(), "race",
                "#0 Sync dma_copy (DMA engine 0) writes dst SBUF#0[p0+128, off 0, (64,1)] f32 and "
                "#1 Scalar activation reads src0 SBUF#0[p0+128, off 0, (64,1)] f32 are not ordered",
                "overlap in SBUF 't' partitions [0, 128) bytes [0, 256) of each partition: " +
                    std::string(kRule));
  p.order(load, act);
  EXPECT_TRUE(validate(p.b.program()).ok()) << validate(p.b.program());
  BaseProgram base; // the same with the semaphores: load -> exp -> store
  EXPECT_TRUE(validate(base.b.program()).ok()) << validate(base.b.program());
}

TEST(NeuronRaceCheck, WriteAfterReadAndWriteAfterWriteRaceToo) {
  Tiles w; // Vector reads t (into u), Scalar then overwrites t (from x's copy in SBUF: v)
  const int32_t vt = w.b.allocate(BufferKind::sbuf, 64 * 4, "v");
  w.vector(w.all(w.u), w.all(w.t));
  w.scalar(w.all(w.t), w.all(vt));
  expect_breach(w.b.program(), "race", "#0 Vector tensor_scalar reads src0",
                "#1 Scalar activation writes dst");
  Tiles ww; // both write u
  const int64_t v = ww.vector(ww.all(ww.u), ww.all(ww.t));
  const int64_t g = ww.gpsimd(ww.all(ww.u), ww.all(ww.t));
  expect_breach(ww.b.program(), "race", "#0 Vector tensor_scalar writes dst",
                "#1 GpSimd tensor_scalar writes dst");
  ww.order(v, g);
  EXPECT_TRUE(validate(ww.b.program()).ok()) << validate(ww.b.program());
}

TEST(NeuronRaceCheck, ReadsOnTwoEnginesNeedNoOrder) {
  Tiles r; // Vector and Scalar both read t, unordered, into their own outputs
  const int32_t out = r.b.allocate(BufferKind::sbuf, 64 * 4, "out");
  r.vector(r.all(r.u), r.all(r.t));
  r.scalar(r.all(out), r.all(r.t));
  EXPECT_TRUE(validate(r.b.program()).ok()) << validate(r.b.program());
}

TEST(NeuronRaceCheck, DisjointPartitionsOrBytesDoNotRace) {
  Tiles parts; // partitions [0, 64) on Vector, [64, 128) on GpSimd
  parts.vector(parts.view(parts.u, 0, 64, 0, {{64, 1}}), parts.view(parts.t, 0, 64, 0, {{64, 1}}));
  parts.gpsimd(parts.view(parts.u, 64, 64, 0, {{64, 1}}),
               parts.view(parts.t, 64, 64, 0, {{64, 1}}));
  EXPECT_TRUE(validate(parts.b.program()).ok()) << validate(parts.b.program());

  Tiles cols; // columns [0, 32) on Vector, [32, 64) on GpSimd
  cols.vector(cols.view(cols.u, 0, 128, 0, {{32, 1}}), cols.view(cols.t, 0, 128, 0, {{32, 1}}));
  cols.gpsimd(cols.view(cols.u, 0, 128, 32, {{32, 1}}), cols.view(cols.t, 0, 128, 32, {{32, 1}}));
  EXPECT_TRUE(validate(cols.b.program()).ok()) << validate(cols.b.program());

  Tiles strided; // the even columns on Vector, the odd ones on Scalar: interleaved, disjoint
  strided.vector(strided.view(strided.u, 0, 128, 0, {{32, 2}}),
                 strided.view(strided.t, 0, 128, 0, {{32, 2}}));
  strided.scalar(strided.view(strided.u, 0, 128, 1, {{32, 2}}),
                 strided.view(strided.t, 0, 128, 1, {{32, 2}}));
  EXPECT_TRUE(validate(strided.b.program()).ok()) << validate(strided.b.program());

  Tiles overlap; // partitions [0, 64) and [32, 64): overlap in 32..63
  overlap.vector(overlap.view(overlap.u, 0, 64, 0, {{64, 1}}),
                 overlap.view(overlap.t, 0, 64, 0, {{64, 1}}));
  overlap.gpsimd(overlap.view(overlap.u, 32, 32, 0, {{64, 1}}),
                 overlap.view(overlap.t, 32, 32, 0, {{64, 1}}));
  expect_breach(overlap.b.program(), "race", "#1 GpSimd tensor_scalar writes dst",
                "partitions [32, 64) bytes [0, 256)");

  Tiles bytes; // columns [0, 33) and [32, 64): one f32 column shared
  bytes.vector(bytes.view(bytes.u, 0, 128, 0, {{33, 1}}),
               bytes.view(bytes.t, 0, 128, 0, {{33, 1}}));
  bytes.gpsimd(bytes.view(bytes.u, 0, 128, 32, {{32, 1}}),
               bytes.view(bytes.t, 0, 128, 32, {{32, 1}}));
  expect_breach(bytes.b.program(), "race", "#0 Vector tensor_scalar writes dst",
                "partitions [0, 128) bytes [128, 132) of each partition");
}

TEST(NeuronRaceCheck, OrderThroughAThirdEngineCounts) {
  // Vector writes t -> GpSimd (touching only u) -> Scalar reads t.
  for (bool linked : {true, false}) {
    Tiles p;
    const int32_t src = p.b.allocate(BufferKind::sbuf, 64 * 4, "src");
    const int32_t out = p.b.allocate(BufferKind::sbuf, 64 * 4, "out");
    const int64_t v = p.vector(p.all(p.t), p.all(src));
    const int64_t g = p.gpsimd(p.all(p.u), p.all(p.u));
    const int64_t s = p.scalar(p.all(out), p.all(p.t));
    p.order(g, s);
    if (linked) p.order(v, g);
    expect_valid_or_race(linked, p.b.program(), "#0 Vector tensor_scalar writes dst",
                         "#2 Scalar activation reads src0");
  }
}

/// Vector writes t, then `second` (Vector or GpSimd) writes u, each
/// signalling one semaphore; Scalar reads u after that semaphore reaches
/// `count`.
TileProgram two_signals_then_read(Engine second, int32_t count) {
  Tiles p;
  const int32_t s = p.b.semaphore();
  const int32_t src = p.b.allocate(BufferKind::sbuf, 64 * 4, "src");
  const int32_t out = p.b.allocate(BufferKind::sbuf, 64 * 4, "out");
  const int64_t first = p.vector(p.all(p.t), p.all(src));
  const int64_t then = second == Engine::vector ? p.vector(p.all(p.u), p.all(src))
                                                : p.gpsimd(p.all(p.u), p.all(src));
  const int64_t read = p.scalar(p.all(out), p.all(p.u));
  p.b.signal(first, s);
  p.b.signal(then, s);
  p.b.wait(read, s, count);
  return p.b.take();
}

TEST(NeuronRaceCheck, AWaitForAnEarlierSignalDoesNotOrderALaterWrite) {
  // Vector signals twice: a wait for 1 is behind its first write only, not
  // the second one (u), which Scalar reads.
  for (int32_t count : {1, 2})
    expect_valid_or_race(count == 2, two_signals_then_read(Engine::vector, count),
                         "#1 Vector tensor_scalar writes dst", "#2 Scalar activation reads src0");
}

TEST(NeuronRaceCheck, ASemaphoreTwoEnginesSignalOrdersOnlyWhenTheCountNeedsBoth) {
  // Vector and GpSimd each signal once: a count of 1 may be Vector's
  // signal alone, so only 2 orders GpSimd's write of u before the read.
  for (int32_t count : {1, 2})
    expect_valid_or_race(count == 2, two_signals_then_read(Engine::gpsimd, count),
                         "#1 GpSimd tensor_scalar writes dst", "#2 Scalar activation reads src0");
}

TEST(NeuronRaceCheck, DmaEnginesCompleteOutOfOrderButEachInOrder) {
  // A load then a store of the same tile, nothing between them: Sync
  // issues both in order, but two DMA engines may finish in either order.
  for (bool same_engine : {true, false}) {
    Tiles p;
    const int32_t y = p.b.hbm_tensor("y", DType::f32, 128 * 64);
    const int64_t load = p.b.dma_copy(p.all(p.t), hbm_rows(p.x, DType::f32, 64, 0, 128, 0, 64));
    const int64_t store = p.b.dma_copy(hbm_rows(y, DType::f32, 64, 0, 128, 0, 64), p.all(p.t));
    p.b.set_dma_engine(store, same_engine ? p.b.at(load).dma_engine : 5);
    expect_valid_or_race(same_engine, p.b.program(), "#0 Sync dma_copy (DMA engine 0) writes dst",
                         "#1 Sync dma_copy (DMA engine 5) reads src0");
  }
}

TEST(NeuronRaceCheck, TwoDmaEnginesStoringOneHbmRangeRace) {
  Tiles p; // t's columns [0, 32) to y's, then to y's [16, 48) (overlap) or [32, 64) (none)
  const int32_t y = p.b.hbm_tensor("y", DType::f32, 128 * 64);
  p.b.dma_copy(hbm_rows(y, DType::f32, 64, 0, 128, 0, 32), p.view(p.t, 0, 128, 0, {{32, 1}}));
  p.b.dma_copy(hbm_rows(y, DType::f32, 64, 0, 128, 32, 32), p.view(p.t, 0, 128, 0, {{32, 1}}));
  EXPECT_TRUE(validate(p.b.program()).ok()) << validate(p.b.program());
  p.b.dma_copy(hbm_rows(y, DType::f32, 64, 0, 128, 16, 32), p.view(p.t, 0, 128, 0, {{32, 1}}));
  expect_breach(
      p.b.program(), "race", "#0 Sync dma_copy (DMA engine 0) writes dst HBM#1",
      "#2 Sync dma_copy (DMA engine 2) writes dst HBM#1[p0+128 stride 64, off 16, (32,1)] "
      "f32 are not ordered by any semaphore and overlap in HBM tensor 'y' elements [16, 32)");
}

TEST(NeuronRaceCheck, ReusedBytesOfAReleasedAllocationAreCompared) {
  // Vector writes t; t is released and v takes its bytes; a DMA fills v
  // while Vector may still be writing: a race on the same SBUF bytes.
  Tiles p;
  const int64_t write = p.vector(p.all(p.t), p.all(p.u));
  p.b.release(p.t);
  const int32_t v = p.b.allocate(BufferKind::sbuf, 64 * 4, "v");
  ASSERT_EQ(p.b.program().allocations[v].byte_offset, p.b.program().allocations[p.t].byte_offset);
  const int64_t load = p.b.dma_copy(p.all(v), hbm_rows(p.x, DType::f32, 64, 0, 128, 0, 64));
  expect_breach(p.b.program(), "race", "#0 Vector tensor_scalar writes dst",
                "overlap in SBUF 't' and 'v' (the same bytes) partitions [0, 128) bytes [0, 256)");
  p.order(write, load);
  EXPECT_TRUE(validate(p.b.program()).ok()) << validate(p.b.program());
}

TEST(NeuronRaceCheck, ARingsLaterFillsDoNotCountTowardsAnEarlierWait) {
  // Two DMA engines fill slot t (signal f each), Vector reads it after
  // f >= 2 and frees it; the second round's fills wait for that and signal
  // f again. The first read's count of 2 can only be the first round's.
  Tiles p;
  const int32_t f = p.b.semaphore(), freed = p.b.semaphore();
  const int32_t out = p.b.allocate(BufferKind::sbuf, 64 * 4, "out");
  for (int round = 0; round < 2; ++round) {
    for (int half = 0; half < 2; ++half) {
      const int64_t fill = p.b.dma_copy(p.view(p.t, 0, 128, 32 * half, {{32, 1}}),
                                        hbm_rows(p.x, DType::f32, 64, 0, 128, 32 * half, 32));
      p.b.set_dma_engine(fill, half);
      p.b.signal(fill, f);
      if (round > 0) p.b.wait(fill, freed, round);
    }
    const int64_t read = p.vector(p.all(out), p.all(p.t));
    p.b.wait(read, f, 2 * (round + 1));
    p.b.signal(read, freed);
  }
  EXPECT_TRUE(validate(p.b.program()).ok()) << validate(p.b.program());
}

} // namespace
} // namespace mstep::neuron
