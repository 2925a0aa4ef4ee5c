//===- TensorSplit.cpp - a layer's math over its tensor group --------------===//
//
// The collectives are skipped where the shape has one rank; a multi-sample gather or
// reduce-scatter reorders the group's rank-major buffer into sample order.
//
//===----------------------------------------------------------------------===//

#include "runtime/model/layers/TensorSplit.h"

namespace conduit::model {

namespace {
/// The tensor group of `ops`, which only a layer split over T > 1 ranks calls.
template <typename T> TensorGroup<T> &group(Ops<T> &ops) { return *ops.tensorGroup(); }
} // namespace

template <typename T>
void gatherSequence(Ops<T> &ops, const GptShape &s, int64_t samples, int64_t width, const T *shard,
                    T *full) {
  const int64_t chunk = s.localSeq() * width, ranks = s.tensorSize;
  if (samples == 1) {
    group(ops).allGather(chunk, shard, full);
    return;
  }
  Buffer<T> byRank = transient(ops, ranks * samples * chunk);
  group(ops).allGather(samples * chunk, shard, byRank.data());
  for (int64_t r = 0; r < ranks; ++r)
    for (int64_t n = 0; n < samples; ++n)
      ops.copy(chunk, byRank.data() + (r * samples + n) * chunk, full + (n * ranks + r) * chunk);
}

template <typename T>
void reduceScatterSequence(Ops<T> &ops, const GptShape &s, int64_t samples, int64_t width,
                           const T *full, T *shard) {
  const int64_t chunk = s.localSeq() * width, ranks = s.tensorSize;
  if (samples == 1) {
    group(ops).reduceScatter(chunk, full, shard);
    return;
  }
  Buffer<T> byRank = transient(ops, ranks * samples * chunk);
  for (int64_t r = 0; r < ranks; ++r)
    for (int64_t n = 0; n < samples; ++n)
      ops.copy(chunk, full + (n * ranks + r) * chunk, byRank.data() + (r * samples + n) * chunk);
  group(ops).reduceScatter(samples * chunk, byRank.data(), shard);
}

template <typename T>
const T *wholeSequence(Ops<T> &ops, const GptShape &s, int64_t samples, const T *rows,
                       Buffer<T> &scratch) {
  if (!s.sequenceParallel)
    return rows;
  scratch = transient(ops, samples * s.seq * s.hidden);
  gatherSequence(ops, s, samples, s.hidden, rows, scratch.data());
  return scratch.data();
}

template <typename T>
void reduceRows(Ops<T> &ops, const GptShape &s, int64_t samples, T *partial, T *out) {
  if (s.sequenceParallel) {
    reduceScatterSequence(ops, s, samples, s.hidden, partial, out);
    return;
  }
  if (s.tensorParallel())
    group(ops).allReduce(samples * s.seq * s.hidden, partial);
  if (partial != out)
    ops.copy(samples * s.seq * s.hidden, partial, out);
}

template <typename T>
void columnParallel(Ops<T> &ops, const GptShape &s, int64_t samples, int64_t n, const T *x,
                    const T *w, const T *b, T *y, bool transposed) {
  const int64_t rows = samples * s.seq;
  {
    Buffer<T> gathered;
    ops.gemm(false, transposed, rows, n, s.hidden, 1, wholeSequence(ops, s, samples, x, gathered),
             w, 0, y);
  }
  if (b)
    ops.addBias(rows, n, b, y);
}

template <typename T>
void rowParallel(Ops<T> &ops, const GptShape &s, int64_t samples, int64_t k, const T *in,
                 const T *w, const T *b, const T *residual, T *out) {
  const int64_t local = samples * s.localSeq(), h = s.hidden;
  if (s.tensorParallel()) {
    // The residual is added once, after the group's sum.
    reducedProduct(ops, s, samples, k, in, w, /*transposed=*/false, out);
    ops.add(local * h, residual, out);
  } else {
    // One rank: the GEMM accumulates onto a copy of the residual.
    ops.copy(local * h, residual, out);
    ops.gemm(false, false, local, h, k, 1, in, w, 1, out);
  }
  if (b)
    ops.addBias(local, h, b, out);
}

template <typename T>
void reducedProduct(Ops<T> &ops, const GptShape &s, int64_t samples, int64_t k, const T *in,
                    const T *w, bool transposed, T *out) {
  const int64_t rows = samples * s.seq;
  Buffer<T> partial;
  T *sum = out;
  if (s.sequenceParallel) {
    partial = transient(ops, rows * s.hidden);
    sum = partial.data();
  }
  ops.gemm(false, transposed, rows, s.hidden, k, 1, in, w, 0, sum);
  reduceRows(ops, s, samples, sum, out);
}

template <typename T>
void weightGradient(Ops<T> &ops, int64_t rows, int64_t in, int64_t out, const T *x, const T *dy,
                    T *dw, T *db) {
  ops.gemm(true, false, in, out, rows, 1, x, dy, 1, dw);
  if (db)
    ops.sumRows(rows, out, dy, db);
}

template <typename T>
Buffer<T> outputGradient(Ops<T> &ops, const GptShape &s, int64_t samples, const T *dy, bool kept) {
  const int64_t n = samples * s.seq * s.hidden;
  if (!s.sequenceParallel && kept)
    return Buffer<T>();
  Buffer<T> whole = ops.allocate(n);
  if (s.sequenceParallel)
    gatherSequence(ops, s, samples, s.hidden, dy, whole.data());
  else
    ops.copy(n, dy, whole.data());
  return whole;
}

Projections::Projections(const GptShape &s, int64_t in, bool inBias, int64_t out, bool outBias)
    : s(s), in(in), out(out) {
  int64_t at = 0;
  auto take = [&](int64_t n, bool present = true) {
    int64_t here = present ? at : -1;
    at += present ? n : 0;
    return here;
  };
  wIn = take(s.hidden * in);
  bIn = take(in, inBias);
  wOut = take(out * s.hidden);
  bOut = take(s.hidden, outBias);
  total = at;
}

void Projections::slice(const Projections &whole,
                        const std::vector<std::pair<int64_t, int64_t>> &columns, int64_t wholeAt,
                        int64_t localAt, std::vector<ParameterRun> &runs) const {
  // Column-parallel: this rank's columns of each row of Win (and of bin, one row).
  auto inColumns = [&](int64_t wholeRow, int64_t localRow, int64_t rows) {
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t from = wholeAt + wholeRow + i * whole.in;
      int64_t to = localAt + localRow + i * in;
      for (const auto &[first, count] : columns) {
        addRun(runs, from + first, to, count);
        to += count;
      }
    }
  };
  inColumns(whole.wIn, wIn, s.hidden);
  if (bIn >= 0)
    inColumns(whole.bIn, bIn, 1);
  // Row-parallel: this rank's rows of Wout; bout replicated.
  addRun(runs, wholeAt + whole.wOut + s.tensorRank * out * s.hidden, localAt + wOut,
         out * s.hidden);
  if (bOut >= 0)
    addRun(runs, wholeAt + whole.bOut, localAt + bOut, s.hidden);
}

template <typename T>
Buffer<T> Projections::backwardOut(Ops<T> &ops, const T *p, LayerCache<T> &cache, const T *dy,
                                   bool dyKept) const {
  const int64_t n = cache.samples, rows = n * s.seq;
  std::vector<Buffer<T>> &g = cache.stash;
  g.clear();
  g.resize(NumStashed);
  g[StashDy] = outputGradient(ops, s, n, dy, dyKept);
  const T *whole = g[StashDy].empty() ? dy : g[StashDy].data();
  Buffer<T> dOut = transient(ops, rows * out);
  g[StashDin] = ops.allocate(rows * in);
  ops.gemm(false, true, rows, out, s.hidden, 1, whole, p + wOut, 0, dOut.data());
  return dOut;
}

template <typename T>
Buffer<T> Projections::backwardIn(Ops<T> &ops, const T *p, const LayerCache<T> &cache) const {
  const int64_t n = cache.samples;
  Buffer<T> dx = ops.allocate(n * s.localSeq() * s.hidden);
  reducedProduct(ops, s, n, in, cache.stash[StashDin].data(), p + wIn, /*transposed=*/true,
                 dx.data());
  return dx;
}

template <typename T>
void Projections::backwardWeight(Ops<T> &ops, const LayerCache<T> &cache, const T *x, const T *dy,
                                 T *dp) const {
  const int64_t n = cache.samples, rows = n * s.seq;
  const std::vector<Buffer<T>> &g = cache.stash;
  const T *whole = g[StashDy].empty() ? dy : g[StashDy].data();
  weightGradient(ops, rows, out, s.hidden, cache.saved[SavedOutIn].data(), whole, dp + wOut,
                 outBias(dp));
  Buffer<T> gathered;
  weightGradient(ops, rows, s.hidden, in, wholeSequence(ops, s, n, x, gathered), g[StashDin].data(),
                 dp + wIn, inBias(dp));
}

std::vector<int32_t> localTokens(const GptShape &s, const int32_t *tokens, int64_t n) {
  const int64_t first = s.tensorRank * s.localVocab(), end = first + s.localVocab();
  std::vector<int32_t> out(n);
  for (int64_t i = 0; i < n; ++i)
    out[i] = tokens[i] >= first && tokens[i] < end ? static_cast<int32_t>(tokens[i] - first) : -1;
  return out;
}

template <typename T>
PartialGradients<T>::PartialGradients(Ops<T> &ops, bool partial, int64_t n)
    : ops(ops), partial(partial) {
  if (partial)
    buffer = transient(ops, n);
}

template <typename T> T *PartialGradients<T>::at(T *dp, int64_t n) {
  if (!partial)
    return dp;
  targets.emplace_back(dp, n);
  used += n;
  return buffer.data() + used - n;
}

template <typename T> void PartialGradients<T>::reduce() {
  if (!partial)
    return;
  group(ops).allReduce(used, buffer.data());
  int64_t at = 0;
  for (const auto &[dp, n] : targets) {
    ops.add(n, buffer.data() + at, dp);
    at += n;
  }
}

#define CONDUIT_TENSOR_SPLIT(T)                                                                    \
  template void gatherSequence<T>(Ops<T> &, const GptShape &, int64_t, int64_t, const T *, T *);   \
  template void reduceScatterSequence<T>(Ops<T> &, const GptShape &, int64_t, int64_t, const T *,  \
                                         T *);                                                     \
  template const T *wholeSequence<T>(Ops<T> &, const GptShape &, int64_t, const T *, Buffer<T> &); \
  template void reduceRows<T>(Ops<T> &, const GptShape &, int64_t, T *, T *);                      \
  template void columnParallel<T>(Ops<T> &, const GptShape &, int64_t, int64_t, const T *,         \
                                  const T *, const T *, T *, bool);                                \
  template void rowParallel<T>(Ops<T> &, const GptShape &, int64_t, int64_t, const T *, const T *, \
                               const T *, const T *, T *);                                         \
  template void reducedProduct<T>(Ops<T> &, const GptShape &, int64_t, int64_t, const T *,         \
                                  const T *, bool, T *);                                           \
  template void weightGradient<T>(Ops<T> &, int64_t, int64_t, int64_t, const T *, const T *, T *,  \
                                  T *);                                                            \
  template Buffer<T> outputGradient<T>(Ops<T> &, const GptShape &, int64_t, const T *, bool);      \
  template Buffer<T> Projections::backwardOut<T>(Ops<T> &, const T *, LayerCache<T> &, const T *,  \
                                                 bool) const;                                      \
  template Buffer<T> Projections::backwardIn<T>(Ops<T> &, const T *, const LayerCache<T> &) const; \
  template void Projections::backwardWeight<T>(Ops<T> &, const LayerCache<T> &, const T *,         \
                                               const T *, T *) const;                              \
  template class PartialGradients<T>;
CONDUIT_TENSOR_SPLIT(float)
CONDUIT_TENSOR_SPLIT(double)
#undef CONDUIT_TENSOR_SPLIT

} // namespace conduit::model
