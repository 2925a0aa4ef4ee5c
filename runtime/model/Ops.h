//===- Ops.h - the math of the model, on some device ------------*- C++ -*-===//
//
// The model's layers are written once against this interface; each backend supplies an
// implementation: CpuOps (CBLAS and loops, in host memory) and CudaOps (cuBLAS and kernels, in
// device memory). Every pointer passed to an Ops is memory of that Ops (from allocate() or
// from the backend's own buffers), except token ids, which callers keep on the host.
//
// One conformance suite (tests/unit/runtime/OpsConformanceTest.cpp) checks every implementation
// against the double-precision CPU one. Every Ops counts what it allocates (MemoryCounter.h).
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_MODEL_OPS_H
#define CONDUIT_RUNTIME_MODEL_OPS_H

#include "runtime/model/MemoryCounter.h"
#include "runtime/model/TensorGroup.h"
#include "runtime/plan/Rotary.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

namespace conduit::model {

/// Memory of an Ops implementation, released when the buffer goes. A buffer from an Ops's
/// allocate() also tells that Ops's counter when it goes, so the counter must outlive it (as
/// the Ops must).
template <typename T> class Buffer {
public:
  Buffer() = default;
  Buffer(T *data, int64_t size, std::function<void(T *)> release, MemoryCounter *counter = nullptr)
      : ptr(data), count(size), release(std::move(release)), counter(counter) {
    if (counter)
      tag = counter->allocated(size, sizeof(T));
  }
  Buffer(Buffer &&other) noexcept { *this = std::move(other); }
  Buffer &operator=(Buffer &&other) noexcept {
    if (this != &other) {
      reset();
      ptr = std::exchange(other.ptr, nullptr);
      count = std::exchange(other.count, 0);
      release = std::move(other.release);
      counter = std::exchange(other.counter, nullptr);
      tag = other.tag;
    }
    return *this;
  }
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;
  ~Buffer() { reset(); }

  T *data() const { return ptr; }
  int64_t size() const { return count; }
  bool empty() const { return count == 0; }
  void reset() {
    if (ptr && release)
      release(ptr);
    if (counter)
      counter->released(tag);
    ptr = nullptr;
    count = 0;
    counter = nullptr;
  }

private:
  T *ptr = nullptr;
  int64_t count = 0;
  std::function<void(T *)> release;
  MemoryCounter *counter = nullptr; ///< counted the allocation as `tag`
  MemoryTag tag;
};

template <typename T> class Ops {
public:
  virtual ~Ops() = default;

  /// `n` zeroed elements, counted by memory() under its current use.
  virtual Buffer<T> allocate(int64_t n) = 0;
  virtual Buffer<double> allocateDouble(int64_t n) = 0;
  /// What this Ops's buffers hold now and at their peak, by use.
  MemoryCounter &memory() { return counter; }
  const MemoryCounter &memory() const { return counter; }
  /// Host <-> this Ops's memory.
  virtual void upload(const T *host, int64_t n, T *dst) = 0;
  virtual void download(const T *src, int64_t n, T *host) = 0;
  /// Whether micro-batches are computed one sample at a time, so that results do not depend
  /// on how the batch is cut (the CPU backend's bitwise equivalence; devices that need whole
  /// micro-batches for speed say no).
  virtual bool perSample() const = 0;
  /// Waits until all work issued so far has finished (for timing; a no-op where ops run
  /// synchronously).
  virtual void synchronize() {}

  // Element-wise and reductions.
  virtual void fill(int64_t n, T value, T *dst) = 0;
  virtual void copy(int64_t n, const T *src, T *dst) = 0;
  /// `rows` rows of n elements from src, whose rows start srcStride apart, to dst, whose rows
  /// start dstStride apart (a column block of one matrix into, or out of, another).
  virtual void copyRows(int64_t rows, int64_t n, const T *src, int64_t srcStride, T *dst,
                        int64_t dstStride) = 0;
  /// dst += src.
  virtual void add(int64_t n, const T *src, T *dst) = 0;
  /// dst += src, accumulating in double precision.
  virtual void accumulate(int64_t n, const T *src, double *dst) = 0;
  /// dst += alpha · src. This default goes through the host (download, add, upload), which is
  /// right on any device; CpuOps adds in place.
  virtual void scaledAdd(int64_t n, T alpha, const T *src, T *dst) {
    std::vector<T> a(n), b(n);
    download(src, n, a.data());
    download(dst, n, b.data());
    for (int64_t i = 0; i < n; ++i)
      b[i] += alpha * a[i];
    upload(b.data(), n, dst);
  }
  /// Row r of x (`rows` rows of width n) times factors[r], in place; `factors` on the host.
  /// This default goes through the host, as scaledAdd's does; CpuOps scales in place.
  virtual void scaleRows(int64_t rows, int64_t n, const T *factors, T *x) {
    std::vector<T> a(rows * n);
    download(x, rows * n, a.data());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < n; ++i)
        a[r * n + i] *= factors[r];
    upload(a.data(), rows * n, x);
  }
  /// Adds `bias` to each of `rows` rows of width n.
  virtual void addBias(int64_t rows, int64_t n, const T *bias, T *x) = 0;
  /// sum += the rows of x (bias gradients).
  virtual void sumRows(int64_t rows, int64_t n, const T *x, T *sum) = 0;

  /// C[m×n] = alpha · op(A) · op(B) + beta · C, row-major.
  virtual void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, T alpha, const T *a,
                    const T *b, T beta, T *c) = 0;

  /// LayerNorm over rows of width h with epsilon `eps`; keeps the per-row mean and reciprocal
  /// standard deviation for the backward.
  virtual void layerNormForward(int64_t rows, int64_t h, const T *x, const T *gamma, const T *beta,
                                double eps, T *y, T *mean, T *rstd) = 0;
  /// The LayerNorm backward in two halves, so that a split backward can run the second later:
  /// dx overwritten; dgamma, dbeta accumulated.
  virtual void layerNormBackwardInput(int64_t rows, int64_t h, const T *x, const T *gamma,
                                      const T *mean, const T *rstd, const T *dy, T *dx) = 0;
  virtual void layerNormBackwardWeight(int64_t rows, int64_t h, const T *x, const T *mean,
                                       const T *rstd, const T *dy, T *dgamma, T *dbeta) = 0;
  /// RMSNorm: y = x · rstd · gamma, rstd = 1 / sqrt(mean(x²) + eps), kept per row. Its
  /// backward in the same two halves: dx overwritten; dgamma accumulated.
  virtual void rmsNormForward(int64_t rows, int64_t h, const T *x, const T *gamma, double eps, T *y,
                              T *rstd) = 0;
  virtual void rmsNormBackwardInput(int64_t rows, int64_t h, const T *x, const T *gamma,
                                    const T *rstd, const T *dy, T *dx) = 0;
  virtual void rmsNormBackwardWeight(int64_t rows, int64_t h, const T *x, const T *rstd,
                                     const T *dy, T *dgamma) = 0;
  virtual void geluForward(int64_t n, const T *x, T *y) = 0;
  virtual void geluBackward(int64_t n, const T *x, const T *dy, T *dx) = 0;
  /// SwiGLU over `rows` rows of [gate | up], each f wide: out = silu(gate) · up (rows × f).
  virtual void swigluForward(int64_t rows, int64_t f, const T *gateUp, T *out) = 0;
  /// dGateUp (rows × 2f, overwritten) from dout.
  virtual void swigluBackward(int64_t rows, int64_t f, const T *gateUp, const T *dout,
                              T *dGateUp) = 0;
  /// Rotary position embedding, in place, on the q and k heads of the qkv rows of `samples`
  /// sequences (the layout of attentionForward); see Kernels.h for the convention.
  virtual void rotaryForward(int64_t samples, int64_t seq, int64_t heads, int64_t kvHeads,
                             int64_t headDim, const runtime::RotaryPositions &rope, T *qkv) = 0;
  /// The inverse rotation, in place, on the q and k parts of a qkv gradient.
  virtual void rotaryBackward(int64_t samples, int64_t seq, int64_t heads, int64_t kvHeads,
                              int64_t headDim, const runtime::RotaryPositions &rope, T *dqkv) = 0;
  /// Causal multi-head (grouped-query where kvHeads < heads) attention core; see Kernels.h for
  /// the layout.
  virtual void attentionForward(int64_t samples, int64_t seq, int64_t heads, int64_t kvHeads,
                                int64_t headDim, const T *qkv, T *probs, T *out) = 0;
  virtual void attentionBackward(int64_t samples, int64_t seq, int64_t heads, int64_t kvHeads,
                                 int64_t headDim, const T *qkv, const T *probs, const T *dout,
                                 T *dqkv) = 0;
  /// y[n, t] = wte[tokens[n, t]] + wpe[t], or wte[tokens[n, t]] where wpe is null (no
  /// learned positions); tokens on the host. A negative token has no row here (another tensor
  /// rank's part of the vocabulary): it contributes zero.
  virtual void embeddingForward(int64_t samples, int64_t seq, int64_t hidden, const int32_t *tokens,
                                const T *wte, const T *wpe, T *y) = 0;
  /// dwte, dwpe accumulated (dwpe null: no position table); negative tokens add to dwpe only.
  virtual void embeddingBackward(int64_t samples, int64_t seq, int64_t hidden,
                                 const int32_t *tokens, const T *dy, T *dwte, T *dwpe) = 0;
  /// Adds the summed cross-entropy of `logits` against `targets` (host) to the loss, and
  /// writes scale · (softmax − onehot) to dlogits, which may be `logits` (in place).
  virtual void crossEntropy(int64_t rows, int64_t vocab, const T *logits, const int32_t *targets,
                            T scale, T *dlogits) = 0;
  /// The vocabulary-parallel cross-entropy (Megatron-LM's), in three parts around the tensor
  /// group's all-reduces of the row statistics; `logits` are this rank's columns, `targets`
  /// (host) the target's column here or −1 where another rank holds it. First each row's
  /// largest logit; then, against the group's maxima, the sum of exponentials and the target's
  /// logit (0 where −1); last, from the group's sums, scale · (softmax − onehot) into dlogits,
  /// and the rows' loss added to the loss when `countLoss` (one rank of the group counts it);
  /// dlogits may be `logits`.
  virtual void rowMax(int64_t rows, int64_t vocab, const T *logits, T *max) = 0;
  virtual void crossEntropyPartials(int64_t rows, int64_t vocab, const T *logits,
                                    const int32_t *targets, const T *max, T *sums, T *picked) = 0;
  virtual void crossEntropyFromPartials(int64_t rows, int64_t vocab, const T *logits,
                                        const int32_t *targets, const T *max, const T *sums,
                                        const T *picked, T scale, bool countLoss, T *dlogits) = 0;
  /// The loss summed since the last call, and zero from now on.
  virtual double takeLoss() = 0;
  /// While off, crossEntropy leaves the loss alone (a recomputed forward counts once), and so
  /// do addAuxLoss, addZLoss and addMtpLoss.
  void countLoss(bool on) { countingLoss = on; }
  bool countsLoss() const { return countingLoss; }
  /// The mixture of experts' auxiliary loss (layers/Moe.h), apart from the cross-entropy:
  /// each block with experts adds its samples' sum; takeAuxLoss returns it and starts again.
  void addAuxLoss(double value) {
    if (countingLoss)
      auxLoss += value;
  }
  double takeAuxLoss() { return std::exchange(auxLoss, 0.0); }
  /// The router z-loss (layers/Moe.h), apart as the auxiliary loss is: each block with experts
  /// adds its samples' sum over the tokens this rank routes.
  void addZLoss(double value) {
    if (countingLoss)
      zLoss += value;
  }
  double takeZLoss() { return std::exchange(zLoss, 0.0); }
  /// The multi-token prediction modules' loss (layers/Mtp.h), apart as the auxiliary loss
  /// is: each module adds its counted rows' cross-entropy over the number of modules.
  void addMtpLoss(double value) {
    if (countingLoss)
      mtpLoss += value;
  }
  double takeMtpLoss() { return std::exchange(mtpLoss, 0.0); }
  /// An expert group's load (layers/Moe.h): each piece's routed tokens over the balanced share,
  /// counted once per forward (not again in a recomputation).
  void noteRoutedLoad(double ratio) {
    if (!countingLoss)
      return;
    load.peak = std::max(load.peak, ratio);
    load.sum += ratio;
    ++load.pieces;
  }
  /// A capacity's drops: of `assignments` the router chose, `dropped`; counted once per
  /// forward, as the load.
  void noteDropped(int64_t assignments, int64_t dropped) {
    if (!countingLoss)
      return;
    load.assignments += assignments;
    load.dropped += dropped;
  }
  const RoutedLoad &routedLoad() const { return load; }
  /// The tensor group the layers communicate in (null without tensor parallelism); it
  /// outlives the Ops's use of it.
  TensorGroup<T> *tensorGroup() const { return tensor; }
  void setTensorGroup(TensorGroup<T> *group) { tensor = group; }
  /// The expert group the mixture of experts exchanges tokens in (null without expert
  /// parallelism); it outlives the Ops's use of it.
  ExpertGroup<T> *expertGroup() const { return experts; }
  void setExpertGroup(ExpertGroup<T> *group) { experts = group; }

protected:
  bool countingLoss = true;
  double auxLoss = 0, zLoss = 0, mtpLoss = 0;
  RoutedLoad load;
  TensorGroup<T> *tensor = nullptr;
  ExpertGroup<T> *experts = nullptr;
  MemoryCounter counter;
};

/// The CPU implementation over CBLAS, in host memory.
template <typename T> class CpuOps final : public Ops<T> {
public:
  Buffer<T> allocate(int64_t n) override;
  Buffer<double> allocateDouble(int64_t n) override;
  void upload(const T *host, int64_t n, T *dst) override;
  void download(const T *src, int64_t n, T *host) override;
  bool perSample() const override { return true; }
  void fill(int64_t n, T value, T *dst) override;
  void copy(int64_t n, const T *src, T *dst) override;
  void copyRows(int64_t rows, int64_t n, const T *src, int64_t srcStride, T *dst,
                int64_t dstStride) override;
  void add(int64_t n, const T *src, T *dst) override;
  void accumulate(int64_t n, const T *src, double *dst) override;
  void scaledAdd(int64_t n, T alpha, const T *src, T *dst) override;
  void scaleRows(int64_t rows, int64_t n, const T *factors, T *x) override;
  void addBias(int64_t rows, int64_t n, const T *bias, T *x) override;
  void sumRows(int64_t rows, int64_t n, const T *x, T *sum) override;
  void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, T alpha, const T *a,
            const T *b, T beta, T *c) override;
  void layerNormForward(int64_t rows, int64_t h, const T *x, const T *gamma, const T *beta,
                        double eps, T *y, T *mean, T *rstd) override;
  void layerNormBackwardInput(int64_t rows, int64_t h, const T *x, const T *gamma, const T *mean,
                              const T *rstd, const T *dy, T *dx) override;
  void layerNormBackwardWeight(int64_t rows, int64_t h, const T *x, const T *mean, const T *rstd,
                               const T *dy, T *dgamma, T *dbeta) override;
  void rmsNormForward(int64_t rows, int64_t h, const T *x, const T *gamma, double eps, T *y,
                      T *rstd) override;
  void rmsNormBackwardInput(int64_t rows, int64_t h, const T *x, const T *gamma, const T *rstd,
                            const T *dy, T *dx) override;
  void rmsNormBackwardWeight(int64_t rows, int64_t h, const T *x, const T *rstd, const T *dy,
                             T *dgamma) override;
  void geluForward(int64_t n, const T *x, T *y) override;
  void geluBackward(int64_t n, const T *x, const T *dy, T *dx) override;
  void swigluForward(int64_t rows, int64_t f, const T *gateUp, T *out) override;
  void swigluBackward(int64_t rows, int64_t f, const T *gateUp, const T *dout, T *dGateUp) override;
  void rotaryForward(int64_t samples, int64_t seq, int64_t heads, int64_t kvHeads, int64_t headDim,
                     const runtime::RotaryPositions &rope, T *qkv) override;
  void rotaryBackward(int64_t samples, int64_t seq, int64_t heads, int64_t kvHeads, int64_t headDim,
                      const runtime::RotaryPositions &rope, T *dqkv) override;
  void attentionForward(int64_t samples, int64_t seq, int64_t heads, int64_t kvHeads,
                        int64_t headDim, const T *qkv, T *probs, T *out) override;
  void attentionBackward(int64_t samples, int64_t seq, int64_t heads, int64_t kvHeads,
                         int64_t headDim, const T *qkv, const T *probs, const T *dout,
                         T *dqkv) override;
  void embeddingForward(int64_t samples, int64_t seq, int64_t hidden, const int32_t *tokens,
                        const T *wte, const T *wpe, T *y) override;
  void embeddingBackward(int64_t samples, int64_t seq, int64_t hidden, const int32_t *tokens,
                         const T *dy, T *dwte, T *dwpe) override;
  void crossEntropy(int64_t rows, int64_t vocab, const T *logits, const int32_t *targets, T scale,
                    T *dlogits) override;
  void rowMax(int64_t rows, int64_t vocab, const T *logits, T *max) override;
  void crossEntropyPartials(int64_t rows, int64_t vocab, const T *logits, const int32_t *targets,
                            const T *max, T *sums, T *picked) override;
  void crossEntropyFromPartials(int64_t rows, int64_t vocab, const T *logits,
                                const int32_t *targets, const T *max, const T *sums,
                                const T *picked, T scale, bool countLoss, T *dlogits) override;
  double takeLoss() override;

private:
  double loss = 0;
};

} // namespace conduit::model

#endif // CONDUIT_RUNTIME_MODEL_OPS_H
