// IndexedLowering.cpp: embedding's index_select (a gathering dma_indirect)
// and its gradient's index_add (a scatter-add in token order) against ref's
// kernels: ragged token tiles, chunked long rows, bf16, i32 ids, repeated
// ids (the same bits as ref), a bad id (ref's error), refusals.
#include <cstring>

#include "LoweringTestUtil.h"

namespace mstep::neuron {
namespace {

using ::testing::HasSubstr;
using namespace mstep::neuron::testing;

std::shared_ptr<host::HostBuffer> ids_buffer(const std::vector<int64_t>& ids, DType dt) {
  auto b =
      std::make_shared<host::HostBuffer>(TensorType{Shape({static_cast<int64_t>(ids.size())}), dt});
  for (size_t i = 0; i < ids.size(); ++i) {
    if (dt == DType::i32)
      b->data<int32_t>()[i] = static_cast<int32_t>(ids[i]);
    else
      b->data<int64_t>()[i] = ids[i];
  }
  return b;
}

std::vector<int64_t> random_ids(int64_t n, int64_t rows, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> u(0, rows - 1);
  std::vector<int64_t> v(n);
  for (int64_t& x : v) x = u(rng);
  return v;
}

GraphNode index_select_node(int64_t tokens, int64_t cols, DType dt) {
  GraphNode n = op(OpKind::index_select, {0, 1}, TensorType{Shape({tokens, cols}), dt});
  n.attrs.push_back({AttrName::dim, AttrValue(int64_t{0})});
  return n;
}

GraphNode index_add_node(int64_t rows, int64_t cols, DType dt) {
  GraphNode n = op(OpKind::index_add, {0, 1, 2}, TensorType{Shape({rows, cols}), dt});
  n.attrs.push_back({AttrName::dim, AttrValue(int64_t{0})});
  return n;
}

void expect_same_bytes(const host::HostBuffer& got, const host::HostBuffer& want) {
  ASSERT_EQ(got.type(), want.type());
  EXPECT_EQ(std::memcmp(got.bytes(), want.bytes(), want.type().bytes()), 0)
      << got.type().to_string() << " differs from ref";
}

void check_index_select(int64_t rows, int64_t cols, int64_t tokens, DType dt, DType id_dt) {
  const GraphNode node = index_select_node(tokens, cols, dt);
  const Buffers in = {
      buffer(TensorType{Shape({rows, cols}), dt}, random_values(rows * cols, -3, 3, 5)),
      ids_buffer(random_ids(tokens, rows, 9), id_dt)};
  absl::StatusOr<Buffers> got = run_lowered_all(node, in), want = run_ref(node, in);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(want.ok()) << want.status();
  expect_same_bytes(*(*got)[0], *(*want)[0]); // a gather moves bits
}

// 300 tokens: token tiles of 128, 128 and 44.
TEST(NeuronEmbeddingLowering, IndexSelectF32RaggedTokenTiles) {
  check_index_select(50, 70, 300, DType::f32, DType::i64);
}
TEST(NeuronEmbeddingLowering, IndexSelectBf16AndI32Ids) {
  check_index_select(65, 32, 129, DType::bf16, DType::i32);
}
// 5000 columns: two chunks of at most 4096.
TEST(NeuronEmbeddingLowering, IndexSelectLongRowsAreChunked) {
  check_index_select(7, 5000, 20, DType::f32, DType::i64);
}

void check_index_add(int64_t rows, int64_t cols, int64_t tokens, DType dt) {
  const GraphNode node = index_add_node(rows, cols, dt);
  // Few rows, many tokens: every row is added to many times.
  const Buffers in = {
      buffer(TensorType{Shape({rows, cols}), dt}, random_values(rows * cols, -1, 1, 3)),
      ids_buffer(random_ids(tokens, rows, 4), DType::i64),
      buffer(TensorType{Shape({tokens, cols}), dt}, random_values(tokens * cols, -100, 100, 6))};
  absl::StatusOr<Buffers> got = run_lowered_all(node, in), want = run_ref(node, in);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(want.ok()) << want.status();
  // The adds in ref's order, each rounded as ref rounds it: the same bits.
  expect_same_bytes(*(*got)[0], *(*want)[0]);
}

TEST(NeuronEmbeddingLowering, IndexAddRepeatedIdsAddInRefsOrder) {
  check_index_add(9, 70, 300, DType::f32);
}
TEST(NeuronEmbeddingLowering, IndexAddBf16) { check_index_add(5, 33, 200, DType::bf16); }
TEST(NeuronEmbeddingLowering, IndexAddLongRowsAreChunked) {
  check_index_add(3, 4500, 10, DType::f32);
}

TEST(NeuronEmbeddingLowering, BadIdIsRefsError) {
  const GraphNode node = index_select_node(4, 8, DType::f32);
  const Buffers in = {buffer(TensorType{Shape({10, 8}), DType::f32}, random_values(80, -1, 1, 1)),
                      ids_buffer({1, 2, 10, 3}, DType::i64)};
  absl::StatusOr<Buffers> got = run_lowered_all(node, in), want = run_ref(node, in);
  ASSERT_FALSE(got.ok());
  ASSERT_FALSE(want.ok());
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("index 10 (element 2"));
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("out of range [0, 10)"));
}

TEST(NeuronEmbeddingLowering, Refusals) {
  const TensorType table{Shape({10, 8}), DType::f32}, ids{Shape({4}), DType::i64};
  GraphNode other_dim = op(OpKind::index_select, {0, 1}, TensorType{Shape({10, 4}), DType::f32});
  other_dim.attrs.push_back({AttrName::dim, AttrValue(int64_t{1})});
  EXPECT_THAT(refusal(other_dim, {table, ids}), HasSubstr("only dim 0"));
  EXPECT_THAT(
      refusal(index_select_node(4, 8, DType::i64), {TensorType{Shape({10, 8}), DType::i64}, ids}),
      HasSubstr("only f32/bf16 rows"));
  EXPECT_THAT(
      refusal(index_select_node(0, 8, DType::f32), {table, TensorType{Shape({0}), DType::i64}}),
      HasSubstr("has no elements"));
  EXPECT_THAT(refusal(index_add_node(10, 8, DType::f32),
                      {table, ids, TensorType{Shape({4, 8}), DType::bf16}}),
              HasSubstr("is not 4 rows of"));
}

} // namespace
} // namespace mstep::neuron
