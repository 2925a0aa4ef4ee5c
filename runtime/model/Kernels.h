//===- Kernels.h - the CPU math of the GPT model ----------------*- C++ -*-===//
//
// The handful of dense kernels the model needs, for float (training) and double (gradient
// checks): GEMM through CBLAS, LayerNorm and RMSNorm, GELU and SwiGLU, rotary position
// embedding, causal softmax attention (multi-head or grouped-query) and cross-entropy, each
// with its backward. Matrices are row-major; a "row" is one token.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_MODEL_KERNELS_H
#define CONDUIT_RUNTIME_MODEL_KERNELS_H

#include "runtime/plan/Rotary.h"

#include <cstdint>
#include <vector>

namespace conduit::model {

/// C[m×n] = alpha · op(A) · op(B) + beta · C, row-major; op(X) is X or Xᵀ.
template <typename T>
void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, T alpha, const T *a,
          const T *b, T beta, T *c);

/// y = LayerNorm(x) · gamma + beta over the last dimension (width `h`) of `rows` rows, with
/// `eps` added to the variance; keeps the per-row mean and reciprocal standard deviation for
/// the backward.
template <typename T>
void layerNormForward(int64_t rows, int64_t h, const T *x, const T *gamma, const T *beta,
                      double eps, T *y, T *mean, T *rstd);
/// The input gradient dx (overwritten) from the output gradient dy.
template <typename T>
void layerNormBackwardInput(int64_t rows, int64_t h, const T *x, const T *gamma, const T *mean,
                            const T *rstd, const T *dy, T *dx);
/// The parameter gradients dgamma, dbeta (accumulated) from the output gradient dy; apart from
/// the input gradient, so that a split backward can compute them later.
template <typename T>
void layerNormBackwardWeight(int64_t rows, int64_t h, const T *x, const T *mean, const T *rstd,
                             const T *dy, T *dgamma, T *dbeta);

/// y = x · rstd · gamma with rstd = 1 / sqrt(mean(x²) + eps) per row (RMSNorm, Zhang and
/// Sennrich, arXiv:1910.07467); keeps rstd for the backward.
template <typename T>
void rmsNormForward(int64_t rows, int64_t h, const T *x, const T *gamma, double eps, T *y, T *rstd);
/// The input gradient dx (overwritten).
template <typename T>
void rmsNormBackwardInput(int64_t rows, int64_t h, const T *x, const T *gamma, const T *rstd,
                          const T *dy, T *dx);
/// The gain gradient dgamma (accumulated).
template <typename T>
void rmsNormBackwardWeight(int64_t rows, int64_t h, const T *x, const T *rstd, const T *dy,
                           T *dgamma);

/// GELU, tanh approximation (as GPT-2).
template <typename T> void geluForward(int64_t n, const T *x, T *y);
/// dx = dy · gelu'(x).
template <typename T> void geluBackward(int64_t n, const T *x, const T *dy, T *dx);

/// SwiGLU (Shazeer, arXiv:2002.05202): each of `rows` rows of `gateUp` is [a | b], each f
/// wide; out (rows × f) = silu(a) · b with silu(a) = a · sigmoid(a).
template <typename T> void swigluForward(int64_t rows, int64_t f, const T *gateUp, T *out);
/// dGateUp (rows × 2f, overwritten) from dout.
template <typename T>
void swigluBackward(int64_t rows, int64_t f, const T *gateUp, const T *dout, T *dGateUp);

/// Rotary position embedding (Su et al., arXiv:2104.09864) in Hugging Face Llama's convention
/// (`rotate_half` in modeling_llama.py), in place on the q and k heads of `qkv` (the layout of
/// attentionForward; v is left alone). For a head of even width d, dimensions i and i + d/2
/// (i < d/2) form a pair rotated by the angle t · f_i at position t, f_i the inverse frequency
/// (theta^(−2i/d) without a context extension; runtime/plan/Rotary.h), and scaled by the
/// extension's magnitude m (1 but for yarn): x[i] ← m (x[i] cos − x[i + d/2] sin),
/// x[i + d/2] ← m (x[i + d/2] cos + x[i] sin). `inverse` rotates by the negative angle, with the
/// same m: the backward, applied to a gradient. Angles in double.
template <typename T>
void rotary(int64_t samples, int64_t seq, int64_t heads, int64_t kvHeads, int64_t headDim,
            const runtime::RotaryPositions &rope, bool inverse, T *qkv);

/// Causal self-attention core for `samples` sequences of `seq` tokens, with `heads` query
/// heads sharing `kvHeads` key/value heads (a divisor of heads): query head i reads kv-head
/// i / (heads / kvHeads), grouped-query attention (Ainslie et al., arXiv:2305.13245); kvHeads
/// = heads is multi-head attention. `qkv` holds per token [q | k | v]: q `heads × headDim`
/// wide, k and v `kvHeads × headDim` each. Writes the attention output (per token heads ×
/// headDim) and keeps the softmax probabilities [samples, heads, seq, seq].
template <typename T>
void attentionForward(int64_t samples, int64_t seq, int64_t heads, int64_t kvHeads, int64_t headDim,
                      const T *qkv, T *probs, T *out);
/// Gradient of the attention core: dqkv (overwritten) from dout. A kv-head's gradient sums its
/// query heads' contributions in head order.
template <typename T>
void attentionBackward(int64_t samples, int64_t seq, int64_t heads, int64_t kvHeads,
                       int64_t headDim, const T *qkv, const T *probs, const T *dout, T *dqkv);

/// Sum over rows of the cross-entropy of `logits` [rows × vocab] against `targets`.
/// `dlogits` (if not null) receives scale · (softmax − onehot); it may be `logits`.
template <typename T>
double crossEntropy(int64_t rows, int64_t vocab, const T *logits, const int32_t *targets, T scale,
                    T *dlogits);

} // namespace conduit::model

#endif // CONDUIT_RUNTIME_MODEL_KERNELS_H
