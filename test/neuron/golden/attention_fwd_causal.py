# NKI kernel 'attention_fwd_causal': 40 instructions, written by mstep from its tile
# program (lib/backends/neuron, issue 19): one statement per tile instruction, in
# program order; HBM tensors are the (flat) arguments, outputs are dst= operands.
# Not compiled against the Neuron SDK: NKI 0.2+ style, checked only to be valid
# Python. The NKI compiler inserts its own synchronisation; each statement's
# comment gives the tile program's semaphore waits (s<id> >= n) and signals.
import math

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def attention_fwd_causal(q, k, v, out):
    # q: HBM bf16 [6400]
    # k: HBM bf16 [5120]
    # v: HBM bf16 [5120]
    # out: HBM bf16 [6400]
    sb_ones = nl.ndarray((nl.par_dim(128), 128), dtype=nl.bfloat16, buffer=nl.sbuf)  # bytes [0, 256), live [0, end)
    sb_identity = nl.ndarray((nl.par_dim(128), 128), dtype=nl.bfloat16, buffer=nl.sbuf)  # bytes [256, 512), live [0, end)
    sb_qT0 = nl.ndarray((nl.par_dim(128), 200), dtype=nl.bfloat16, buffer=nl.sbuf)  # bytes [512, 912), live [2, end)
    sb_kT0 = nl.ndarray((nl.par_dim(128), 160), dtype=nl.bfloat16, buffer=nl.sbuf)  # bytes [960, 1280), live [2, end)
    sb_v0 = nl.ndarray((nl.par_dim(128), 64), dtype=nl.bfloat16, buffer=nl.sbuf)  # bytes [1280, 1408), live [2, end)
    sb_q_rows0 = nl.ndarray((nl.par_dim(128), 64), dtype=nl.bfloat16, buffer=nl.sbuf)  # bytes [1408, 1536), live [2, end)
    sb_k_rows0 = nl.ndarray((nl.par_dim(128), 64), dtype=nl.bfloat16, buffer=nl.sbuf)  # bytes [1536, 1664), live [2, end)
    ps_scores0 = nl.ndarray((nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)  # bytes [0, 2048), live [2, end)
    sb_s0 = nl.ndarray((nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.sbuf)  # bytes [1664, 3712), live [2, end)
    sb_p0 = nl.ndarray((nl.par_dim(128), 512), dtype=nl.bfloat16, buffer=nl.sbuf)  # bytes [3712, 4736), live [2, end)
    sb_neg_m0 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [4736, 4740), live [2, end)
    sb_chunk_neg_m0 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [4800, 4804), live [2, end)
    sb_rowsum0 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [4864, 4868), live [2, end)
    sb_alpha0 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [4928, 4932), live [2, end)
    sb_l0 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [4992, 4996), live [2, end)
    ps_scores1 = nl.ndarray((nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)  # bytes [2048, 4096), live [2, end)
    sb_s1 = nl.ndarray((nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.sbuf)  # bytes [5056, 7104), live [2, end)
    sb_p1 = nl.ndarray((nl.par_dim(128), 512), dtype=nl.bfloat16, buffer=nl.sbuf)  # bytes [7104, 8128), live [2, end)
    sb_neg_m1 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [8128, 8132), live [2, end)
    sb_chunk_neg_m1 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [8192, 8196), live [2, end)
    sb_rowsum1 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [8256, 8260), live [2, end)
    sb_alpha1 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [8320, 8324), live [2, end)
    sb_l1 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [8384, 8388), live [2, end)
    ps_scores2 = nl.ndarray((nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)  # bytes [4096, 6144), live [2, end)
    sb_s2 = nl.ndarray((nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.sbuf)  # bytes [8448, 10496), live [2, end)
    sb_p2 = nl.ndarray((nl.par_dim(128), 256), dtype=nl.float32, buffer=nl.sbuf)  # bytes [10496, 11520), live [2, end)
    sb_neg_m2 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [11520, 11524), live [2, end)
    sb_chunk_neg_m2 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [11584, 11588), live [2, end)
    sb_rowsum2 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [11648, 11652), live [2, end)
    sb_alpha2 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [11712, 11716), live [2, end)
    sb_l2 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [11776, 11780), live [2, end)
    ps_pT_psum0 = nl.ndarray((nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)  # bytes [6144, 8192), live [2, end)
    ps_pv0 = nl.ndarray((nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)  # bytes [8192, 10240), live [2, end)
    sb_pT0 = nl.ndarray((nl.par_dim(128), 512), dtype=nl.bfloat16, buffer=nl.sbuf)  # bytes [11840, 12864), live [2, end)
    ps_pT_psum1 = nl.ndarray((nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)  # bytes [10240, 12288), live [2, end)
    ps_pv1 = nl.ndarray((nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)  # bytes [12288, 14336), live [2, end)
    sb_pT1 = nl.ndarray((nl.par_dim(128), 512), dtype=nl.bfloat16, buffer=nl.sbuf)  # bytes [12864, 13888), live [2, end)
    sb_o0 = nl.ndarray((nl.par_dim(128), 32), dtype=nl.float32, buffer=nl.sbuf)  # bytes [13888, 14016), live [2, end)
    sb_o1 = nl.ndarray((nl.par_dim(128), 32), dtype=nl.float32, buffer=nl.sbuf)  # bytes [14016, 14144), live [2, end)
    sb_o_out0 = nl.ndarray((nl.par_dim(128), 32), dtype=nl.bfloat16, buffer=nl.sbuf)  # bytes [14144, 14208), live [2, end)
    sb_o_out1 = nl.ndarray((nl.par_dim(128), 32), dtype=nl.bfloat16, buffer=nl.sbuf)  # bytes [14208, 14272), live [2, end)
    ps_qkT_psum = nl.ndarray((nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)  # bytes [14336, 16384), live [2, end)
    sb_causal_mask = nl.ndarray((nl.par_dim(128), 1152), dtype=nl.bfloat16, buffer=nl.sbuf)  # bytes [14272, 16576), live [2, end)
    nisa.iota(dst=sb_ones[0:128, 0:128], pattern=[[0, 128]], offset=1, channel_multiplier=0)  # #0 GpSimd; signal s3
    nisa.affine_select(dst=sb_identity[0:128, 0:128], pattern=[[-1, 128]], offset=0, channel_multiplier=1, on_true_tile=sb_ones[0:128, 0:128], on_false_value=0.0, cmp_op=nl.equal)  # #1 GpSimd; signal s3
    nisa.iota(dst=sb_causal_mask[0:128, 0:1152], pattern=[[0, 1152]], offset=0, channel_multiplier=0)  # #2 GpSimd; signal s3
    nisa.affine_select(dst=sb_causal_mask[0:128, 0:1152], pattern=[[-1, 1152]], offset=512, channel_multiplier=1, on_true_tile=sb_causal_mask[0:128, 0:1152], on_false_value=-1.00000002e+30, cmp_op=nl.greater_equal)  # #3 GpSimd; signal s3
    nisa.dma_copy(dst=sb_q_rows0[0:128, 0:32], src=q.ap(pattern=[[32, 128], [1, 32]], offset=0))  # #4 Sync dma0; signal s4
    nisa.dma_copy(dst=sb_q_rows0[0:72, 32:64], src=q.ap(pattern=[[32, 72], [1, 32]], offset=4096))  # #5 Sync dma1; signal s5
    nisa.dma_copy(dst=sb_k_rows0[0:128, 0:32], src=k.ap(pattern=[[32, 128], [1, 32]], offset=0))  # #6 Sync dma2; signal s6
    nisa.dma_copy(dst=sb_k_rows0[0:32, 32:64], src=k.ap(pattern=[[32, 32], [1, 32]], offset=4096))  # #7 Sync dma3; signal s7
    nisa.dma_copy(dst=sb_v0[0:128, 0:32], src=v.ap(pattern=[[32, 128], [1, 32]], offset=0))  # #8 Sync dma4; signal s8
    nisa.dma_copy(dst=sb_v0[0:32, 32:64], src=v.ap(pattern=[[32, 32], [1, 32]], offset=4096))  # #9 Sync dma5; signal s9
    nisa.nc_matmul(dst=ps_qkT_psum[0:32, 0:128], stationary=sb_q_rows0[0:128, 0:32], moving=sb_identity[0:128, 0:128], accumulate=False)  # #10 Tensor; wait s3>=2 s4>=1 s5>=1; signal s0
    nisa.nc_matmul(dst=ps_qkT_psum[0:32, 128:200], stationary=sb_q_rows0[0:72, 32:64], moving=sb_identity[0:72, 0:72], accumulate=False)  # #11 Tensor; wait s3>=2 s4>=1 s5>=1; signal s0
    nisa.tensor_copy(dst=sb_qT0[0:32, 0:200], src=ps_qkT_psum[0:32, 0:200], engine=nisa.engine.scalar)  # #12 Scalar; wait s0>=2; signal s2
    nisa.nc_matmul(dst=ps_qkT_psum[0:32, 0:128], stationary=sb_k_rows0[0:128, 0:32], moving=sb_identity[0:128, 0:128], accumulate=False)  # #13 Tensor; wait s2>=1 s3>=2 s6>=1 s7>=1; signal s0
    nisa.nc_matmul(dst=ps_qkT_psum[0:32, 128:160], stationary=sb_k_rows0[0:32, 32:64], moving=sb_identity[0:32, 0:32], accumulate=False)  # #14 Tensor; wait s3>=2 s6>=1 s7>=1; signal s0
    nisa.tensor_copy(dst=sb_kT0[0:32, 0:160], src=ps_qkT_psum[0:32, 0:160], engine=nisa.engine.scalar)  # #15 Scalar; wait s0>=4; signal s2
    nisa.nc_matmul(dst=ps_scores0[0:128, 0:128], stationary=sb_qT0[0:32, 0:128], moving=sb_kT0[0:32, 0:128], accumulate=False)  # #16 Tensor; wait s2>=2; signal s0
    nisa.nc_matmul(dst=ps_scores0[0:128, 0:128], stationary=sb_identity[0:128, 0:128], moving=sb_causal_mask[0:128, 512:640], accumulate=True)  # #17 Tensor; wait s3>=4; signal s0
    nisa.tensor_reduce(dst=sb_chunk_neg_m0[0:128, 0:1], op=nl.maximum, data=ps_scores0[0:128, 0:128], axis=(1,))  # #18 Vector; wait s0>=6; signal s1
    nisa.tensor_scalar(dst=sb_neg_m0[0:128, 0:1], data=sb_chunk_neg_m0[0:128, 0:1], op0=nl.multiply, operand0=-0.125, engine=nisa.engine.vector)  # #19 Vector; signal s1
    nisa.activation(dst=sb_p0[0:128, 0:128], op=nl.exp, data=ps_scores0[0:128, 0:128], bias=sb_neg_m0[0:128, 0:1], scale=0.125, reduce_op=nl.add, reduce_res=sb_l0[0:128, 0:1], reduce_cmd=nisa.reduce_cmd.reset_reduce)  # #20 Scalar; wait s0>=6 s1>=2; signal s2
    nisa.nc_matmul(dst=ps_scores1[0:72, 0:160], stationary=sb_qT0[0:32, 128:200], moving=sb_kT0[0:32, 0:160], accumulate=False)  # #21 Tensor; wait s2>=2; signal s0
    nisa.nc_matmul(dst=ps_scores1[0:72, 0:160], stationary=sb_identity[0:72, 0:72], moving=sb_causal_mask[0:72, 384:544], accumulate=True)  # #22 Tensor; wait s3>=4; signal s0
    nisa.nc_matmul(dst=ps_pT_psum0[0:128, 0:128], stationary=sb_p0[0:128, 0:128], moving=sb_identity[0:128, 0:128], accumulate=False)  # #23 Tensor; wait s2>=3 s3>=2; signal s0
    nisa.tensor_copy(dst=sb_pT0[0:128, 0:128], src=ps_pT_psum0[0:128, 0:128], engine=nisa.engine.scalar)  # #24 Scalar; wait s0>=9; signal s2
    nisa.nc_matmul(dst=ps_pv0[0:128, 0:32], stationary=sb_pT0[0:128, 0:128], moving=sb_v0[0:128, 0:32], accumulate=False)  # #25 Tensor; wait s2>=4 s8>=1 s9>=1; signal s0
    nisa.tensor_reduce(dst=sb_chunk_neg_m1[0:72, 0:1], op=nl.maximum, data=ps_scores1[0:72, 0:160], axis=(1,))  # #26 Vector; wait s0>=8; signal s1
    nisa.tensor_scalar(dst=sb_neg_m1[0:72, 0:1], data=sb_chunk_neg_m1[0:72, 0:1], op0=nl.multiply, operand0=-0.125, engine=nisa.engine.vector)  # #27 Vector; signal s1
    nisa.activation(dst=sb_p1[0:72, 0:160], op=nl.exp, data=ps_scores1[0:72, 0:160], bias=sb_neg_m1[0:72, 0:1], scale=0.125, reduce_op=nl.add, reduce_res=sb_l1[0:72, 0:1], reduce_cmd=nisa.reduce_cmd.reset_reduce)  # #28 Scalar; wait s0>=8 s1>=4; signal s2
    nisa.tensor_copy(dst=sb_o0[0:128, 0:32], src=ps_pv0[0:128, 0:32], engine=nisa.engine.vector)  # #29 Vector; wait s0>=10; signal s1
    nisa.tensor_tensor(dst=sb_o_out0[0:128, 0:32], data1=sb_o0[0:128, 0:32], data2=sb_l0.ap(pattern=[[1, 128], [0, 32]], offset=0), op=nl.divide, engine=nisa.engine.vector)  # #30 Vector; wait s2>=3; signal s1
    nisa.dma_copy(dst=out.ap(pattern=[[32, 128], [1, 32]], offset=0), src=sb_o_out0[0:128, 0:32])  # #31 Sync dma6; wait s1>=6; signal s10
    nisa.nc_matmul(dst=ps_pT_psum1[0:128, 0:72], stationary=sb_p1[0:72, 0:128], moving=sb_identity[0:72, 0:72], accumulate=False)  # #32 Tensor; wait s2>=5 s3>=2; signal s0
    nisa.nc_matmul(dst=ps_pT_psum1[0:32, 72:144], stationary=sb_p1[0:72, 128:160], moving=sb_identity[0:72, 0:72], accumulate=False)  # #33 Tensor; wait s2>=5 s3>=2; signal s0
    nisa.tensor_copy(dst=sb_pT1[0:128, 0:144], src=ps_pT_psum1[0:128, 0:144], engine=nisa.engine.scalar)  # #34 Scalar; wait s0>=12; signal s2
    nisa.nc_matmul(dst=ps_pv1[0:72, 0:32], stationary=sb_pT1[0:128, 0:72], moving=sb_v0[0:128, 0:32], accumulate=False)  # #35 Tensor; wait s2>=6 s8>=1 s9>=1; signal s0
    nisa.nc_matmul(dst=ps_pv1[0:72, 0:32], stationary=sb_pT1[0:32, 72:144], moving=sb_v0[0:32, 32:64], accumulate=True)  # #36 Tensor; wait s2>=6 s8>=1 s9>=1; signal s0
    nisa.tensor_copy(dst=sb_o1[0:72, 0:32], src=ps_pv1[0:72, 0:32], engine=nisa.engine.vector)  # #37 Vector; wait s0>=14; signal s1
    nisa.tensor_tensor(dst=sb_o_out1[0:72, 0:32], data1=sb_o1[0:72, 0:32], data2=sb_l1.ap(pattern=[[1, 72], [0, 32]], offset=0), op=nl.divide, engine=nisa.engine.vector)  # #38 Vector; wait s2>=5; signal s1
    nisa.dma_copy(dst=out.ap(pattern=[[32, 72], [1, 32]], offset=4096), src=sb_o_out1[0:72, 0:32])  # #39 Sync dma7; wait s1>=8; signal s11
