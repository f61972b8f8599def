// The steps of the GPU check's compiled cases (cuda_codegen_cases.cpp
// writes them with inputs and expected outputs; cuda_codegen_cases_test
// runs their loop nests on the host against those files).
#pragma once

#include <string>

#include "absl/strings/str_replace.h"

namespace mstep::cuda::testing {

// relu(a * b + c), c a scalar broadcast over 1,000,003 elements: 3907
// blocks of 256, the last one partial (1,000,003 = 3906 * 256 + 67).
inline constexpr const char* kFmaRelu = R"(
func.func @step(%a: tensor<1000003xf32>, %b: tensor<1000003xf32>, %c: tensor<f32>)
    -> tensor<1000003xf32> {
  %r = mstep.fusion ins(%a, %b, %c : tensor<1000003xf32>, tensor<1000003xf32>, tensor<f32>)
      -> tensor<1000003xf32> {
  ^bb0(%x: tensor<1000003xf32>, %y: tensor<1000003xf32>, %z: tensor<f32>):
    %m = mstep.mul %x, %y : tensor<1000003xf32>, tensor<1000003xf32> -> tensor<1000003xf32>
    %s = mstep.add %m, %z : tensor<1000003xf32>, tensor<f32> -> tensor<1000003xf32>
    %q = mstep.relu %s : tensor<1000003xf32>
    mstep.yield %q : tensor<1000003xf32>
  }
  return %r : tensor<1000003xf32>
}
)";

// The same over 2^26 + 3 = 67,108,867 elements (805 MB moved: past any
// L2), for the HBM bandwidth figure; its inputs are constants.
inline const std::string& fma_relu_hbm_step() {
  static const std::string text = absl::StrReplaceAll(kFmaRelu, {{"1000003", "67108867"}});
  return text;
}

// Three unfused ops, so three launches through intermediate buffers:
// tanh(exp(x) * y), with exp(x) also returned. 129 * 257 = 33153 elements
// (a partial last block). exp and tanh come from libdevice.
inline constexpr const char* kExpTanh = R"(
func.func @step(%x: tensor<129x257xf32>, %y: tensor<129x257xf32>)
    -> (tensor<129x257xf32>, tensor<129x257xf32>) {
  %0 = mstep.exp %x : tensor<129x257xf32>
  %1 = mstep.mul %0, %y : tensor<129x257xf32>, tensor<129x257xf32> -> tensor<129x257xf32>
  %2 = mstep.tanh %1 : tensor<129x257xf32>
  return %2, %0 : tensor<129x257xf32>, tensor<129x257xf32>
}
)";

// A row sum (keepdim): one thread per row, 300 rows of 33.
inline constexpr const char* kRowSum = R"(
func.func @step(%x: tensor<300x33xf32>) -> tensor<300x1xf32> {
  %s = mstep.sum %x {dims = array<i64: 1>, keepdim = true} : tensor<300x33xf32> -> tensor<300x1xf32>
  return %s : tensor<300x1xf32>
}
)";

// A column sum (the bias gradient's form): one thread per column, 1000
// columns (4 blocks, the last partial) of 77 rows.
inline constexpr const char* kColumnSum = R"(
func.func @step(%x: tensor<77x1000xf32>) -> tensor<1000xf32> {
  %s = mstep.sum %x {dims = array<i64: 0>, keepdim = false} : tensor<77x1000xf32> -> tensor<1000xf32>
  return %s : tensor<1000xf32>
}
)";

// softmax and log_softmax over rows of 37 (CudaOpLoops.h: one lane per
// row, statistics in f64), 300 rows: two blocks, the second partial.
inline constexpr const char* kSoftmaxRows = R"(
func.func @step(%x: tensor<300x37xf32>) -> (tensor<300x37xf32>, tensor<300x37xf32>) {
  %p = mstep.softmax %x {dim = 1 : i64} : tensor<300x37xf32>
  %l = mstep.log_softmax %x {dim = 1 : i64} : tensor<300x37xf32>
  return %p, %l : tensor<300x37xf32>, tensor<300x37xf32>
}
)";

// layer_norm (weight, bias) and rms_norm (weight) over rows of 96.
inline constexpr const char* kNorms = R"(
func.func @step(%x: tensor<40x96xf32>, %w: tensor<96xf32>, %b: tensor<96xf32>)
    -> (tensor<40x96xf32>, tensor<40x96xf32>) {
  %y = mstep.layer_norm %x weight(%w : tensor<96xf32>) bias(%b : tensor<96xf32>) {eps = 1.000000e-05 : f64, normalized_ndim = 1 : i64} : tensor<40x96xf32>
  %z = mstep.rms_norm %x weight(%w : tensor<96xf32>) {eps = 1.000000e-06 : f64, normalized_ndim = 1 : i64} : tensor<40x96xf32>
  return %y, %z : tensor<40x96xf32>, tensor<40x96xf32>
}
)";

// Copy kernels: permute (2, 0, 1), a strided slice and its slice_scatter,
// a reshape. Exact: only elements move.
inline constexpr const char* kShapeCopies = R"(
func.func @step(%x: tensor<8x30x50xf32>, %s: tensor<8x9x50xf32>)
    -> (tensor<50x8x30xf32>, tensor<8x9x50xf32>, tensor<8x30x50xf32>, tensor<240x50xf32>) {
  %p = mstep.permute %x {perm = array<i64: 2, 0, 1>} : tensor<8x30x50xf32> -> tensor<50x8x30xf32>
  %c = mstep.slice %x {dim = 1 : i64, end = 29 : i64, start = 2 : i64, step = 3 : i64} : tensor<8x30x50xf32> -> tensor<8x9x50xf32>
  %u = mstep.slice_scatter %x, %s {dim = 1 : i64, end = 29 : i64, start = 2 : i64, step = 3 : i64} : tensor<8x30x50xf32>, tensor<8x9x50xf32>
  %r = mstep.reshape %x : tensor<8x30x50xf32> -> tensor<240x50xf32>
  return %p, %c, %u, %r : tensor<50x8x30xf32>, tensor<8x9x50xf32>, tensor<8x30x50xf32>, tensor<240x50xf32>
}
)";

// dropout with ref's Philox mask (seed and offset in an i64 state).
inline constexpr const char* kDropout = R"(
func.func @step(%x: tensor<33x70xf32>, %rng: tensor<2xi64>) -> tensor<33x70xf32> {
  %y = mstep.dropout %x, %rng {offset = 16 : i64, p = 2.500000e-01 : f64} : tensor<33x70xf32>
  return %y : tensor<33x70xf32>
}
)";

// The loss and the embedding: log_softmax, nll_loss (mean, none),
// index_select of token rows and index_add of their gradients (repeated
// tokens add in index order, one lane per column). The same i64 ids are
// the targets and the tokens (no ignored target: ref rejects it as a row
// index).
inline constexpr const char* kLossEmbedding = R"(
func.func @step(%z: tensor<40x10xf32>, %t: tensor<40xi64>, %table: tensor<50x24xf32>, %g: tensor<40x24xf32>)
    -> (tensor<f32>, tensor<40xf32>, tensor<40x24xf32>, tensor<50x24xf32>) {
  %lp = mstep.log_softmax %z {dim = 1 : i64} : tensor<40x10xf32>
  %m = mstep.nll_loss %lp, %t {ignore_index = -100 : i64, reduction = #mstep.reduction<mean>} : tensor<40x10xf32>, tensor<40xi64> -> tensor<f32>
  %n = mstep.nll_loss %lp, %t {ignore_index = -100 : i64, reduction = #mstep.reduction<none>} : tensor<40x10xf32>, tensor<40xi64> -> tensor<40xf32>
  %e = mstep.index_select %table, %t {dim = 0 : i64} : tensor<50x24xf32>, tensor<40xi64> -> tensor<40x24xf32>
  %d = mstep.index_add %table, %t, %g {dim = 0 : i64} : tensor<50x24xf32>, tensor<40xi64>, tensor<40x24xf32>
  return %m, %n, %e, %d : tensor<f32>, tensor<40xf32>, tensor<40x24xf32>, tensor<50x24xf32>
}
)";

// The optimizer update: Adadelta over two parameters with
// clip_grad_norm_ (the norms in one lane each, then the total), f64
// hyperparameters and i64 step counters in, the f32 results out.
inline constexpr const char* kClippedAdadelta = R"(
func.func @step(%w: tensor<30x20xf32>, %b: tensor<300xf32>, %gw: tensor<30x20xf32>, %gb: tensor<300xf32>,
                %s0: tensor<30x20xf32>, %s1: tensor<300xf32>, %s2: tensor<30x20xf32>, %s3: tensor<300xf32>,
                %t0: tensor<i64>, %t1: tensor<i64>, %lr: tensor<f64>, %rho: tensor<f64>, %eps: tensor<f64>)
    -> (tensor<30x20xf32>, tensor<300xf32>, tensor<30x20xf32>, tensor<300xf32>, tensor<30x20xf32>, tensor<300xf32>, tensor<f32>) {
  %p:2, %s:4, %t:2, %n = mstep.multi_tensor_update <adadelta> params(%w, %b : tensor<30x20xf32>, tensor<300xf32>) grads(%gw, %gb : tensor<30x20xf32>, tensor<300xf32>) states(%s0, %s1, %s2, %s3 : tensor<30x20xf32>, tensor<300xf32>, tensor<30x20xf32>, tensor<300xf32>) steps(%t0, %t1) lr(%lr) rho(%rho) eps(%eps) {max_grad_norm = 1.0 : f64} -> total_grad_norm tensor<f32>
  return %p#0, %p#1, %s#0, %s#1, %s#2, %s#3, %n : tensor<30x20xf32>, tensor<300xf32>, tensor<30x20xf32>, tensor<300xf32>, tensor<30x20xf32>, tensor<300xf32>, tensor<f32>
}
)";

} // namespace mstep::cuda::testing
