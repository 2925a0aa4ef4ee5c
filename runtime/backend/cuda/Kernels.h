//===- Kernels.h - the CUDA kernels of the GPT model ------------*- C++ -*-===//
//
// Host entry points of the device kernels CudaOps needs besides cuBLAS: element-wise ops,
// LayerNorm and RMSNorm, GELU and SwiGLU, rotary positions, the softmax parts of attention,
// embedding, cross-entropy and the optimizer updates, all on float32 in device memory, with the
// same formulas as the CPU kernels (runtime/model/Kernels.cpp). Every launcher enqueues on `stream`
// and returns the launch error. This header is plain C++ (no Abseil), so that nvcc never sees the
// rest of the runtime.
//
// Reductions have a fixed order (no floating-point atomics), so a kernel gives the same bits
// on every run.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_BACKEND_CUDA_KERNELS_H
#define CONDUIT_RUNTIME_BACKEND_CUDA_KERNELS_H

#include "runtime/plan/Rotary.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace conduit::cuda {

cudaError_t fill(int64_t n, float value, float *dst, cudaStream_t stream);
/// dst += src.
cudaError_t add(int64_t n, const float *src, float *dst, cudaStream_t stream);
/// dst = max(dst, src), element-wise.
cudaError_t maximum(int64_t n, const float *src, float *dst, cudaStream_t stream);
/// dst += src, in double precision.
cudaError_t accumulate(int64_t n, const float *src, double *dst, cudaStream_t stream);
/// x[r, :] += bias for each of `rows` rows of width n.
cudaError_t addBias(int64_t rows, int64_t n, const float *bias, float *x, cudaStream_t stream);

/// Floats of scratch the column reductions below need for `rows` rows of width n.
int64_t columnScratch(int64_t rows, int64_t n);
/// sum += the rows of x.
cudaError_t sumRows(int64_t rows, int64_t n, const float *x, float *sum, float *scratch,
                    cudaStream_t stream);

cudaError_t layerNormForward(int64_t rows, int64_t h, const float *x, const float *gamma,
                             const float *beta, float eps, float *y, float *mean, float *rstd,
                             cudaStream_t stream);
/// dx overwritten.
cudaError_t layerNormBackwardInput(int64_t rows, int64_t h, const float *x, const float *gamma,
                                   const float *mean, const float *rstd, const float *dy, float *dx,
                                   cudaStream_t stream);
/// dgamma and dbeta accumulated. `scratch`: columnScratch(rows, h).
cudaError_t layerNormBackwardWeight(int64_t rows, int64_t h, const float *x, const float *mean,
                                    const float *rstd, const float *dy, float *dgamma, float *dbeta,
                                    float *scratch, cudaStream_t stream);

cudaError_t rmsNormForward(int64_t rows, int64_t h, const float *x, const float *gamma, float eps,
                           float *y, float *rstd, cudaStream_t stream);
/// dx overwritten.
cudaError_t rmsNormBackwardInput(int64_t rows, int64_t h, const float *x, const float *gamma,
                                 const float *rstd, const float *dy, float *dx,
                                 cudaStream_t stream);
/// dgamma accumulated. `scratch`: columnScratch(rows, h).
cudaError_t rmsNormBackwardWeight(int64_t rows, int64_t h, const float *x, const float *rstd,
                                  const float *dy, float *dgamma, float *scratch,
                                  cudaStream_t stream);

cudaError_t geluForward(int64_t n, const float *x, float *y, cudaStream_t stream);
cudaError_t geluBackward(int64_t n, const float *x, const float *dy, float *dx,
                         cudaStream_t stream);
/// Rows of [gate | up], each f wide: out = silu(gate) · up.
cudaError_t swigluForward(int64_t rows, int64_t f, const float *gateUp, float *out,
                          cudaStream_t stream);
/// dGateUp overwritten.
cudaError_t swigluBackward(int64_t rows, int64_t f, const float *gateUp, const float *dout,
                           float *dGateUp, cudaStream_t stream);

/// In place: rotates the first `vectors` head vectors (headDim wide, even) of each of `rows`
/// rows, `stride` apart, by the rotary angles of position r mod seq, scaled by the extension's
/// magnitude (model::rotary's convention, angles in double); `sign` −1 rotates back.
cudaError_t rotary(int64_t rows, int64_t seq, int64_t vectors, int64_t headDim, int64_t stride,
                   const runtime::RotaryPositions &rope, double sign, float *x,
                   cudaStream_t stream);

/// In place on `rows` rows of `seq` scores (row i of each seq × seq block may attend to
/// columns 0..i): the causal softmax.
cudaError_t causalSoftmax(int64_t rows, int64_t seq, float *scores, cudaStream_t stream);
/// In place on dP: dS = P ⊙ (dP − rowsum(P ⊙ dP)) · scale.
cudaError_t softmaxBackward(int64_t rows, int64_t seq, const float *probs, float *grad, float scale,
                            cudaStream_t stream);

/// y[r, :] = wte[tokens[r], :] + wpe[r mod seq, :] for rows = samples · seq (tokens on the
/// device; a negative token contributes zero); wpe null: no position table.
cudaError_t embeddingForward(int64_t rows, int64_t seq, int64_t hidden, const int32_t *tokens,
                             const float *wte, const float *wpe, float *y, cudaStream_t stream);
/// dwte and dwpe accumulated (dwpe null: no position table). The rows come grouped by token (device
/// arrays): `order` lists the rows token by token, group g holds order[starts[g], starts[g + 1]) of
/// token groupTokens[g]; each group's rows are summed in order, groups in parallel.
cudaError_t embeddingBackward(int64_t rows, int64_t seq, int64_t hidden, const int32_t *order,
                              const int32_t *starts, const int32_t *groupTokens, int64_t groups,
                              const float *dy, float *dwte, float *dwpe, cudaStream_t stream);

/// Per row: loss[r] = logsumexp(logits[r]) − logits[r, targets[r]], and dlogits[r] =
/// scale · (softmax − onehot). Targets on the device.
cudaError_t crossEntropy(int64_t rows, int64_t vocab, const float *logits, const int32_t *targets,
                         float scale, float *loss, float *dlogits, cudaStream_t stream);
/// The vocabulary-parallel cross-entropy's parts (model::Ops): each row's largest logit; the
/// sum of exp(logit − max) and the target's logit (0 where the target is −1: another rank's);
/// from the group's statistics, loss[r] and dlogits. Targets on the device.
cudaError_t rowMax(int64_t rows, int64_t vocab, const float *logits, float *max,
                   cudaStream_t stream);
cudaError_t crossEntropyPartials(int64_t rows, int64_t vocab, const float *logits,
                                 const int32_t *targets, const float *max, float *sums,
                                 float *picked, cudaStream_t stream);
cudaError_t crossEntropyFromPartials(int64_t rows, int64_t vocab, const float *logits,
                                     const int32_t *targets, const float *max, const float *sums,
                                     const float *picked, float scale, float *loss, float *dlogits,
                                     cudaStream_t stream);
/// total += Σ values, in double precision and a fixed order.
cudaError_t sumInto(int64_t n, const float *values, double *total, cudaStream_t stream);

/// Adam with bias correction (as model::optimizerStep): `correction1` = 1 − β1^t,
/// `correction2` = 1 − β2^t; state holds m then v, n each.
cudaError_t adamStep(int64_t n, float learningRate, float beta1, float beta2, float epsilon,
                     float correction1, float correction2, float *params, float *state,
                     const float *grads, cudaStream_t stream);
cudaError_t sgdStep(int64_t n, float learningRate, float *params, const float *grads,
                    cudaStream_t stream);

} // namespace conduit::cuda

#endif // CONDUIT_RUNTIME_BACKEND_CUDA_KERNELS_H
