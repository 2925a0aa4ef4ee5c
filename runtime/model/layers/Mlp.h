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

template <typename T> class Mlp final : public ProjectionBranch<T> {
public:
  /// With `recomputeHidden` (the recompute module `mlp`) the forward keeps neither the first
  /// projection's output nor the activation's: they are working memory there, and recompute()
  /// computes them again from the MLP's input before the input gradient.
  explicit Mlp(const GptShape &s, bool recomputeHidden = false);

  CONDUIT_PROJECTION_BRANCH_OVERRIDES(T)
  void recompute(Ops<T> &ops, const T *p, const T *x, LayerCache<T> &cache) const override;

private:
  /// The first projection u of x and its activation g, on n samples.
  void hidden(Ops<T> &ops, const T *p, const T *x, int64_t n, T *u, T *g) const;

  GptShape s;
  bool recomputeHidden = false;
  using ProjectionBranch<T>::o; ///< W1, b1, W2, b2
};

} // namespace conduit::model

#endif // CONDUIT_RUNTIME_MODEL_LAYERS_MLP_H
