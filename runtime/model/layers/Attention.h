//===- Attention.h - causal self-attention, a block's first branch -*- C++ -*-===//
//
// x + Wo · Attention(Rotary(QkNorm(x · Wqkv + bqkv))) + bo: multi-head or grouped-query causal
// self-attention, with rotary positions on q and k where the shape says, and, where it says
// (Qwen3), an RMSNorm over each head's query and each head's key before them (one gain for
// every query head, one for every key head). Parameters, in this order: Wqkv [h × (q + 2·kvd)],
// bqkv [q + 2·kvd] (bias "all" or "qkv"), Wo [q × h], bo [h] (bias "all"), then the query
// norm's gain [d] and the key norm's [d] (q/k norms only); d is the head width, q = heads · d
// (h unless the heads have a width of their own), kvd = kvHeads · d, and Wqkv's columns are the
// q heads, then the k heads, then the v heads.
//
// Split over a tensor group, each rank holds its heads/T query heads and kv_heads/T key/value
// heads: their columns of Wqkv and bqkv (column-parallel) and their rows of Wo (row-parallel);
// bo is replicated and added once, after the group's sum; so are the q/k norms' gains, whose
// gradients each rank computes from its own heads and the group sums. With selective
// checkpointing the forward keeps no attention probabilities: the input gradient computes them
// again from the kept (rotated) q, k and v with the same kernel.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_MODEL_LAYERS_ATTENTION_H
#define CONDUIT_RUNTIME_MODEL_LAYERS_ATTENTION_H

#include "runtime/model/GptShape.h"
#include "runtime/model/layers/Branch.h"

#include <array>
#include <utility>

namespace conduit::model {

/// The attention probabilities an input gradient reads over `samples` sequences: `kept`, the
/// forward's, unless `recompute` (selective checkpointing of the attention core); then computed
/// again from the kept (rotated) `qkv` with the forward's kernel, the same bits, into `scratch`.
template <typename T>
const T *attentionProbabilities(Ops<T> &ops, int64_t samples, int64_t seq, int64_t heads,
                                int64_t kvHeads, int64_t headDim, const T *qkv,
                                const Buffer<T> &kept, bool recompute, Buffer<T> &scratch) {
  if (!recompute)
    return kept.data();
  scratch = transient(ops, samples * heads * seq * seq);
  // The attention's output again, not needed.
  Buffer<T> out = transient(ops, samples * seq * heads * headDim);
  ops.attentionForward(samples, seq, heads, kvHeads, headDim, qkv, scratch.data(), out.data());
  return scratch.data();
}

template <typename T> class Attention final : public ProjectionBranch<T> {
public:
  CONDUIT_PROJECTION_BRANCH_OVERRIDES(T)
  int64_t numParams() const override { return o.total + normParams(); }
  void backwardWeight(Ops<T> &ops, const LayerCache<T> &cache, const T *x, const T *dy,
                      T *dparams) const override;

  /// With `recomputeAttention` (selective checkpointing) the forward does not keep the
  /// attention probabilities.
  Attention(const GptShape &s, bool recomputeAttention);

private:
  /// This rank's query heads' width (q without tensor parallelism), and its key heads'.
  int64_t width() const { return s.localHeads() * s.headDim(); }
  int64_t kvWidth() const { return s.localKvHeads() * s.headDim(); }
  /// The q/k norms' gains (after the projections' parameters), or none.
  int64_t normParams() const { return s.qkNorm ? 2 * s.headDim() : 0; }
  /// The columns of this rank's q heads in its qkv rows, then of its k heads: where each part
  /// starts, and its heads.
  std::array<std::pair<int64_t, int64_t>, 2> qkParts() const {
    return {{{0, s.localHeads()}, {width(), s.localKvHeads()}}};
  }
  int64_t probsSize(int64_t samples) const { return samples * s.localHeads() * s.seq * s.seq; }
  /// The q/k norms over the qkv projection `qkv` of `rows` tokens, in place: keeps their inputs
  /// and statistics in `cache`.
  void normaliseQk(Ops<T> &ops, const T *p, int64_t rows, T *qkv, LayerCache<T> &cache) const;
  /// Their backward, in place on the qkv gradient `dqkv`; stashes the gains' gradients.
  void normaliseQkBackward(Ops<T> &ops, const T *p, int64_t rows, T *dqkv,
                           LayerCache<T> &cache) const;

  GptShape s;
  using ProjectionBranch<T>::o; ///< Wqkv, bqkv, Wo, bo
  bool recomputeAttention = false;
};

} // namespace conduit::model

#endif // CONDUIT_RUNTIME_MODEL_LAYERS_ATTENTION_H
