# NKI kernel 'attention_fwd_causal': 39 instructions, written by mstep from its tile
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
    sb_qkT0 = nl.ndarray((nl.par_dim(128), 360), dtype=nl.bfloat16, buffer=nl.sbuf)  # bytes [512, 1232), live [2, end)
    sb_v0 = nl.ndarray((nl.par_dim(128), 64), dtype=nl.bfloat16, buffer=nl.sbuf)  # bytes [1280, 1408), live [2, end)
    sb_q_rows0 = nl.ndarray((nl.par_dim(128), 64), dtype=nl.bfloat16, buffer=nl.sbuf)  # bytes [1408, 1536), live [2, end)
    sb_k_rows0 = nl.ndarray((nl.par_dim(128), 64), dtype=nl.bfloat16, buffer=nl.sbuf)  # bytes [1536, 1664), live [2, end)
    ps_scores0 = nl.ndarray((nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)  # bytes [0, 2048), live [2, end)
    ps_scores1 = nl.ndarray((nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)  # bytes [2048, 4096), live [2, end)
    ps_scores2 = nl.ndarray((nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)  # bytes [4096, 6144), live [2, end)
    sb_s0 = nl.ndarray((nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.sbuf)  # bytes [1664, 3712), live [2, end)
    sb_s1 = nl.ndarray((nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.sbuf)  # bytes [3712, 5760), live [2, end)
    sb_s2 = nl.ndarray((nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.sbuf)  # bytes [5760, 7808), live [2, end)
    sb_s3 = nl.ndarray((nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.sbuf)  # bytes [7808, 9856), live [2, end)
    sb_p0 = nl.ndarray((nl.par_dim(128), 512), dtype=nl.bfloat16, buffer=nl.sbuf)  # bytes [9856, 10880), live [2, end)
    sb_pT0 = nl.ndarray((nl.par_dim(128), 512), dtype=nl.bfloat16, buffer=nl.sbuf)  # bytes [10880, 11904), live [2, end)
    sb_p1 = nl.ndarray((nl.par_dim(128), 512), dtype=nl.bfloat16, buffer=nl.sbuf)  # bytes [11904, 12928), live [2, end)
    sb_pT1 = nl.ndarray((nl.par_dim(128), 512), dtype=nl.bfloat16, buffer=nl.sbuf)  # bytes [12928, 13952), live [2, end)
    sb_p2 = nl.ndarray((nl.par_dim(128), 256), dtype=nl.float32, buffer=nl.sbuf)  # bytes [13952, 14976), live [2, end)
    sb_pT2 = nl.ndarray((nl.par_dim(128), 256), dtype=nl.float32, buffer=nl.sbuf)  # bytes [14976, 16000), live [2, end)
    sb_neg_m0 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [16000, 16004), live [2, end)
    sb_chunk_neg_m0 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [16064, 16068), live [2, end)
    sb_rowsum0 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [16128, 16132), live [2, end)
    sb_alpha0 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [16192, 16196), live [2, end)
    sb_l0 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [16256, 16260), live [2, end)
    sb_out_factor0 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [16320, 16324), live [2, end)
    sb_neg_m1 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [16384, 16388), live [2, end)
    sb_chunk_neg_m1 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [16448, 16452), live [2, end)
    sb_rowsum1 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [16512, 16516), live [2, end)
    sb_alpha1 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [16576, 16580), live [2, end)
    sb_l1 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [16640, 16644), live [2, end)
    sb_out_factor1 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [16704, 16708), live [2, end)
    sb_neg_m2 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [16768, 16772), live [2, end)
    sb_chunk_neg_m2 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [16832, 16836), live [2, end)
    sb_rowsum2 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [16896, 16900), live [2, end)
    sb_alpha2 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [16960, 16964), live [2, end)
    sb_l2 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [17024, 17028), live [2, end)
    sb_out_factor2 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [17088, 17092), live [2, end)
    sb_neg_m3 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [17152, 17156), live [2, end)
    sb_chunk_neg_m3 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [17216, 17220), live [2, end)
    sb_rowsum3 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [17280, 17284), live [2, end)
    sb_alpha3 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [17344, 17348), live [2, end)
    sb_l3 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [17408, 17412), live [2, end)
    sb_out_factor3 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [17472, 17476), live [2, end)
    sb_neg_m4 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [17536, 17540), live [2, end)
    sb_chunk_neg_m4 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [17600, 17604), live [2, end)
    sb_rowsum4 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [17664, 17668), live [2, end)
    sb_alpha4 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [17728, 17732), live [2, end)
    sb_l4 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [17792, 17796), live [2, end)
    sb_out_factor4 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [17856, 17860), live [2, end)
    sb_neg_m5 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [17920, 17924), live [2, end)
    sb_chunk_neg_m5 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [17984, 17988), live [2, end)
    sb_rowsum5 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [18048, 18052), live [2, end)
    sb_alpha5 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [18112, 18116), live [2, end)
    sb_l5 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [18176, 18180), live [2, end)
    sb_out_factor5 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [18240, 18244), live [2, end)
    sb_neg_m6 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [18304, 18308), live [2, end)
    sb_chunk_neg_m6 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [18368, 18372), live [2, end)
    sb_rowsum6 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [18432, 18436), live [2, end)
    sb_alpha6 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [18496, 18500), live [2, end)
    sb_l6 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [18560, 18564), live [2, end)
    sb_out_factor6 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [18624, 18628), live [2, end)
    sb_neg_m7 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [18688, 18692), live [2, end)
    sb_chunk_neg_m7 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [18752, 18756), live [2, end)
    sb_rowsum7 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [18816, 18820), live [2, end)
    sb_alpha7 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [18880, 18884), live [2, end)
    sb_l7 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [18944, 18948), live [2, end)
    sb_out_factor7 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [19008, 19012), live [2, end)
    sb_neg_m8 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [19072, 19076), live [2, end)
    sb_chunk_neg_m8 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [19136, 19140), live [2, end)
    sb_rowsum8 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [19200, 19204), live [2, end)
    sb_alpha8 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [19264, 19268), live [2, end)
    sb_l8 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [19328, 19332), live [2, end)
    sb_out_factor8 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [19392, 19396), live [2, end)
    sb_neg_m9 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [19456, 19460), live [2, end)
    sb_chunk_neg_m9 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [19520, 19524), live [2, end)
    sb_rowsum9 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [19584, 19588), live [2, end)
    sb_alpha9 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [19648, 19652), live [2, end)
    sb_l9 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [19712, 19716), live [2, end)
    sb_out_factor9 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [19776, 19780), live [2, end)
    sb_neg_m10 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [19840, 19844), live [2, end)
    sb_chunk_neg_m10 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [19904, 19908), live [2, end)
    sb_rowsum10 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [19968, 19972), live [2, end)
    sb_alpha10 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [20032, 20036), live [2, end)
    sb_l10 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [20096, 20100), live [2, end)
    sb_out_factor10 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [20160, 20164), live [2, end)
    sb_neg_m11 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [20224, 20228), live [2, end)
    sb_chunk_neg_m11 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [20288, 20292), live [2, end)
    sb_rowsum11 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [20352, 20356), live [2, end)
    sb_alpha11 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [20416, 20420), live [2, end)
    sb_l11 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [20480, 20484), live [2, end)
    sb_out_factor11 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [20544, 20548), live [2, end)
    sb_neg_m12 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [20608, 20612), live [2, end)
    sb_chunk_neg_m12 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [20672, 20676), live [2, end)
    sb_rowsum12 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [20736, 20740), live [2, end)
    sb_alpha12 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [20800, 20804), live [2, end)
    sb_l12 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [20864, 20868), live [2, end)
    sb_out_factor12 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [20928, 20932), live [2, end)
    sb_neg_m13 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [20992, 20996), live [2, end)
    sb_chunk_neg_m13 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [21056, 21060), live [2, end)
    sb_rowsum13 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [21120, 21124), live [2, end)
    sb_alpha13 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [21184, 21188), live [2, end)
    sb_l13 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [21248, 21252), live [2, end)
    sb_out_factor13 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [21312, 21316), live [2, end)
    sb_neg_m14 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [21376, 21380), live [2, end)
    sb_chunk_neg_m14 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [21440, 21444), live [2, end)
    sb_rowsum14 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [21504, 21508), live [2, end)
    sb_alpha14 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [21568, 21572), live [2, end)
    sb_l14 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [21632, 21636), live [2, end)
    sb_out_factor14 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [21696, 21700), live [2, end)
    sb_neg_m15 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [21760, 21764), live [2, end)
    sb_chunk_neg_m15 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [21824, 21828), live [2, end)
    sb_rowsum15 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [21888, 21892), live [2, end)
    sb_alpha15 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [21952, 21956), live [2, end)
    sb_l15 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [22016, 22020), live [2, end)
    sb_out_factor15 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [22080, 22084), live [2, end)
    sb_neg_m16 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [22144, 22148), live [2, end)
    sb_chunk_neg_m16 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [22208, 22212), live [2, end)
    sb_rowsum16 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [22272, 22276), live [2, end)
    sb_alpha16 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [22336, 22340), live [2, end)
    sb_l16 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [22400, 22404), live [2, end)
    sb_out_factor16 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [22464, 22468), live [2, end)
    sb_neg_m17 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [22528, 22532), live [2, end)
    sb_chunk_neg_m17 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [22592, 22596), live [2, end)
    sb_rowsum17 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [22656, 22660), live [2, end)
    sb_alpha17 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [22720, 22724), live [2, end)
    sb_l17 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [22784, 22788), live [2, end)
    sb_out_factor17 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [22848, 22852), live [2, end)
    sb_neg_m18 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [22912, 22916), live [2, end)
    sb_chunk_neg_m18 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [22976, 22980), live [2, end)
    sb_rowsum18 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [23040, 23044), live [2, end)
    sb_alpha18 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [23104, 23108), live [2, end)
    sb_l18 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [23168, 23172), live [2, end)
    sb_out_factor18 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [23232, 23236), live [2, end)
    sb_neg_m19 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [23296, 23300), live [2, end)
    sb_chunk_neg_m19 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [23360, 23364), live [2, end)
    sb_rowsum19 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [23424, 23428), live [2, end)
    sb_alpha19 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [23488, 23492), live [2, end)
    sb_l19 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [23552, 23556), live [2, end)
    sb_out_factor19 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [23616, 23620), live [2, end)
    sb_neg_m20 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [23680, 23684), live [2, end)
    sb_chunk_neg_m20 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [23744, 23748), live [2, end)
    sb_rowsum20 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [23808, 23812), live [2, end)
    sb_alpha20 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [23872, 23876), live [2, end)
    sb_l20 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [23936, 23940), live [2, end)
    sb_out_factor20 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [24000, 24004), live [2, end)
    sb_neg_m21 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [24064, 24068), live [2, end)
    sb_chunk_neg_m21 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [24128, 24132), live [2, end)
    sb_rowsum21 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [24192, 24196), live [2, end)
    sb_alpha21 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [24256, 24260), live [2, end)
    sb_l21 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [24320, 24324), live [2, end)
    sb_out_factor21 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [24384, 24388), live [2, end)
    sb_neg_m22 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [24448, 24452), live [2, end)
    sb_chunk_neg_m22 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [24512, 24516), live [2, end)
    sb_rowsum22 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [24576, 24580), live [2, end)
    sb_alpha22 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [24640, 24644), live [2, end)
    sb_l22 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [24704, 24708), live [2, end)
    sb_out_factor22 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [24768, 24772), live [2, end)
    sb_neg_m23 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [24832, 24836), live [2, end)
    sb_chunk_neg_m23 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [24896, 24900), live [2, end)
    sb_rowsum23 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [24960, 24964), live [2, end)
    sb_alpha23 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [25024, 25028), live [2, end)
    sb_l23 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [25088, 25092), live [2, end)
    sb_out_factor23 = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)  # bytes [25152, 25156), live [2, end)
    ps_pT_psum0 = nl.ndarray((nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)  # bytes [6144, 8192), live [2, end)
    ps_pv0 = nl.ndarray((nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)  # bytes [8192, 10240), live [2, end)
    ps_pT_psum1 = nl.ndarray((nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)  # bytes [10240, 12288), live [2, end)
    ps_pv1 = nl.ndarray((nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)  # bytes [12288, 14336), live [2, end)
    sb_o0 = nl.ndarray((nl.par_dim(128), 32), dtype=nl.float32, buffer=nl.sbuf)  # bytes [25216, 25344), live [2, end)
    sb_o1 = nl.ndarray((nl.par_dim(128), 32), dtype=nl.float32, buffer=nl.sbuf)  # bytes [25344, 25472), live [2, end)
    sb_o_out0 = nl.ndarray((nl.par_dim(128), 32), dtype=nl.bfloat16, buffer=nl.sbuf)  # bytes [25472, 25536), live [2, end)
    sb_o_out1 = nl.ndarray((nl.par_dim(128), 32), dtype=nl.bfloat16, buffer=nl.sbuf)  # bytes [25536, 25600), live [2, end)
    ps_transposes_psum = nl.ndarray((nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)  # bytes [14336, 16384), live [2, end)
    sb_causal_mask = nl.ndarray((nl.par_dim(128), 1152), dtype=nl.bfloat16, buffer=nl.sbuf)  # bytes [25600, 27904), live [2, end)
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
    nisa.nc_matmul(dst=ps_transposes_psum[0:32, 0:128], stationary=sb_q_rows0[0:128, 0:32], moving=sb_identity[0:128, 0:128], accumulate=False)  # #10 Tensor; wait s3>=2 s4>=1 s5>=1; signal s0
    nisa.nc_matmul(dst=ps_transposes_psum[0:32, 128:200], stationary=sb_q_rows0[0:72, 32:64], moving=sb_identity[0:72, 0:72], accumulate=False)  # #11 Tensor; wait s3>=2 s4>=1 s5>=1; signal s0
    nisa.nc_matmul(dst=ps_transposes_psum[0:32, 200:328], stationary=sb_k_rows0[0:128, 0:32], moving=sb_identity[0:128, 0:128], accumulate=False)  # #12 Tensor; wait s3>=2 s6>=1 s7>=1; signal s0
    nisa.nc_matmul(dst=ps_transposes_psum[0:32, 328:360], stationary=sb_k_rows0[0:32, 32:64], moving=sb_identity[0:32, 0:32], accumulate=False)  # #13 Tensor; wait s3>=2 s6>=1 s7>=1; signal s0
    nisa.tensor_copy(dst=sb_qkT0[0:32, 0:360], src=ps_transposes_psum[0:32, 0:360], engine=nisa.engine.scalar)  # #14 Scalar; wait s0>=4; signal s2
    nisa.nc_matmul(dst=ps_scores0[0:128, 0:128], stationary=sb_qkT0[0:32, 0:128], moving=sb_qkT0[0:32, 200:328], accumulate=False)  # #15 Tensor; wait s2>=1; signal s0
    nisa.nc_matmul(dst=ps_scores0[0:128, 0:128], stationary=sb_identity[0:128, 0:128], moving=sb_causal_mask[0:128, 512:640], accumulate=True)  # #16 Tensor; wait s3>=4; signal s0
    nisa.activation(dst=sb_s0[0:128, 0:128], op=nl.copy, data=ps_scores0[0:128, 0:128], bias=0.0, scale=-0.125)  # #17 Scalar; wait s0>=6; signal s2
    nisa.tensor_reduce(dst=sb_neg_m0[0:128, 0:1], op=nl.minimum, data=sb_s0[0:128, 0:128], axis=(1,))  # #18 Vector; wait s2>=2; signal s1
    nisa.nc_matmul(dst=ps_scores1[0:72, 0:160], stationary=sb_qkT0[0:32, 128:200], moving=sb_qkT0[0:32, 200:360], accumulate=False)  # #19 Tensor; wait s2>=1; signal s0
    nisa.nc_matmul(dst=ps_scores1[0:72, 0:160], stationary=sb_identity[0:72, 0:72], moving=sb_causal_mask[0:72, 384:544], accumulate=True)  # #20 Tensor; wait s3>=4; signal s0
    nisa.activation(dst=sb_s1[0:72, 0:160], op=nl.copy, data=ps_scores1[0:72, 0:160], bias=0.0, scale=-0.125)  # #21 Scalar; wait s0>=8; signal s2
    nisa.activation(dst=sb_p0[0:128, 0:128], op=nl.exp, data=sb_s0[0:128, 0:128], bias=sb_neg_m0[0:128, 0:1], scale=-1.0, reduce_op=nl.add, reduce_res=sb_l0[0:128, 0:1], reduce_cmd=nisa.reduce_cmd.reset_reduce)  # #22 Scalar; wait s1>=1; signal s2
    nisa.tensor_reduce(dst=sb_neg_m1[0:72, 0:1], op=nl.minimum, data=sb_s1[0:72, 0:160], axis=(1,))  # #23 Vector; wait s2>=3; signal s1
    nisa.nc_matmul(dst=ps_pT_psum0[0:128, 0:128], stationary=sb_p0[0:128, 0:128], moving=sb_identity[0:128, 0:128], accumulate=False)  # #24 Tensor; wait s2>=4 s3>=2; signal s0
    nisa.tensor_scalar(dst=sb_out_factor0[0:128, 0:1], data=sb_l0[0:128, 0:1], op0=nl.divide, operand0=1.0, reverse0=True, engine=nisa.engine.vector)  # #25 Vector; wait s2>=4; signal s1
    nisa.activation(dst=sb_p1[0:72, 0:160], op=nl.exp, data=sb_s1[0:72, 0:160], bias=sb_neg_m1[0:72, 0:1], scale=-1.0, reduce_op=nl.add, reduce_res=sb_l1[0:72, 0:1], reduce_cmd=nisa.reduce_cmd.reset_reduce)  # #26 Scalar; wait s1>=2; signal s2
    nisa.tensor_copy(dst=sb_pT0[0:128, 0:128], src=ps_pT_psum0[0:128, 0:128], engine=nisa.engine.vector)  # #27 Vector; wait s0>=9; signal s1
    nisa.nc_matmul(dst=ps_pT_psum1[0:128, 0:72], stationary=sb_p1[0:72, 0:128], moving=sb_identity[0:72, 0:72], accumulate=False)  # #28 Tensor; wait s2>=5 s3>=2; signal s0
    nisa.nc_matmul(dst=ps_pT_psum1[0:32, 72:144], stationary=sb_p1[0:72, 128:160], moving=sb_identity[0:72, 0:72], accumulate=False)  # #29 Tensor; wait s2>=5 s3>=2; signal s0
    nisa.tensor_scalar(dst=sb_out_factor1[0:72, 0:1], data=sb_l1[0:72, 0:1], op0=nl.divide, operand0=1.0, reverse0=True, engine=nisa.engine.vector)  # #30 Vector; wait s2>=5; signal s1
    nisa.nc_matmul(dst=ps_pv0[0:128, 0:32], stationary=sb_pT0[0:128, 0:128], moving=sb_v0[0:128, 0:32], accumulate=False)  # #31 Tensor; wait s1>=4 s8>=1 s9>=1; signal s0
    nisa.activation(dst=sb_o_out0[0:128, 0:32], op=nl.copy, data=ps_pv0[0:128, 0:32], bias=0.0, scale=1.0)  # #32 Scalar; wait s0>=12 s1>=3; signal s2
    nisa.dma_copy(dst=out.ap(pattern=[[32, 128], [1, 32]], offset=0), src=sb_o_out0[0:128, 0:32])  # #33 Sync dma6; wait s2>=6; signal s10
    nisa.tensor_copy(dst=sb_pT1[0:128, 0:144], src=ps_pT_psum1[0:128, 0:144], engine=nisa.engine.vector)  # #34 Vector; wait s0>=11; signal s1
    nisa.nc_matmul(dst=ps_pv1[0:72, 0:32], stationary=sb_pT1[0:128, 0:72], moving=sb_v0[0:128, 0:32], accumulate=False)  # #35 Tensor; wait s1>=6 s8>=1 s9>=1; signal s0
    nisa.nc_matmul(dst=ps_pv1[0:72, 0:32], stationary=sb_pT1[0:32, 72:144], moving=sb_v0[0:32, 32:64], accumulate=True)  # #36 Tensor; wait s1>=6 s8>=1 s9>=1; signal s0
    nisa.activation(dst=sb_o_out1[0:72, 0:32], op=nl.copy, data=ps_pv1[0:72, 0:32], bias=0.0, scale=1.0)  # #37 Scalar; wait s0>=14 s1>=5; signal s2
    nisa.dma_copy(dst=out.ap(pattern=[[32, 72], [1, 32]], offset=4096), src=sb_o_out1[0:72, 0:32])  # #38 Sync dma7; wait s2>=7; signal s11
