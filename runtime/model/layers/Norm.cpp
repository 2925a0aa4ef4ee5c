//===- Norm.cpp - a block's or the head's norm -----------------------------===//
//
// The kernels of LayerNorm or RMSNorm as the shape says; the statistics in the unit's cache.
//
//===----------------------------------------------------------------------===//

#include "runtime/model/layers/Norm.h"

#include <algorithm>

namespace conduit::model {

namespace {
/// The statistics a norm keeps, by index: LayerNorm's mean (empty for RMSNorm) and the
/// reciprocal standard deviation.
enum { Mean, Rstd, NumSaved };
} // namespace

template <typename T> void Norm<T>::initialise(T *params) const {
  std::fill(params, params + s.hidden, T(1));
  std::fill(params + s.hidden, params + s.normParams(), T(0));
}

template <typename T> void Norm<T>::keep(Ops<T> &ops, int64_t samples, LayerCache<T> &cache) const {
  cache.samples = samples;
  const int64_t n = rows(cache);
  cache.saved.clear();
  cache.saved.resize(NumSaved);
  cache.saved[Mean] = ops.allocate(s.rmsNorm ? 0 : n);
  cache.saved[Rstd] = ops.allocate(n);
}

template <typename T>
void Norm<T>::forward(Ops<T> &ops, const T *p, const T *x, T *y, LayerCache<T> &cache) const {
  const std::vector<Buffer<T>> &v = cache.saved;
  if (s.rmsNorm)
    ops.rmsNormForward(rows(cache), s.hidden, x, p, s.normEps, y, v[Rstd].data());
  else
    ops.layerNormForward(rows(cache), s.hidden, x, p, p + s.hidden, s.normEps, y, v[Mean].data(),
                         v[Rstd].data());
}

template <typename T>
void Norm<T>::backwardInput(Ops<T> &ops, const T *p, const T *x, const LayerCache<T> &cache,
                            const T *dy, T *dx) const {
  const std::vector<Buffer<T>> &v = cache.saved;
  if (s.rmsNorm)
    ops.rmsNormBackwardInput(rows(cache), s.hidden, x, p, v[Rstd].data(), dy, dx);
  else
    ops.layerNormBackwardInput(rows(cache), s.hidden, x, p, v[Mean].data(), v[Rstd].data(), dy, dx);
}

template <typename T>
void Norm<T>::backwardWeight(Ops<T> &ops, const T *x, const LayerCache<T> &cache, const T *dy,
                             T *dp) const {
  const std::vector<Buffer<T>> &v = cache.saved;
  if (s.rmsNorm)
    ops.rmsNormBackwardWeight(rows(cache), s.hidden, x, v[Rstd].data(), dy, dp);
  else
    ops.layerNormBackwardWeight(rows(cache), s.hidden, x, v[Mean].data(), v[Rstd].data(), dy, dp,
                                dp + s.hidden);
}

template class Norm<float>;
template class Norm<double>;

} // namespace conduit::model
