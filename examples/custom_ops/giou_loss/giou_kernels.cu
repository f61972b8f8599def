// The GIoU loss's CUDA kernels, the "cuda" kernels of giou_loss and
// giou_loss_backward (GiouOps.cpp). mstep compiles this text with NVRTC
// when a step that calls the ops compiles for cuda; the build embeds it
// as a string (GiouCudaSource.h). The host check (test/cuda/
// giou_cuda_host_test.cpp) compiles the same file with the host compiler
// through test/cuda/CudaHostShim.h and compares it with the ref kernels.
// So: CUDA C++ without the standard library, and the per-box arithmetic
// written as GiouOps.cpp's (torchvision's operations in torchvision's order).
//
// Parameters (the order GiouOps.cpp registers):
//   giou_forward<T>(pred, target, loss, n, mode)
//   giou_backward<T>(pred, target, grad, grad_pred, grad_target, n, mode)
// pred, target: n boxes (x1, y1, x2, y2); mode 0 none, 1 mean, 2 sum.
// Launches: one thread per box (GIOU_THREADS a block), except the forward
// with a reduction: one block whose threads each sum a strided share of
// the boxes in double, then a tree in shared memory (deterministic).

#define GIOU_THREADS 256
#define GIOU_EPS 1e-7

// std::max and std::min exactly (ties and NaNs as the cpu kernels see them).
template <typename T> __device__ inline T giou_max(T a, T b) { return (a < b) ? b : a; }
template <typename T> __device__ inline T giou_min(T a, T b) { return (b < a) ? b : a; }

template <typename T> __device__ inline T giou_pair_loss(const T* p, const T* t) {
  const T eps = static_cast<T>(GIOU_EPS);
  const T ix1 = giou_max(p[0], t[0]), iy1 = giou_max(p[1], t[1]);
  const T ix2 = giou_min(p[2], t[2]), iy2 = giou_min(p[3], t[3]);
  const T inter = ix2 > ix1 && iy2 > iy1 ? (ix2 - ix1) * (iy2 - iy1) : T(0);
  const T uni = (p[2] - p[0]) * (p[3] - p[1]) + (t[2] - t[0]) * (t[3] - t[1]) - inter;
  const T iou = inter / (uni + eps);
  const T area_c = (giou_max(p[2], t[2]) - giou_min(p[0], t[0])) *
                   (giou_max(p[3], t[3]) - giou_min(p[1], t[1]));
  return T(1) - (iou - (area_c - uni) / (area_c + eps));
}

template <typename T> __device__ inline T giou_max_share(T a, T b) {
  return a > b ? T(1) : a == b ? T(0.5) : T(0);
}
template <typename T> __device__ inline T giou_min_share(T a, T b) { return giou_max_share(b, a); }

// The gradients of g * giou_pair_loss(p, t) by p and t (GiouOps.cpp's
// pair_grad, which derives them).
template <typename T>
__device__ inline void giou_pair_grad(const T* p, const T* t, T g, T* gp, T* gt) {
  const T eps = static_cast<T>(GIOU_EPS);
  const T ix1 = giou_max(p[0], t[0]), iy1 = giou_max(p[1], t[1]);
  const T ix2 = giou_min(p[2], t[2]), iy2 = giou_min(p[3], t[3]);
  const T iw = ix2 - ix1, ih = iy2 - iy1;
  const bool overlap = ix2 > ix1 && iy2 > iy1;
  const T inter = overlap ? iw * ih : T(0);
  const T pw = p[2] - p[0], ph = p[3] - p[1], tw = t[2] - t[0], th = t[3] - t[1];
  const T uni = pw * ph + tw * th - inter;
  const T cw = giou_max(p[2], t[2]) - giou_min(p[0], t[0]);
  const T ch = giou_max(p[3], t[3]) - giou_min(p[1], t[1]);
  const T area_c = cw * ch;
  const T ue = uni + eps, ce = area_c + eps;
  const T d_uni = g * inter / (ue * ue) - g / ce;
  const T d_inter = -g / ue - d_uni;
  const T d_c = g / ce - g * (area_c - uni) / (ce * ce);
  const T d_iw = overlap ? d_inter * ih : T(0), d_ih = overlap ? d_inter * iw : T(0);
  const T d_cw = d_c * ch, d_ch = d_c * cw;
  const T s0 = giou_max_share(p[0], t[0]), s1 = giou_max_share(p[1], t[1]);
  const T s2 = giou_min_share(p[2], t[2]), s3 = giou_min_share(p[3], t[3]);
  const T c0 = giou_min_share(p[0], t[0]), c1 = giou_min_share(p[1], t[1]);
  const T c2 = giou_max_share(p[2], t[2]), c3 = giou_max_share(p[3], t[3]);
  gp[0] = -d_uni * ph - d_iw * s0 - d_cw * c0;
  gp[1] = -d_uni * pw - d_ih * s1 - d_ch * c1;
  gp[2] = d_uni * ph + d_iw * s2 + d_cw * c2;
  gp[3] = d_uni * pw + d_ih * s3 + d_ch * c3;
  gt[0] = -d_uni * th - d_iw * (1 - s0) - d_cw * (1 - c0);
  gt[1] = -d_uni * tw - d_ih * (1 - s1) - d_ch * (1 - c1);
  gt[2] = d_uni * th + d_iw * (1 - s2) + d_cw * (1 - c2);
  gt[3] = d_uni * tw + d_ih * (1 - s3) + d_ch * (1 - c3);
}

template <typename T>
__global__ void giou_forward(const T* pred, const T* target, T* loss, long long n, int mode) {
  if (mode == 0) {
    const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) loss[i] = giou_pair_loss(pred + 4 * i, target + 4 * i);
    return;
  }
  // One block: a strided share per thread, then a tree over the threads.
  __shared__ double partial[GIOU_THREADS];
  double sum = 0;
  for (long long i = threadIdx.x; i < n; i += GIOU_THREADS)
    sum += static_cast<double>(giou_pair_loss(pred + 4 * i, target + 4 * i));
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int half = GIOU_THREADS / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    double total = partial[0];
    if (mode == 1) total = n > 0 ? total / static_cast<double>(n) : 0.0;
    loss[0] = static_cast<T>(total);
  }
}

template <typename T>
__global__ void giou_backward(const T* pred, const T* target, const T* grad, T* grad_pred,
                              T* grad_target, long long n, int mode) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const T g = mode == 0   ? grad[i]
              : mode == 1 ? grad[0] / static_cast<T>(n > 1 ? n : 1)
                          : grad[0];
  giou_pair_grad(pred + 4 * i, target + 4 * i, g, grad_pred + 4 * i, grad_target + 4 * i);
}
