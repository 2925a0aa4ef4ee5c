//===- Norm.h - a block's or the head's norm --------------------*- C++ -*-===//
//
// LayerNorm (gain, then bias) or RMSNorm (gain only), as the shape says, over this rank's rows
// of the hidden activations (its sequence shard with sequence parallelism). A norm is a unit
// of the block (two of them) and of the head; its parameters are replicated on every tensor
// rank. It keeps its per-row statistics; its input and output belong to the layer around it,
// which keeps them once for the units on either side and passes them back to the backward.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_MODEL_LAYERS_NORM_H
#define CONDUIT_RUNTIME_MODEL_LAYERS_NORM_H

#include "runtime/model/GptShape.h"
#include "runtime/model/layers/Layer.h"

#include <vector>

namespace conduit::model {

template <typename T> class Norm {
public:
  explicit Norm(const GptShape &s) : s(s) {}
  /// Gain [h], then bias [h] for LayerNorm.
  int64_t numParams() const { return s.normParams(); }
  /// Replicated: the whole norm, at wholeAt in the whole layer and localAt in the rank's.
  void slice(int64_t wholeAt, int64_t localAt, std::vector<ParameterRun> &runs) const {
    addRun(runs, wholeAt, localAt, numParams());
  }
  /// Gains 1, biases 0.
  void initialise(T *params) const;

  /// Allocates what forward keeps for `samples` samples: the statistics of each row.
  void keep(Ops<T> &ops, int64_t samples, LayerCache<T> &cache) const;
  /// y = Norm(x), on this rank's rows, after keep().
  void forward(Ops<T> &ops, const T *params, const T *x, T *y, LayerCache<T> &cache) const;
  /// dx (overwritten) from dy; x is the forward's.
  void backwardInput(Ops<T> &ops, const T *params, const T *x, const LayerCache<T> &cache,
                     const T *dy, T *dx) const;
  /// Accumulates the parameters' gradients at `dparams`, over this rank's rows only.
  void backwardWeight(Ops<T> &ops, const T *x, const LayerCache<T> &cache, const T *dy,
                      T *dparams) const;

private:
  int64_t rows(const LayerCache<T> &cache) const { return cache.samples * s.localSeq(); }

  GptShape s;
};

} // namespace conduit::model

#endif // CONDUIT_RUNTIME_MODEL_LAYERS_NORM_H
