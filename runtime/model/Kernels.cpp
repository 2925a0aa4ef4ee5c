//===- Kernels.cpp - the CPU math of the GPT model ------------------------===//
//
// Straightforward loops around CBLAS. Every kernel is deterministic: the order of every sum
// depends only on the shapes, so the same inputs give the same bits on every rank and in the
// single-process reference.
//
//===----------------------------------------------------------------------===//

#include "runtime/model/Kernels.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

namespace conduit::model {

template <typename T>
void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, T alpha, const T *a,
          const T *b, T beta, T *c) {
  // CBLAS's single- and double-precision GEMMs take the same arguments.
  auto call = [&](auto blasGemm) {
    blasGemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
             static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a,
             static_cast<int>(transA ? m : k), b, static_cast<int>(transB ? k : n), beta, c,
             static_cast<int>(n));
  };
  if constexpr (std::is_same_v<T, float>)
    call(cblas_sgemm);
  else
    call(cblas_dgemm);
}

template <typename T>
void layerNormForward(int64_t rows, int64_t h, const T *x, const T *gamma, const T *beta,
                      double eps, T *y, T *mean, T *rstd) {
  for (int64_t r = 0; r < rows; ++r) {
    const T *xr = x + r * h;
    T *yr = y + r * h;
    double sum = 0;
    for (int64_t i = 0; i < h; ++i)
      sum += xr[i];
    const double mu = sum / static_cast<double>(h);
    double var = 0;
    for (int64_t i = 0; i < h; ++i)
      var += (xr[i] - mu) * (xr[i] - mu);
    var /= static_cast<double>(h);
    const double rs = 1.0 / std::sqrt(var + eps);
    mean[r] = static_cast<T>(mu);
    rstd[r] = static_cast<T>(rs);
    for (int64_t i = 0; i < h; ++i)
      yr[i] = static_cast<T>((xr[i] - mu) * rs) * gamma[i] + beta[i];
  }
}

template <typename T>
void layerNormBackwardInput(int64_t rows, int64_t h, const T *x, const T *gamma, const T *mean,
                            const T *rstd, const T *dy, T *dx) {
  const double invH = 1.0 / static_cast<double>(h);
  for (int64_t r = 0; r < rows; ++r) {
    const T *xr = x + r * h, *dyr = dy + r * h;
    T *dxr = dx + r * h;
    const double mu = mean[r], rs = rstd[r];
    double sumDxhat = 0, sumDxhatXhat = 0;
    for (int64_t i = 0; i < h; ++i) {
      const double xhat = (xr[i] - mu) * rs;
      const double dxhat = static_cast<double>(dyr[i]) * gamma[i];
      sumDxhat += dxhat;
      sumDxhatXhat += dxhat * xhat;
    }
    for (int64_t i = 0; i < h; ++i) {
      const double xhat = (xr[i] - mu) * rs;
      const double dxhat = static_cast<double>(dyr[i]) * gamma[i];
      dxr[i] = static_cast<T>(rs * (dxhat - invH * sumDxhat - xhat * invH * sumDxhatXhat));
    }
  }
}

template <typename T>
void layerNormBackwardWeight(int64_t rows, int64_t h, const T *x, const T *mean, const T *rstd,
                             const T *dy, T *dgamma, T *dbeta) {
  for (int64_t r = 0; r < rows; ++r) {
    const T *xr = x + r * h, *dyr = dy + r * h;
    const double mu = mean[r], rs = rstd[r];
    for (int64_t i = 0; i < h; ++i) {
      const double xhat = (xr[i] - mu) * rs;
      dgamma[i] += static_cast<T>(dyr[i] * xhat);
      dbeta[i] += dyr[i];
    }
  }
}

template <typename T>
void rmsNormForward(int64_t rows, int64_t h, const T *x, const T *gamma, double eps, T *y,
                    T *rstd) {
  for (int64_t r = 0; r < rows; ++r) {
    const T *xr = x + r * h;
    T *yr = y + r * h;
    double squares = 0;
    for (int64_t i = 0; i < h; ++i)
      squares += static_cast<double>(xr[i]) * xr[i];
    const double rs = 1.0 / std::sqrt(squares / static_cast<double>(h) + eps);
    rstd[r] = static_cast<T>(rs);
    for (int64_t i = 0; i < h; ++i)
      yr[i] = static_cast<T>(xr[i] * rs) * gamma[i];
  }
}

// With x̂ = x · rstd and dx̂ = dy · gamma: dx = rstd · (dx̂ − x̂ · mean(dx̂ · x̂)).
template <typename T>
void rmsNormBackwardInput(int64_t rows, int64_t h, const T *x, const T *gamma, const T *rstd,
                          const T *dy, T *dx) {
  const double invH = 1.0 / static_cast<double>(h);
  for (int64_t r = 0; r < rows; ++r) {
    const T *xr = x + r * h, *dyr = dy + r * h;
    T *dxr = dx + r * h;
    const double rs = rstd[r];
    double sumDxhatXhat = 0;
    for (int64_t i = 0; i < h; ++i)
      sumDxhatXhat += static_cast<double>(dyr[i]) * gamma[i] * (xr[i] * rs);
    for (int64_t i = 0; i < h; ++i) {
      const double xhat = xr[i] * rs;
      const double dxhat = static_cast<double>(dyr[i]) * gamma[i];
      dxr[i] = static_cast<T>(rs * (dxhat - xhat * invH * sumDxhatXhat));
    }
  }
}

template <typename T>
void rmsNormBackwardWeight(int64_t rows, int64_t h, const T *x, const T *rstd, const T *dy,
                           T *dgamma) {
  for (int64_t r = 0; r < rows; ++r) {
    const T *xr = x + r * h, *dyr = dy + r * h;
    const double rs = rstd[r];
    for (int64_t i = 0; i < h; ++i)
      dgamma[i] += static_cast<T>(dyr[i] * (xr[i] * rs));
  }
}

namespace {
constexpr double kGeluC = 0.7978845608028654; // sqrt(2 / pi)
constexpr double kGeluA = 0.044715;
} // namespace

template <typename T> void geluForward(int64_t n, const T *x, T *y) {
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    y[i] = static_cast<T>(0.5 * v * (1 + std::tanh(kGeluC * (v + kGeluA * v * v * v))));
  }
}

template <typename T> void geluBackward(int64_t n, const T *x, const T *dy, T *dx) {
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    const double u = kGeluC * (v + kGeluA * v * v * v);
    const double t = std::tanh(u);
    const double du = kGeluC * (1 + 3 * kGeluA * v * v);
    dx[i] = static_cast<T>(dy[i] * (0.5 * (1 + t) + 0.5 * v * (1 - t * t) * du));
  }
}

template <typename T> void swigluForward(int64_t rows, int64_t f, const T *gateUp, T *out) {
  for (int64_t r = 0; r < rows; ++r) {
    const T *gate = gateUp + r * 2 * f, *up = gate + f;
    for (int64_t i = 0; i < f; ++i) {
      const double a = gate[i];
      const double sigmoid = 1.0 / (1.0 + std::exp(-a));
      out[r * f + i] = static_cast<T>(a * sigmoid * up[i]);
    }
  }
}

// d silu(a) / da = sigmoid(a) · (1 + a · (1 − sigmoid(a))).
template <typename T>
void swigluBackward(int64_t rows, int64_t f, const T *gateUp, const T *dout, T *dGateUp) {
  for (int64_t r = 0; r < rows; ++r) {
    const T *gate = gateUp + r * 2 * f, *up = gate + f, *d = dout + r * f;
    T *dGate = dGateUp + r * 2 * f, *dUp = dGate + f;
    for (int64_t i = 0; i < f; ++i) {
      const double a = gate[i];
      const double sigmoid = 1.0 / (1.0 + std::exp(-a));
      dGate[i] = static_cast<T>(d[i] * up[i] * sigmoid * (1.0 + a * (1.0 - sigmoid)));
      dUp[i] = static_cast<T>(d[i] * a * sigmoid);
    }
  }
}

template <typename T>
void rotary(int64_t samples, int64_t seq, int64_t heads, int64_t kvHeads, int64_t headDim,
            const runtime::RotaryPositions &rope, bool inverse, T *qkv) {
  const int64_t half = headDim / 2, stride = (heads + 2 * kvHeads) * headDim;
  const double magnitude = rope.scaling.attentionFactor;
  std::vector<double> inverseFrequency(half), cosines(half), sines(half);
  for (int64_t i = 0; i < half; ++i)
    inverseFrequency[i] = runtime::rotaryInverseFrequency(rope, i, headDim);
  for (int64_t t = 0; t < seq; ++t) {
    for (int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(t) * inverseFrequency[i];
      cosines[i] = magnitude * std::cos(angle);
      sines[i] = magnitude * (inverse ? -std::sin(angle) : std::sin(angle));
    }
    for (int64_t n = 0; n < samples; ++n) {
      T *row = qkv + (n * seq + t) * stride;
      // The q heads and then the k heads are consecutive: heads + kvHeads vectors in all.
      for (int64_t head = 0; head < heads + kvHeads; ++head) {
        T *x = row + head * headDim;
        for (int64_t i = 0; i < half; ++i) {
          const double a = x[i], b = x[i + half];
          x[i] = static_cast<T>(a * cosines[i] - b * sines[i]);
          x[i + half] = static_cast<T>(b * cosines[i] + a * sines[i]);
        }
      }
    }
  }
}

template <typename T>
void attentionForward(int64_t samples, int64_t seq, int64_t heads, int64_t kvHeads, int64_t headDim,
                      const T *qkv, T *probs, T *out) {
  const int64_t width = heads * headDim, kvWidth = kvHeads * headDim, stride = width + 2 * kvWidth,
                group = heads / kvHeads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(headDim));
  std::vector<double> scores(seq);
  for (int64_t n = 0; n < samples; ++n)
    for (int64_t hd = 0; hd < heads; ++hd) {
      T *p = probs + ((n * heads + hd) * seq) * seq;
      const int64_t kOffset = width + (hd / group) * headDim, vOffset = kOffset + kvWidth;
      for (int64_t i = 0; i < seq; ++i) {
        const T *q = qkv + (n * seq + i) * stride + hd * headDim;
        double best = -INFINITY;
        for (int64_t j = 0; j <= i; ++j) {
          const T *k = qkv + (n * seq + j) * stride + kOffset;
          double dot = 0;
          for (int64_t d = 0; d < headDim; ++d)
            dot += static_cast<double>(q[d]) * k[d];
          scores[j] = dot * scale;
          best = std::max(best, scores[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j <= i; ++j) {
          scores[j] = std::exp(scores[j] - best);
          sum += scores[j];
        }
        T *pi = p + i * seq;
        for (int64_t j = 0; j < seq; ++j)
          pi[j] = j <= i ? static_cast<T>(scores[j] / sum) : T(0);
        T *o = out + (n * seq + i) * width + hd * headDim;
        for (int64_t d = 0; d < headDim; ++d) {
          double acc = 0;
          for (int64_t j = 0; j <= i; ++j)
            acc += static_cast<double>(pi[j]) * qkv[(n * seq + j) * stride + vOffset + d];
          o[d] = static_cast<T>(acc);
        }
      }
    }
}

template <typename T>
void attentionBackward(int64_t samples, int64_t seq, int64_t heads, int64_t kvHeads,
                       int64_t headDim, const T *qkv, const T *probs, const T *dout, T *dqkv) {
  const int64_t width = heads * headDim, kvWidth = kvHeads * headDim, stride = width + 2 * kvWidth,
                group = heads / kvHeads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(headDim));
  std::fill(dqkv, dqkv + samples * seq * stride, T(0));
  std::vector<double> dp(seq), dq(headDim);
  for (int64_t n = 0; n < samples; ++n)
    for (int64_t hd = 0; hd < heads; ++hd) {
      const T *p = probs + ((n * heads + hd) * seq) * seq;
      const int64_t kOffset = width + (hd / group) * headDim, vOffset = kOffset + kvWidth;
      for (int64_t i = 0; i < seq; ++i) {
        const T *pi = p + i * seq;
        const T *doi = dout + (n * seq + i) * width + hd * headDim;
        // dP[j] = dO · V[j]; dV[j] += P[j] dO; dS = P (dP - sum P dP).
        double dot = 0;
        for (int64_t j = 0; j <= i; ++j) {
          const T *v = qkv + (n * seq + j) * stride + vOffset;
          T *dv = dqkv + (n * seq + j) * stride + vOffset;
          double acc = 0;
          for (int64_t d = 0; d < headDim; ++d) {
            acc += static_cast<double>(doi[d]) * v[d];
            dv[d] += static_cast<T>(pi[j] * doi[d]);
          }
          dp[j] = acc;
          dot += pi[j] * acc;
        }
        const T *q = qkv + (n * seq + i) * stride + hd * headDim;
        std::fill(dq.begin(), dq.end(), 0.0);
        for (int64_t j = 0; j <= i; ++j) {
          const double ds = pi[j] * (dp[j] - dot) * scale;
          const T *k = qkv + (n * seq + j) * stride + kOffset;
          T *dk = dqkv + (n * seq + j) * stride + kOffset;
          for (int64_t d = 0; d < headDim; ++d) {
            dq[d] += ds * k[d];
            dk[d] += static_cast<T>(ds * q[d]);
          }
        }
        T *dqi = dqkv + (n * seq + i) * stride + hd * headDim;
        for (int64_t d = 0; d < headDim; ++d)
          dqi[d] += static_cast<T>(dq[d]);
      }
    }
}

template <typename T>
double crossEntropy(int64_t rows, int64_t vocab, const T *logits, const int32_t *targets, T scale,
                    T *dlogits) {
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const T *z = logits + r * vocab;
    const double best = *std::max_element(z, z + vocab);
    double sum = 0;
    for (int64_t v = 0; v < vocab; ++v)
      sum += std::exp(z[v] - best);
    const double logSum = best + std::log(sum);
    total += logSum - z[targets[r]];
    if (dlogits) {
      T *dz = dlogits + r * vocab;
      for (int64_t v = 0; v < vocab; ++v)
        dz[v] = static_cast<T>(scale * (std::exp(z[v] - logSum) - (v == targets[r] ? 1 : 0)));
    }
  }
  return total;
}

#define CONDUIT_INSTANTIATE_KERNELS(T)                                                             \
  template void gemm<T>(bool, bool, int64_t, int64_t, int64_t, T, const T *, const T *, T, T *);   \
  template void layerNormForward<T>(int64_t, int64_t, const T *, const T *, const T *, double,     \
                                    T *, T *, T *);                                                \
  template void layerNormBackwardInput<T>(int64_t, int64_t, const T *, const T *, const T *,       \
                                          const T *, const T *, T *);                              \
  template void layerNormBackwardWeight<T>(int64_t, int64_t, const T *, const T *, const T *,      \
                                           const T *, T *, T *);                                   \
  template void rmsNormForward<T>(int64_t, int64_t, const T *, const T *, double, T *, T *);       \
  template void rmsNormBackwardInput<T>(int64_t, int64_t, const T *, const T *, const T *,         \
                                        const T *, T *);                                           \
  template void rmsNormBackwardWeight<T>(int64_t, int64_t, const T *, const T *, const T *, T *);  \
  template void geluForward<T>(int64_t, const T *, T *);                                           \
  template void geluBackward<T>(int64_t, const T *, const T *, T *);                               \
  template void swigluForward<T>(int64_t, int64_t, const T *, T *);                                \
  template void swigluBackward<T>(int64_t, int64_t, const T *, const T *, T *);                    \
  template void rotary<T>(int64_t, int64_t, int64_t, int64_t, int64_t,                             \
                          const runtime::RotaryPositions &, bool, T *);                            \
  template void attentionForward<T>(int64_t, int64_t, int64_t, int64_t, int64_t, const T *, T *,   \
                                    T *);                                                          \
  template void attentionBackward<T>(int64_t, int64_t, int64_t, int64_t, int64_t, const T *,       \
                                     const T *, const T *, T *);                                   \
  template double crossEntropy<T>(int64_t, int64_t, const T *, const int32_t *, T, T *);

CONDUIT_INSTANTIATE_KERNELS(float)
CONDUIT_INSTANTIATE_KERNELS(double)

} // namespace conduit::model
