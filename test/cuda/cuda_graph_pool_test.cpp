// A captured graph's static memory from one pool private to it (issue 22
// §1), on the fake driver: CudaBackend::allocate_graph_pool carves every
// buffer from one block of the caching allocator, sized at the call (each
// buffer 256-byte aligned, none overlapping), the block goes back to the
// allocator only with the last buffer, and inside a capture it is refused
// as any allocation is.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "test/cuda/FakeCudaBackendTest.h"

namespace mstep::cuda {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;

class CudaGraphPoolTest : public testing::FakeCudaBackendTest {};

TEST_F(CudaGraphPoolTest, TheGraphsBuffersShareOneBlockThatGoesBackWithTheLast) {
  const std::vector<TensorType> types = {{Shape({3}), DType::f32},       // 12 bytes
                                         {Shape({100, 7}), DType::f64},  // 5600
                                         {Shape({0}), DType::f32},       // none
                                         {Shape({1}), DType::i64}};      // 8
  const CudaAllocatorStats before = backend_->allocator().stats();
  auto allocated = backend_->allocate_graph_pool(types);
  ASSERT_TRUE(allocated.ok()) << allocated.status();
  std::vector<BufferPtr>* pool = &allocated->buffers;
  ASSERT_THAT(*pool, SizeIs(4));
  const CudaAllocatorStats after = backend_->allocator().stats();
  EXPECT_EQ(after.requests, before.requests + 1);  // one block for all
  EXPECT_EQ(after.device_allocations, before.device_allocations + 1);  // one cuMemAlloc
  const size_t bytes = 256 + 5632 + 256;           // each rounded up to 256
  EXPECT_EQ(allocated->bytes, static_cast<int64_t>(bytes));
  EXPECT_EQ(after.bytes_in_use - before.bytes_in_use, CudaAllocator::size_class(bytes));
  const CUdeviceptr base = CudaBackend::device_pointer(*(*pool)[0]);
  EXPECT_EQ(CudaBackend::device_pointer(*(*pool)[1]), base + 256);
  EXPECT_EQ(CudaBackend::device_pointer(*(*pool)[2]), CUdeviceptr{0});  // 0 bytes: no memory
  EXPECT_EQ(CudaBackend::device_pointer(*(*pool)[3]), base + 256 + 5632);
  for (size_t i = 0; i < types.size(); ++i) EXPECT_EQ((*pool)[i]->type(), types[i]);
  // Usable like any buffer.
  const std::vector<int64_t> value = {42};
  ASSERT_TRUE(backend_->copy_in(*(*pool)[3], value.data(), 8).ok());
  std::vector<int64_t> back(1);
  ASSERT_TRUE(backend_->copy_out(*(*pool)[3], back.data(), 8).ok());
  EXPECT_EQ(back, value);

  BufferPtr last = (*pool)[1];
  pool->clear();
  EXPECT_EQ(backend_->allocator().stats().bytes_in_use, after.bytes_in_use);  // still held
  last.reset();
  EXPECT_EQ(backend_->allocator().stats().bytes_in_use, before.bytes_in_use);
  EXPECT_EQ(backend_->allocator().bad_releases(), 0u);
  // The block is back in the cache: the same pool again needs no cuMemAlloc.
  ASSERT_TRUE(backend_->allocate_graph_pool(types).ok());
  EXPECT_EQ(backend_->allocator().stats().device_allocations, after.device_allocations);
}

TEST_F(CudaGraphPoolTest, ANoBufferPoolHoldsNoMemory) {
  const CudaAllocatorStats before = backend_->allocator().stats();
  auto empty = backend_->allocate_graph_pool({});
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_THAT(empty->buffers, SizeIs(0));
  EXPECT_EQ(empty->bytes, 0);
  EXPECT_EQ(backend_->allocator().stats().requests, before.requests);
  empty->buffers.clear();
  EXPECT_EQ(backend_->allocator().bad_releases(), 0u);
}

TEST_F(CudaGraphPoolTest, AGraphRecordedOverPoolBuffersKeepsThePoolUntilBothAreGone) {
  auto allocated = backend_->allocate_graph_pool({{TensorType{Shape({4}), DType::f32},
                                                   TensorType{Shape({4}), DType::f32}}});
  ASSERT_TRUE(allocated.ok()) << allocated.status();
  const size_t in_use = backend_->allocator().stats().bytes_in_use;
  BufferPtr src = allocated->buffers[0], dst = allocated->buffers[1];
  allocated->buffers.clear();
  auto graph = backend_->record_graph([&] { return backend_->copy_device(src, dst); });
  ASSERT_TRUE(graph.ok()) << graph.status();
  const std::vector<float> value = {1, 2, 3, 4};
  ASSERT_TRUE(backend_->copy_in(*src, value.data(), 16).ok());
  ASSERT_TRUE((*graph)->launch().ok());
  std::vector<float> back(4);
  ASSERT_TRUE(backend_->copy_out(*dst, back.data(), 16).ok());
  EXPECT_EQ(back, value);
  src.reset();
  dst.reset();
  graph->reset();
  EXPECT_EQ(backend_->allocator().stats().bytes_in_use, in_use - CudaAllocator::size_class(512));
  EXPECT_EQ(backend_->allocator().bad_releases(), 0u);
}

TEST_F(CudaGraphPoolTest, APoolInsideACaptureIsRefused) {
  absl::Status inside;
  auto graph = backend_->record_graph([&] {
    inside = backend_->allocate_graph_pool({{TensorType{Shape({4}), DType::f32}}}).status();
    return absl::OkStatus();
  });
  EXPECT_FALSE(inside.ok());
  EXPECT_THAT(inside.message(), HasSubstr("pool for a graph's static buffers while a CUDA graph is "
                                          "being captured"));
  EXPECT_TRUE(backend_->health().ok());
}

}  // namespace
}  // namespace mstep::cuda
