//===- Mlp.h - the feed-forward network, a block's second branch -*- C++ -*-===//
//
// x + act(x · W1 + b1) · W2 + b2, with act GELU (tanh approximation) or SwiGLU as the shape
// says. Parameters, in this order: W1 [h × f] for GELU or [h × 2f] for SwiGLU (columns 0 to f
// the gate, f to 2f the up projection), b1 [f or 2f], W2 [f × h], b2 [h] (biases with bias
// "all").
//
// Split over a tensor group, each rank holds the FFN columns [r·f/T, (r+1)·f/T) of W1 and b1
// (of the gate and of the up projection alike, so that they match; column-parallel) and those
// rows of W2 (row-parallel); b2 is replicated and added once, after the group's sum.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_MODEL_LAYERS_MLP_H
#define CONDUIT_RUNTIME_MODEL_LAYERS_MLP_H

#include "runtime/model/GptShape.h"
#include "runtime/model/layers/Branch.h"

namespace conduit::model {

template <typename T> class Mlp final : public Branch<T> {
public:
  explicit Mlp(const GptShape &s);

  int64_t numParams() const override { return o.total; }
  void slice(int64_t wholeAt, int64_t localAt, std::vector<ParameterRun> &runs) const override;
  void initialise(T *params, Random &random) const override;
  void keep(Ops<T> &ops, int64_t samples, LayerCache<T> &cache) const override;
  void forward(Ops<T> &ops, const T *params, const T *x, const T *residual, T *y,
               LayerCache<T> &cache) const override;
  Buffer<T> backwardInput(Ops<T> &ops, const T *params, LayerCache<T> &cache, const T *dy,
                          bool dyKept) const override;
  void backwardWeight(Ops<T> &ops, const LayerCache<T> &cache, const T *x, const T *dy,
                      T *dparams) const override;

  /// Where each parameter starts in the branch's (−1: absent), for a shape's tensor rank.
  struct Offsets {
    int64_t w1, b1, w2, b2, total;
  };
  static Offsets offsets(const GptShape &s);

private:
  GptShape s;
  Offsets o;
};

} // namespace conduit::model

#endif // CONDUIT_RUNTIME_MODEL_LAYERS_MLP_H
