//===- Kernels.cu - the CUDA kernels of the GPT model ---------------------===//
//
// One thread block per row for the row-wise kernels (LayerNorm, RMSNorm, softmax,
// cross-entropy), with warp-shuffle block reductions; grid-stride loops for the element-wise
// ones (GELU, SwiGLU, rotary positions: one thread per pair of rotated dimensions); column sums in
// two passes (fixed chunks of rows, then the chunks in order) so that no float atomics make a
// result depend on timing.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/Kernels.h"

#include <algorithm>

namespace conduit::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kChunkRows = 128;
constexpr float kGeluC = 0.7978845608028654f; // sqrt(2 / pi)
constexpr float kGeluA = 0.044715f;

unsigned blocksFor(int64_t n) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, 1 << 20));
}

template <typename T> __device__ T warpSum(T v) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ float warpMax(float v) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

/// The sum over the block, on every thread. Every thread of the block must call it.
template <typename T> __device__ T blockSum(T v) {
  __shared__ T partial[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warpSum(v);
  __syncthreads(); // an earlier call may still be reading `partial`
  if (lane == 0)
    partial[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) >> 5;
  v = threadIdx.x < warps ? partial[threadIdx.x] : T(0);
  if (warp == 0)
    v = warpSum(v);
  if (threadIdx.x == 0)
    partial[0] = v;
  __syncthreads();
  return partial[0];
}

__device__ float blockMax(float v) {
  __shared__ float partial[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warpMax(v);
  __syncthreads();
  if (lane == 0)
    partial[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) >> 5;
  v = threadIdx.x < warps ? partial[threadIdx.x] : -INFINITY;
  if (warp == 0)
    v = warpMax(v);
  if (threadIdx.x == 0)
    partial[0] = v;
  __syncthreads();
  return partial[0];
}

#define CONDUIT_GRID_STRIDE(i, n)                                                                  \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n);                        \
       i += int64_t(gridDim.x) * blockDim.x)

//===----------------------------------------------------------------------===//
// Element-wise
//===----------------------------------------------------------------------===//

__global__ void fillKernel(int64_t n, float value, float *dst) {
  CONDUIT_GRID_STRIDE(i, n) dst[i] = value;
}

__global__ void maximumKernel(int64_t n, const float *src, float *dst) {
  CONDUIT_GRID_STRIDE(i, n) dst[i] = fmaxf(dst[i], src[i]);
}

__global__ void addKernel(int64_t n, const float *src, float *dst) {
  CONDUIT_GRID_STRIDE(i, n) dst[i] += src[i];
}

__global__ void accumulateKernel(int64_t n, const float *src, double *dst) {
  CONDUIT_GRID_STRIDE(i, n) dst[i] += static_cast<double>(src[i]);
}

__global__ void addBiasKernel(int64_t total, int64_t n, const float *bias, float *x) {
  CONDUIT_GRID_STRIDE(i, total) x[i] += bias[i % n];
}

__global__ void geluForwardKernel(int64_t n, const float *x, float *y) {
  CONDUIT_GRID_STRIDE(i, n) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.0f + tanhf(kGeluC * (v + kGeluA * v * v * v)));
  }
}

__global__ void geluBackwardKernel(int64_t n, const float *x, const float *dy, float *dx) {
  CONDUIT_GRID_STRIDE(i, n) {
    const float v = x[i];
    const float t = tanhf(kGeluC * (v + kGeluA * v * v * v));
    const float du = kGeluC * (1.0f + 3.0f * kGeluA * v * v);
    dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du);
  }
}

/// Element k of the rows × f output: gate at row · 2f + i, up f further.
__global__ void swigluForwardKernel(int64_t n, int64_t f, const float *gateUp, float *out) {
  CONDUIT_GRID_STRIDE(k, n) {
    const int64_t at = (k / f) * 2 * f + k % f;
    const float a = gateUp[at], sigmoid = 1.0f / (1.0f + expf(-a));
    out[k] = a * sigmoid * gateUp[at + f];
  }
}

__global__ void swigluBackwardKernel(int64_t n, int64_t f, const float *gateUp, const float *dout,
                                     float *dGateUp) {
  CONDUIT_GRID_STRIDE(k, n) {
    const int64_t at = (k / f) * 2 * f + k % f;
    const float a = gateUp[at], b = gateUp[at + f], d = dout[k];
    const float sigmoid = 1.0f / (1.0f + expf(-a));
    dGateUp[at] = d * b * sigmoid * (1.0f + a * (1.0f - sigmoid));
    dGateUp[at + f] = d * a * sigmoid;
  }
}

/// One thread per rotated pair: n = rows · vectors · headDim / 2.
__global__ void rotaryKernel(int64_t n, int64_t seq, int64_t vectors, int64_t headDim,
                             int64_t stride, runtime::RotaryPositions rope, double sign, float *x) {
  const int64_t half = headDim / 2;
  const double magnitude = rope.scaling.attentionFactor;
  CONDUIT_GRID_STRIDE(k, n) {
    const int64_t r = k / (vectors * half), vector = k / half % vectors, i = k % half;
    const double angle =
        static_cast<double>(r % seq) * runtime::rotaryInverseFrequency(rope, i, headDim);
    double sine, cosine;
    sincos(angle, &sine, &cosine);
    const float c = static_cast<float>(magnitude * cosine),
                s = static_cast<float>(magnitude * sign * sine);
    float *pair = x + r * stride + vector * headDim + i;
    const float a = pair[0], b = pair[half];
    pair[0] = a * c - b * s;
    pair[half] = b * c + a * s;
  }
}

//===----------------------------------------------------------------------===//
// Column sums: partial sums over chunks of kChunkRows rows, then the chunks in order
//===----------------------------------------------------------------------===//

struct Element {
  const float *x;
  __device__ float operator()(int64_t r, int64_t c, int64_t n) const { return x[r * n + c]; }
};

/// dy · x̂, the LayerNorm gamma gradient's terms.
struct NormalizedProduct {
  const float *x, *mean, *rstd, *dy;
  __device__ float operator()(int64_t r, int64_t c, int64_t n) const {
    return dy[r * n + c] * (x[r * n + c] - mean[r]) * rstd[r];
  }
};

/// dy · x · rstd, the RMSNorm gamma gradient's terms.
struct ScaledProduct {
  const float *x, *rstd, *dy;
  __device__ float operator()(int64_t r, int64_t c, int64_t n) const {
    return dy[r * n + c] * (x[r * n + c] * rstd[r]);
  }
};

template <typename Value>
__global__ void columnPartialKernel(int64_t rows, int64_t n, Value value, float *partial) {
  const int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (c >= n)
    return;
  const int64_t chunk = blockIdx.y;
  const int64_t end = min(rows, (chunk + 1) * kChunkRows);
  float s = 0;
  for (int64_t r = chunk * kChunkRows; r < end; ++r)
    s += value(r, c, n);
  partial[chunk * n + c] = s;
}

__global__ void columnFinishKernel(int64_t chunks, int64_t n, const float *partial, float *out) {
  CONDUIT_GRID_STRIDE(c, n) {
    float s = 0;
    for (int64_t k = 0; k < chunks; ++k)
      s += partial[k * n + c];
    out[c] += s;
  }
}

template <typename Value>
cudaError_t columnSum(int64_t rows, int64_t n, Value value, float *out, float *scratch,
                      cudaStream_t stream) {
  if (rows == 0 || n == 0)
    return cudaSuccess;
  const int64_t chunks = (rows + kChunkRows - 1) / kChunkRows;
  if (chunks > 65535)
    return cudaErrorInvalidValue;
  dim3 grid(static_cast<unsigned>((n + kThreads - 1) / kThreads), static_cast<unsigned>(chunks));
  columnPartialKernel<<<grid, kThreads, 0, stream>>>(rows, n, value, scratch);
  columnFinishKernel<<<blocksFor(n), kThreads, 0, stream>>>(chunks, n, scratch, out);
  return cudaGetLastError();
}

//===----------------------------------------------------------------------===//
// Row-wise: one block per row
//===----------------------------------------------------------------------===//

__global__ void layerNormForwardKernel(int64_t h, const float *x, const float *gamma,
                                       const float *beta, float eps, float *y, float *mean,
                                       float *rstd) {
  const int64_t r = blockIdx.x;
  const float *xr = x + r * h;
  float s = 0;
  for (int64_t i = threadIdx.x; i < h; i += blockDim.x)
    s += xr[i];
  const float mu = blockSum(s) / static_cast<float>(h);
  float v = 0;
  for (int64_t i = threadIdx.x; i < h; i += blockDim.x) {
    const float d = xr[i] - mu;
    v += d * d;
  }
  const float rs = rsqrtf(blockSum(v) / static_cast<float>(h) + eps);
  if (threadIdx.x == 0) {
    mean[r] = mu;
    rstd[r] = rs;
  }
  float *yr = y + r * h;
  for (int64_t i = threadIdx.x; i < h; i += blockDim.x)
    yr[i] = (xr[i] - mu) * rs * gamma[i] + beta[i];
}

__global__ void layerNormInputGradKernel(int64_t h, const float *x, const float *gamma,
                                         const float *mean, const float *rstd, const float *dy,
                                         float *dx) {
  const int64_t r = blockIdx.x;
  const float *xr = x + r * h, *dyr = dy + r * h;
  const float mu = mean[r], rs = rstd[r];
  float s1 = 0, s2 = 0;
  for (int64_t i = threadIdx.x; i < h; i += blockDim.x) {
    const float dxhat = dyr[i] * gamma[i];
    s1 += dxhat;
    s2 += dxhat * (xr[i] - mu) * rs;
  }
  const float invH = 1.0f / static_cast<float>(h);
  const float sumDxhat = blockSum(s1) * invH;
  const float sumDxhatXhat = blockSum(s2) * invH;
  float *dxr = dx + r * h;
  for (int64_t i = threadIdx.x; i < h; i += blockDim.x) {
    const float xhat = (xr[i] - mu) * rs;
    dxr[i] = rs * (dyr[i] * gamma[i] - sumDxhat - xhat * sumDxhatXhat);
  }
}

__global__ void rmsNormForwardKernel(int64_t h, const float *x, const float *gamma, float eps,
                                     float *y, float *rstd) {
  const int64_t r = blockIdx.x;
  const float *xr = x + r * h;
  float s = 0;
  for (int64_t i = threadIdx.x; i < h; i += blockDim.x)
    s += xr[i] * xr[i];
  const float rs = rsqrtf(blockSum(s) / static_cast<float>(h) + eps);
  if (threadIdx.x == 0)
    rstd[r] = rs;
  float *yr = y + r * h;
  for (int64_t i = threadIdx.x; i < h; i += blockDim.x)
    yr[i] = xr[i] * rs * gamma[i];
}

// dx = rstd · (dx̂ − x̂ · mean(dx̂ · x̂)) with x̂ = x · rstd, dx̂ = dy · gamma.
__global__ void rmsNormInputGradKernel(int64_t h, const float *x, const float *gamma,
                                       const float *rstd, const float *dy, float *dx) {
  const int64_t r = blockIdx.x;
  const float *xr = x + r * h, *dyr = dy + r * h;
  const float rs = rstd[r];
  float s = 0;
  for (int64_t i = threadIdx.x; i < h; i += blockDim.x)
    s += dyr[i] * gamma[i] * (xr[i] * rs);
  const float meanDxhatXhat = blockSum(s) / static_cast<float>(h);
  float *dxr = dx + r * h;
  for (int64_t i = threadIdx.x; i < h; i += blockDim.x)
    dxr[i] = rs * (dyr[i] * gamma[i] - xr[i] * rs * meanDxhatXhat);
}

/// Row r of each seq × seq block is query position r mod seq.
__global__ void causalSoftmaxKernel(int64_t seq, float *scores) {
  const int64_t r = blockIdx.x, i = r % seq;
  float *row = scores + r * seq;
  float best = -INFINITY;
  for (int64_t j = threadIdx.x; j <= i; j += blockDim.x)
    best = fmaxf(best, row[j]);
  best = blockMax(best);
  float s = 0;
  for (int64_t j = threadIdx.x; j <= i; j += blockDim.x)
    s += __expf(row[j] - best);
  const float inv = 1.0f / blockSum(s);
  for (int64_t j = threadIdx.x; j < seq; j += blockDim.x)
    row[j] = j <= i ? __expf(row[j] - best) * inv : 0.0f;
}

__global__ void softmaxBackwardKernel(int64_t seq, const float *probs, float *grad, float scale) {
  const int64_t r = blockIdx.x;
  const float *p = probs + r * seq;
  float *g = grad + r * seq;
  float s = 0;
  for (int64_t j = threadIdx.x; j < seq; j += blockDim.x)
    s += p[j] * g[j];
  const float dot = blockSum(s);
  for (int64_t j = threadIdx.x; j < seq; j += blockDim.x)
    g[j] = p[j] * (g[j] - dot) * scale;
}

__global__ void crossEntropyKernel(int64_t vocab, const float *logits, const int32_t *targets,
                                   float scale, float *loss, float *dlogits) {
  const int64_t r = blockIdx.x;
  const float *z = logits + r * vocab;
  float best = -INFINITY;
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x)
    best = fmaxf(best, z[v]);
  best = blockMax(best);
  float s = 0;
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x)
    s += expf(z[v] - best);
  // Read before blockSum's barrier: dlogits may be logits, written in place below.
  const int32_t target = targets[r];
  const float picked = z[target];
  const float logSum = best + logf(blockSum(s));
  if (threadIdx.x == 0)
    loss[r] = logSum - picked;
  if (!dlogits)
    return;
  float *dz = dlogits + r * vocab;
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x)
    dz[v] = scale * (expf(z[v] - logSum) - (v == target ? 1.0f : 0.0f));
}

__global__ void rowMaxKernel(int64_t vocab, const float *logits, float *max) {
  const float *z = logits + int64_t(blockIdx.x) * vocab;
  float best = -INFINITY;
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x)
    best = fmaxf(best, z[v]);
  best = blockMax(best);
  if (threadIdx.x == 0)
    max[blockIdx.x] = best;
}

__global__ void crossEntropyPartialsKernel(int64_t vocab, const float *logits,
                                           const int32_t *targets, const float *max, float *sums,
                                           float *picked) {
  const int64_t r = blockIdx.x;
  const float *z = logits + r * vocab;
  float s = 0;
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x)
    s += expf(z[v] - max[r]);
  s = blockSum(s);
  if (threadIdx.x == 0) {
    sums[r] = s;
    picked[r] = targets[r] >= 0 ? z[targets[r]] : 0.0f;
  }
}

__global__ void crossEntropyFromPartialsKernel(int64_t vocab, const float *logits,
                                               const int32_t *targets, const float *max,
                                               const float *sums, const float *picked, float scale,
                                               float *loss, float *dlogits) {
  const int64_t r = blockIdx.x;
  const float logSum = max[r] + logf(sums[r]);
  if (threadIdx.x == 0)
    loss[r] = logSum - picked[r];
  const float *z = logits + r * vocab;
  float *dz = dlogits + r * vocab;
  const int32_t target = targets[r];
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x)
    dz[v] = scale * (expf(z[v] - logSum) - (v == target ? 1.0f : 0.0f));
}

__global__ void sumIntoKernel(int64_t n, const float *values, double *total) {
  double s = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    s += values[i];
  s = blockSum(s);
  if (threadIdx.x == 0)
    *total += s;
}

//===----------------------------------------------------------------------===//
// Embedding
//===----------------------------------------------------------------------===//

__global__ void embeddingForwardKernel(int64_t rows, int64_t seq, int64_t h, const int32_t *tokens,
                                       const float *wte, const float *wpe, float *y) {
  CONDUIT_GRID_STRIDE(k, rows * h) {
    const int64_t r = k / h, i = k % h;
    // A negative token is another tensor rank's part of the vocabulary: zero here.
    const float token = tokens[r] < 0 ? 0.0f : wte[static_cast<int64_t>(tokens[r]) * h + i];
    y[k] = wpe ? token + wpe[(r % seq) * h + i] : token;
  }
}

/// Block (g, tile) sums the rows of token group g for one tile of columns, in row order:
/// tokens repeat, and a fixed order keeps the sums reproducible without atomics.
__global__ void tokenGradKernel(int64_t h, const int32_t *order, const int32_t *starts,
                                const int32_t *groupTokens, const float *dy, float *dwte) {
  const int64_t g = blockIdx.x, i = blockIdx.y * int64_t(blockDim.x) + threadIdx.x;
  if (i >= h)
    return;
  float s = 0;
  for (int32_t k = starts[g]; k < starts[g + 1]; ++k)
    s += dy[static_cast<int64_t>(order[k]) * h + i];
  dwte[static_cast<int64_t>(groupTokens[g]) * h + i] += s;
}

__global__ void positionGradKernel(int64_t samples, int64_t seq, int64_t h, const float *dy,
                                   float *dwpe) {
  CONDUIT_GRID_STRIDE(k, seq * h) {
    float s = 0;
    for (int64_t n = 0; n < samples; ++n)
      s += dy[n * seq * h + k];
    dwpe[k] += s;
  }
}

//===----------------------------------------------------------------------===//
// Optimizer
//===----------------------------------------------------------------------===//

__global__ void adamKernel(int64_t n, float lr, float beta1, float beta2, float epsilon,
                           float correction1, float correction2, float *params, float *m, float *v,
                           const float *grads) {
  CONDUIT_GRID_STRIDE(i, n) {
    const float g = grads[i];
    const float mi = beta1 * m[i] + (1.0f - beta1) * g;
    const float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    params[i] -= lr * (mi / correction1) / (sqrtf(vi / correction2) + epsilon);
  }
}

__global__ void sgdKernel(int64_t n, float lr, float *params, const float *grads) {
  CONDUIT_GRID_STRIDE(i, n) params[i] -= lr * grads[i];
}

} // namespace

cudaError_t fill(int64_t n, float value, float *dst, cudaStream_t stream) {
  if (n == 0)
    return cudaSuccess;
  fillKernel<<<blocksFor(n), kThreads, 0, stream>>>(n, value, dst);
  return cudaGetLastError();
}

cudaError_t add(int64_t n, const float *src, float *dst, cudaStream_t stream) {
  if (n == 0)
    return cudaSuccess;
  addKernel<<<blocksFor(n), kThreads, 0, stream>>>(n, src, dst);
  return cudaGetLastError();
}

cudaError_t maximum(int64_t n, const float *src, float *dst, cudaStream_t stream) {
  if (n == 0)
    return cudaSuccess;
  maximumKernel<<<blocksFor(n), kThreads, 0, stream>>>(n, src, dst);
  return cudaGetLastError();
}

cudaError_t accumulate(int64_t n, const float *src, double *dst, cudaStream_t stream) {
  if (n == 0)
    return cudaSuccess;
  accumulateKernel<<<blocksFor(n), kThreads, 0, stream>>>(n, src, dst);
  return cudaGetLastError();
}

cudaError_t addBias(int64_t rows, int64_t n, const float *bias, float *x, cudaStream_t stream) {
  if (rows * n == 0)
    return cudaSuccess;
  addBiasKernel<<<blocksFor(rows * n), kThreads, 0, stream>>>(rows * n, n, bias, x);
  return cudaGetLastError();
}

int64_t columnScratch(int64_t rows, int64_t n) { return (rows + kChunkRows - 1) / kChunkRows * n; }

cudaError_t sumRows(int64_t rows, int64_t n, const float *x, float *sum, float *scratch,
                    cudaStream_t stream) {
  return columnSum(rows, n, Element{x}, sum, scratch, stream);
}

cudaError_t layerNormForward(int64_t rows, int64_t h, const float *x, const float *gamma,
                             const float *beta, float eps, float *y, float *mean, float *rstd,
                             cudaStream_t stream) {
  if (rows == 0)
    return cudaSuccess;
  layerNormForwardKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(h, x, gamma, beta,
                                                                               eps, y, mean, rstd);
  return cudaGetLastError();
}

cudaError_t layerNormBackwardInput(int64_t rows, int64_t h, const float *x, const float *gamma,
                                   const float *mean, const float *rstd, const float *dy, float *dx,
                                   cudaStream_t stream) {
  if (rows == 0)
    return cudaSuccess;
  layerNormInputGradKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(h, x, gamma, mean,
                                                                                 rstd, dy, dx);
  return cudaGetLastError();
}

cudaError_t layerNormBackwardWeight(int64_t rows, int64_t h, const float *x, const float *mean,
                                    const float *rstd, const float *dy, float *dgamma, float *dbeta,
                                    float *scratch, cudaStream_t stream) {
  if (rows == 0)
    return cudaSuccess;
  // The two column sums run one after the other on the stream, so they share the scratch.
  if (cudaError_t e =
          columnSum(rows, h, NormalizedProduct{x, mean, rstd, dy}, dgamma, scratch, stream);
      e != cudaSuccess)
    return e;
  return columnSum(rows, h, Element{dy}, dbeta, scratch, stream);
}

cudaError_t rmsNormForward(int64_t rows, int64_t h, const float *x, const float *gamma, float eps,
                           float *y, float *rstd, cudaStream_t stream) {
  if (rows == 0)
    return cudaSuccess;
  rmsNormForwardKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(h, x, gamma, eps, y,
                                                                             rstd);
  return cudaGetLastError();
}

cudaError_t rmsNormBackwardInput(int64_t rows, int64_t h, const float *x, const float *gamma,
                                 const float *rstd, const float *dy, float *dx,
                                 cudaStream_t stream) {
  if (rows == 0)
    return cudaSuccess;
  rmsNormInputGradKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(h, x, gamma, rstd,
                                                                               dy, dx);
  return cudaGetLastError();
}

cudaError_t rmsNormBackwardWeight(int64_t rows, int64_t h, const float *x, const float *rstd,
                                  const float *dy, float *dgamma, float *scratch,
                                  cudaStream_t stream) {
  return columnSum(rows, h, ScaledProduct{x, rstd, dy}, dgamma, scratch, stream);
}

cudaError_t geluForward(int64_t n, const float *x, float *y, cudaStream_t stream) {
  if (n == 0)
    return cudaSuccess;
  geluForwardKernel<<<blocksFor(n), kThreads, 0, stream>>>(n, x, y);
  return cudaGetLastError();
}

cudaError_t geluBackward(int64_t n, const float *x, const float *dy, float *dx,
                         cudaStream_t stream) {
  if (n == 0)
    return cudaSuccess;
  geluBackwardKernel<<<blocksFor(n), kThreads, 0, stream>>>(n, x, dy, dx);
  return cudaGetLastError();
}

cudaError_t swigluForward(int64_t rows, int64_t f, const float *gateUp, float *out,
                          cudaStream_t stream) {
  if (rows * f == 0)
    return cudaSuccess;
  swigluForwardKernel<<<blocksFor(rows * f), kThreads, 0, stream>>>(rows * f, f, gateUp, out);
  return cudaGetLastError();
}

cudaError_t swigluBackward(int64_t rows, int64_t f, const float *gateUp, const float *dout,
                           float *dGateUp, cudaStream_t stream) {
  if (rows * f == 0)
    return cudaSuccess;
  swigluBackwardKernel<<<blocksFor(rows * f), kThreads, 0, stream>>>(rows * f, f, gateUp, dout,
                                                                     dGateUp);
  return cudaGetLastError();
}

cudaError_t rotary(int64_t rows, int64_t seq, int64_t vectors, int64_t headDim, int64_t stride,
                   const runtime::RotaryPositions &rope, double sign, float *x,
                   cudaStream_t stream) {
  const int64_t n = rows * vectors * (headDim / 2);
  if (n == 0)
    return cudaSuccess;
  rotaryKernel<<<blocksFor(n), kThreads, 0, stream>>>(n, seq, vectors, headDim, stride, rope, sign,
                                                      x);
  return cudaGetLastError();
}

cudaError_t causalSoftmax(int64_t rows, int64_t seq, float *scores, cudaStream_t stream) {
  if (rows == 0)
    return cudaSuccess;
  causalSoftmaxKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(seq, scores);
  return cudaGetLastError();
}

cudaError_t softmaxBackward(int64_t rows, int64_t seq, const float *probs, float *grad, float scale,
                            cudaStream_t stream) {
  if (rows == 0)
    return cudaSuccess;
  softmaxBackwardKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(seq, probs, grad,
                                                                              scale);
  return cudaGetLastError();
}

cudaError_t embeddingForward(int64_t rows, int64_t seq, int64_t hidden, const int32_t *tokens,
                             const float *wte, const float *wpe, float *y, cudaStream_t stream) {
  if (rows == 0)
    return cudaSuccess;
  embeddingForwardKernel<<<blocksFor(rows * hidden), kThreads, 0, stream>>>(rows, seq, hidden,
                                                                            tokens, wte, wpe, y);
  return cudaGetLastError();
}

cudaError_t embeddingBackward(int64_t rows, int64_t seq, int64_t hidden, const int32_t *order,
                              const int32_t *starts, const int32_t *groupTokens, int64_t groups,
                              const float *dy, float *dwte, float *dwpe, cudaStream_t stream) {
  if (rows == 0)
    return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(groups),
                  static_cast<unsigned>((hidden + kThreads - 1) / kThreads));
  if (grid.y > 65535)
    return cudaErrorInvalidValue;
  if (groups > 0)
    tokenGradKernel<<<grid, kThreads, 0, stream>>>(hidden, order, starts, groupTokens, dy, dwte);
  if (dwpe)
    positionGradKernel<<<blocksFor(seq * hidden), kThreads, 0, stream>>>(rows / seq, seq, hidden,
                                                                         dy, dwpe);
  return cudaGetLastError();
}

cudaError_t crossEntropy(int64_t rows, int64_t vocab, const float *logits, const int32_t *targets,
                         float scale, float *loss, float *dlogits, cudaStream_t stream) {
  if (rows == 0)
    return cudaSuccess;
  crossEntropyKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(vocab, logits, targets,
                                                                           scale, loss, dlogits);
  return cudaGetLastError();
}

cudaError_t rowMax(int64_t rows, int64_t vocab, const float *logits, float *max,
                   cudaStream_t stream) {
  if (rows == 0)
    return cudaSuccess;
  rowMaxKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(vocab, logits, max);
  return cudaGetLastError();
}

cudaError_t crossEntropyPartials(int64_t rows, int64_t vocab, const float *logits,
                                 const int32_t *targets, const float *max, float *sums,
                                 float *picked, cudaStream_t stream) {
  if (rows == 0)
    return cudaSuccess;
  crossEntropyPartialsKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
      vocab, logits, targets, max, sums, picked);
  return cudaGetLastError();
}

cudaError_t crossEntropyFromPartials(int64_t rows, int64_t vocab, const float *logits,
                                     const int32_t *targets, const float *max, const float *sums,
                                     const float *picked, float scale, float *loss, float *dlogits,
                                     cudaStream_t stream) {
  if (rows == 0)
    return cudaSuccess;
  crossEntropyFromPartialsKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
      vocab, logits, targets, max, sums, picked, scale, loss, dlogits);
  return cudaGetLastError();
}

cudaError_t sumInto(int64_t n, const float *values, double *total, cudaStream_t stream) {
  if (n == 0)
    return cudaSuccess;
  sumIntoKernel<<<1, kThreads, 0, stream>>>(n, values, total);
  return cudaGetLastError();
}

cudaError_t adamStep(int64_t n, float learningRate, float beta1, float beta2, float epsilon,
                     float correction1, float correction2, float *params, float *state,
                     const float *grads, cudaStream_t stream) {
  if (n == 0)
    return cudaSuccess;
  adamKernel<<<blocksFor(n), kThreads, 0, stream>>>(n, learningRate, beta1, beta2, epsilon,
                                                    correction1, correction2, params, state,
                                                    state + n, grads);
  return cudaGetLastError();
}

cudaError_t sgdStep(int64_t n, float learningRate, float *params, const float *grads,
                    cudaStream_t stream) {
  if (n == 0)
    return cudaSuccess;
  sgdKernel<<<blocksFor(n), kThreads, 0, stream>>>(n, learningRate, params, grads);
  return cudaGetLastError();
}

} // namespace conduit::cuda
