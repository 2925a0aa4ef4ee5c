//===- Attention.h - causal self-attention, a block's first branch -*- C++ -*-===//
//
// x + Wo · Attention(Rotary(x · Wqkv + bqkv)) + bo: multi-head or grouped-query causal
// self-attention, with rotary positions on q and k where the shape says. Parameters, in this
// order: Wqkv [h × (h + 2·kvd)], bqkv [h + 2·kvd] (bias "all" or "qkv"), Wo [h × h], bo [h]
// (bias "all"); kvd = kvHeads · headDim, and Wqkv's columns are the q heads, then the k heads,
// then the v heads.
//
// Split over a tensor group, each rank holds its heads/T query heads and kv_heads/T key/value
// heads: their columns of Wqkv and bqkv (column-parallel) and their rows of Wo (row-parallel);
// bo is replicated and added once, after the group's sum. With selective checkpointing the
// forward keeps no attention probabilities: the input gradient computes them again from the
// kept (rotated) q, k and v with the same kernel.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_MODEL_LAYERS_ATTENTION_H
#define CONDUIT_RUNTIME_MODEL_LAYERS_ATTENTION_H

#include "runtime/model/GptShape.h"
#include "runtime/model/layers/Branch.h"

namespace conduit::model {

template <typename T> class Attention final : public ProjectionBranch<T> {
public:
  CONDUIT_PROJECTION_BRANCH_OVERRIDES(T)

  /// With `recomputeAttention` (selective checkpointing) the forward does not keep the
  /// attention probabilities.
  Attention(const GptShape &s, bool recomputeAttention);

private:
  /// This rank's query heads' width (h without tensor parallelism).
  int64_t width() const { return s.localHeads() * s.headDim(); }
  int64_t probsSize(int64_t samples) const { return samples * s.localHeads() * s.seq * s.seq; }
  /// The attention probabilities the input gradient reads: the forward's or, recomputed from
  /// the kept q, k and v, the same bits in `scratch`.
  const T *probabilities(Ops<T> &ops, const LayerCache<T> &cache, Buffer<T> &scratch) const;

  GptShape s;
  using ProjectionBranch<T>::o; ///< Wqkv, bqkv, Wo, bo
  bool recomputeAttention = false;
};

} // namespace conduit::model

#endif // CONDUIT_RUNTIME_MODEL_LAYERS_ATTENTION_H
