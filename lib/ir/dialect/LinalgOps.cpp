// Verifiers of matmul, conv2d, pooling and their gradients.
#include "lib/ir/dialect/Verification.h"
#include "mstep/ir/dialect/MstepOps.h"
#include "llvm/Support/CheckedArithmetic.h"

namespace mstep::dialect {

using llvm::ArrayRef;
using llvm::LogicalResult;
using mlir::failure;
using mlir::success;
using rules::shapeString;

namespace {

LogicalResult require4d(mlir::Operation* op, llvm::StringRef name, mlir::Value value) {
  if (rankOf(value) == 4) return success();
  return op->emitOpError() << name << " " << value.getType() << " must be 4-D [N, C, H, W]";
}

LogicalResult checkResult(mlir::Operation* op, ArrayRef<int64_t> expected, llvm::StringRef what) {
  ArrayRef<int64_t> got = dimsOf(op->getResult(0));
  if (got == expected) return success();
  return op->emitOpError() << "result shape " << shapeString(got) << " must be "
                           << shapeString(expected) << " (" << what << ")";
}

/// The NCHW shape of conv2d(input, weight), or failure with a diagnostic.
/// `input` and `weight` are the forward's shapes (the gradients pass the
/// shapes they reconstruct).
mlir::FailureOr<rules::Dims> convOutputShape(mlir::Operation* op, ArrayRef<int64_t> input,
                                             ArrayRef<int64_t> weight, ArrayRef<int64_t> stride,
                                             ArrayRef<int64_t> padding, ArrayRef<int64_t> dilation,
                                             int64_t groups) {
  const int64_t channels = input[1], outChannels = weight[0];
  if (channels % groups != 0 || outChannels % groups != 0)
    return op->emitOpError() << "groups = " << groups << " must divide the input's " << channels
                             << " channels and the weight's " << outChannels << " output channels";
  if (weight[1] != channels / groups) {
    auto diag = op->emitOpError() << "weight " << shapeString(weight) << " expects ";
    if (std::optional<int64_t> expected = llvm::checkedMul(weight[1], groups))
      diag << *expected;
    else
      diag << "more than 2^63";
    return diag << " input channels (dim 1 x groups = " << groups << ") but the input "
                << shapeString(input) << " has " << channels;
  }
  if (weight[2] < 1 || weight[3] < 1)
    return op->emitOpError() << "weight " << shapeString(weight)
                             << " has an empty kernel; its spatial dims must be >= 1";
  rules::Dims out{input[0], outChannels, 0, 0};
  for (int i = 0; i < 2; ++i) {
    std::optional<int64_t> size =
        rules::convOutputSize(input[2 + i], weight[2 + i], stride[i], padding[i], dilation[i]);
    if (!size)
      return op->emitOpError() << "the window arithmetic of kernel " << weight[2] << "x"
                               << weight[3] << " (stride " << shapeString(stride) << ", padding "
                               << shapeString(padding) << ", dilation " << shapeString(dilation)
                               << ") on input " << shapeString(input) << " overflows int64";
    out[2 + i] = *size;
    if (out[2 + i] < 1)
      return op->emitOpError() << "kernel " << weight[2] << "x" << weight[3] << " with dilation "
                               << shapeString(dilation) << " does not fit the input "
                               << shapeString(input) << " padded by " << shapeString(padding);
  }
  return out;
}

/// The NCHW shape of pooling `input`, or failure with a diagnostic.
mlir::FailureOr<rules::Dims> poolOutputShape(mlir::Operation* op, ArrayRef<int64_t> input,
                                             ArrayRef<int64_t> kernel, ArrayRef<int64_t> stride,
                                             ArrayRef<int64_t> padding, ArrayRef<int64_t> dilation,
                                             bool ceilMode) {
  rules::Dims out{input[0], input[1], 0, 0};
  for (int i = 0; i < 2; ++i) {
    if (padding[i] > kernel[i] / 2)
      return op->emitOpError() << "padding " << shapeString(padding)
                               << " must be at most half the kernel " << shapeString(kernel);
    std::optional<int64_t> size = rules::poolOutputSize(input[2 + i], kernel[i], stride[i],
                                                        padding[i], dilation[i], ceilMode);
    if (!size)
      return op->emitOpError() << "the window arithmetic of kernel " << shapeString(kernel)
                               << " (stride " << shapeString(stride) << ", padding "
                               << shapeString(padding) << ", dilation " << shapeString(dilation)
                               << ") on input " << shapeString(input) << " overflows int64";
    out[2 + i] = *size;
    if (out[2 + i] < 1)
      return op->emitOpError() << "window " << shapeString(kernel) << " (dilation "
                               << shapeString(dilation) << ") does not fit the input "
                               << shapeString(input) << " padded by " << shapeString(padding);
  }
  return out;
}

constexpr int64_t kNoDilation[] = {1, 1};

}  // namespace

LogicalResult MatmulOp::verify() {
  ArrayRef<int64_t> a = dimsOf(getLhs()), b = dimsOf(getRhs());
  if (a.size() < 2 || b.size() < 2)
    return emitOpError() << "operands " << getLhs().getType() << " and " << getRhs().getType()
                         << " must both have rank >= 2 ([..., n, k] x [..., k, p])";
  if (a.back() != b[b.size() - 2])
    return emitOpError() << "contracted dims differ: lhs " << shapeString(a)
                         << " has k = " << a.back() << " (last dim), rhs " << shapeString(b)
                         << " has " << b[b.size() - 2] << " (dim -2)";
  int64_t badDim = 0;
  std::optional<rules::Dims> batch =
      rules::broadcastShapes(a.drop_back(2), b.drop_back(2), &badDim);
  if (!batch)
    return emitOpError() << "batch dims of lhs " << shapeString(a) << " and rhs " << shapeString(b)
                         << " do not broadcast (batch dim " << badDim << ")";
  batch->push_back(a[a.size() - 2]);
  batch->push_back(b.back());
  return checkResult(*this, *batch, "broadcast batch dims, then n and p");
}

LogicalResult Conv2dOp::verify() {
  if (failed(require4d(*this, "input", getInput())) ||
      failed(require4d(*this, "weight", getWeight())))
    return failure();
  if (getBias() && dimsOf(getBias()) != ArrayRef<int64_t>{dimsOf(getWeight())[0]})
    return emitOpError() << "bias " << getBias().getType() << " must be 1-D of size "
                         << dimsOf(getWeight())[0] << " (the weight's output channels)";
  auto out = convOutputShape(*this, dimsOf(getInput()), dimsOf(getWeight()), getStride(),
                             getPadding(), getDilation(), getGroups());
  if (failed(out)) return failure();
  return checkResult(*this, *out, "the convolution's output");
}

LogicalResult MaxPool2dOp::verify() {
  if (failed(require4d(*this, "input", getInput()))) return failure();
  auto out = poolOutputShape(*this, dimsOf(getInput()), getKernel(), getStride(), getPadding(),
                             getDilation(), getCeilMode());
  if (failed(out)) return failure();
  return checkResult(*this, *out, "the pooling output");
}

LogicalResult AvgPool2dOp::verify() {
  if (failed(require4d(*this, "input", getInput()))) return failure();
  auto out = poolOutputShape(*this, dimsOf(getInput()), getKernel(), getStride(), getPadding(),
                             kNoDilation, getCeilMode());
  if (failed(out)) return failure();
  return checkResult(*this, *out, "the pooling output");
}

namespace {
/// The conv gradients: the forward conv2d(input, weight) must produce
/// grad_output's shape.
LogicalResult verifyConvGrad(mlir::Operation* op, ArrayRef<int64_t> input, ArrayRef<int64_t> weight,
                             mlir::Value gradOutput, ArrayRef<int64_t> stride,
                             ArrayRef<int64_t> padding, ArrayRef<int64_t> dilation,
                             int64_t groups) {
  if (input.size() != 4 || weight.size() != 4 || rankOf(gradOutput) != 4)
    return op->emitOpError() << "input " << shapeString(input) << ", weight " << shapeString(weight)
                             << " and grad_output " << shapeString(dimsOf(gradOutput))
                             << " must all be 4-D";
  auto out = convOutputShape(op, input, weight, stride, padding, dilation, groups);
  if (failed(out)) return failure();
  if (ArrayRef<int64_t>(*out) != dimsOf(gradOutput))
    return op->emitOpError() << "grad_output " << gradOutput.getType() << " must have shape "
                             << shapeString(*out) << ", the output of conv2d(input "
                             << shapeString(input) << ", weight " << shapeString(weight) << ")";
  return success();
}

LogicalResult verifyPoolGrad(mlir::Operation* op, mlir::Value gradOutput, ArrayRef<int64_t> input,
                             ArrayRef<int64_t> kernel, ArrayRef<int64_t> stride,
                             ArrayRef<int64_t> padding, ArrayRef<int64_t> dilation, bool ceilMode) {
  if (input.size() != 4 || rankOf(gradOutput) != 4)
    return op->emitOpError() << "input " << shapeString(input) << " and grad_output "
                             << gradOutput.getType() << " must be 4-D";
  auto out = poolOutputShape(op, input, kernel, stride, padding, dilation, ceilMode);
  if (failed(out)) return failure();
  if (ArrayRef<int64_t>(*out) != dimsOf(gradOutput))
    return op->emitOpError() << "grad_output " << gradOutput.getType() << " must have shape "
                             << shapeString(*out) << ", the pooling output of input "
                             << shapeString(input);
  return success();
}
}  // namespace

LogicalResult Conv2dInputGradOp::verify() {
  return verifyConvGrad(*this, getType().getShape(), dimsOf(getWeight()), getGradOutput(),
                        getStride(), getPadding(), getDilation(), getGroups());
}

LogicalResult Conv2dWeightGradOp::verify() {
  return verifyConvGrad(*this, dimsOf(getInput()), getType().getShape(), getGradOutput(),
                        getStride(), getPadding(), getDilation(), getGroups());
}

LogicalResult MaxPool2dGradOp::verify() {
  return verifyPoolGrad(*this, getGradOutput(), dimsOf(getInput()), getKernel(), getStride(),
                        getPadding(), getDilation(), getCeilMode());
}

LogicalResult AvgPool2dGradOp::verify() {
  return verifyPoolGrad(*this, getGradOutput(), getType().getShape(), getKernel(), getStride(),
                        getPadding(), kNoDilation, getCeilMode());
}

void MstepDialect::registerLinalgOps() {
  addOperations<
#define GET_OP_LIST
#include "mstep/ir/dialect/LinalgOps.cpp.inc"
      >();
}

}  // namespace mstep::dialect

#define GET_OP_CLASSES
#include "mstep/ir/dialect/LinalgOps.cpp.inc"
