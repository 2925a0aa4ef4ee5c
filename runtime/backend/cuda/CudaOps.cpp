//===- CudaOps.cpp - the model's math on one CUDA stream ------------------===//

#include "runtime/backend/cuda/CudaOps.h"

#include "runtime/backend/cuda/CudaCheck.h"
#include "runtime/backend/cuda/Kernels.h"

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>

namespace conduit::cuda {

absl::StatusOr<std::unique_ptr<CudaOps>> CudaOps::create(cudaStream_t stream,
                                                         runtime::DType precision) {
  cublasHandle_t blas = nullptr;
  CONDUIT_CUDA(cublasCreate(&blas));
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  if (precision == runtime::DType::BF16)
    compute = CUBLAS_COMPUTE_32F_FAST_16BF;
  else if (precision == runtime::DType::FP16)
    compute = CUBLAS_COMPUTE_32F_FAST_16F;
  std::unique_ptr<CudaOps> ops(new CudaOps(stream, blas, compute));
  CONDUIT_CUDA(cublasSetStream(blas, stream));
  // Keep freed memory in the stream-ordered pool: with the default threshold of zero, every
  // synchronization would hand it back to the driver and the next allocation map it again.
  int device = 0;
  cudaMemPool_t pool = nullptr;
  uint64_t keep = UINT64_MAX;
  CONDUIT_CUDA(cudaGetDevice(&device));
  CONDUIT_CUDA(cudaDeviceGetDefaultMemPool(&pool, device));
  CONDUIT_CUDA(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  CONDUIT_CUDA(cudaMalloc(&ops->lossDevice, sizeof(double)));
  CONDUIT_CUDA(cudaMemsetAsync(ops->lossDevice, 0, sizeof(double), stream));
  CONDUIT_CUDA(cudaMallocHost(&ops->lossHost, sizeof(double)));
  for (Staging &s : ops->staging)
    CONDUIT_CUDA(cudaEventCreateWithFlags(&s.copied, cudaEventDisableTiming));
  return ops;
}

absl::StatusOr<std::unique_ptr<CudaOps>> CudaOps::create(runtime::DType precision) {
  cudaStream_t stream = nullptr;
  CONDUIT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  absl::StatusOr<std::unique_ptr<CudaOps>> ops = create(stream, precision);
  if (!ops.ok()) {
    absl::Status ignored;
    CONDUIT_CUDA_NOTE(ignored, cudaStreamDestroy(stream));
    return ops.status();
  }
  (*ops)->ownsQueue = true;
  return ops;
}

CudaOps::CudaOps(cudaStream_t stream, cublasHandle_t blas, cublasComputeType_t compute)
    : queue(stream), blas(blas), compute(compute) {}

CudaOps::~CudaOps() {
  // Errors here have no one to go to; the backend has checked status() before.
  absl::Status ignored;
  CONDUIT_CUDA_NOTE(ignored, cudaStreamSynchronize(queue));
  for (Staging &s : staging) {
    if (s.copied)
      CONDUIT_CUDA_NOTE(ignored, cudaEventDestroy(s.copied));
    if (s.host)
      CONDUIT_CUDA_NOTE(ignored, cudaFreeHost(s.host));
  }
  for (int32_t *p : outgrown)
    CONDUIT_CUDA_NOTE(ignored, cudaFreeHost(p));
  if (lossHost)
    CONDUIT_CUDA_NOTE(ignored, cudaFreeHost(lossHost));
  if (lossDevice)
    CONDUIT_CUDA_NOTE(ignored, cudaFree(lossDevice));
  if (blas)
    CONDUIT_CUDA_NOTE(ignored, cublasDestroy(blas));
  if (ownsQueue)
    CONDUIT_CUDA_NOTE(ignored, cudaStreamDestroy(queue));
}

template <typename T> model::Buffer<T> CudaOps::deviceBuffer(int64_t n) {
  if (n <= 0 || !failure.ok())
    return {};
  T *p = nullptr;
  CONDUIT_CUDA_NOTE(failure, cudaMallocAsync(&p, n * sizeof(T), queue));
  if (!failure.ok())
    return {};
  return model::Buffer<T>(
      p, n, [this](T *q) { CONDUIT_CUDA_NOTE(failure, cudaFreeAsync(q, queue)); }, &counter);
}

model::Buffer<float> CudaOps::allocate(int64_t n) {
  model::Buffer<float> b = deviceBuffer<float>(n);
  if (!b.empty())
    CONDUIT_CUDA_NOTE(failure, cudaMemsetAsync(b.data(), 0, n * sizeof(float), queue));
  return b;
}

model::Buffer<double> CudaOps::allocateDouble(int64_t n) {
  model::Buffer<double> b = deviceBuffer<double>(n);
  if (!b.empty())
    CONDUIT_CUDA_NOTE(failure, cudaMemsetAsync(b.data(), 0, n * sizeof(double), queue));
  return b;
}

void CudaOps::upload(const float *host, int64_t n, float *dst) {
  if (n > 0 && failure.ok())
    CONDUIT_CUDA_NOTE(failure,
                      cudaMemcpyAsync(dst, host, n * sizeof(float), cudaMemcpyHostToDevice, queue));
}

void CudaOps::download(const float *src, int64_t n, float *host) {
  if (n <= 0 || !failure.ok())
    return;
  CONDUIT_CUDA_NOTE(failure,
                    cudaMemcpyAsync(host, src, n * sizeof(float), cudaMemcpyDeviceToHost, queue));
  synchronize();
}

void CudaOps::synchronize() {
  if (failure.ok())
    CONDUIT_CUDA_NOTE(failure, cudaStreamSynchronize(queue));
}

void CudaOps::fill(int64_t n, float value, float *dst) {
  if (failure.ok())
    CONDUIT_CUDA_NOTE(failure, cuda::fill(n, value, dst, queue));
}

void CudaOps::copy(int64_t n, const float *src, float *dst) {
  if (n > 0 && failure.ok())
    CONDUIT_CUDA_NOTE(
        failure, cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, queue));
}

void CudaOps::copyRows(int64_t rows, int64_t n, const float *src, int64_t srcStride, float *dst,
                       int64_t dstStride) {
  if (rows > 0 && n > 0 && failure.ok())
    CONDUIT_CUDA_NOTE(failure, cudaMemcpy2DAsync(dst, dstStride * sizeof(float), src,
                                                 srcStride * sizeof(float), n * sizeof(float), rows,
                                                 cudaMemcpyDeviceToDevice, queue));
}

void CudaOps::add(int64_t n, const float *src, float *dst) {
  if (failure.ok())
    CONDUIT_CUDA_NOTE(failure, cuda::add(n, src, dst, queue));
}

void CudaOps::accumulate(int64_t n, const float *src, double *dst) {
  if (failure.ok())
    CONDUIT_CUDA_NOTE(failure, cuda::accumulate(n, src, dst, queue));
}

void CudaOps::addBias(int64_t rows, int64_t n, const float *bias, float *x) {
  if (failure.ok())
    CONDUIT_CUDA_NOTE(failure, cuda::addBias(rows, n, bias, x, queue));
}

void CudaOps::sumRows(int64_t rows, int64_t n, const float *x, float *sum) {
  model::Buffer<float> scratch = deviceBuffer<float>(columnScratch(rows, n));
  if (failure.ok())
    CONDUIT_CUDA_NOTE(failure, cuda::sumRows(rows, n, x, sum, scratch.data(), queue));
}

void CudaOps::gemmStrided(bool transA, bool transB, int64_t m, int64_t n, int64_t k, float alpha,
                          const float *a, int64_t lda, int64_t strideA, const float *b, int64_t ldb,
                          int64_t strideB, float beta, float *c, int64_t ldc, int64_t strideC,
                          int64_t batch) {
  if (!failure.ok() || m == 0 || n == 0 || batch == 0)
    return;
  for (int64_t v : {m, n, k, lda, ldb, ldc, batch})
    if (v > INT_MAX) {
      note(failure, absl::OutOfRangeError(absl::StrCat("a GEMM dimension of ", v,
                                                       " exceeds what cuBLAS takes (2^31 - 1)")));
      return;
    }
  // cuBLAS is column-major: a row-major matrix is its transpose there, so compute
  // Cᵀ = op(B)ᵀ · op(A)ᵀ.
  CONDUIT_CUDA_NOTE(
      failure, cublasGemmStridedBatchedEx(
                   blas, transB ? CUBLAS_OP_T : CUBLAS_OP_N, transA ? CUBLAS_OP_T : CUBLAS_OP_N,
                   static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha, b,
                   CUDA_R_32F, static_cast<int>(ldb), strideB, a, CUDA_R_32F, static_cast<int>(lda),
                   strideA, &beta, c, CUDA_R_32F, static_cast<int>(ldc), strideC,
                   static_cast<int>(batch), compute, CUBLAS_GEMM_DEFAULT));
}

void CudaOps::gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, float alpha,
                   const float *a, const float *b, float beta, float *c) {
  gemmStrided(transA, transB, m, n, k, alpha, a, transA ? m : k, 0, b, transB ? k : n, 0, beta, c,
              n, 0, 1);
}

void CudaOps::layerNormForward(int64_t rows, int64_t h, const float *x, const float *gamma,
                               const float *beta, double eps, float *y, float *mean, float *rstd) {
  if (failure.ok())
    CONDUIT_CUDA_NOTE(failure,
                      cuda::layerNormForward(rows, h, x, gamma, beta, static_cast<float>(eps), y,
                                             mean, rstd, queue));
}

void CudaOps::layerNormBackwardInput(int64_t rows, int64_t h, const float *x, const float *gamma,
                                     const float *mean, const float *rstd, const float *dy,
                                     float *dx) {
  if (failure.ok())
    CONDUIT_CUDA_NOTE(failure,
                      cuda::layerNormBackwardInput(rows, h, x, gamma, mean, rstd, dy, dx, queue));
}

void CudaOps::layerNormBackwardWeight(int64_t rows, int64_t h, const float *x, const float *mean,
                                      const float *rstd, const float *dy, float *dgamma,
                                      float *dbeta) {
  model::Buffer<float> scratch = deviceBuffer<float>(columnScratch(rows, h));
  if (failure.ok())
    CONDUIT_CUDA_NOTE(failure, cuda::layerNormBackwardWeight(rows, h, x, mean, rstd, dy, dgamma,
                                                             dbeta, scratch.data(), queue));
}

void CudaOps::rmsNormForward(int64_t rows, int64_t h, const float *x, const float *gamma,
                             double eps, float *y, float *rstd) {
  if (failure.ok())
    CONDUIT_CUDA_NOTE(
        failure, cuda::rmsNormForward(rows, h, x, gamma, static_cast<float>(eps), y, rstd, queue));
}

void CudaOps::rmsNormBackwardInput(int64_t rows, int64_t h, const float *x, const float *gamma,
                                   const float *rstd, const float *dy, float *dx) {
  if (failure.ok())
    CONDUIT_CUDA_NOTE(failure, cuda::rmsNormBackwardInput(rows, h, x, gamma, rstd, dy, dx, queue));
}

void CudaOps::rmsNormBackwardWeight(int64_t rows, int64_t h, const float *x, const float *rstd,
                                    const float *dy, float *dgamma) {
  model::Buffer<float> scratch = deviceBuffer<float>(columnScratch(rows, h));
  if (failure.ok())
    CONDUIT_CUDA_NOTE(
        failure, cuda::rmsNormBackwardWeight(rows, h, x, rstd, dy, dgamma, scratch.data(), queue));
}

void CudaOps::geluForward(int64_t n, const float *x, float *y) {
  if (failure.ok())
    CONDUIT_CUDA_NOTE(failure, cuda::geluForward(n, x, y, queue));
}

void CudaOps::geluBackward(int64_t n, const float *x, const float *dy, float *dx) {
  if (failure.ok())
    CONDUIT_CUDA_NOTE(failure, cuda::geluBackward(n, x, dy, dx, queue));
}

void CudaOps::swigluForward(int64_t rows, int64_t f, const float *gateUp, float *out) {
  if (failure.ok())
    CONDUIT_CUDA_NOTE(failure, cuda::swigluForward(rows, f, gateUp, out, queue));
}

void CudaOps::swigluBackward(int64_t rows, int64_t f, const float *gateUp, const float *dout,
                             float *dGateUp) {
  if (failure.ok())
    CONDUIT_CUDA_NOTE(failure, cuda::swigluBackward(rows, f, gateUp, dout, dGateUp, queue));
}

// The q heads and then the k heads are consecutive in a qkv row: heads + kvHeads vectors.
void CudaOps::rotaryForward(int64_t samples, int64_t seq, int64_t heads, int64_t kvHeads,
                            int64_t headDim, const runtime::RotaryPositions &rope, float *qkv) {
  if (failure.ok())
    CONDUIT_CUDA_NOTE(failure,
                      cuda::rotary(samples * seq, seq, heads + kvHeads, headDim,
                                   (heads + 2 * kvHeads) * headDim, rope, 1.0, qkv, queue));
}

void CudaOps::rotaryBackward(int64_t samples, int64_t seq, int64_t heads, int64_t kvHeads,
                             int64_t headDim, const runtime::RotaryPositions &rope, float *dqkv) {
  if (failure.ok())
    CONDUIT_CUDA_NOTE(failure,
                      cuda::rotary(samples * seq, seq, heads + kvHeads, headDim,
                                   (heads + 2 * kvHeads) * headDim, rope, -1.0, dqkv, queue));
}

// Per sample, heads form the batch of the GEMMs. Query head i of token t sits at column i · d
// of its row, kv-head j at h + j · d (k) and h + kvd + j · d (v); rows are h + 2 · kvd (qkv)
// or h (out) apart. With g = heads / kvHeads query heads per kv-head, query head j · g + m
// reads kv-head j: member m of every group is one batch over the kv-heads (query heads g · d
// apart, kv-heads d apart, probabilities g seq² apart). A kv-head's gradients add its group's
// members in order (beta 1 after the first). With g = 1 each GEMM is one batch over all heads.
void CudaOps::attentionForward(int64_t samples, int64_t seq, int64_t heads, int64_t kvHeads,
                               int64_t headDim, const float *qkv, float *probs, float *out) {
  const int64_t width = heads * headDim, kvWidth = kvHeads * headDim, stride = width + 2 * kvWidth,
                square = seq * seq, group = heads / kvHeads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(headDim));
  for (int64_t n = 0; n < samples && failure.ok(); ++n) {
    const float *q = qkv + n * seq * stride, *k = q + width, *v = k + kvWidth;
    float *p = probs + n * heads * square, *o = out + n * seq * width;
    for (int64_t m = 0; m < group; ++m)
      gemmStrided(false, true, seq, seq, headDim, scale, q + m * headDim, stride, group * headDim,
                  k, stride, headDim, 0, p + m * square, seq, group * square, kvHeads);
    if (failure.ok())
      CONDUIT_CUDA_NOTE(failure, causalSoftmax(heads * seq, seq, p, queue));
    for (int64_t m = 0; m < group; ++m)
      gemmStrided(false, false, seq, headDim, seq, 1, p + m * square, seq, group * square, v,
                  stride, headDim, 0, o + m * headDim, width, group * headDim, kvHeads);
  }
}

void CudaOps::attentionBackward(int64_t samples, int64_t seq, int64_t heads, int64_t kvHeads,
                                int64_t headDim, const float *qkv, const float *probs,
                                const float *dout, float *dqkv) {
  const int64_t width = heads * headDim, kvWidth = kvHeads * headDim, stride = width + 2 * kvWidth,
                square = seq * seq, group = heads / kvHeads;
  const int64_t qStep = group * headDim, pStep = group * square;
  const float scale = 1.0f / std::sqrt(static_cast<float>(headDim));
  model::Buffer<float> dp = deviceBuffer<float>(heads * square);
  for (int64_t n = 0; n < samples && failure.ok(); ++n) {
    const float *q = qkv + n * seq * stride, *k = q + width, *v = k + kvWidth;
    const float *p = probs + n * heads * square, *dO = dout + n * seq * width;
    float *dq = dqkv + n * seq * stride, *dk = dq + width, *dv = dk + kvWidth;
    // dP = dO Vᵀ; dV = Σ Pᵀ dO; dS = P ⊙ (dP − rowsum(P ⊙ dP)) · scale; dQ = dS K;
    // dK = Σ dSᵀ Q (sums over a kv-head's query heads).
    for (int64_t m = 0; m < group; ++m)
      gemmStrided(false, true, seq, seq, headDim, 1, dO + m * headDim, width, qStep, v, stride,
                  headDim, 0, dp.data() + m * square, seq, pStep, kvHeads);
    for (int64_t m = 0; m < group; ++m)
      gemmStrided(true, false, seq, headDim, seq, 1, p + m * square, seq, pStep, dO + m * headDim,
                  width, qStep, m == 0 ? 0 : 1, dv, stride, headDim, kvHeads);
    if (failure.ok())
      CONDUIT_CUDA_NOTE(failure, softmaxBackward(heads * seq, seq, p, dp.data(), scale, queue));
    for (int64_t m = 0; m < group; ++m)
      gemmStrided(false, false, seq, headDim, seq, 1, dp.data() + m * square, seq, pStep, k, stride,
                  headDim, 0, dq + m * headDim, stride, qStep, kvHeads);
    for (int64_t m = 0; m < group; ++m)
      gemmStrided(true, false, seq, headDim, seq, 1, dp.data() + m * square, seq, pStep,
                  q + m * headDim, stride, qStep, m == 0 ? 0 : 1, dk, stride, headDim, kvHeads);
  }
}

absl::Status CudaOps::reserveTokens(int64_t tokens) {
  // An embedding backward uploads the rows grouped by token: up to 3 · tokens + 1 ids.
  const int64_t n = 3 * tokens + 1;
  for (Staging &s : staging) {
    if (s.capacity >= n)
      continue;
    CONDUIT_CUDA(cudaEventSynchronize(s.copied));
    if (s.host)
      CONDUIT_CUDA(cudaFreeHost(s.host));
    s.host = nullptr;
    s.capacity = 0;
    CONDUIT_CUDA(cudaMallocHost(&s.host, n * sizeof(int32_t)));
    s.capacity = n;
  }
  return absl::OkStatus();
}

model::Buffer<int32_t> CudaOps::uploadIds(const int32_t *host, int64_t n) {
  model::Buffer<int32_t> device = deviceBuffer<int32_t>(n);
  if (device.empty())
    return device;
  Staging &s = staging[nextStaging++ % staging.size()];
  // The staging buffer is free once its previous copy has run.
  CONDUIT_CUDA_NOTE(failure, cudaEventSynchronize(s.copied));
  if (s.capacity < n) {
    // Not reserved for this size: grow, keeping the old buffer (a copy may still read it,
    // and freeing pinned memory would synchronize the device).
    if (s.host)
      outgrown.push_back(s.host);
    s.host = nullptr;
    s.capacity = 0;
    CONDUIT_CUDA_NOTE(failure, cudaMallocHost(&s.host, n * sizeof(int32_t)));
    if (!failure.ok())
      return {};
    s.capacity = n;
  }
  std::memcpy(s.host, host, n * sizeof(int32_t));
  CONDUIT_CUDA_NOTE(failure, cudaMemcpyAsync(device.data(), s.host, n * sizeof(int32_t),
                                             cudaMemcpyHostToDevice, queue));
  CONDUIT_CUDA_NOTE(failure, cudaEventRecord(s.copied, queue));
  return device;
}

void CudaOps::embeddingForward(int64_t samples, int64_t seq, int64_t hidden, const int32_t *tokens,
                               const float *wte, const float *wpe, float *y) {
  model::Buffer<int32_t> ids = uploadIds(tokens, samples * seq);
  if (failure.ok())
    CONDUIT_CUDA_NOTE(failure, cuda::embeddingForward(samples * seq, seq, hidden, ids.data(), wte,
                                                      wpe, y, queue));
}

void CudaOps::embeddingBackward(int64_t samples, int64_t seq, int64_t hidden, const int32_t *tokens,
                                const float *dy, float *dwte, float *dwpe) {
  // The rows grouped by token, in row order within a group, so that the device sums each
  // token's rows in parallel with the others and in a fixed order:
  // [rows in token order | group starts (groups + 1) | the group's token].
  // Rows of negative tokens (another tensor rank's vocabulary) add to the positions only.
  const int64_t rows = samples * seq;
  std::vector<int32_t> order;
  order.reserve(rows);
  for (int64_t r = 0; r < rows; ++r)
    if (tokens[r] >= 0)
      order.push_back(static_cast<int32_t>(r));
  const int64_t kept = static_cast<int64_t>(order.size());
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return tokens[a] < tokens[b]; });
  std::vector<int32_t> starts, groupTokens;
  for (int64_t k = 0; k < kept; ++k)
    if (k == 0 || tokens[order[k]] != tokens[order[k - 1]]) {
      starts.push_back(static_cast<int32_t>(k));
      groupTokens.push_back(tokens[order[k]]);
    }
  const int64_t groups = static_cast<int64_t>(groupTokens.size());
  starts.push_back(static_cast<int32_t>(kept));
  std::vector<int32_t> packed = order;
  packed.insert(packed.end(), starts.begin(), starts.end());
  packed.insert(packed.end(), groupTokens.begin(), groupTokens.end());
  model::Buffer<int32_t> ids = uploadIds(packed.data(), static_cast<int64_t>(packed.size()));
  if (failure.ok())
    CONDUIT_CUDA_NOTE(failure, cuda::embeddingBackward(
                                   rows, seq, hidden, ids.data(), ids.data() + kept,
                                   ids.data() + kept + groups + 1, groups, dy, dwte, dwpe, queue));
}

void CudaOps::crossEntropy(int64_t rows, int64_t vocab, const float *logits, const int32_t *targets,
                           float scale, float *dlogits) {
  model::Buffer<int32_t> ids = uploadIds(targets, rows);
  model::Buffer<float> losses = deviceBuffer<float>(rows);
  if (failure.ok())
    CONDUIT_CUDA_NOTE(failure, cuda::crossEntropy(rows, vocab, logits, ids.data(), scale,
                                                  losses.data(), dlogits, queue));
  if (failure.ok() && countingLoss)
    CONDUIT_CUDA_NOTE(failure, sumInto(rows, losses.data(), lossDevice, queue));
}

void CudaOps::rowMax(int64_t rows, int64_t vocab, const float *logits, float *max) {
  if (failure.ok())
    CONDUIT_CUDA_NOTE(failure, cuda::rowMax(rows, vocab, logits, max, queue));
}

void CudaOps::crossEntropyPartials(int64_t rows, int64_t vocab, const float *logits,
                                   const int32_t *targets, const float *max, float *sums,
                                   float *picked) {
  model::Buffer<int32_t> ids = uploadIds(targets, rows);
  if (failure.ok())
    CONDUIT_CUDA_NOTE(failure, cuda::crossEntropyPartials(rows, vocab, logits, ids.data(), max,
                                                          sums, picked, queue));
}

void CudaOps::crossEntropyFromPartials(int64_t rows, int64_t vocab, const float *logits,
                                       const int32_t *targets, const float *max, const float *sums,
                                       const float *picked, float scale, bool countLoss,
                                       float *dlogits) {
  model::Buffer<int32_t> ids = uploadIds(targets, rows);
  model::Buffer<float> losses = deviceBuffer<float>(rows);
  if (failure.ok())
    CONDUIT_CUDA_NOTE(failure,
                      cuda::crossEntropyFromPartials(rows, vocab, logits, ids.data(), max, sums,
                                                     picked, scale, losses.data(), dlogits, queue));
  if (failure.ok() && countLoss && countingLoss)
    CONDUIT_CUDA_NOTE(failure, sumInto(rows, losses.data(), lossDevice, queue));
}

double CudaOps::takeLoss() {
  if (!failure.ok())
    return NAN;
  CONDUIT_CUDA_NOTE(failure, cudaMemcpyAsync(lossHost, lossDevice, sizeof(double),
                                             cudaMemcpyDeviceToHost, queue));
  CONDUIT_CUDA_NOTE(failure, cudaMemsetAsync(lossDevice, 0, sizeof(double), queue));
  CONDUIT_CUDA_NOTE(failure, cudaStreamSynchronize(queue));
  return failure.ok() ? *lossHost : NAN;
}

} // namespace conduit::cuda
