//===- Block.h - a pre-norm transformer block -------------------*- C++ -*-===//
//
// x2 = x + Attention(Norm1(x)), then y = x2 + MLP(Norm2(x2)): a layer of the chain composed of
// four units, each owning a contiguous slice of the block's parameters in this order — norm1
// (layers/Norm.h), the attention (layers/Attention.h), norm2, the MLP (layers/Mlp.h). The
// attention and the MLP are residual branches (layers/Branch.h); in a block with experts the
// MLP is a mixture of experts (layers/Moe.h), and in a model with latent attention the
// attention is layers/LatentAttention.h, other Branches, chosen where the block builds them.
//
// The block keeps the tensors between its units (its input x, the normed activations, the
// residual stream x2) and, between its input and weight gradients, the gradients that pass
// between them; each unit keeps its own in the block cache's `parts`. With sequence
// parallelism the norms' parameter gradients cover this rank's tokens only: the block sums
// both over the group with one all-reduce at the end of its weight gradient.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_MODEL_LAYERS_BLOCK_H
#define CONDUIT_RUNTIME_MODEL_LAYERS_BLOCK_H

#include "runtime/model/GptShape.h"
#include "runtime/model/layers/Branch.h"
#include "runtime/model/layers/Layer.h"
#include "runtime/model/layers/Norm.h"

#include <memory>

namespace conduit::model {

template <typename T> class Block final : public Layer<T> {
public:
  /// `recomputed`: the modules selective checkpointing recomputes (runtime::RecomputeModule
  /// bits; 0 without it). With the attention core, the attention keeps no probabilities: its
  /// input gradient computes them again. With the norms, the block keeps neither norm's
  /// output: they are working memory in the forward, and its input gradient computes them
  /// again from the kept inputs. With the MLP (a dense block's) or the routed experts'
  /// activation (a block with experts), that branch recomputes its hidden activations
  /// (Branch::recompute) before its input gradient; with latent attention's up projections,
  /// the attention recomputes its heads from the kept latents. With `experts` the MLP is a mixture
  /// of experts (layers/Moe.h).
  Block(const GptShape &s, uint32_t recomputed, bool experts = false);

  CONDUIT_LAYER_OVERRIDES(T)
  int64_t expertParams() const override { return mlp->expertParams(); }
  void placeExperts(int64_t at) override { mlp->placeExperts(at - this->at[FeedForward]); }
  void placeExpertsApart(const T *params, T *grads) override {
    mlp->placeExpertsApart(params, grads);
  }
  int64_t loadBalancedBias() const override {
    const int64_t bias = mlp->loadBalancedBias();
    return bias < 0 ? -1 : at[FeedForward] + bias;
  }

private:
  /// The units, in the order of their parameters and of the cache's parts.
  enum Part { Norm1, Attend, Norm2, FeedForward, NumParts };

  /// With recomputeNorms: the norms' outputs again, before the input gradient.
  void recomputeNormOutputs(Ops<T> &ops, const T *p, LayerCache<T> &cache) const;

  GptShape s;
  bool experts = false, recomputeNorms = false;
  Norm<T> norm1, norm2;
  std::unique_ptr<Branch<T>> attention, mlp;
  int64_t at[NumParts + 1] = {}; ///< where each unit's parameters start; at[NumParts]: all
};

} // namespace conduit::model

#endif // CONDUIT_RUNTIME_MODEL_LAYERS_BLOCK_H
