//===- Branch.h - a residual branch of a block ------------------*- C++ -*-===//
//
// What a block (layers/Block.h) asks of each of its two residual branches, the attention
// (layers/Attention.h) and the MLP (layers/Mlp.h): y = residual + f(x), with x the branch's
// input, the block's normed activations. Another kind of branch (a mixture-of-experts MLP)
// implements this interface and is chosen where the block builds its MLP; nothing else in the
// block or the other units changes.
//
// A branch owns a contiguous slice of the block's parameters and its tensor rank's part of
// them, and keeps in its cache what is internal to it (projections, attention probabilities,
// activations, its stashed gradients); the block keeps the tensors between units (the
// branch's input and the residual stream) and passes them back to the backward. Every tensor
// that enters or leaves a branch is on this rank's rows (its sequence shard with sequence
// parallelism); the branch gathers and reduces over the tensor group itself
// (layers/TensorSplit.h), as TensorCollectives.h lists for a block.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_MODEL_LAYERS_BRANCH_H
#define CONDUIT_RUNTIME_MODEL_LAYERS_BRANCH_H

#include "runtime/model/Random.h"
#include "runtime/model/layers/Layer.h"
#include "runtime/model/layers/TensorSplit.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace conduit::model {

template <typename T> class Branch {
public:
  virtual ~Branch() = default;
  /// This tensor rank's parameters (the whole branch's without tensor parallelism).
  virtual int64_t numParams() const = 0;
  /// Where each of them lies in the whole branch's: runs appended to `runs`, offset by wholeAt
  /// in the whole layer and by localAt in the rank's.
  virtual void slice(int64_t wholeAt, int64_t localAt, std::vector<ParameterRun> &runs) const = 0;
  /// Fills host `params`, the whole branch's (on the unsplit shape only), drawing its weights
  /// from `random`, which the block's units share in their order.
  virtual void initialise(T *params, Random &random) const = 0;
  /// Layer::expertParams and Layer::placeExperts, for the branch: `at` is relative to the
  /// branch's own parameters.
  virtual int64_t expertParams() const { return 0; }
  virtual void placeExperts(int64_t at) {}
  virtual void placeExpertsApart(const T *params, T *grads) {}
  /// Layer::loadBalancedBias, relative to the branch's own parameters.
  virtual int64_t loadBalancedBias() const { return -1; }

  /// Allocates what forward keeps for `samples` samples, into `cache` (saved and input-only).
  /// The block allocates all its units' before any of them computes.
  virtual void keep(Ops<T> &ops, int64_t samples, LayerCache<T> &cache) const = 0;
  /// y = residual + f(x), after keep().
  virtual void forward(Ops<T> &ops, const T *params, const T *x, const T *residual, T *y,
                       LayerCache<T> &cache) const = 0;
  /// Selective checkpointing's recomputation of what the branch's forward dropped (the
  /// recompute modules `mlp`, `moe_act` and `mla_up_proj`): called by the block before
  /// backwardInput, with the forward's input x, it computes those tensors again with the forward's
  /// kernels (the same bits) and keeps them in `cache` as the forward would have. Nothing by
  /// default.
  virtual void recompute(Ops<T> &ops, const T *params, const T *x, LayerCache<T> &cache) const {}
  /// The input gradient of f from the output gradient dy, in a buffer allocated here once the
  /// branch's own working memory is released. `dyKept` says whether the caller keeps dy as it
  /// is until backwardWeight (which then reads it there), else the branch keeps what it
  /// needs of it. Leaves input-only buffers to the block, which releases them at its end.
  virtual Buffer<T> backwardInput(Ops<T> &ops, const T *params, LayerCache<T> &cache, const T *dy,
                                  bool dyKept) const = 0;
  /// Accumulates the parameter gradients into dparams; x is the forward's input and dy the
  /// output gradient backwardInput was given (read only where it was kept).
  virtual void backwardWeight(Ops<T> &ops, const LayerCache<T> &cache, const T *x, const T *dy,
                              T *dparams) const = 0;
};

/// A branch that is a column-parallel in-projection, then a row-parallel out-projection (the
/// attention, the MLP), its parameters and cache slots as Projections says: what is the same in
/// every such branch (its parameter count, its weight gradients) is written here once; a derived
/// branch defines the rest, what lies between its two projections being its own. A branch with
/// parameters of its own between them (the attention's q/k norms) keeps them after the
/// projections' and adds them to these two.
template <typename T> class ProjectionBranch : public Branch<T> {
public:
  int64_t numParams() const override { return o.total; }
  void backwardWeight(Ops<T> &ops, const LayerCache<T> &cache, const T *x, const T *dy,
                      T *dparams) const override {
    o.backwardWeight(ops, cache, x, dy, dparams);
  }

protected:
  explicit ProjectionBranch(const Projections &o) : o(o) {}

  Projections o;
};

/// The declarations of the overrides a ProjectionBranch<T> leaves to a derived branch, for the
/// body of its class template over T: each such branch states them with this one line (as LLVM
/// and MLIR declare repeated members with a macro), and says what is particular to it where it
/// defines them.
#define CONDUIT_PROJECTION_BRANCH_OVERRIDES(T)                                                     \
  void slice(int64_t wholeAt, int64_t localAt, std::vector<ParameterRun> &runs) const override;    \
  void initialise(T *params, Random &random) const override;                                       \
  void keep(Ops<T> &ops, int64_t samples, LayerCache<T> &cache) const override;                    \
  void forward(Ops<T> &ops, const T *params, const T *x, const T *residual, T *y,                  \
               LayerCache<T> &cache) const override;                                               \
  Buffer<T> backwardInput(Ops<T> &ops, const T *params, LayerCache<T> &cache, const T *dy,         \
                          bool dyKept) const override;

/// The start of a branch's keep(): `cache` set for `samples` samples, with `inputOnly` and
/// `saved` empty buffers for the branch to allocate.
template <typename T>
void startCache(LayerCache<T> &cache, int64_t samples, size_t inputOnly, size_t saved) {
  cache.samples = samples;
  cache.inputOnly.clear();
  cache.inputOnly.resize(inputOnly);
  cache.saved.clear();
  cache.saved.resize(saved);
}

} // namespace conduit::model

#endif // CONDUIT_RUNTIME_MODEL_LAYERS_BRANCH_H
