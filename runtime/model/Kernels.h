//===- Kernels.h - the CPU math of the GPT model ----------------*- C++ -*-===//
//
// The handful of dense kernels the model needs, for float (training) and double (gradient
// checks): GEMM through CBLAS, LayerNorm, GELU, causal softmax attention and cross-entropy,
// each with its backward. Matrices are row-major; a "row" is one token.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_MODEL_KERNELS_H
#define CONDUIT_RUNTIME_MODEL_KERNELS_H

#include <cstdint>
#include <vector>

namespace conduit::model {

/// C[m×n] = alpha · op(A) · op(B) + beta · C, row-major; op(X) is X or Xᵀ.
template <typename T>
void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, T alpha, const T *a,
          const T *b, T beta, T *c);

/// y = LayerNorm(x) · gamma + beta over the last dimension (width `h`) of `rows` rows; keeps
/// the per-row mean and reciprocal standard deviation for the backward.
template <typename T>
void layerNormForward(int64_t rows, int64_t h, const T *x, const T *gamma, const T *beta, T *y,
                      T *mean, T *rstd);
/// The input gradient dx (overwritten) from the output gradient dy.
template <typename T>
void layerNormBackwardInput(int64_t rows, int64_t h, const T *x, const T *gamma, const T *mean,
                            const T *rstd, const T *dy, T *dx);
/// The parameter gradients dgamma, dbeta (accumulated) from the output gradient dy; apart from
/// the input gradient, so that a split backward can compute them later.
template <typename T>
void layerNormBackwardWeight(int64_t rows, int64_t h, const T *x, const T *mean, const T *rstd,
                             const T *dy, T *dgamma, T *dbeta);

/// GELU, tanh approximation (as GPT-2).
template <typename T> void geluForward(int64_t n, const T *x, T *y);
/// dx = dy · gelu'(x).
template <typename T> void geluBackward(int64_t n, const T *x, const T *dy, T *dx);

/// Causal multi-head self-attention core for `samples` sequences of `seq` tokens. `qkv` holds
/// per token [q | k | v], each `heads × headDim` wide. Writes the attention output (per token
/// heads × headDim) and keeps the softmax probabilities [samples, heads, seq, seq].
template <typename T>
void attentionForward(int64_t samples, int64_t seq, int64_t heads, int64_t headDim, const T *qkv,
                      T *probs, T *out);
/// Gradient of the attention core: dqkv (overwritten) from dout.
template <typename T>
void attentionBackward(int64_t samples, int64_t seq, int64_t heads, int64_t headDim, const T *qkv,
                       const T *probs, const T *dout, T *dqkv);

/// Sum over rows of the cross-entropy of `logits` [rows × vocab] against `targets`.
/// `dlogits` (if not null) receives scale · (softmax − onehot).
template <typename T>
double crossEntropy(int64_t rows, int64_t vocab, const T *logits, const int32_t *targets, T scale,
                    T *dlogits);

} // namespace conduit::model

#endif // CONDUIT_RUNTIME_MODEL_KERNELS_H
