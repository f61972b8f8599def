func.func @unary(%f: tensor<2x3xf32>, %h: tensor<4xf16>, %i: tensor<2x3xi32>, %b: tensor<2x3xi1>) {
  %0 = mstep.neg %i : tensor<2x3xi32>
  %1 = mstep.abs %f : tensor<2x3xf32>
  %2 = mstep.exp %f : tensor<2x3xf32>
  %3 = mstep.log %h : tensor<4xf16>
  %4 = mstep.log1p %f : tensor<2x3xf32>
  %5 = mstep.sqrt %f : tensor<2x3xf32>
  %6 = mstep.rsqrt %f : tensor<2x3xf32>
  %7 = mstep.sin %f : tensor<2x3xf32>
  %8 = mstep.cos %f : tensor<2x3xf32>
  %9 = mstep.tanh %f : tensor<2x3xf32>
  %10 = mstep.sigmoid %f : tensor<2x3xf32>
  %11 = mstep.relu %i : tensor<2x3xi32>
  %12 = mstep.gelu %f : tensor<2x3xf32>
  %13 = mstep.gelu %f {approximate = #mstep.gelu_approximation<tanh>} : tensor<2x3xf32>
  %14 = mstep.silu %f : tensor<2x3xf32>
  %15 = mstep.erf %f : tensor<2x3xf32>
  %16 = mstep.reciprocal %f : tensor<2x3xf32>
  %17 = mstep.isnan %f : tensor<2x3xf32> -> tensor<2x3xi1>
  %18 = mstep.isfinite %h : tensor<4xf16> -> tensor<4xi1>
  %19 = mstep.logical_not %b : tensor<2x3xi1>
  %20 = mstep.cast %i : tensor<2x3xi32> -> tensor<2x3xf32>
  return
}
