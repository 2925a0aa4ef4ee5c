//===- Mtp.cpp - a multi-token prediction module ---------------------------===//
//
// The module's forward (embedding of the shifted tokens, the two norms, the projection, the
// block, the head's norm, the shared head and the counted cross-entropy) and its backward.
//
//===----------------------------------------------------------------------===//

#include "runtime/model/layers/Mtp.h"

#include "runtime/model/layers/Initialise.h"
#include "runtime/model/layers/TensorSplit.h"

#include <algorithm>
#include <cmath>

namespace conduit::model {

namespace {
// What the forward keeps, by index: the embedding e and the previous depth's hidden state h
// (the norms' inputs), their norms' outputs (the projection's input), the block's output b
// (the head norm's input), the head norm's output z, and the logits' gradient, computed in the
// forward with the loss in the logits' own buffer.
enum { E, H, EN, HN, B, Z, DLogits, NumSaved };
// Its units' caches, by index.
enum { ENormCache, HNormCache, HeadNormCache, BlockCache, NumCaches };
// What the input gradient stashes for the weight gradient: the head norm's output gradient,
// the projection's, the two norms' (ENorm's output and input: the table's rows), and with
// sequence parallelism ENorm's input gradient over the whole sequence (the table's rows read
// it).
enum { DZ, DU, DEN, DHN, DE, DEWhole, NumStashed };
/// The projection's stream beside (seed, layer), which the block draws from: a key of its
/// own, as the data's streams have theirs (runtime/data/Data.cpp).
constexpr uint64_t kProjectionKey = 0x3e7a9;
} // namespace

template <typename T>
Mtp<T>::Mtp(const GptShape &s, int64_t depth, uint32_t recomputed, bool experts)
    : s(s), depth(depth), experts(experts), enorm(s), hnorm(s), headNorm(s),
      block(s, recomputed, experts) {
  const int64_t h = s.hidden;
  const int64_t sizes[NumParts] = {ownsTable() ? s.localVocab() * h : 0,
                                   s.normParams(),
                                   s.normParams(),
                                   2 * h * h,
                                   s.normParams(),
                                   block.numParams()};
  for (int i = 0; i < NumParts; ++i)
    at[i + 1] = at[i] + sizes[i];
  tableAt = at[Table];
}

template <typename T> int64_t Mtp<T>::numParams() const { return at[NumParts]; }

template <typename T> std::vector<ParameterRun> Mtp<T>::slice() const {
  // The table's copy by vocabulary rows, as the embedding's; the norms and M whole on every
  // rank (replicated); the block's as a block's.
  const Mtp whole(s.whole(), depth, /*recomputed=*/0, experts);
  const int64_t rows = s.localVocab() * s.hidden;
  std::vector<ParameterRun> runs;
  if (ownsTable())
    addRun(runs, whole.at[Table] + s.tensorRank * rows, at[Table], rows);
  addRun(runs, whole.at[ENorm], at[ENorm], at[Blk] - at[ENorm]);
  for (const ParameterRun &run : block.slice())
    addRun(runs, whole.at[Blk] + run.whole, at[Blk] + run.local, run.length);
  return runs;
}

template <typename T> void Mtp<T>::initialise(T *params, uint64_t seed, int64_t layer) const {
  if (ownsTable()) {
    // The embedding's draws (layer 0), so that both copies start identical.
    Random table({seed, 0});
    fillNormal(params + at[Table], s.vocab * s.hidden, table);
  }
  enorm.initialise(params + at[ENorm]);
  hnorm.initialise(params + at[HNorm]);
  headNorm.initialise(params + at[HeadNorm]);
  // The block draws from (seed, layer) as a block at this index would; M from a stream of its
  // own.
  Random projection({seed, static_cast<uint64_t>(layer), kProjectionKey, kProjectionKey});
  fillNormal(params + at[Proj], 2 * s.hidden * s.hidden, projection);
  block.initialise(params + at[Blk], seed, layer);
}

template <typename T>
void Mtp<T>::forward(Ops<T> &ops, const T *p, const T *x, const Tokens &batch, T *y,
                     LayerCache<T> &cache) const {
  // `rows` of the whole sequence (the logits'), `local` elements of this rank's rows (its
  // sequence shard with sequence parallelism; all of them without).
  const int64_t n = batch.samples, seq = s.seq, h = s.hidden, vocab = s.localVocab(),
                rows = n * seq, local = n * s.localSeq() * h;
  std::vector<Buffer<T>> &v = cache.saved;
  std::vector<LayerCache<T>> &c = cache.parts;
  cache.samples = n;
  v.clear();
  v.resize(NumSaved);
  c.clear();
  c.resize(NumCaches);
  // The token k + 1 ahead of each position (token 0 past the sample's end), as this rank's
  // rows of the table (-1: another rank's).
  std::vector<int32_t> ids(rows, 0);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i + depth < seq; ++i)
      ids[j * seq + i] = batch.targets[j * seq + i + depth];
  cache.tokens = localTokens(s, ids.data(), rows);
  for (int index : {E, H, EN, HN})
    v[index] = ops.allocate(local);
  enorm.keep(ops, n, c[ENormCache]);
  hnorm.keep(ops, n, c[HNormCache]);
  const T *main = x, *previous = depth == 0 ? x : x + local;
  {
    // The embedding's lookup over the vocabulary-parallel table, summed over the group (this
    // rank's rows of the sum with sequence parallelism).
    Buffer<T> partial;
    T *sum = v[E].data();
    if (s.sequenceParallel) {
      partial = transient(ops, rows * h);
      sum = partial.data();
    }
    ops.embeddingForward(n, seq, h, cache.tokens.data(), p + tableAt, /*wpe=*/nullptr, sum);
    reduceRows(ops, s, n, sum, v[E].data());
  }
  ops.copy(local, previous, v[H].data());
  enorm.forward(ops, p + at[ENorm], v[E].data(), v[EN].data(), c[ENormCache]);
  hnorm.forward(ops, p + at[HNorm], v[H].data(), v[HN].data(), c[HNormCache]);
  {
    // u = EN · M[:h] + HN · M[h:] on this rank's rows (M whole on every rank), the block's
    // input (which it keeps its own copy of).
    const int64_t mine = n * s.localSeq();
    Buffer<T> u = transient(ops, local);
    const T *m = p + at[Proj];
    ops.gemm(false, false, mine, h, h, 1, v[EN].data(), m, 0, u.data());
    ops.gemm(false, false, mine, h, h, 1, v[HN].data(), m + h * h, 1, u.data());
    v[B] = ops.allocate(local);
    block.forward(ops, p + at[Blk], u.data(), batch, v[B].data(), c[BlockCache]);
  }
  v[Z] = ops.allocate(local);
  headNorm.keep(ops, n, c[HeadNormCache]);
  headNorm.forward(ops, p + at[HeadNorm], v[B].data(), v[Z].data(), c[HeadNormCache]);
  v[DLogits] = ops.allocate(rows * vocab);
  T *logits = v[DLogits].data();
  columnParallel(ops, s, n, vocab, v[Z].data(), p + headAt, /*b=*/static_cast<const T *>(nullptr),
                 logits, /*transposed=*/s.tied);
  // The cross-entropy of the counted rows, by its row statistics over the whole batch at once,
  // summed over the group's vocabulary parts (the other rows' targets -1: no target), its loss
  // summed here from them by tensor rank 0, apart from the language model's; the other rows'
  // gradient is then zeroed.
  const int64_t counted = this->counted();
  const T scale = static_cast<T>(batch.lossScale * s.mtpLossCoefficient / s.mtpLayers);
  std::vector<int32_t> targets(rows, -1);
  for (int64_t j = 0; j < n; ++j)
    std::copy(batch.targets + j * seq + depth + 1, batch.targets + j * seq + depth + 1 + counted,
              targets.begin() + j * seq);
  targets = localTokens(s, targets.data(), rows);
  double loss = 0;
  {
    Buffer<T> max = transient(ops, rows), sums = transient(ops, rows),
              picked = transient(ops, rows);
    TensorGroup<T> *tensor = s.tensorParallel() ? ops.tensorGroup() : nullptr;
    ops.rowMax(rows, vocab, logits, max.data());
    if (tensor)
      tensor->allReduce(rows, max.data(), Reduction::Max);
    ops.crossEntropyPartials(rows, vocab, logits, targets.data(), max.data(), sums.data(),
                             picked.data());
    if (tensor) {
      tensor->allReduce(rows, sums.data());
      tensor->allReduce(rows, picked.data());
    }
    ops.crossEntropyFromPartials(rows, vocab, logits, targets.data(), max.data(), sums.data(),
                                 picked.data(), scale, /*countLoss=*/false, logits);
    if (ops.countsLoss() && s.tensorRank == 0) {
      std::vector<T> hostMax(rows), hostSums(rows), hostPicked(rows);
      ops.download(max.data(), rows, hostMax.data());
      ops.download(sums.data(), rows, hostSums.data());
      ops.download(picked.data(), rows, hostPicked.data());
      for (int64_t j = 0; j < n; ++j)
        for (int64_t r = j * seq; r < j * seq + counted; ++r)
          loss += static_cast<double>(hostMax[r]) + std::log(static_cast<double>(hostSums[r])) -
                  hostPicked[r];
    }
  }
  for (int64_t j = 0; j < n; ++j)
    ops.fill((seq - counted) * vocab, T(0), logits + (j * seq + counted) * vocab);
  ops.addMtpLoss(loss / static_cast<double>(s.mtpLayers));
  // Passed on: the main hidden state, then (unless last) b.
  ops.copy(local, main, y);
  if (!last())
    ops.copy(local, v[B].data(), y + local);
}

template <typename T>
void Mtp<T>::backwardInput(Ops<T> &ops, const T *p, LayerCache<T> &cache, const T *dy,
                           T *dx) const {
  const int64_t n = cache.samples, h = s.hidden, mine = n * s.localSeq(), local = mine * h;
  const std::vector<Buffer<T>> &v = cache.saved;
  std::vector<LayerCache<T>> &c = cache.parts;
  std::vector<Buffer<T>> &g = cache.stash;
  g.clear();
  g.resize(NumStashed);
  // b's gradient: the head's (summed over the group's vocabulary parts), through its norm,
  // and the next module's (unless last).
  g[DZ] = ops.allocate(local);
  reducedProduct(ops, s, n, s.localVocab(), v[DLogits].data(), p + headAt,
                 /*transposed=*/!s.tied, g[DZ].data());
  {
    Buffer<T> db = transient(ops, local);
    headNorm.backwardInput(ops, p + at[HeadNorm], v[B].data(), c[HeadNormCache], g[DZ].data(),
                           db.data());
    if (!last())
      ops.add(local, dy + local, db.data());
    g[DU] = ops.allocate(local);
    block.backwardInput(ops, p + at[Blk], c[BlockCache], db.data(), g[DU].data());
  }
  // Through the projection to the two norms' outputs, then to their inputs.
  const T *m = p + at[Proj];
  g[DEN] = ops.allocate(local);
  g[DHN] = ops.allocate(local);
  ops.gemm(false, true, mine, h, h, 1, g[DU].data(), m, 0, g[DEN].data());
  ops.gemm(false, true, mine, h, h, 1, g[DU].data(), m + h * h, 0, g[DHN].data());
  g[DE] = ops.allocate(local);
  enorm.backwardInput(ops, p + at[ENorm], v[E].data(), c[ENormCache], g[DEN].data(), g[DE].data());
  // The table's rows take the embedding's gradient over the whole sequence (gathered with
  // sequence parallelism).
  if (Buffer<T> whole = outputGradient(ops, s, n, g[DE].data(), /*kept=*/true); !whole.empty()) {
    g[DEWhole] = std::move(whole);
    g[DE].reset(); // read no more: the table's rows read the whole sequence's
  }
  // The main state's gradient passes through; the first module's h is the main state.
  T *dPrevious = depth == 0 ? dx : dx + local;
  Buffer<T> dh;
  if (depth == 0) {
    dh = transient(ops, local);
    dPrevious = dh.data();
  }
  hnorm.backwardInput(ops, p + at[HNorm], v[H].data(), c[HNormCache], g[DHN].data(), dPrevious);
  ops.copy(local, dy, dx);
  if (depth == 0)
    ops.add(local, dh.data(), dx);
}

template <typename T>
void Mtp<T>::backwardWeight(Ops<T> &ops, const LayerCache<T> &cache, T *dp) const {
  const int64_t n = cache.samples, h = s.hidden, vocab = s.localVocab(), rows = n * s.seq,
                mine = n * s.localSeq();
  const std::vector<Buffer<T>> &v = cache.saved;
  const std::vector<LayerCache<T>> &c = cache.parts;
  const std::vector<Buffer<T>> &g = cache.stash;
  {
    // The shared head's matrix, from the normed rows of the whole sequence: dW = dlogitsᵀ · z
    // tied ([vocab × h]), zᵀ · dlogits untied.
    Buffer<T> gathered;
    const T *z = wholeSequence(ops, s, n, v[Z].data(), gathered);
    if (s.tied)
      ops.gemm(true, false, vocab, h, rows, 1, v[DLogits].data(), z, 1, dp + headAt);
    else
      weightGradient(ops, rows, h, vocab, z, v[DLogits].data(), dp + headAt,
                     static_cast<T *>(nullptr));
  }
  // The norms' and M's gradients, from this rank's rows: summed over the group after the
  // block's with sequence parallelism.
  // `own(X)`: where unit X's gradients accumulate, from ENorm's on.
  PartialGradients<T> partial(ops, s.sequenceParallel, at[Blk] - at[ENorm]);
  T *const ownAt = partial.at(dp + at[ENorm], at[Blk] - at[ENorm]);
  auto own = [&](Part part) { return ownAt + (at[part] - at[ENorm]); };
  headNorm.backwardWeight(ops, v[B].data(), c[HeadNormCache], g[DZ].data(), own(HeadNorm));
  block.backwardWeight(ops, c[BlockCache], dp + at[Blk]);
  weightGradient(ops, mine, h, h, v[EN].data(), g[DU].data(), own(Proj), static_cast<T *>(nullptr));
  weightGradient(ops, mine, h, h, v[HN].data(), g[DU].data(), own(Proj) + h * h,
                 static_cast<T *>(nullptr));
  enorm.backwardWeight(ops, v[E].data(), c[ENormCache], g[DEN].data(), own(ENorm));
  hnorm.backwardWeight(ops, v[H].data(), c[HNormCache], g[DHN].data(), own(HNorm));
  const T *dE = g[DEWhole].empty() ? g[DE].data() : g[DEWhole].data();
  ops.embeddingBackward(n, s.seq, h, cache.tokens.data(), dE, dp + tableAt, /*dwpe=*/nullptr);
  partial.reduce();
}

template class Mtp<float>;
template class Mtp<double>;

} // namespace conduit::model
