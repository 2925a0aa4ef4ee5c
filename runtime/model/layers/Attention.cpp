//===- Attention.cpp - causal self-attention, a block's first branch -------===//
//
// The qkv projection, rotary positions and attention core on this rank's heads, and the
// row-parallel output projection; their two backward halves.
//
//===----------------------------------------------------------------------===//

#include "runtime/model/layers/Attention.h"

#include "runtime/model/layers/Initialise.h"
#include "runtime/model/layers/TensorSplit.h"

#include <algorithm>

namespace conduit::model {

namespace {
// What the forward keeps, by index: for the input gradient only, the (rotated) qkv
// projection, the probabilities (empty with selective checkpointing) and, with q/k norms, their
// inputs (this rank's q heads of every token, then its k heads) and statistics (empty
// without); for both halves, the attention's output, Wo's input. The input gradient stashes
// what Projections says: the output gradient over the whole sequence where the block does not
// keep it so (empty otherwise), and Wqkv's output gradient (of the projection before its
// rotation and its norms); then, with q/k norms, their gains' gradients.
enum { Qkv, Probs, QkNormIn, QkNormRstd, NumInputOnly };
enum { Att = Projections::SavedOutIn, NumSaved };
enum { StashQkGains = Projections::NumStashed };
} // namespace

template <typename T>
Attention<T>::Attention(const GptShape &s, bool recomputeAttention)
    : ProjectionBranch<T>(
          Projections(s, s.localQkvWidth(), s.qkvBias, s.localHeads() * s.headDim(), s.otherBias)),
      s(s), recomputeAttention(recomputeAttention) {}

template <typename T>
void Attention<T>::slice(int64_t wholeAt, int64_t localAt, std::vector<ParameterRun> &runs) const {
  const GptShape w = s.whole();
  const Attention whole(w, recomputeAttention);
  const int64_t r = s.tensorRank, wq = w.qWidth(), q = width(), kv = kvWidth();
  // Of each row of Wqkv: this rank's q heads, then its key and value heads; the q/k norms'
  // gains whole on every rank.
  o.slice(whole.o, {{r * q, q}, {wq + r * kv, kv}, {wq + w.kvWidth() + r * kv, kv}}, wholeAt,
          localAt, runs);
  addRun(runs, wholeAt + whole.o.total, localAt + o.total, normParams());
}

template <typename T> void Attention<T>::initialise(T *params, Random &random) const {
  std::fill(params, params + o.total, T(0));
  fillNormal(params + o.wIn, s.hidden * s.qkvWidth(), random);
  fillNormal(params + o.wOut, s.qWidth() * s.hidden, random);
  std::fill(params + o.total, params + o.total + normParams(), T(1));
}

template <typename T>
void Attention<T>::keep(Ops<T> &ops, int64_t samples, LayerCache<T> &cache) const {
  const int64_t rows = samples * s.seq;
  startCache(cache, samples, NumInputOnly, NumSaved);
  cache.inputOnly[Qkv] = ops.allocate(rows * s.localQkvWidth());
  cache.inputOnly[Probs] = ops.allocate(recomputeAttention ? 0 : probsSize(samples));
  if (s.qkNorm) {
    cache.inputOnly[QkNormIn] = ops.allocate(rows * (width() + kvWidth()));
    cache.inputOnly[QkNormRstd] = ops.allocate(rows * (s.localHeads() + s.localKvHeads()));
  }
  cache.saved[Att] = ops.allocate(rows * width());
}

template <typename T>
void Attention<T>::forward(Ops<T> &ops, const T *p, const T *x, const T *residual, T *y,
                           LayerCache<T> &cache) const {
  const int64_t n = cache.samples;
  T *qkv = cache.inputOnly[Qkv].data(), *att = cache.saved[Att].data();
  columnParallel(ops, s, n, s.localQkvWidth(), x, p + o.wIn, o.inBias(p), qkv);
  if (s.qkNorm)
    normaliseQk(ops, p, n * s.seq, qkv, cache);
  if (s.rotary)
    ops.rotaryForward(n, s.seq, s.localHeads(), s.localKvHeads(), s.headDim(), s.rotaryPositions(),
                      qkv);
  {
    Buffer<T> probs = recomputeAttention ? transient(ops, probsSize(n)) : Buffer<T>();
    ops.attentionForward(n, s.seq, s.localHeads(), s.localKvHeads(), s.headDim(), qkv,
                         recomputeAttention ? probs.data() : cache.inputOnly[Probs].data(), att);
  }
  rowParallel(ops, s, n, width(), att, p + o.wOut, o.outBias(p), residual, y);
}

template <typename T>
Buffer<T> Attention<T>::backwardInput(Ops<T> &ops, const T *p, LayerCache<T> &cache, const T *dy,
                                      bool dyKept) const {
  const int64_t n = cache.samples;
  Buffer<T> datt = o.backwardOut(ops, p, cache, dy, dyKept);
  T *dqkv = cache.stash[Projections::StashDin].data();
  {
    Buffer<T> probs;
    ops.attentionBackward(n, s.seq, s.localHeads(), s.localKvHeads(), s.headDim(),
                          cache.inputOnly[Qkv].data(),
                          attentionProbabilities(ops, n, s.seq, s.localHeads(), s.localKvHeads(),
                                                 s.headDim(), cache.inputOnly[Qkv].data(),
                                                 cache.inputOnly[Probs], recomputeAttention, probs),
                          datt.data(), dqkv);
  }
  datt.reset();
  if (s.rotary)
    ops.rotaryBackward(n, s.seq, s.localHeads(), s.localKvHeads(), s.headDim(), s.rotaryPositions(),
                       dqkv);
  if (s.qkNorm)
    normaliseQkBackward(ops, p, n * s.seq, dqkv, cache);
  return o.backwardIn(ops, p, cache);
}

template <typename T>
void Attention<T>::backwardWeight(Ops<T> &ops, const LayerCache<T> &cache, const T *x, const T *dy,
                                  T *dparams) const {
  o.backwardWeight(ops, cache, x, dy, dparams);
  if (!s.qkNorm)
    return;
  const T *gains = cache.stash[StashQkGains].data();
  if (s.tensorParallel()) {
    // Each rank's part comes from its own heads: the group sums them.
    Buffer<T> sum = transient(ops, normParams());
    ops.copy(normParams(), gains, sum.data());
    ops.tensorGroup()->allReduce(normParams(), sum.data());
    ops.add(normParams(), sum.data(), dparams + o.total);
  } else {
    ops.add(normParams(), gains, dparams + o.total);
  }
}

// The query heads of every token are normalised as rows of width d with the query gain, then
// the key heads with the key gain: each part is copied out of the qkv rows (its columns),
// normalised, and copied back. The inputs stay in the cache, q part then k part, for the
// backward.
template <typename T>
void Attention<T>::normaliseQk(Ops<T> &ops, const T *p, int64_t rows, T *qkv,
                               LayerCache<T> &cache) const {
  const int64_t d = s.headDim(), stride = s.localQkvWidth();
  T *in = cache.inputOnly[QkNormIn].data(), *rstd = cache.inputOnly[QkNormRstd].data();
  const T *gains = p + o.total;
  Buffer<T> out = transient(ops, rows * std::max(width(), kvWidth()));
  for (auto [column, heads] : qkParts()) {
    const int64_t part = heads * d;
    ops.copyRows(rows, part, qkv + column, stride, in, part);
    ops.rmsNormForward(rows * heads, d, in, gains, s.normEps, out.data(), rstd);
    ops.copyRows(rows, part, out.data(), part, qkv + column, stride);
    in += rows * part;
    rstd += rows * heads;
    gains += d;
  }
}

template <typename T>
void Attention<T>::normaliseQkBackward(Ops<T> &ops, const T *p, int64_t rows, T *dqkv,
                                       LayerCache<T> &cache) const {
  const int64_t d = s.headDim(), stride = s.localQkvWidth(), most = std::max(width(), kvWidth());
  const T *in = cache.inputOnly[QkNormIn].data(), *rstd = cache.inputOnly[QkNormRstd].data();
  const T *gains = p + o.total;
  cache.stash.resize(StashQkGains + 1);
  T *dgains = (cache.stash[StashQkGains] = ops.allocate(normParams())).data();
  Buffer<T> dout = transient(ops, rows * most), din = transient(ops, rows * most);
  for (auto [column, heads] : qkParts()) {
    const int64_t part = heads * d;
    ops.copyRows(rows, part, dqkv + column, stride, dout.data(), part);
    ops.rmsNormBackwardWeight(rows * heads, d, in, rstd, dout.data(), dgains);
    ops.rmsNormBackwardInput(rows * heads, d, in, gains, rstd, dout.data(), din.data());
    ops.copyRows(rows, part, din.data(), part, dqkv + column, stride);
    in += rows * part;
    rstd += rows * heads;
    gains += d;
    dgains += d;
  }
}

template class Attention<float>;
template class Attention<double>;

} // namespace conduit::model
