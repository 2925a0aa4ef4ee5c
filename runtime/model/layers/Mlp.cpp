//===- Mlp.cpp - the feed-forward network, a block's second branch ---------===//
//
// The first projection and its activation on this rank's FFN columns, and the row-parallel
// second projection; their two backward halves.
//
//===----------------------------------------------------------------------===//

#include "runtime/model/layers/Mlp.h"

#include "runtime/model/layers/Initialise.h"
#include "runtime/model/layers/TensorSplit.h"

#include <algorithm>

namespace conduit::model {

namespace {
// What the forward keeps, by index: for the input gradient only, the first projection U; for
// both halves, its activation G, W2's input. The input gradient stashes what Projections
// says: the output gradient over the whole sequence, unless the block keeps it so, and W1's
// output gradient.
enum { U, NumInputOnly };
enum { G = Projections::SavedOutIn, NumSaved };
} // namespace

template <typename T>
Mlp<T>::Mlp(const GptShape &s, bool recomputeHidden)
    : ProjectionBranch<T>(Projections(s, s.localUpWidth(), s.otherBias, s.localFfn(), s.otherBias)),
      s(s), recomputeHidden(recomputeHidden) {}

template <typename T>
void Mlp<T>::slice(int64_t wholeAt, int64_t localAt, std::vector<ParameterRun> &runs) const {
  const GptShape w = s.whole();
  const int64_t r = s.tensorRank, f = s.localFfn();
  // Of each row of W1: this rank's FFN columns of the gate, then of the up projection.
  std::vector<std::pair<int64_t, int64_t>> columns = {{r * f, f}};
  if (s.gated)
    columns.push_back({w.ffn + r * f, f});
  o.slice(Mlp(w).o, columns, wholeAt, localAt, runs);
}

template <typename T> void Mlp<T>::initialise(T *params, Random &random) const {
  std::fill(params, params + o.total, T(0));
  fillNormal(params + o.wIn, s.hidden * s.upWidth(), random);
  fillNormal(params + o.wOut, s.ffn * s.hidden, random);
}

template <typename T> void Mlp<T>::keep(Ops<T> &ops, int64_t samples, LayerCache<T> &cache) const {
  const int64_t rows = samples * s.seq;
  startCache(cache, samples, NumInputOnly, NumSaved);
  if (recomputeHidden)
    return; // recompute() allocates them before the input gradient
  cache.inputOnly[U] = ops.allocate(rows * s.localUpWidth());
  cache.saved[G] = ops.allocate(rows * s.localFfn());
}

template <typename T>
void Mlp<T>::hidden(Ops<T> &ops, const T *p, const T *x, int64_t n, T *u, T *g) const {
  const int64_t rows = n * s.seq, f = s.localFfn();
  columnParallel(ops, s, n, s.localUpWidth(), x, p + o.wIn, o.inBias(p), u);
  if (s.gated)
    ops.swigluForward(rows, f, u, g);
  else
    ops.geluForward(rows * f, u, g);
}

template <typename T>
void Mlp<T>::forward(Ops<T> &ops, const T *p, const T *x, const T *residual, T *y,
                     LayerCache<T> &cache) const {
  const int64_t n = cache.samples, rows = n * s.seq, f = s.localFfn();
  // Recomputed, u and g are working memory until the second projection has read g.
  Buffer<T> workingU, workingG;
  if (recomputeHidden) {
    workingU = transient(ops, rows * s.localUpWidth());
    workingG = transient(ops, rows * f);
  }
  T *u = recomputeHidden ? workingU.data() : cache.inputOnly[U].data(),
    *g = recomputeHidden ? workingG.data() : cache.saved[G].data();
  hidden(ops, p, x, n, u, g);
  rowParallel(ops, s, n, f, g, p + o.wOut, o.outBias(p), residual, y);
}

template <typename T>
void Mlp<T>::recompute(Ops<T> &ops, const T *p, const T *x, LayerCache<T> &cache) const {
  if (!recomputeHidden)
    return;
  // The forward's kernels on the kept input: the same bits. U lives until the input gradient
  // is done, G (W2's input) until the weight gradient, as the forward's would have.
  const int64_t n = cache.samples, rows = n * s.seq;
  cache.inputOnly[U] = ops.allocate(rows * s.localUpWidth());
  cache.saved[G] = ops.allocate(rows * s.localFfn());
  hidden(ops, p, x, n, cache.inputOnly[U].data(), cache.saved[G].data());
}

template <typename T>
Buffer<T> Mlp<T>::backwardInput(Ops<T> &ops, const T *p, LayerCache<T> &cache, const T *dy,
                                bool dyKept) const {
  const int64_t rows = cache.samples * s.seq, f = s.localFfn();
  {
    Buffer<T> dg = o.backwardOut(ops, p, cache, dy, dyKept);
    T *du = cache.stash[Projections::StashDin].data();
    if (s.gated)
      ops.swigluBackward(rows, f, cache.inputOnly[U].data(), dg.data(), du);
    else
      ops.geluBackward(rows * f, cache.inputOnly[U].data(), dg.data(), du);
  }
  return o.backwardIn(ops, p, cache);
}

template class Mlp<float>;
template class Mlp<double>;

} // namespace conduit::model
