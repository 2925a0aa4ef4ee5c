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
// the attention's output, Wo's input. The input gradient stashes what Projections says: the
// output gradient over the whole sequence where the block does not keep it so (empty
// otherwise), and Wqkv's output gradient (of the projection before its rotation).
enum { Qkv, Probs, NumInputOnly };
enum { Att = Projections::SavedOutIn, NumSaved };
} // namespace

template <typename T>
Attention<T>::Attention(const GptShape &s, bool recomputeAttention)
    : ProjectionBranch<T>(
          Projections(s, s.localQkvWidth(), s.qkvBias, s.localHeads() * s.headDim(), s.otherBias)),
      s(s), recomputeAttention(recomputeAttention) {}

template <typename T>
void Attention<T>::slice(int64_t wholeAt, int64_t localAt, std::vector<ParameterRun> &runs) const {
  const GptShape w = s.whole();
  const int64_t r = s.tensorRank, h = s.hidden, q = s.localHeads() * s.headDim(),
                kv = s.localKvHeads() * s.headDim();
  // Of each row of Wqkv: this rank's q heads, then its key and value heads.
  o.slice(Attention(w, recomputeAttention).o,
          {{r * q, q}, {h + r * kv, kv}, {h + w.kvWidth() + r * kv, kv}}, wholeAt, localAt, runs);
}

template <typename T> void Attention<T>::initialise(T *params, Random &random) const {
  std::fill(params, params + o.total, T(0));
  fillNormal(params + o.wIn, s.hidden * s.qkvWidth(), random);
  fillNormal(params + o.wOut, s.hidden * s.hidden, random);
}

template <typename T>
void Attention<T>::keep(Ops<T> &ops, int64_t samples, LayerCache<T> &cache) const {
  const int64_t rows = samples * s.seq;
  startCache(cache, samples, NumInputOnly, NumSaved);
  cache.inputOnly[Qkv] = ops.allocate(rows * s.localQkvWidth());
  cache.inputOnly[Probs] = ops.allocate(recomputeAttention ? 0 : probsSize(samples));
  cache.saved[Att] = ops.allocate(rows * width());
}

template <typename T>
void Attention<T>::forward(Ops<T> &ops, const T *p, const T *x, const T *residual, T *y,
                           LayerCache<T> &cache) const {
  const int64_t n = cache.samples;
  T *qkv = cache.inputOnly[Qkv].data(), *att = cache.saved[Att].data();
  columnParallel(ops, s, n, s.localQkvWidth(), x, p + o.wIn, o.inBias(p), qkv);
  if (s.rotary)
    ops.rotaryForward(n, s.seq, s.localHeads(), s.localKvHeads(), s.headDim(), s.ropeTheta, qkv);
  {
    Buffer<T> probs = recomputeAttention ? transient(ops, probsSize(n)) : Buffer<T>();
    ops.attentionForward(n, s.seq, s.localHeads(), s.localKvHeads(), s.headDim(), qkv,
                         recomputeAttention ? probs.data() : cache.inputOnly[Probs].data(), att);
  }
  rowParallel(ops, s, n, width(), att, p + o.wOut, o.outBias(p), residual, y);
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
  const int64_t n = cache.samples;
  Buffer<T> datt = o.backwardOut(ops, p, cache, dy, dyKept);
  T *dqkv = cache.stash[Projections::StashDin].data();
  {
    Buffer<T> probs;
    ops.attentionBackward(n, s.seq, s.localHeads(), s.localKvHeads(), s.headDim(),
                          cache.inputOnly[Qkv].data(), probabilities(ops, cache, probs),
                          datt.data(), dqkv);
  }
  datt.reset();
  if (s.rotary)
    ops.rotaryBackward(n, s.seq, s.localHeads(), s.localKvHeads(), s.headDim(), s.ropeTheta, dqkv);
  return o.backwardIn(ops, p, cache);
}

template class Attention<float>;
template class Attention<double>;

} // namespace conduit::model
