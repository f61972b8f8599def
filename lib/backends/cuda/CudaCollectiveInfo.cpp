// check_cuda_collective: see CudaCollectiveInfo.h.
#include "lib/backends/cuda/CudaCollectiveInfo.h"

#include "absl/strings/str_cat.h"

namespace mstep::cuda {

const char* cuda_collective_name(OpKind op) {
  switch (op) {
    case OpKind::all_reduce: return "all_reduce";
    case OpKind::all_gather: return "all_gather";
    case OpKind::broadcast: return "broadcast";
    case OpKind::reduce_scatter: return "reduce_scatter";
    default: return nullptr;
  }
}

absl::Status check_cuda_collective(const CudaCollectiveInfo& info, const TensorType& input,
                                   const TensorType& result) {
  const char* name = cuda_collective_name(info.op);
  if (name == nullptr)
    return absl::InvalidArgumentError(absl::StrCat("cuda plan: collective step ", info.origin,
                                                   " is not a collective op"));
  const std::string what = absl::StrCat("cuda: op 'mstep.", name, "' (", info.origin, ", ",
                                        input.to_string(), ")");
  const bool reduces = info.op == OpKind::all_reduce || info.op == OpKind::reduce_scatter;
  if (info.world_size < 1 || info.world_size > (int64_t{1} << 24) || info.reduce_op < 0 ||
      info.reduce_op > 3 ||
      (info.op == OpKind::broadcast && (info.root < 0 || info.root >= info.world_size)) ||
      info.dim < 0 || (info.dim > 0 && static_cast<size_t>(info.dim) >= input.shape.rank()))
    return absl::InvalidArgumentError(
        absl::StrCat("cuda plan: ", what, " has world_size ", info.world_size, ", reduce_op ",
                     info.reduce_op, ", root ", info.root, ", dim ", info.dim));
  if (input.dtype == DType::boolean && reduces)
    return absl::UnimplementedError(absl::StrCat(
        what, " is not lowered for cuda: NCCL does not reduce bool; cast to i32 first"));
  if (input.dtype != result.dtype)
    return absl::InvalidArgumentError(absl::StrCat("cuda plan: ", what, " writes ",
                                                   result.to_string()));
  if (info.op == OpKind::all_gather || info.op == OpKind::reduce_scatter) {
    for (int64_t d = 0; d < info.dim; ++d)
      if (input.shape.dims()[d] != 1)
        return absl::UnimplementedError(absl::StrCat(
            what, " along dim ", info.dim,
            " is not yet lowered for cuda (one NCCL call concatenates whole buffers: only dim 0, "
            "or dims of size 1 before it)"));
  }
  int64_t expected = input.numel();
  if (info.op == OpKind::all_gather) expected *= info.world_size;
  if (info.op == OpKind::reduce_scatter) {
    if (expected % info.world_size != 0)
      return absl::InvalidArgumentError(absl::StrCat("cuda plan: ", what, " does not split into ",
                                                     info.world_size, " ranks"));
    expected /= info.world_size;
  }
  if (result.numel() != expected)
    return absl::InvalidArgumentError(absl::StrCat("cuda plan: ", what, " of world ",
                                                   info.world_size, " writes ", result.to_string(),
                                                   "; NCCL writes ", expected, " elements"));
  return absl::OkStatus();
}

}  // namespace mstep::cuda
