//===- Embedding.cpp - the token (and position) embedding ------------------===//
//
// The vocabulary-parallel lookup and its weight gradient.
//
//===----------------------------------------------------------------------===//

#include "runtime/model/layers/Embedding.h"

#include "runtime/model/layers/Initialise.h"
#include "runtime/model/layers/TensorSplit.h"

namespace conduit::model {

template <typename T> int64_t Embedding<T>::numParams() const {
  return (s.localVocab() + (s.rotary ? 0 : s.seq)) * s.hidden;
}

template <typename T> std::vector<ParameterRun> Embedding<T>::slice() const {
  const int64_t rows = s.localVocab() * s.hidden;
  std::vector<ParameterRun> runs;
  addRun(runs, s.tensorRank * rows, 0, rows);                              // the token table's rows
  addRun(runs, s.vocab * s.hidden, rows, s.rotary ? 0 : s.seq * s.hidden); // positions, whole
  return runs;
}

template <typename T> void Embedding<T>::initialise(T *params, uint64_t seed, int64_t layer) const {
  Random random({seed, static_cast<uint64_t>(layer)});
  fillNormal(params, numParams(), random);
}

template <typename T>
void Embedding<T>::forward(Ops<T> &ops, const T *params, const T *, const Tokens &batch, T *y,
                           LayerCache<T> &cache) const {
  const int64_t n = batch.samples, tokens = n * s.seq;
  cache.samples = n;
  cache.tokens = localTokens(s, batch.tokens, tokens);
  const T *wpe = positions(params);
  const bool split = s.tensorParallel();
  Buffer<T> partial;
  T *sum = y;
  if (s.sequenceParallel) {
    partial = transient(ops, tokens * s.hidden);
    sum = partial.data();
  }
  ops.embeddingForward(n, s.seq, s.hidden, cache.tokens.data(), params, split ? nullptr : wpe, sum);
  reduceRows(ops, s, n, sum, y);
  if (split && wpe) {
    const int64_t width = s.localSeq() * s.hidden;
    const T *mine = wpe + (s.sequenceParallel ? s.tensorRank * width : 0);
    for (int64_t i = 0; i < n; ++i)
      ops.add(width, mine, y + i * width);
  }
}

/// No input gradient; what the weight gradient needs is the output gradient only (of the whole
/// sequence: with sequence parallelism it is gathered here).
template <typename T>
void Embedding<T>::backwardInput(Ops<T> &ops, const T *, LayerCache<T> &cache, const T *dy,
                                 T *) const {
  cache.stash.clear();
  cache.stash.push_back(outputGradient(ops, s, cache.samples, dy, /*kept=*/false));
}

template <typename T>
void Embedding<T>::backwardWeight(Ops<T> &ops, const LayerCache<T> &cache, T *dparams) const {
  ops.embeddingBackward(cache.samples, s.seq, s.hidden, cache.tokens.data(), cache.stash[0].data(),
                        dparams, positions(dparams));
}

template class Embedding<float>;
template class Embedding<double>;

} // namespace conduit::model
