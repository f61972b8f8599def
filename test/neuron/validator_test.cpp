// The validator: a minimal program breaking each rule, and valid programs
// that pass. Each breach names the instruction, the rule and the values.
#include "lib/backends/neuron/TiledMatmulProgram.h"
#include "test/neuron/NeuronTestPrograms.h"

namespace mstep::neuron {
namespace {

using testing::BaseProgram;
using testing::expect_breach;

TEST(NeuronValidator, BaseProgramIsValid) {
  BaseProgram p;
  EXPECT_TRUE(validate(p.b.program()).ok()) << validate(p.b.program());
}

TEST(NeuronValidator, TiledMatmulProgramsAreValid) {
  for (TiledMatmulShape s : {TiledMatmulShape{256, 384, 640, DType::bf16, DType::f32},
                             TiledMatmulShape{100, 200, 50, DType::f32, DType::bf16},
                             TiledMatmulShape{4096, 8192, 8192, DType::bf16, DType::bf16}}) {
    const absl::Status st = validate(tiled_matmul_program(s));
    EXPECT_TRUE(st.ok()) << s.m << "x" << s.k << "x" << s.n << ": " << st;
  }
}

// A row-major and/or B^T given, over the pipeline's orders (B resident,
// A resident, streamed), ragged tiles, one M row, long K (one rows slot
// where two do not fit: a rows load once waited on Sync for transposes
// queued behind matmuls that needed the B behind it, a deadlock).
TEST(NeuronValidator, TiledMatmulProgramsWithOnChipTransposesAreValid) {
  for (TiledMatmulShape s : {TiledMatmulShape{2048, 256, 768, DType::bf16, DType::bf16},
                             TiledMatmulShape{256, 2048, 1024, DType::bf16, DType::bf16},
                             TiledMatmulShape{1000, 513, 1100, DType::bf16, DType::f32},
                             TiledMatmulShape{129, 300, 1, DType::f32, DType::f32},
                             TiledMatmulShape{1, 5000, 2048, DType::f32, DType::f32},
                             TiledMatmulShape{7, 5000, 500, DType::f32, DType::f32}})
    for (int mode = 1; mode < 4; ++mode) {
      s.a_row_major = mode & 1;
      s.b_transposed = (mode & 2) && s.k <= 3000;
      const absl::Status st = validate(tiled_matmul_program(s));
      EXPECT_TRUE(st.ok()) << s.m << "x" << s.k << "x" << s.n << " mode " << mode << ": " << st;
    }
}

TEST(NeuronValidator, Dtype) {
  BaseProgram p;
  p.inst(p.act).dst.dtype = DType::f64;
  expect_breach(p.b.program(), "dtype", "#1 Scalar activation", "f64");
}

TEST(NeuronValidator, PartitionCount) {
  BaseProgram p;
  p.inst(p.act).srcs[0].partitions = 129;
  expect_breach(p.b.program(), "partition_count", "#1 Scalar activation", "129 partitions");
}

TEST(NeuronValidator, PartitionStartAlignment) {
  struct Case {
    int32_t start, count;
  };
  for (Case c : {Case{32, 64}, Case{64, 65}, Case{16, 32}, Case{96, 33}}) {
    BaseProgram p;
    for (AccessPattern* ap : {&p.inst(p.act).dst, &p.inst(p.act).srcs[0]}) {
      ap->start_partition = c.start;
      ap->partitions = c.count;
    }
    expect_breach(p.b.program(), "partition_start", "#1 Scalar activation",
                  std::to_string(c.count) + " partitions may not start at partition " +
                      std::to_string(c.start));
  }
  for (Case c : {Case{64, 64}, Case{96, 32}, Case{32, 1}, Case{0, 128}}) { // allowed starts
    BaseProgram p;
    for (AccessPattern* ap : {&p.inst(p.act).dst, &p.inst(p.act).srcs[0]}) {
      ap->start_partition = c.start;
      ap->partitions = c.count;
    }
    EXPECT_TRUE(validate(p.b.program()).ok())
        << c.start << "+" << c.count << ": " << validate(p.b.program());
  }
}

TEST(NeuronValidator, FreeDims) {
  BaseProgram p;
  p.inst(p.act).srcs[0].dims = {{2, 32}, {2, 16}, {2, 8}, {2, 4}, {4, 1}};
  expect_breach(p.b.program(), "free_dims", "#1 Scalar activation", "5 free dimensions > 4");
}

TEST(NeuronValidator, FreeSizeSbuf) {
  TileBuilder b("big");
  const int32_t t = b.allocate(BufferKind::sbuf, 65537 * 2, "t");
  const AccessPattern ap = tile_pattern(BufferKind::sbuf, t, DType::bf16, 0, 1, 0, {{65537, 1}});
  b.tensor_copy(Engine::vector, ap, ap);
  expect_breach(b.program(), "free_size", "#0 Vector tensor_copy",
                "65537 free elements > 65536 in SBUF");
}

TEST(NeuronValidator, FreeSizePsum) {
  TileBuilder b("big_psum");
  const int32_t ps = b.allocate(BufferKind::psum, 16 * 1024, "ps");
  const int32_t t = b.allocate(BufferKind::sbuf, 4097 * 4, "t");
  b.tensor_copy(Engine::vector,
                tile_pattern(BufferKind::sbuf, t, DType::f32, 0, 128, 0, {{4097, 1}}),
                tile_pattern(BufferKind::psum, ps, DType::f32, 0, 128, 0, {{4097, 1}}));
  expect_breach(b.program(), "free_size", "#0 Vector tensor_copy",
                "4097 free elements > 4096 in PSUM");
}

TEST(NeuronValidator, Buffer) {
  BaseProgram p;
  p.inst(p.act).srcs[0].buffer = 7;
  expect_breach(p.b.program(), "buffer", "#1 Scalar activation", "no SBUF allocation 7");
  BaseProgram q;
  q.inst(q.load).srcs[0].dtype = DType::bf16;
  q.inst(q.load).dst.dtype = DType::bf16;
  expect_breach(q.b.program(), "buffer", "#0 Sync dma_copy", "HBM tensor 'x' holds f32");
}

TEST(NeuronValidator, AllocationLive) {
  BaseProgram p;
  p.b.release(p.tile); // released after the store, then used again
  p.b.activation(p.sbuf(), p.sbuf(), ActivationFunction::exp);
  expect_breach(p.b.program(), "allocation_live", "#3 Scalar activation",
                "is live for instructions [0, 3)");
}

TEST(NeuronValidator, BoundsOnChip) {
  BaseProgram p;
  p.inst(p.act).dst.offset = 1; // 64 f32 from element 1: bytes [4, 260) of a 256-byte tile
  expect_breach(p.b.program(), "bounds", "#1 Scalar activation", "bytes [4, 260)");
}

TEST(NeuronValidator, BoundsHbm) {
  BaseProgram p;
  p.inst(p.store).dst.offset = 64; // rows 1..128 of a 128-row tensor
  expect_breach(p.b.program(), "bounds", "#2 Sync dma_copy",
                "elements [64, 8255] outside HBM tensor 'y' of 8192");
}

TEST(NeuronValidator, EngineOpcode) {
  BaseProgram p;
  p.inst(p.act).engine = Engine::vector;
  expect_breach(p.b.program(), "engine_opcode", "#1 Vector activation",
                "activation does not run on Vector");
}

TEST(NeuronValidator, EngineMemory) {
  BaseProgram p; // Scalar may not read HBM
  p.inst(p.act).srcs[0] = hbm_rows(p.x, DType::f32, 64, 0, 128, 0, 64);
  expect_breach(p.b.program(), "engine_memory", "#1 Scalar activation", "Scalar may not read HBM");

  TileBuilder b("tensor_writes_sbuf"); // Tensor writes PSUM only
  const int32_t s = b.allocate(BufferKind::sbuf, 1024, "s");
  const AccessPattern tile = tile_pattern(BufferKind::sbuf, s, DType::bf16, 0, 128, 0, {{128, 1}});
  b.matmul(tile_pattern(BufferKind::sbuf, s, DType::f32, 0, 128, 0, {{128, 1}}), tile, tile, false);
  expect_breach(b.program(), "engine_memory", "#0 Tensor nc_matmul", "Tensor may not write SBUF");

  TileBuilder d("dma_to_psum"); // DMA moves HBM <-> SBUF
  const int32_t x = d.hbm_tensor("x", DType::f32, 128);
  const int32_t ps = d.allocate(BufferKind::psum, 2048, "ps");
  d.dma_copy(tile_pattern(BufferKind::psum, ps, DType::f32, 0, 128, 0, {{1, 1}}),
             hbm_rows(x, DType::f32, 1, 0, 128, 0, 1));
  expect_breach(d.program(), "engine_memory", "#0 Sync dma_copy", "Sync may not write PSUM");
}

TEST(NeuronValidator, GpSimdNeverTouchesPsum) {
  TileBuilder b("gpsimd_psum");
  const int32_t ps = b.allocate(BufferKind::psum, 2048, "ps");
  const int32_t s = b.allocate(BufferKind::sbuf, 2048, "s");
  b.tensor_copy(Engine::gpsimd,
                tile_pattern(BufferKind::sbuf, s, DType::f32, 0, 128, 0, {{512, 1}}),
                tile_pattern(BufferKind::psum, ps, DType::f32, 0, 128, 0, {{512, 1}}));
  expect_breach(b.program(), "gpsimd_psum", "#0 GpSimd tensor_copy", "GpSimd never accesses PSUM");
}

TEST(NeuronValidator, TensorTensorNotBothInputsInPsum) {
  TileBuilder b("tt_psum");
  const int32_t ps = b.allocate(BufferKind::psum, 4096, "ps");
  const int32_t s = b.allocate(BufferKind::sbuf, 2048, "s");
  const AccessPattern p0 = tile_pattern(BufferKind::psum, ps, DType::f32, 0, 128, 0, {{512, 1}});
  const AccessPattern p1 = tile_pattern(BufferKind::psum, ps, DType::f32, 0, 128, 512, {{512, 1}});
  b.tensor_tensor(Engine::vector,
                  tile_pattern(BufferKind::sbuf, s, DType::f32, 0, 128, 0, {{512, 1}}), p0, p1,
                  AluOp::add);
  expect_breach(b.program(), "tensor_tensor_psum", "#0 Vector tensor_tensor",
                "both inputs are in PSUM");
}

TEST(NeuronValidator, DmaDoesNotConvert) {
  TileBuilder b("dma_convert");
  const int32_t x = b.hbm_tensor("x", DType::f32, 128);
  const int32_t s = b.allocate(BufferKind::sbuf, 64, "s");
  b.dma_copy(tile_pattern(BufferKind::sbuf, s, DType::bf16, 0, 128, 0, {{1, 1}}),
             hbm_rows(x, DType::f32, 1, 0, 128, 0, 1));
  expect_breach(b.program(), "operands", "#0 Sync dma_copy",
                "DMA does not convert: dst bf16, src f32");
}

TEST(NeuronValidator, ReduceOpIsAReduction) {
  for (AluOp op : {AluOp::subtract, AluOp::is_ge}) {
    TileBuilder b("reduce_sub");
    const int32_t s = b.allocate(BufferKind::sbuf, 1024, "s");
    b.tensor_reduce(Engine::vector,
                    tile_pattern(BufferKind::sbuf, s, DType::f32, 0, 128, 0, {{1, 1}}),
                    tile_pattern(BufferKind::sbuf, s, DType::f32, 0, 128, 0, {{64, 1}}), op);
    expect_breach(b.program(), "operands", "#0 Vector tensor_reduce",
                  std::string("tensor_reduce with ") + std::string(alu_op_name(op)));
  }
}

// bn_stats takes at most 512 free elements and writes one fp32 record of
// 3; bn_aggr reads whole records and writes fp32 (mean, variance).
TEST(NeuronValidator, BnStats) {
  auto program = [](Opcode op, int64_t src_free, int64_t dst_free, DType dst_dtype) {
    TileBuilder b("bn");
    const int32_t s = b.allocate(BufferKind::sbuf, 4096, "s");
    const AccessPattern dst =
        tile_pattern(BufferKind::sbuf, s, dst_dtype, 0, 128, 0, {{dst_free, 1}});
    const AccessPattern src =
        tile_pattern(BufferKind::sbuf, s, DType::f32, 0, 128, 0, {{src_free, 1}});
    op == Opcode::bn_stats ? b.bn_stats(dst, src) : b.bn_aggr(dst, src);
    return b.take();
  };
  EXPECT_TRUE(validate(program(Opcode::bn_stats, 512, 3, DType::f32)).ok());
  EXPECT_TRUE(validate(program(Opcode::bn_aggr, 12, 2, DType::f32)).ok());
  expect_breach(program(Opcode::bn_stats, 513, 3, DType::f32), "bn_stats", "#0 Vector bn_stats",
                "src [128, 513] has 513 free elements > 512");
  expect_breach(program(Opcode::bn_aggr, 10, 2, DType::f32), "bn_stats", "#0 Vector bn_aggr",
                "src [128, 10] is not whole records of 3");
  expect_breach(program(Opcode::bn_stats, 64, 3, DType::bf16), "shape", "#0 Vector bn_stats",
                "dst [128, 3] bf16 is not fp32 [128, 3]");
  expect_breach(program(Opcode::bn_aggr, 6, 3, DType::f32), "shape", "#0 Vector bn_aggr",
                "dst [128, 3] f32 is not fp32 [128, 2]");
}

TEST(NeuronValidator, Shape) {
  BaseProgram p;
  p.inst(p.act).dst.dims[0].size = 32;
  expect_breach(p.b.program(), "shape", "#1 Scalar activation",
                "dst [128, 32] and src [128, 64] differ");
  // An activation's per-partition scale is one element per partition.
  BaseProgram q;
  q.inst(q.act).scale_column = q.inst(q.act).srcs[0];
  expect_breach(q.b.program(), "shape", "#1 Scalar activation",
                "scale/bias/accum [128, 64] is not [128, 1]");
}

/// A matmul psum[M, N] = stationary[K, M]^T moving[K, N] with the given
/// sizes and PSUM offset (f32 elements), on fresh allocations.
TileProgram matmul_program(int32_t k, int64_t m, int32_t k2, int64_t n, int64_t psum_offset = 0) {
  TileBuilder b("mm");
  const int32_t st = b.allocate(BufferKind::sbuf, 4096, "stationary");
  const int32_t mv = b.allocate(BufferKind::sbuf, 4096, "moving");
  const int32_t ps = b.allocate(BufferKind::psum, 16 * 1024, "ps");
  b.matmul(tile_pattern(BufferKind::psum, ps, DType::f32, 0,
                        static_cast<int32_t>(std::min<int64_t>(m, 128)), psum_offset, {{n, 1}}),
           tile_pattern(BufferKind::sbuf, st, DType::bf16, 0, k, 0, {{m, 1}}),
           tile_pattern(BufferKind::sbuf, mv, DType::bf16, 0, k2, 0, {{n, 1}}), false);
  return b.take();
}

TEST(NeuronValidator, MatmulShape) {
  EXPECT_TRUE(validate(matmul_program(128, 128, 128, 512)).ok())
      << validate(matmul_program(128, 128, 128, 512));
  expect_breach(matmul_program(128, 128, 128, 600), "matmul_shape", "#0 Tensor nc_matmul",
                "moving N = 600 > 512");
  expect_breach(matmul_program(128, 129, 128, 512), "matmul_shape", "#0 Tensor nc_matmul",
                "stationary M = 129 > 128");
  expect_breach(matmul_program(128, 128, 64, 512), "matmul_shape", "#0 Tensor nc_matmul",
                "stationary K = 128 but moving K = 64");
}

TEST(NeuronValidator, PsumBank) {
  // 256 f32 from element 384: bytes [1536, 2560), across banks 0 and 1.
  expect_breach(matmul_program(128, 128, 128, 256, 384), "psum_bank", "#0 Tensor nc_matmul",
                "bytes [1536, 2560) of a partition, across banks 0 and 1");
  EXPECT_TRUE(validate(matmul_program(128, 128, 128, 256, 256)).ok());
}

TEST(NeuronValidator, DmaEngine) {
  BaseProgram p;
  p.inst(p.load).dma_engine = 16;
  expect_breach(p.b.program(), "dma_engine", "#0 Sync dma_copy", "DMA engine 16 is not 0..15");
}

TEST(NeuronValidator, Semaphore) {
  BaseProgram p;
  p.inst(p.act).waits[0].semaphore = 5;
  expect_breach(p.b.program(), "semaphore", "#1 Scalar activation",
                "waits on semaphore 5, the program has 2");
  BaseProgram q;
  q.inst(q.act).waits[0].value = 2;
  expect_breach(q.b.program(), "semaphore", "#1 Scalar activation",
                "waits for semaphore 0 >= 2 but only 1 instructions signal it");
}

TEST(NeuronValidator, SbufCapacity) {
  TileBuilder b("sbuf_full");
  const int32_t a = b.allocate(BufferKind::sbuf, 128 * 1024, "a");
  const int32_t c = b.allocate(BufferKind::sbuf, 100 * 1024, "c"); // 228 KiB live > 192 KiB
  b.tensor_copy(Engine::vector, tile_pattern(BufferKind::sbuf, c, DType::f32, 0, 128, 0, {{4, 1}}),
                tile_pattern(BufferKind::sbuf, a, DType::f32, 0, 128, 0, {{4, 1}}));
  expect_breach(b.program(), "capacity", "#0 Vector tensor_copy",
                "SBUF allocation 'c' needs bytes [131072, 233472)");
}

TEST(NeuronValidator, PsumCapacityCountsOnlyLiveAllocations) {
  TileBuilder b("psum_reuse");
  const int32_t s = b.allocate(BufferKind::sbuf, 64, "s");
  const AccessPattern col = tile_pattern(BufferKind::sbuf, s, DType::f32, 0, 128, 0, {{1, 1}});
  const int32_t p0 = b.allocate(BufferKind::psum, 12 * 1024, "p0");
  b.tensor_copy(Engine::vector, col,
                tile_pattern(BufferKind::psum, p0, DType::f32, 0, 128, 0, {{1, 1}}));
  b.release(p0);
  const int32_t p1 = b.allocate(BufferKind::psum, 12 * 1024, "p1"); // fits: p0 is dead
  b.tensor_copy(Engine::vector, col,
                tile_pattern(BufferKind::psum, p1, DType::f32, 0, 128, 0, {{1, 1}}));
  EXPECT_TRUE(validate(b.program()).ok()) << validate(b.program());
  b.allocate(BufferKind::psum, 8 * 1024, "p2"); // with p1 live: 20 KiB > 16 KiB
  b.tensor_copy(Engine::vector, col, col);
  expect_breach(b.program(), "capacity", "#2 Vector tensor_copy", "capacity 16384");
}

TEST(NeuronValidator, AllocationOverlap) {
  TileBuilder b("overlap");
  b.allocate(BufferKind::sbuf, 1024, "a");
  const int32_t c = b.allocate(BufferKind::sbuf, 1024, "c");
  const int32_t x = b.hbm_tensor("x", DType::f32, 128);
  b.dma_copy(tile_pattern(BufferKind::sbuf, c, DType::f32, 0, 128, 0, {{1, 1}}),
             hbm_rows(x, DType::f32, 1, 0, 128, 0, 1));
  TileProgram prog = b.take();
  prog.allocations[c].byte_offset = 512;
  expect_breach(prog, "allocation_overlap", "#0 Sync dma_copy",
                "bytes [512, 1536) overlap live 'a' [0, 1024)");
}

TEST(NeuronValidator, Deadlock) {
  BaseProgram p; // the load now also waits for the activation: neither can start
  p.b.wait(p.load, 1, 1);
  expect_breach(p.b.program(), "deadlock", "#0 Sync dma_copy waits for semaphore 1 >= 1 (count 0)",
                "#1 Scalar activation waits for semaphore 0 >= 1 (count 0)");
}

} // namespace
} // namespace mstep::neuron
