//===- Head.h - the final norm, the LM head and the loss --------*- C++ -*-===//
//
// The chain's last layer: z = Norm(x) (layers/Norm.h), logits = z · W, then the cross-entropy
// against the next tokens, added to the Ops's loss. Parameters: the final norm's, then W,
// [h × vocab] (logits = z · W), or, tied, [vocab × h] as the token table (logits = z · Wᵀ),
// starting from the token table's values.
//
// Split over a tensor group, each rank holds the LM head's columns of its vocabulary rows (tied:
// the token table's rows) and computes Megatron-LM's vocabulary-parallel cross-entropy: each
// row's maximum, sum of exponentials and target logit summed over the group; tensor rank 0
// counts the loss. One rank computes the cross-entropy in one kernel.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_MODEL_LAYERS_HEAD_H
#define CONDUIT_RUNTIME_MODEL_LAYERS_HEAD_H

#include "runtime/model/GptShape.h"
#include "runtime/model/layers/Layer.h"
#include "runtime/model/layers/Norm.h"

namespace conduit::model {

template <typename T> class Head final : public Layer<T> {
public:
  explicit Head(const GptShape &s) : s(s), norm(s) {}

  CONDUIT_LAYER_OVERRIDES(T)

private:
  GptShape s;
  Norm<T> norm;
};

} // namespace conduit::model

#endif // CONDUIT_RUNTIME_MODEL_LAYERS_HEAD_H
