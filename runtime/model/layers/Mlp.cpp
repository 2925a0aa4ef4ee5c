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
// both halves, its activation G, W2's input.
enum { U, NumInputOnly };
enum { G, NumSaved };
// What the input gradient stashes: the output gradient over the whole sequence, unless the
// block keeps it so, and W1's output gradient.
enum { DY, DU, NumStashed };
} // namespace

template <typename T> Mlp<T>::Mlp(const GptShape &s) : s(s), o(offsets(s)) {}

template <typename T> typename Mlp<T>::Offsets Mlp<T>::offsets(const GptShape &s) {
  const int64_t h = s.hidden, f = s.localFfn(), up = s.localUpWidth();
  Offsets o;
  int64_t at = 0;
  auto take = [&](int64_t n, bool present = true) {
    int64_t here = present ? at : -1;
    at += present ? n : 0;
    return here;
  };
  o.w1 = take(h * up);
  o.b1 = take(up, s.otherBias);
  o.w2 = take(f * h);
  o.b2 = take(h, s.otherBias);
  o.total = at;
  return o;
}

template <typename T>
void Mlp<T>::slice(int64_t wholeAt, int64_t localAt, std::vector<ParameterRun> &runs) const {
  const GptShape w = s.whole();
  const Offsets W = offsets(w);
  const int64_t r = s.tensorRank, h = s.hidden, f = s.localFfn(), wideUp = w.upWidth(),
                up = s.localUpWidth();
  // Column-parallel: this rank's FFN columns (of the gate and of the up projection).
  auto upColumns = [&](int64_t wholeRow, int64_t localRow, int64_t rows) {
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t from = wholeAt + wholeRow + i * wideUp, to = localAt + localRow + i * up;
      addRun(runs, from + r * f, to, f);
      if (s.gated)
        addRun(runs, from + w.ffn + r * f, to + f, f);
    }
  };
  upColumns(W.w1, o.w1, h);
  if (o.b1 >= 0)
    upColumns(W.b1, o.b1, 1);
  addRun(runs, wholeAt + W.w2 + r * f * h, localAt + o.w2, f * h); // row-parallel: its rows
  if (o.b2 >= 0)
    addRun(runs, wholeAt + W.b2, localAt + o.b2, h);
}

template <typename T> void Mlp<T>::initialise(T *params, Random &random) const {
  std::fill(params, params + o.total, T(0));
  fillNormal(params + o.w1, s.hidden * s.upWidth(), random);
  fillNormal(params + o.w2, s.ffn * s.hidden, random);
}

template <typename T> void Mlp<T>::keep(Ops<T> &ops, int64_t samples, LayerCache<T> &cache) const {
  const int64_t rows = samples * s.seq;
  cache.samples = samples;
  cache.inputOnly.clear();
  cache.inputOnly.resize(NumInputOnly);
  cache.saved.clear();
  cache.saved.resize(NumSaved);
  cache.inputOnly[U] = ops.allocate(rows * s.localUpWidth());
  cache.saved[G] = ops.allocate(rows * s.localFfn());
}

template <typename T>
void Mlp<T>::forward(Ops<T> &ops, const T *p, const T *x, const T *residual, T *y,
                     LayerCache<T> &cache) const {
  const int64_t n = cache.samples, rows = n * s.seq, f = s.localFfn();
  T *u = cache.inputOnly[U].data(), *g = cache.saved[G].data();
  columnParallel(ops, s, n, s.localUpWidth(), x, p + o.w1, o.b1 >= 0 ? p + o.b1 : nullptr, u);
  if (s.gated)
    ops.swigluForward(rows, f, u, g);
  else
    ops.geluForward(rows * f, u, g);
  rowParallel(ops, s, n, f, g, p + o.w2, o.b2 >= 0 ? p + o.b2 : nullptr, residual, y);
}

template <typename T>
Buffer<T> Mlp<T>::backwardInput(Ops<T> &ops, const T *p, LayerCache<T> &cache, const T *dy,
                                bool dyKept) const {
  const int64_t n = cache.samples, rows = n * s.seq, local = n * s.localSeq(), h = s.hidden,
                f = s.localFfn(), up = s.localUpWidth();
  std::vector<Buffer<T>> &g = cache.stash;
  g.clear();
  g.resize(NumStashed);
  g[DY] = outputGradient(ops, s, n, dy, dyKept);
  const T *whole = g[DY].empty() ? dy : g[DY].data();
  Buffer<T> dg = transient(ops, rows * f);
  g[DU] = ops.allocate(rows * up);
  ops.gemm(false, true, rows, f, h, 1, whole, p + o.w2, 0, dg.data());
  if (s.gated)
    ops.swigluBackward(rows, f, cache.inputOnly[U].data(), dg.data(), g[DU].data());
  else
    ops.geluBackward(rows * f, cache.inputOnly[U].data(), dg.data(), g[DU].data());
  dg.reset();
  Buffer<T> dx = ops.allocate(local * h);
  reducedProduct(ops, s, n, up, g[DU].data(), p + o.w1, /*transposed=*/true, dx.data());
  return dx;
}

template <typename T>
void Mlp<T>::backwardWeight(Ops<T> &ops, const LayerCache<T> &cache, const T *x, const T *dy,
                            T *dp) const {
  const int64_t n = cache.samples, rows = n * s.seq;
  const std::vector<Buffer<T>> &g = cache.stash;
  const T *whole = g[DY].empty() ? dy : g[DY].data();
  weightGradient(ops, rows, s.localFfn(), s.hidden, cache.saved[G].data(), whole, dp + o.w2,
                 o.b2 >= 0 ? dp + o.b2 : nullptr);
  Buffer<T> gathered;
  weightGradient(ops, rows, s.hidden, s.localUpWidth(), wholeSequence(ops, s, n, x, gathered),
                 g[DU].data(), dp + o.w1, o.b1 >= 0 ? dp + o.b1 : nullptr);
}

template class Mlp<float>;
template class Mlp<double>;

} // namespace conduit::model
