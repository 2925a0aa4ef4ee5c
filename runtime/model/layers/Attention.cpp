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
// projection and the probabilities (empty with selective checkpointing); for both halves,
// the attention's output, Wo's input.
enum { Qkv, Probs, NumInputOnly };
enum { Att, NumSaved };
// What the input gradient stashes: the output gradient over the whole sequence where the
// block does not keep it so (empty otherwise), and Wqkv's output gradient (of the projection
// before its rotation).
enum { DY, DQKV, NumStashed };
} // namespace

template <typename T>
Attention<T>::Attention(const GptShape &s, bool recomputeAttention)
    : s(s), o(offsets(s)), recomputeAttention(recomputeAttention) {}

template <typename T> typename Attention<T>::Offsets Attention<T>::offsets(const GptShape &s) {
  const int64_t h = s.hidden, qkv = s.localQkvWidth(), width = s.localHeads() * s.headDim();
  Offsets o;
  int64_t at = 0;
  auto take = [&](int64_t n, bool present = true) {
    int64_t here = present ? at : -1;
    at += present ? n : 0;
    return here;
  };
  o.wqkv = take(h * qkv);
  o.bqkv = take(qkv, s.qkvBias);
  o.wo = take(width * h);
  o.bo = take(h, s.otherBias);
  o.total = at;
  return o;
}

template <typename T>
void Attention<T>::slice(int64_t wholeAt, int64_t localAt, std::vector<ParameterRun> &runs) const {
  const GptShape w = s.whole();
  const Offsets W = offsets(w);
  const int64_t r = s.tensorRank, h = s.hidden, d = s.headDim(), q = s.localHeads() * d,
                kv = s.localKvHeads() * d, wideQkv = w.qkvWidth(), qkv = s.localQkvWidth();
  // Column-parallel: this rank's q heads, then its key and value heads, of each row.
  auto qkvColumns = [&](int64_t wholeRow, int64_t localRow, int64_t rows) {
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t from = wholeAt + wholeRow + i * wideQkv, to = localAt + localRow + i * qkv;
      addRun(runs, from + r * q, to, q);
      addRun(runs, from + h + r * kv, to + q, kv);
      addRun(runs, from + h + w.kvWidth() + r * kv, to + q + kv, kv);
    }
  };
  qkvColumns(W.wqkv, o.wqkv, h);
  if (o.bqkv >= 0)
    qkvColumns(W.bqkv, o.bqkv, 1);
  addRun(runs, wholeAt + W.wo + r * q * h, localAt + o.wo, q * h); // row-parallel: its rows
  if (o.bo >= 0)
    addRun(runs, wholeAt + W.bo, localAt + o.bo, h);
}

template <typename T> void Attention<T>::initialise(T *params, Random &random) const {
  std::fill(params, params + o.total, T(0));
  fillNormal(params + o.wqkv, s.hidden * s.qkvWidth(), random);
  fillNormal(params + o.wo, s.hidden * s.hidden, random);
}

template <typename T>
void Attention<T>::keep(Ops<T> &ops, int64_t samples, LayerCache<T> &cache) const {
  const int64_t rows = samples * s.seq;
  cache.samples = samples;
  cache.inputOnly.clear();
  cache.inputOnly.resize(NumInputOnly);
  cache.saved.clear();
  cache.saved.resize(NumSaved);
  cache.inputOnly[Qkv] = ops.allocate(rows * s.localQkvWidth());
  cache.inputOnly[Probs] = ops.allocate(recomputeAttention ? 0 : probsSize(samples));
  cache.saved[Att] = ops.allocate(rows * width());
}

template <typename T>
void Attention<T>::forward(Ops<T> &ops, const T *p, const T *x, const T *residual, T *y,
                           LayerCache<T> &cache) const {
  const int64_t n = cache.samples;
  T *qkv = cache.inputOnly[Qkv].data(), *att = cache.saved[Att].data();
  columnParallel(ops, s, n, s.localQkvWidth(), x, p + o.wqkv, o.bqkv >= 0 ? p + o.bqkv : nullptr,
                 qkv);
  if (s.rotary)
    ops.rotaryForward(n, s.seq, s.localHeads(), s.localKvHeads(), s.headDim(), s.ropeTheta, qkv);
  {
    Buffer<T> probs = recomputeAttention ? transient(ops, probsSize(n)) : Buffer<T>();
    ops.attentionForward(n, s.seq, s.localHeads(), s.localKvHeads(), s.headDim(), qkv,
                         recomputeAttention ? probs.data() : cache.inputOnly[Probs].data(), att);
  }
  rowParallel(ops, s, n, width(), att, p + o.wo, o.bo >= 0 ? p + o.bo : nullptr, residual, y);
}

template <typename T>
const T *Attention<T>::probabilities(Ops<T> &ops, const LayerCache<T> &cache,
                                     Buffer<T> &scratch) const {
  if (!recomputeAttention)
    return cache.inputOnly[Probs].data();
  const int64_t n = cache.samples;
  scratch = transient(ops, probsSize(n));
  // The attention's output again, not needed.
  Buffer<T> out = transient(ops, n * s.seq * width());
  ops.attentionForward(n, s.seq, s.localHeads(), s.localKvHeads(), s.headDim(),
                       cache.inputOnly[Qkv].data(), scratch.data(), out.data());
  return scratch.data();
}

template <typename T>
Buffer<T> Attention<T>::backwardInput(Ops<T> &ops, const T *p, LayerCache<T> &cache, const T *dy,
                                      bool dyKept) const {
  const int64_t n = cache.samples, rows = n * s.seq, local = n * s.localSeq(), h = s.hidden,
                qkv = s.localQkvWidth();
  std::vector<Buffer<T>> &g = cache.stash;
  g.clear();
  g.resize(NumStashed);
  g[DY] = outputGradient(ops, s, n, dy, dyKept);
  const T *whole = g[DY].empty() ? dy : g[DY].data();
  Buffer<T> datt = transient(ops, rows * width());
  g[DQKV] = ops.allocate(rows * qkv);
  ops.gemm(false, true, rows, width(), h, 1, whole, p + o.wo, 0, datt.data());
  {
    Buffer<T> probs;
    ops.attentionBackward(n, s.seq, s.localHeads(), s.localKvHeads(), s.headDim(),
                          cache.inputOnly[Qkv].data(), probabilities(ops, cache, probs),
                          datt.data(), g[DQKV].data());
  }
  datt.reset();
  if (s.rotary)
    ops.rotaryBackward(n, s.seq, s.localHeads(), s.localKvHeads(), s.headDim(), s.ropeTheta,
                       g[DQKV].data());
  Buffer<T> dx = ops.allocate(local * h);
  reducedProduct(ops, s, n, qkv, g[DQKV].data(), p + o.wqkv, /*transposed=*/true, dx.data());
  return dx;
}

template <typename T>
void Attention<T>::backwardWeight(Ops<T> &ops, const LayerCache<T> &cache, const T *x, const T *dy,
                                  T *dp) const {
  const int64_t n = cache.samples, rows = n * s.seq;
  const std::vector<Buffer<T>> &g = cache.stash;
  const T *whole = g[DY].empty() ? dy : g[DY].data();
  weightGradient(ops, rows, width(), s.hidden, cache.saved[Att].data(), whole, dp + o.wo,
                 o.bo >= 0 ? dp + o.bo : nullptr);
  Buffer<T> gathered;
  weightGradient(ops, rows, s.hidden, s.localQkvWidth(), wholeSequence(ops, s, n, x, gathered),
                 g[DQKV].data(), dp + o.wqkv, o.bqkv >= 0 ? dp + o.bqkv : nullptr);
}

template class Attention<float>;
template class Attention<double>;

} // namespace conduit::model
