// Creation ops: constant-filled tensors, ranges, random tensors (Philox),
// and tensors from host data.
#pragma once

#include <optional>
#include <vector>

#include "mstep/api/Tensor.h"

namespace mstep {

Tensor zeros(const Shape& shape, DType dtype = DType::f32,
             std::optional<Device> device = std::nullopt);
Tensor ones(const Shape& shape, DType dtype = DType::f32,
            std::optional<Device> device = std::nullopt);
/// Without a dtype it follows the scalar: f32 for floating, i64 for
/// integers, bool for bools (as torch.full).
Tensor full(const Shape& shape, Scalar value,
            std::optional<DType> dtype = std::nullopt,
            std::optional<Device> device = std::nullopt);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, Scalar value);

/// [start, end) in steps of `step`. Without a dtype: i64 when all three
/// are integers, f32 otherwise (as torch.arange).
Tensor arange(Scalar end, std::optional<DType> dtype = std::nullopt,
              std::optional<Device> device = std::nullopt);
Tensor arange(Scalar start, Scalar end, Scalar step = 1,
              std::optional<DType> dtype = std::nullopt,
              std::optional<Device> device = std::nullopt);

/// Uniform [0, 1) and standard normal, from the global Philox stream
/// (see manual_seed). Each call reserves fresh numbers.
Tensor rand(const Shape& shape, DType dtype = DType::f32,
            std::optional<Device> device = std::nullopt);
Tensor randn(const Shape& shape, DType dtype = DType::f32,
             std::optional<Device> device = std::nullopt);

/// Copies host data into a new materialized tensor. `data.size()` must
/// equal the shape's element count. The element type picks the dtype
/// unless `dtype` converts it (e.g. floats to bf16).
Tensor from_vector(const std::vector<float>& data, const Shape& shape,
                   std::optional<DType> dtype = std::nullopt,
                   std::optional<Device> device = std::nullopt);
Tensor from_vector(const std::vector<double>& data, const Shape& shape,
                   std::optional<DType> dtype = std::nullopt,
                   std::optional<Device> device = std::nullopt);
Tensor from_vector(const std::vector<int32_t>& data, const Shape& shape,
                   std::optional<DType> dtype = std::nullopt,
                   std::optional<Device> device = std::nullopt);
Tensor from_vector(const std::vector<int64_t>& data, const Shape& shape,
                   std::optional<DType> dtype = std::nullopt,
                   std::optional<Device> device = std::nullopt);
Tensor from_vector(const std::vector<bool>& data, const Shape& shape,
                   std::optional<Device> device = std::nullopt);
/// Copies `type.bytes()` bytes of raw host memory laid out as `type`.
Tensor from_buffer(const void* data, const TensorType& type,
                   std::optional<Device> device = std::nullopt);

}  // namespace mstep
