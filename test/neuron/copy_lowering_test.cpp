// reshape, permute, expand, slice and cat as DMA tile programs
// (CopyLowering.h): every program validates, and its result has exactly
// ref's bytes (a copy is exact), in f32, bf16 and int64 (moved as int32
// pairs); which copies are layout aliases; the refusals.
#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>

#include "lib/backends/neuron/CopyLowering.h"
#include "test/neuron/LoweringTestUtil.h"

namespace mstep::neuron {
namespace {

using testing::Buffers;
using testing::op;

/// A buffer of `t` whose bytes are all different (any dtype).
std::shared_ptr<host::HostBuffer> distinct_bytes(const TensorType& t, unsigned seed) {
  auto b = std::make_shared<host::HostBuffer>(t);
  for (size_t i = 0; i < t.bytes(); ++i)
    b->bytes()[i] = static_cast<std::byte>((i * 131 + seed * 17 + i / 251) & 0xFF);
  return b;
}

GraphNode permute_node(const TensorType& out, IntList perm) {
  GraphNode n = op(OpKind::permute, {0}, out);
  n.attrs.push_back({AttrName::perm, AttrValue(perm)});
  return n;
}

GraphNode slice_node(const TensorType& out, int64_t dim, int64_t start, int64_t end, int64_t step) {
  GraphNode n = op(OpKind::slice, {0}, out);
  n.attrs = {{AttrName::dim, AttrValue(dim)},
             {AttrName::start, AttrValue(start)},
             {AttrName::end, AttrValue(end)},
             {AttrName::step, AttrValue(step)}};
  return n;
}

TensorType permuted(const TensorType& t, const IntList& perm) {
  Shape s;
  for (int64_t p : perm) s.push_back(t.shape[p]);
  return TensorType{s, t.dtype};
}

/// Lowers `node` over `in`, runs it on the simulator and expects ref's
/// bytes.
void expect_ref_bytes(const GraphNode& node, const Buffers& in) {
  absl::StatusOr<Buffers> want = testing::run_ref(node, in);
  ASSERT_TRUE(want.ok()) << want.status();
  absl::StatusOr<Buffers> got = testing::run_lowered_all(node, in);
  ASSERT_TRUE(got.ok()) << got.status();
  const size_t bytes = node.results[0].bytes();
  EXPECT_EQ(std::memcmp((*got)[0]->bytes(), (*want)[0]->bytes(), bytes), 0)
      << op_name(node.op) << " -> " << node.results[0].to_string();
}

TEST(CopyLowering, PermutesMatchRefBitForBit) {
  // Attention's head split [B, T, H, Dh] -> [B, H, T, Dh] and back.
  const TensorType x{Shape({2, 150, 4, 16}), DType::f32};
  expect_ref_bytes(permute_node(permuted(x, {0, 2, 1, 3}), {0, 2, 1, 3}), {distinct_bytes(x, 1)});
  // Transposes of the last two dims (element-strided reads), ragged row tiles.
  const TensorType y{Shape({3, 130, 70}), DType::f32};
  expect_ref_bytes(permute_node(permuted(y, {0, 2, 1}), {0, 2, 1}), {distinct_bytes(y, 2)});
  const TensorType big{Shape({260, 5000}), DType::f32}; // free dim chunked
  expect_ref_bytes(permute_node(permuted(big, {1, 0}), {1, 0}), {distinct_bytes(big, 3)});
  // bf16, and int64 (as int32 pairs).
  const TensorType h{Shape({5, 7, 129}), DType::bf16};
  expect_ref_bytes(permute_node(permuted(h, {2, 0, 1}), {2, 0, 1}), {distinct_bytes(h, 4)});
  const TensorType l{Shape({6, 33, 5}), DType::i64};
  expect_ref_bytes(permute_node(permuted(l, {1, 2, 0}), {1, 2, 0}), {distinct_bytes(l, 5)});
  // Six dims that do not merge: the outer ones loop (at most 4 free dims
  // per descriptor).
  const TensorType six{Shape({2, 3, 2, 3, 2, 5}), DType::f32};
  expect_ref_bytes(permute_node(permuted(six, {5, 4, 3, 2, 1, 0}), {5, 4, 3, 2, 1, 0}),
                   {distinct_bytes(six, 6)});
}

TEST(CopyLowering, ReshapeExpandSliceAndCatMatchRef) {
  const TensorType x{Shape({6, 50}), DType::f32};
  expect_ref_bytes(op(OpKind::reshape, {0}, TensorType{Shape({300}), DType::f32}),
                   {distinct_bytes(x, 7)});
  // expand: a row over rows (partition stride 0) and a column along rows
  // (free stride 0).
  for (const auto& [in, out] :
       std::vector<std::pair<Shape, Shape>>{{Shape({1, 64}), Shape({300, 64})},
                                            {Shape({64, 1}), Shape({64, 100})},
                                            {Shape({3, 1, 5}), Shape({2, 3, 4, 5})}}) {
    GraphNode e = op(OpKind::expand, {0}, TensorType{out, DType::f32});
    e.attrs.push_back({AttrName::shape, AttrValue(IntList(out.begin(), out.end()))});
    expect_ref_bytes(e, {distinct_bytes(TensorType{in, DType::f32}, 8)});
  }
  // The q part of a fused qkv projection, and a strided slice.
  const TensorType qkv{Shape({4, 70, 192}), DType::f32};
  expect_ref_bytes(slice_node(TensorType{Shape({4, 70, 64}), DType::f32}, 2, 64, 128, 1),
                   {distinct_bytes(qkv, 9)});
  expect_ref_bytes(slice_node(TensorType{Shape({4, 35, 192}), DType::f32}, 1, 1, 70, 2),
                   {distinct_bytes(qkv, 10)});
  const TensorType ids{Shape({8, 65}), DType::i64}; // inputs / targets of a token batch
  expect_ref_bytes(slice_node(TensorType{Shape({8, 64}), DType::i64}, 1, 1, 65, 1),
                   {distinct_bytes(ids, 11)});
  // cat along the last dim (an empty operand among them) and along dim 0.
  const TensorType a{Shape({3, 40, 16}), DType::bf16}, e{Shape({3, 40, 0}), DType::bf16},
      c{Shape({3, 40, 48}), DType::bf16};
  GraphNode cat = op(OpKind::cat, {0, 1, 2}, TensorType{Shape({3, 40, 64}), DType::bf16});
  cat.attrs.push_back({AttrName::dim, AttrValue(int64_t{2})});
  expect_ref_bytes(cat, {distinct_bytes(a, 12), distinct_bytes(e, 13), distinct_bytes(c, 14)});
  GraphNode cat0 = op(OpKind::cat, {0, 1}, TensorType{Shape({6, 40, 16}), DType::bf16});
  cat0.attrs.push_back({AttrName::dim, AttrValue(int64_t{0})});
  expect_ref_bytes(cat0, {distinct_bytes(a, 15), distinct_bytes(a, 16)});
}

// slice's gradient: the input outside the slice, the source inside it.
TEST(CopyLowering, SliceScatterMatchesRef) {
  const TensorType x{Shape({4, 70, 24}), DType::f32};
  struct Case {
    int64_t dim, start, end, step;
    Shape src;
  };
  for (const Case& c : {Case{2, 8, 16, 1, Shape({4, 70, 8})}, Case{1, 3, 70, 3, Shape({4, 23, 24})},
                        Case{0, 0, 4, 1, Shape({4, 70, 24})}, Case{1, 5, 5, 1, Shape({4, 0, 24})},
                        Case{2, 1, 24, 5, Shape({4, 70, 5})}}) {
    GraphNode n = slice_node(x, c.dim, c.start, c.end, c.step);
    n.op = OpKind::slice_scatter;
    n.operands.push_back(ValueRef{1, 0});
    expect_ref_bytes(n, {distinct_bytes(x, 20), distinct_bytes(TensorType{c.src, DType::f32}, 21)});
  }
}

// cat along the last dim of two rows: each operand's long contiguous runs
// are split over the partitions ([2, 3000] as [2, 125, 24]), not 2 partitions.
TEST(CopyLowering, FewRowsOfLongRunsSpreadOverPartitions) {
  const TensorType a{Shape({2, 3000}), DType::f32}, b{Shape({2, 5000}), DType::f32};
  GraphNode cat = op(OpKind::cat, {0, 1}, TensorType{Shape({2, 8000}), DType::f32});
  cat.attrs.push_back({AttrName::dim, AttrValue(int64_t{1})});
  expect_ref_bytes(cat, {distinct_bytes(a, 30), distinct_bytes(b, 31)});
  absl::StatusOr<LoweredOp> low = lower_node(cat, {a, b});
  ASSERT_TRUE(low.ok()) << low.status();
  int32_t widest = 0;
  for (const Instruction& i : low->program.instructions)
    widest = std::max(widest, i.dst.partitions);
  EXPECT_EQ(widest, 125); // 3000 = 125 x 24, 5000 = 125 x 40
}

TEST(CopyLowering, LayoutAliasesAreTheCopiesThatMoveNothing) {
  const TensorType x{Shape({4, 1, 6}), DType::f32};
  EXPECT_TRUE(layout_alias(op(OpKind::reshape, {0}, TensorType{Shape({24}), DType::f32}), {x}));
  // Moving a size-1 dim keeps the order; moving a real one does not.
  EXPECT_TRUE(layout_alias(permute_node(permuted(x, {1, 0, 2}), {1, 0, 2}), {x}));
  EXPECT_FALSE(layout_alias(permute_node(permuted(x, {2, 1, 0}), {2, 1, 0}), {x}));
  // All of dim 1 vs a part of it.
  EXPECT_TRUE(layout_alias(slice_node(x, 1, 0, 1, 1), {x}));
  EXPECT_FALSE(layout_alias(slice_node(TensorType{Shape({4, 1, 3}), DType::f32}, 2, 0, 3, 1), {x}));
  GraphNode e = op(OpKind::expand, {0}, TensorType{Shape({1, 4, 1, 6}), DType::f32});
  EXPECT_TRUE(layout_alias(e, {x}));
  GraphNode grow = op(OpKind::expand, {0}, TensorType{Shape({4, 3, 6}), DType::f32});
  EXPECT_FALSE(layout_alias(grow, {x}));
  EXPECT_FALSE(layout_alias(op(OpKind::exp, {0}, x), {x}));
}

/// How many nc_matmul instructions `node`'s program has (the on-chip
/// transpose path has some, the DMA path none).
int64_t matmuls_of(const GraphNode& node, const std::vector<TensorType>& types) {
  absl::StatusOr<LoweredOp> low = lower_node(node, types);
  EXPECT_TRUE(low.ok()) << low.status();
  if (!low.ok()) return -1;
  return std::count_if(low->program.instructions.begin(), low->program.instructions.end(),
                       [](const Instruction& i) { return i.opcode == Opcode::nc_matmul; });
}

// Minor-dim transposes on chip (TransposeCopy.h): byte planes through the
// Tensor engine, so every bit pattern survives, NaN payloads, infinities
// and -0 included (a value transpose by the identity matmul would spread a
// NaN along the row and turn -0 into +0 on NeuronCore-v2).
TEST(CopyLowering, MinorTransposesRunOnChipBitForBit) {
  // Ragged on both axes, every element size (8 bytes: 64-row tiles).
  for (DType dt : {DType::bf16, DType::f32, DType::i64, DType::boolean}) {
    const TensorType x{Shape({300, 260}), dt};
    auto in = distinct_bytes(x, 40);
    if (dt == DType::boolean) // bool bytes are 0 or 1
      for (size_t i = 0; i < x.bytes(); ++i) in->bytes()[i] = static_cast<std::byte>(i % 3 == 0);
    const GraphNode t = permute_node(permuted(x, {1, 0}), {1, 0});
    expect_ref_bytes(t, {in});
    EXPECT_GT(matmuls_of(t, {x}), 0) << x.to_string();
  }
  // The values an identity matmul would not carry, in the first 128 x 128 block.
  const TensorType f{Shape({256, 384}), DType::f32};
  auto special = distinct_bytes(f, 41);
  float* v = special->data<float>();
  const uint32_t payload_nan = 0x7fc12345u;
  v[0] = std::numeric_limits<float>::infinity();
  v[1] = -std::numeric_limits<float>::infinity();
  v[385] = -0.0f;
  std::memcpy(&v[770], &payload_nan, 4);
  v[1000] = std::numeric_limits<float>::denorm_min();
  const GraphNode ft = permute_node(permuted(f, {1, 0}), {1, 0});
  expect_ref_bytes(ft, {special});
  EXPECT_GT(matmuls_of(ft, {f}), 0);
  // Batched: [4, 130, 200] -> [4, 200, 130] (the batch dim loops).
  const TensorType b{Shape({4, 130, 200}), DType::bf16};
  const GraphNode bt = permute_node(permuted(b, {0, 2, 1}), {0, 2, 1});
  expect_ref_bytes(bt, {distinct_bytes(b, 42)});
  EXPECT_GT(matmuls_of(bt, {b}), 0);
  // GPT-mini's h^T for the MLP weight gradient: on chip, and faster than
  // element-wise DMAs could be (one 64-byte burst per 2-byte element,
  // CostParams::dma_descriptor_bytes, at the 410 B/ns of HBM: 327 us).
  const TensorType h{Shape({2048, 1024}), DType::bf16};
  const GraphNode ht = permute_node(permuted(h, {1, 0}), {1, 0});
  absl::StatusOr<LoweredOp> low = lower_node(ht, {h});
  ASSERT_TRUE(low.ok()) << low.status();
  EXPECT_LT(low->cost.total_ns, 2048.0 * 1024 * 64 / 410 / 4);
  EXPECT_GT(matmuls_of(ht, {h}), 0);
  // Few rows: the element-wise DMAs stay (no identity, no PSUM round trip).
  const TensorType thin{Shape({3, 5}), DType::f32};
  const GraphNode tt = permute_node(permuted(thin, {1, 0}), {1, 0});
  expect_ref_bytes(tt, {distinct_bytes(thin, 43)});
  EXPECT_EQ(matmuls_of(tt, {thin}), 0);
}

TEST(CopyLowering, RefusesByteTypesAndTooFragmentedLayouts) {
  // A bool copy that is not a minor-dim transpose: DMAs, which have no 8-bit type.
  const TensorType mask{Shape({4, 8}), DType::boolean};
  EXPECT_THAT(testing::refusal(slice_node(TensorType{Shape({2, 8}), DType::boolean}, 0, 0, 2, 1),
                               {mask}),
              ::testing::HasSubstr("neuron lowering: slice not tiled: bool[2, 8]: 1-byte "
                                   "elements (the tile IR has no 8-bit type)"));
  // 18 dims of 2 reversed: no two merge, 2^13 loops of 2 chunks.
  Shape s;
  IntList perm;
  for (int64_t d = 0; d < 18; ++d) {
    s.push_back(2);
    perm.push_back(17 - d);
  }
  const TensorType t{s, DType::f32};
  EXPECT_THAT(testing::refusal(permute_node(permuted(t, perm), perm), {t}),
              ::testing::HasSubstr("DMA pieces (more than 4096): too fragmented a layout"));
}

} // namespace
} // namespace mstep::neuron
