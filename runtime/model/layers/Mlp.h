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
  explicit Mlp(const GptShape &s);

  CONDUIT_PROJECTION_BRANCH_OVERRIDES(T)

private:
  GptShape s;
  using ProjectionBranch<T>::o; ///< W1, b1, W2, b2
};

} // namespace conduit::model

#endif // CONDUIT_RUNTIME_MODEL_LAYERS_MLP_H
