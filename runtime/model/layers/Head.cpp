//===- Head.cpp - the final norm, the LM head and the loss -----------------===//
//
// The final norm, the LM head's projection and the cross-entropy (in one kernel, or
// vocabulary-parallel over the group), and their backward.
//
//===----------------------------------------------------------------------===//

#include "runtime/model/layers/Head.h"

#include "runtime/model/layers/Initialise.h"
#include "runtime/model/layers/TensorSplit.h"

namespace conduit::model {

namespace {
// What the forward keeps, by index: the input x, the normed z (the LM head's input), and the
// logits' gradient, which the forward computes with the loss in the logits' own buffer: the
// logits are never held beside their gradient.
enum { X, Z, DLogits, NumSaved };

/// Adds the cross-entropy of the rows of `logits` (this rank's vocabulary columns) against
/// `targets` (host, whole vocabulary ids) to the Ops's loss and writes scale · (softmax −
/// onehot) to dlogits: in one kernel on one rank, else from the row statistics the group sums.
template <typename T>
void crossEntropy(Ops<T> &ops, const GptShape &s, int64_t rows, const T *logits,
                  const int32_t *targets, T scale, T *dlogits) {
  if (!s.tensorParallel()) {
    ops.crossEntropy(rows, s.vocab, logits, targets, scale, dlogits);
    return;
  }
  const int64_t vocab = s.localVocab();
  const std::vector<int32_t> mine = localTokens(s, targets, rows);
  Buffer<T> max = transient(ops, rows), sums = transient(ops, rows), picked = transient(ops, rows);
  TensorGroup<T> &tensor = *ops.tensorGroup();
  ops.rowMax(rows, vocab, logits, max.data());
  tensor.allReduce(rows, max.data(), Reduction::Max);
  ops.crossEntropyPartials(rows, vocab, logits, mine.data(), max.data(), sums.data(),
                           picked.data());
  tensor.allReduce(rows, sums.data());
  tensor.allReduce(rows, picked.data());
  ops.crossEntropyFromPartials(rows, vocab, logits, mine.data(), max.data(), sums.data(),
                               picked.data(), scale, /*countLoss=*/s.tensorRank == 0, dlogits);
}
} // namespace

template <typename T> int64_t Head<T>::numParams() const {
  return s.normParams() + s.hidden * s.localVocab();
}

template <typename T> std::vector<ParameterRun> Head<T>::slice() const {
  const int64_t r = s.tensorRank, h = s.hidden, at = s.normParams(), vocab = s.localVocab();
  std::vector<ParameterRun> runs;
  norm.slice(0, 0, runs);
  if (s.tied) // [vocab × h]: this rank's rows
    addRun(runs, at + r * vocab * h, at, vocab * h);
  else // [h × vocab]: this rank's columns of each row
    for (int64_t i = 0; i < h; ++i)
      addRun(runs, at + i * s.vocab + r * vocab, at + i * vocab, vocab);
  return runs;
}

template <typename T> void Head<T>::initialise(T *params, uint64_t seed, int64_t layer) const {
  norm.initialise(params);
  // Tied: the embedding's draws (layer 0), so that both copies start identical.
  Random random({seed, static_cast<uint64_t>(s.tied ? 0 : layer)});
  fillNormal(params + s.normParams(), s.hidden * s.vocab, random);
}

/// Adds the loss to the Ops's; y is not written.
template <typename T>
void Head<T>::forward(Ops<T> &ops, const T *p, const T *x, const Tokens &batch, T *,
                      LayerCache<T> &cache) const {
  const int64_t n = batch.samples, rows = n * s.seq, local = n * s.localSeq() * s.hidden,
                vocab = s.localVocab();
  std::vector<Buffer<T>> &v = cache.saved;
  cache.samples = n;
  v.clear();
  v.resize(NumSaved);
  cache.parts.clear();
  cache.parts.resize(1);
  v[X] = ops.allocate(local);
  v[Z] = ops.allocate(local);
  norm.keep(ops, n, cache.parts[0]);
  v[DLogits] = ops.allocate(rows * vocab);
  ops.copy(local, x, v[X].data());
  norm.forward(ops, p, x, v[Z].data(), cache.parts[0]);
  T *logits = v[DLogits].data();
  columnParallel(ops, s, n, vocab, v[Z].data(), p + s.normParams(),
                 /*b=*/static_cast<const T *>(nullptr), logits, /*transposed=*/s.tied);
  crossEntropy(ops, s, rows, logits, batch.targets, static_cast<T>(batch.lossScale), logits);
}

/// The gradient starts at the loss (the forward's logits gradient): dy is not read.
template <typename T>
void Head<T>::backwardInput(Ops<T> &ops, const T *p, LayerCache<T> &cache, const T *, T *dx) const {
  const int64_t n = cache.samples;
  const std::vector<Buffer<T>> &v = cache.saved;
  // The stash holds the final norm's output gradient.
  cache.stash.clear();
  cache.stash.push_back(ops.allocate(n * s.localSeq() * s.hidden));
  T *dz = cache.stash[0].data();
  reducedProduct(ops, s, n, s.localVocab(), v[DLogits].data(), p + s.normParams(),
                 /*transposed=*/!s.tied, dz);
  norm.backwardInput(ops, p, v[X].data(), cache.parts[0], dz, dx);
}

template <typename T>
void Head<T>::backwardWeight(Ops<T> &ops, const LayerCache<T> &cache, T *dp) const {
  const int64_t n = cache.samples, rows = n * s.seq, h = s.hidden, vocab = s.localVocab();
  const std::vector<Buffer<T>> &v = cache.saved;
  {
    Buffer<T> gathered;
    const T *z = wholeSequence(ops, s, n, v[Z].data(), gathered);
    if (s.tied) // dW = dlogitsᵀ · z, [vocab × h]
      ops.gemm(true, false, vocab, h, rows, 1, v[DLogits].data(), z, 1, dp + s.normParams());
    else // dW = zᵀ · dlogits, [h × vocab]
      weightGradient(ops, rows, h, vocab, z, v[DLogits].data(), dp + s.normParams(),
                     /*db=*/static_cast<T *>(nullptr));
  }
  PartialGradients<T> norms(ops, s.sequenceParallel, s.normParams());
  norm.backwardWeight(ops, v[X].data(), cache.parts[0], cache.stash[0].data(),
                      norms.at(dp, s.normParams()));
  norms.reduce();
}

template class Head<float>;
template class Head<double>;

} // namespace conduit::model
