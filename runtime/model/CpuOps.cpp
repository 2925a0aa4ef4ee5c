//===- CpuOps.cpp - the model's math on the CPU ---------------------------===//

#include "runtime/model/Kernels.h"
#include "runtime/model/Ops.h"

#include <algorithm>
#include <cmath>

namespace conduit::model {

template <typename T> Buffer<T> CpuOps<T>::allocate(int64_t n) {
  return Buffer<T>(new T[n](), n, [](T *p) { delete[] p; }, &this->counter);
}

template <typename T> Buffer<double> CpuOps<T>::allocateDouble(int64_t n) {
  return Buffer<double>(new double[n](), n, [](double *p) { delete[] p; }, &this->counter);
}

template <typename T> void CpuOps<T>::upload(const T *host, int64_t n, T *dst) {
  std::copy(host, host + n, dst);
}

template <typename T> void CpuOps<T>::download(const T *src, int64_t n, T *host) {
  std::copy(src, src + n, host);
}

template <typename T> void CpuOps<T>::fill(int64_t n, T value, T *dst) {
  std::fill(dst, dst + n, value);
}

template <typename T> void CpuOps<T>::copy(int64_t n, const T *src, T *dst) {
  std::copy(src, src + n, dst);
}

template <typename T>
void CpuOps<T>::copyRows(int64_t rows, int64_t n, const T *src, int64_t srcStride, T *dst,
                         int64_t dstStride) {
  for (int64_t r = 0; r < rows; ++r)
    std::copy(src + r * srcStride, src + r * srcStride + n, dst + r * dstStride);
}

template <typename T> void CpuOps<T>::add(int64_t n, const T *src, T *dst) {
  for (int64_t i = 0; i < n; ++i)
    dst[i] += src[i];
}

template <typename T> void CpuOps<T>::accumulate(int64_t n, const T *src, double *dst) {
  for (int64_t i = 0; i < n; ++i)
    dst[i] += src[i];
}

template <typename T> void CpuOps<T>::scaledAdd(int64_t n, T alpha, const T *src, T *dst) {
  for (int64_t i = 0; i < n; ++i)
    dst[i] += alpha * src[i];
}

template <typename T> void CpuOps<T>::scaleRows(int64_t rows, int64_t n, const T *factors, T *x) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < n; ++i)
      x[r * n + i] *= factors[r];
}

template <typename T> void CpuOps<T>::addBias(int64_t rows, int64_t n, const T *bias, T *x) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < n; ++i)
      x[r * n + i] += bias[i];
}

template <typename T> void CpuOps<T>::sumRows(int64_t rows, int64_t n, const T *x, T *sum) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < n; ++i)
      sum[i] += x[r * n + i];
}

template <typename T>
void CpuOps<T>::gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, T alpha, const T *a,
                     const T *b, T beta, T *c) {
  model::gemm<T>(transA, transB, m, n, k, alpha, a, b, beta, c);
}

template <typename T>
void CpuOps<T>::layerNormForward(int64_t rows, int64_t h, const T *x, const T *gamma, const T *beta,
                                 double eps, T *y, T *mean, T *rstd) {
  model::layerNormForward(rows, h, x, gamma, beta, eps, y, mean, rstd);
}

template <typename T>
void CpuOps<T>::layerNormBackwardInput(int64_t rows, int64_t h, const T *x, const T *gamma,
                                       const T *mean, const T *rstd, const T *dy, T *dx) {
  model::layerNormBackwardInput(rows, h, x, gamma, mean, rstd, dy, dx);
}

template <typename T>
void CpuOps<T>::layerNormBackwardWeight(int64_t rows, int64_t h, const T *x, const T *mean,
                                        const T *rstd, const T *dy, T *dgamma, T *dbeta) {
  model::layerNormBackwardWeight(rows, h, x, mean, rstd, dy, dgamma, dbeta);
}

template <typename T>
void CpuOps<T>::rmsNormForward(int64_t rows, int64_t h, const T *x, const T *gamma, double eps,
                               T *y, T *rstd) {
  model::rmsNormForward(rows, h, x, gamma, eps, y, rstd);
}

template <typename T>
void CpuOps<T>::rmsNormBackwardInput(int64_t rows, int64_t h, const T *x, const T *gamma,
                                     const T *rstd, const T *dy, T *dx) {
  model::rmsNormBackwardInput(rows, h, x, gamma, rstd, dy, dx);
}

template <typename T>
void CpuOps<T>::rmsNormBackwardWeight(int64_t rows, int64_t h, const T *x, const T *rstd,
                                      const T *dy, T *dgamma) {
  model::rmsNormBackwardWeight(rows, h, x, rstd, dy, dgamma);
}

template <typename T> void CpuOps<T>::geluForward(int64_t n, const T *x, T *y) {
  model::geluForward(n, x, y);
}

template <typename T> void CpuOps<T>::geluBackward(int64_t n, const T *x, const T *dy, T *dx) {
  model::geluBackward(n, x, dy, dx);
}

template <typename T>
void CpuOps<T>::swigluForward(int64_t rows, int64_t f, const T *gateUp, T *out) {
  model::swigluForward(rows, f, gateUp, out);
}

template <typename T>
void CpuOps<T>::swigluBackward(int64_t rows, int64_t f, const T *gateUp, const T *dout,
                               T *dGateUp) {
  model::swigluBackward(rows, f, gateUp, dout, dGateUp);
}

template <typename T>
void CpuOps<T>::rotaryForward(int64_t samples, int64_t seq, int64_t heads, int64_t kvHeads,
                              int64_t headDim, const runtime::RotaryPositions &rope, T *qkv) {
  model::rotary(samples, seq, heads, kvHeads, headDim, rope, /*inverse=*/false, qkv);
}

template <typename T>
void CpuOps<T>::rotaryBackward(int64_t samples, int64_t seq, int64_t heads, int64_t kvHeads,
                               int64_t headDim, const runtime::RotaryPositions &rope, T *dqkv) {
  model::rotary(samples, seq, heads, kvHeads, headDim, rope, /*inverse=*/true, dqkv);
}

template <typename T>
void CpuOps<T>::attentionForward(int64_t samples, int64_t seq, int64_t heads, int64_t kvHeads,
                                 int64_t headDim, const T *qkv, T *probs, T *out) {
  model::attentionForward(samples, seq, heads, kvHeads, headDim, qkv, probs, out);
}

template <typename T>
void CpuOps<T>::attentionBackward(int64_t samples, int64_t seq, int64_t heads, int64_t kvHeads,
                                  int64_t headDim, const T *qkv, const T *probs, const T *dout,
                                  T *dqkv) {
  model::attentionBackward(samples, seq, heads, kvHeads, headDim, qkv, probs, dout, dqkv);
}

template <typename T>
void CpuOps<T>::embeddingForward(int64_t samples, int64_t seq, int64_t hidden,
                                 const int32_t *tokens, const T *wte, const T *wpe, T *y) {
  for (int64_t n = 0; n < samples; ++n)
    for (int64_t t = 0; t < seq; ++t) {
      const int64_t row = n * seq + t;
      if (tokens[row] < 0) {
        for (int64_t i = 0; i < hidden; ++i)
          y[row * hidden + i] = wpe ? wpe[t * hidden + i] : T(0);
        continue;
      }
      const T *token = wte + static_cast<int64_t>(tokens[row]) * hidden;
      if (!wpe) {
        std::copy(token, token + hidden, y + row * hidden);
        continue;
      }
      for (int64_t i = 0; i < hidden; ++i)
        y[row * hidden + i] = token[i] + wpe[t * hidden + i];
    }
}

template <typename T>
void CpuOps<T>::embeddingBackward(int64_t samples, int64_t seq, int64_t hidden,
                                  const int32_t *tokens, const T *dy, T *dwte, T *dwpe) {
  for (int64_t n = 0; n < samples; ++n)
    for (int64_t t = 0; t < seq; ++t) {
      const int64_t row = n * seq + t;
      T *token = tokens[row] < 0 ? nullptr : dwte + static_cast<int64_t>(tokens[row]) * hidden;
      for (int64_t i = 0; i < hidden; ++i) {
        if (token)
          token[i] += dy[row * hidden + i];
        if (dwpe)
          dwpe[t * hidden + i] += dy[row * hidden + i];
      }
    }
}

template <typename T>
void CpuOps<T>::crossEntropy(int64_t rows, int64_t vocab, const T *logits, const int32_t *targets,
                             T scale, T *dlogits) {
  const double sum = model::crossEntropy(rows, vocab, logits, targets, scale, dlogits);
  if (this->countingLoss)
    loss += sum;
}

template <typename T> void CpuOps<T>::rowMax(int64_t rows, int64_t vocab, const T *logits, T *max) {
  for (int64_t r = 0; r < rows; ++r)
    max[r] = *std::max_element(logits + r * vocab, logits + (r + 1) * vocab);
}

template <typename T>
void CpuOps<T>::crossEntropyPartials(int64_t rows, int64_t vocab, const T *logits,
                                     const int32_t *targets, const T *max, T *sums, T *picked) {
  for (int64_t r = 0; r < rows; ++r) {
    const T *z = logits + r * vocab;
    double sum = 0;
    for (int64_t v = 0; v < vocab; ++v)
      sum += std::exp(static_cast<double>(z[v]) - max[r]);
    sums[r] = static_cast<T>(sum);
    picked[r] = targets[r] >= 0 ? z[targets[r]] : T(0);
  }
}

template <typename T>
void CpuOps<T>::crossEntropyFromPartials(int64_t rows, int64_t vocab, const T *logits,
                                         const int32_t *targets, const T *max, const T *sums,
                                         const T *picked, T scale, bool countLoss, T *dlogits) {
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const double logSum = static_cast<double>(max[r]) + std::log(static_cast<double>(sums[r]));
    total += logSum - picked[r];
    const T *z = logits + r * vocab;
    T *dz = dlogits + r * vocab;
    for (int64_t v = 0; v < vocab; ++v)
      dz[v] = static_cast<T>(scale * (std::exp(z[v] - logSum) - (v == targets[r] ? 1 : 0)));
  }
  if (countLoss && this->countingLoss)
    loss += total;
}

template <typename T> double CpuOps<T>::takeLoss() { return std::exchange(loss, 0.0); }

template class CpuOps<float>;
template class CpuOps<double>;

} // namespace conduit::model
