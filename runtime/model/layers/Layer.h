//===- Layer.h - what every layer of the chain offers -----------*- C++ -*-===//
//
// The interface of a layer of the plan's chain (the embedding, a block, a multi-token
// prediction module, the head) and of the
// cache it keeps between its forward and its backward. A layer owns a flat slice of the
// stage's parameters (its tensor rank's part of the whole layer's, where each run of it lies
// in the whole layer's stated by slice()), and computes its forward and the two halves of its
// backward against an Ops; it is written once for every tensor size, the tensor group's
// collectives (layers/TensorSplit.h) being identities when there is one rank.
//
// A layer may be built from smaller units (a block from norms, an attention and an MLP), each
// keeping its own cache among its layer's `parts`.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_MODEL_LAYERS_LAYER_H
#define CONDUIT_RUNTIME_MODEL_LAYERS_LAYER_H

#include "runtime/model/Ops.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace conduit::model {

/// A run of a tensor rank's parameters of a layer in the whole layer's: `length` elements at
/// `whole` in the unsplit layer's flat parameters and at `local` in the rank's.
struct ParameterRun {
  int64_t whole = 0, local = 0, length = 0;
};
/// Appends a run to `runs` unless it is empty.
inline void addRun(std::vector<ParameterRun> &runs, int64_t whole, int64_t local, int64_t length) {
  if (length > 0)
    runs.push_back({whole, local, length});
}

/// `n` elements that live only while one layer computes (counted as working memory).
template <typename T> Buffer<T> transient(Ops<T> &ops, int64_t n) {
  MemoryScope scope(ops.memory(), MemoryUse::Working);
  return ops.allocate(n);
}

/// The tokens of a batch of whole sequences and their next-token targets.
struct Tokens {
  const int32_t *tokens = nullptr;
  const int32_t *targets = nullptr;
  int64_t samples = 0;
  /// Factor on the loss gradient: 1 / (tokens in the global batch) for a mean loss.
  double lossScale = 1;
};

/// What a layer (or a unit of one) keeps from its forward for its backward (memory of the
/// layer's Ops), and from its input gradient for its weight gradient.
template <typename T> struct LayerCache {
  std::vector<Buffer<T>> saved; ///< by the forward, for both halves of the backward
  /// By the forward, for the input gradient only: released when the layer's input gradient
  /// is done (a block releases its units' together, at its end).
  std::vector<Buffer<T>> inputOnly;
  /// By backwardInput for backwardWeight: the output gradients of the layer's weight GEMMs,
  /// norms and embedding. Copies or buffers of its own, since the buffer the upstream gradient
  /// arrived in is reused before a deferred weight gradient runs.
  std::vector<Buffer<T>> stash;
  std::vector<int32_t> tokens; ///< embedding: the input tokens (host)
  int64_t samples = 0;
  /// The batch's factor on the loss gradient (Tokens::lossScale), for units whose backward
  /// adds a loss of their own (the mixture of experts' auxiliary loss); set by their layer.
  double lossScale = 1;
  /// What a unit keeps on the host between its forward and backward (a mixture of experts'
  /// routing, layers/Moe.h).
  std::shared_ptr<const void> host;
  /// The caches of the units a layer is built from, in the layer's order.
  std::vector<LayerCache> parts;
  /// Where a chain that adds each piece's parameter gradients to double accumulators keeps
  /// the layer's routed experts' (null otherwise). An expert's owner in an expert group holds
  /// the tokens of every member's piece: it adds each member's part of its weight gradients
  /// there on its own, as the reference adds each sample's (layers/Moe.h). Set by the chain
  /// on the layer's cache and its parts before the weight gradient.
  double *expertAccumulators = nullptr;

  void reachExperts(double *accumulators) {
    expertAccumulators = accumulators;
    for (LayerCache &part : parts)
      part.reachExperts(accumulators);
  }

  /// Elements kept by the forward (saved and input-only) and by the input gradient (stash),
  /// the parts' included.
  int64_t savedElements() const {
    int64_t n = count(saved) + count(inputOnly);
    for (const LayerCache &part : parts)
      n += part.savedElements();
    return n;
  }
  int64_t stashedElements() const {
    int64_t n = count(stash);
    for (const LayerCache &part : parts)
      n += part.stashedElements();
    return n;
  }

private:
  static int64_t count(const std::vector<Buffer<T>> &buffers) {
    int64_t n = 0;
    for (const Buffer<T> &b : buffers)
      n += b.size();
    return n;
  }
};

/// One layer's math, written once against Ops. Parameters and activations are memory of the
/// Ops passed in; initialise() works on host memory.
template <typename T> class Layer {
public:
  virtual ~Layer() = default;
  /// This tensor rank's parameters (the whole layer's without tensor parallelism).
  virtual int64_t numParams() const = 0;
  /// Where each of them lies in the whole layer's, in local order; replicated parameters
  /// (norms, row-parallel biases, the position table) are in every rank's.
  virtual std::vector<ParameterRun> slice() const = 0;
  /// Fills host `params` from (seed, global layer index): the whole layer's, so only on the
  /// unsplit shape (initialiseLayer keeps a tensor rank's slice of it).
  virtual void initialise(T *params, uint64_t seed, int64_t layerIndex) const = 0;
  /// Of numParams(), the rank's routed experts' (a block with experts under expert
  /// parallelism): the last ones in local order. A chain keeps them apart from the others
  /// (StageLayout, Gpt.h), since they are reduced over another group.
  virtual int64_t expertParams() const { return 0; }
  /// Where those lie, as an offset from the `params` (and `dparams`) pointer the layer is
  /// given: by default right after the others, as in local order.
  virtual void placeExperts(int64_t at) {}
  /// Where those lie when they are kept in arrays of their own (runtime::ShardSegment::apart):
  /// their parameters at `params` and, unless null, their gradients at `grads`, in the layer's
  /// local order; null `params` (or `grads`) keeps the offset from the pointer given.
  virtual void placeExpertsApart(const T *params, T *grads) {}
  /// Where a router's bias that the load moves (GptShape::biasUpdateRate) starts among the
  /// layer's parameters, GptShape::experts of them, or -1: its backward adds each expert's
  /// count of choices to that bias's gradient, and the optimizer moves it by them
  /// (model::balanceBias) instead of by its update rule.
  virtual int64_t loadBalancedBias() const { return -1; }
  /// Where the token table and the output head's matrix that a multi-token prediction module
  /// reads (layers/Mtp.h) lie in the chain, as offsets from the `params` (and `dparams`)
  /// pointer the layer is given; other layers share nothing.
  virtual void placeShared(int64_t tokenTable, int64_t headMatrix) {}
  /// The layer's output per sample, in activations between layers (LayerChain::sampleSize):
  /// a module that passes on two states says 2.
  virtual int64_t outputWidth() const { return 1; }
  /// Forward over batch.samples sequences: x (null for the embedding) to y (null for the
  /// head, which adds its loss to the Ops's loss).
  virtual void forward(Ops<T> &ops, const T *params, const T *x, const Tokens &batch, T *y,
                       LayerCache<T> &cache) const = 0;
  /// The input-gradient half of the backward (I): writes dx (unless null), releases what only
  /// it reads from the cache and stashes there what backwardWeight needs. The head ignores
  /// dy: its gradient starts at the loss.
  virtual void backwardInput(Ops<T> &ops, const T *params, LayerCache<T> &cache, const T *dy,
                             T *dx) const = 0;
  /// The weight-gradient half (W), after backwardInput on the same cache, possibly much later:
  /// accumulates the parameter gradients into dparams. Reads no parameters.
  virtual void backwardWeight(Ops<T> &ops, const LayerCache<T> &cache, T *dparams) const = 0;
  /// The whole backward: the two halves one after the other, so that a split backward
  /// computes the same bits.
  void backward(Ops<T> &ops, const T *params, LayerCache<T> &cache, const T *dy, T *dparams,
                T *dx) const {
    backwardInput(ops, params, cache, dy, dx);
    backwardWeight(ops, cache, dparams);
  }
};

/// The declarations of Layer<T>'s overrides, for the body of a layer's class template over T:
/// each layer states them with this one line (as LLVM and MLIR declare repeated members with a
/// macro), and says what is particular to it where it defines them.
#define CONDUIT_LAYER_OVERRIDES(T)                                                                 \
  int64_t numParams() const override;                                                              \
  std::vector<ParameterRun> slice() const override;                                                \
  void initialise(T *params, uint64_t seed, int64_t layerIndex) const override;                    \
  void forward(Ops<T> &ops, const T *params, const T *x, const Tokens &batch, T *y,                \
               LayerCache<T> &cache) const override;                                               \
  void backwardInput(Ops<T> &ops, const T *params, LayerCache<T> &cache, const T *dy, T *dx)       \
      const override;                                                                              \
  void backwardWeight(Ops<T> &ops, const LayerCache<T> &cache, T *dparams) const override;

} // namespace conduit::model

#endif // CONDUIT_RUNTIME_MODEL_LAYERS_LAYER_H
