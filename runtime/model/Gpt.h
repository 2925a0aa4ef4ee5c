//===- Gpt.h - the decoder the runtime trains -------------------*- C++ -*-===//
//
// The layers of the plan's transformer chain, GPT-style or Llama-style as the plan's model
// says (GptShape.h), and the chain that runs a contiguous range of them as one unit (a
// pipeline stage, or the whole model). Each layer keeps its parameters in one flat array, in a
// fixed order, so that a stage is a contiguous slice of the model and a data-parallel shard is
// a slice of a stage. Parameters are initialised from (seed, global layer index) only.
//
// The layers are built from units under runtime/model/layers/, each written once for any
// tensor size: the embedding (Embedding.h); the pre-norm block (Block.h), composed of two norms
// (Norm.h), the attention and the MLP (Attention.h, Mlp.h: residual branches, Branch.h); the
// head (Head.h: final norm, LM head, cross-entropy); between the blocks and the head, the
// multi-token prediction modules (Mtp.h), which read the head's matrix and a copy of the token
// table where the chain places them. With tensor parallelism
// (GptShape::tensorSize T > 1) each unit holds its tensor rank's part, as Megatron-LM splits
// it (Shoeybi et al., arXiv:1909.08053), with sequence parallelism (Korthikanti et al.,
// arXiv:2205.05198) as the shape says; the units issue the group's collectives through
// layers/TensorSplit.h in the order runtime/plan/TensorCollectives.h states, and with T = 1
// none, computing the unsplit model's bits.
//
// The element type is a template parameter: float for training, double for gradient checks.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_MODEL_GPT_H
#define CONDUIT_RUNTIME_MODEL_GPT_H

#include "runtime/Status.h"
#include "runtime/model/GptShape.h"
#include "runtime/model/Ops.h"
#include "runtime/model/StageLayout.h"
#include "runtime/model/layers/Layer.h"
#include "runtime/plan/Plan.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace conduit::model {

/// Where each of the tensor rank's parameters of a layer of kind `kind` (at global index
/// `layer`) lies in the whole layer's, in local order (the layer's Layer::slice(); none for a
/// custom layer); replicated parameters (norms, row-parallel biases, the position table) are
/// in every rank's.
std::vector<ParameterRun> tensorSlice(runtime::LayerKind kind, const GptShape &shape,
                                      int64_t layer = 0);
/// Fills host `params`, the rank's part of layer `layer` of kind `kind` in its local order (its
/// tensor rank's, its routed experts'), with the slice of exactly what the unsplit layer gets
/// from (seed, layer).
template <typename T>
void initialiseLayer(runtime::LayerKind kind, const GptShape &shape, T *params, uint64_t seed,
                     int64_t layer);

/// What a forward keeps for its backward, as the plan's activation checkpointing says: with
/// Full a chain keeps each layer's input and its backward recomputes one layer at a time; with
/// Selective a block keeps everything but its attention probabilities, which its backward
/// recomputes from the saved q, k and v.
using runtime::Checkpointing;

/// The layer of kind `kind` at global index `layer` for this shape (its tensor rank's part; a
/// block has experts where GptShape::layerHasExperts says); null for a custom layer, which
/// conduit-run cannot train. With selective checkpointing a block recomputes what
/// `recomputeModules` names of the attention core and the norms (runtime::RecomputeModule).
template <typename T>
std::unique_ptr<Layer<T>> makeLayer(runtime::LayerKind kind, const GptShape &shape,
                                    Checkpointing checkpointing = Checkpointing::None,
                                    int64_t layer = 0,
                                    uint32_t recomputeModules = runtime::kRecomputeCoreAttention);

/// A contiguous range of layers run as one unit (a pipeline stage, or the whole model) on one
/// Ops.
template <typename T> class LayerChain {
public:
  /// Layers [first, end) of `plan`; checks that each has the parameter count the plan states
  /// (of the whole layer: each tensor rank holds its part of it).
  /// `checkpointing` says what a forward keeps (by default everything: the reference). The
  /// parameters are laid out as StageLayout::of(plan, shape, first, end, align) says.
  static absl::StatusOr<LayerChain> build(const runtime::Plan &plan, const GptShape &shape,
                                          int64_t first, int64_t end, Ops<T> &ops,
                                          Checkpointing checkpointing = Checkpointing::None,
                                          int64_t align = 1);

  /// The elements of the chain's flat parameters (StageLayout::size).
  int64_t numParams() const { return layout.size(); }
  /// Where the last stage's copy of the token table lies in the chain's flat parameters, whose
  /// gradient is summed with the embedding's (runtime::Transformer::sharesTokenTable): the
  /// head's matrix with tied embeddings, else the first multi-token prediction module's copy;
  /// -1 where the chain holds neither.
  int64_t tableCopyAt() const { return tableCopy; }
  /// Where the routers' biases that the load moves (Layer::loadBalancedBias) start in the
  /// chain's flat parameters, GptShape::experts elements each, in chain order.
  std::vector<int64_t> loadBalancedBiases() const;
  const StageLayout &parameterLayout() const { return layout; }
  bool hasHead() const { return head; }
  bool hasEmbedding() const { return embedding; }
  /// Elements of one sample's activations between layers (this tensor rank's sequence shard
  /// with sequence parallelism).
  int64_t sampleSize() const { return shape.localSeq() * shape.hidden; }

  /// Initialises `params` (memory of the chain's Ops) from the seed.
  void initialise(T *params, uint64_t seed) const;

  /// What a forward keeps for its backward: each layer's cache (blocks and the head keep
  /// their own copy of their input, so the chain keeps none). With full checkpointing the
  /// layers' caches exist only while the layer computes; the chain keeps each layer's input
  /// (none for the embedding) and the piece's tokens, from which the backward recomputes them.
  struct Cache {
    std::vector<LayerCache<T>> layers;
    std::vector<Buffer<T>> inputs;
    std::vector<int32_t> tokens, targets;
    double lossScale = 1;
    int64_t samples = 0;
  };
  /// Runs the chain; `x` is the chain's input (null when it starts with the embedding), `y`
  /// its output (null when it ends with the head, whose loss goes to the Ops). `seconds`, if
  /// given, receives each layer's time.
  void forward(const T *params, const T *x, const Tokens &batch, T *y, Cache &cache,
               std::vector<double> *seconds = nullptr) const;
  /// Backward through the chain, accumulating into dparams; dx may be null when the chain
  /// starts with the embedding. Releases the cache. `seconds`, if given, receives each
  /// layer's time.
  void backward(const T *params, Cache &cache, const T *dy, T *dparams, T *dx,
                std::vector<double> *seconds = nullptr) const;
  /// The input-gradient half of backward (I): writes dx and keeps in the cache only what
  /// backwardWeight needs.
  void backwardInput(const T *params, Cache &cache, const T *dy, T *dx,
                     std::vector<double> *seconds = nullptr) const;
  /// The weight-gradient half (W) of an earlier backwardInput on `cache`: accumulates into
  /// dparams and releases the cache. backwardInput then backwardWeight computes the bits of
  /// backward, whatever ran in between.
  void backwardWeight(Cache &cache, T *dparams, std::vector<double> *seconds = nullptr) const;

  /// The forward of a micro-batch: one sample at a time where the Ops says so (every sample is
  /// then computed with the same shapes whatever the micro-batch, so any cut of the batch
  /// gives the same bits), else in one go. `caches` receives one cache per piece; `seconds`,
  /// if given, accumulates per layer.
  void forwardSamples(const T *params, const T *x, const Tokens &batch, T *y,
                      std::vector<Cache> &caches, std::vector<double> *seconds = nullptr) const;
  /// The backward of forwardSamples: each piece's parameter gradients are added to the
  /// double-precision `grads` on their own, so the sum does not depend on how the batch was
  /// cut or in which order micro-batches ran. Releases the caches.
  void backwardSamples(const T *params, std::vector<Cache> &caches, const T *dy, double *grads,
                       T *dx, std::vector<double> *seconds = nullptr) const;
  /// backwardSamples in two halves: the input gradients of every piece (I), and later their
  /// weight gradients (W), each piece's added to `grads` on its own as backwardSamples adds
  /// them. The W of several micro-batches may thus run in any order, after any other work:
  /// each adds what backwardSamples would have added.
  void backwardInputSamples(const T *params, std::vector<Cache> &caches, const T *dy, T *dx,
                            std::vector<double> *seconds = nullptr) const;
  void backwardWeightSamples(std::vector<Cache> &caches, double *grads,
                             std::vector<double> *seconds = nullptr) const;

  /// Keeps the routed experts (StageLayout::experts elements, in the layout's order) in
  /// arrays of their own (runtime::ShardSegment::apart): their parameters at `params` and
  /// their gradients at `grads`, or, for the methods that add into double-precision `grads`,
  /// at `doubleGrads`; the expert range of the arrays the other methods take is then neither
  /// read nor written (those arrays may end where it starts). A null pointer keeps that
  /// array's experts in the range.
  void placeExpertsApart(const T *params, T *grads, double *doubleGrads);

  /// Where layer `i` of the chain starts in the chain's flat parameters (its routed experts
  /// may lie elsewhere: StageLayout).
  int64_t offset(size_t i) const { return layout.layerAt[i]; }
  size_t size() const { return layers.size(); }
  const std::string &name(size_t i) const { return names[i]; }
  /// The global index of layer `i` of the chain.
  int64_t globalLayer(size_t i) const { return firstLayer + static_cast<int64_t>(i); }
  Ops<T> &operations() const { return *ops; }

private:
  /// Input gradients from the last layer to the first; with `dparams`, each layer's weight
  /// gradient right after its input gradient, releasing its cache (the whole backward holds
  /// one layer's stash at a time). A layer that checkpointing recomputes whole runs its
  /// forward again first, from its kept input, and the input is released after its backward.
  /// `grads`, if given, are the double accumulators the piece's gradients are added to
  /// (weightOf).
  void inputPass(const T *params, Cache &cache, const T *dy, T *dx, T *dparams, double *grads,
                 std::vector<double> *seconds) const;
  /// backwardWeight, with `grads` as inputPass's.
  void weightPass(Cache &cache, T *dparams, double *grads, std::vector<double> *seconds) const;
  /// Layer `k`'s weight gradient into dparams, releasing its cache. With `grads`, where the
  /// piece's gradients are added afterwards, a layer with routed experts under expert
  /// parallelism adds those there itself (LayerCache::expertAccumulators).
  void weightOf(size_t k, Cache &cache, T *dparams, double *grads) const;
  /// Whether checkpointing recomputes layer `k` whole (runtime::recomputesWhole), keeping only
  /// its input from the forward.
  bool recomputes(size_t k) const { return runtime::recomputesWhole(checkpointing, kinds[k]); }
  /// Layer `k`'s forward again (recomputes(k)), into its cache, as working memory; the loss it
  /// computes was counted by the first forward.
  void recompute(size_t k, const T *params, Cache &cache) const;
  /// Adds a piece's gradients (the chain's whole layout) to `grads`, the expert range to
  /// apartDoubleGrads where it is set.
  void accumulate(const T *dparams, double *grads) const;
  /// Tells the multi-token prediction modules where the token table and the head's matrix
  /// they share lie, and sets tableCopy; refuses a module whose stage lacks the head or the
  /// first module.
  absl::Status placeShared(const runtime::Plan &plan);

  GptShape shape;
  int64_t firstLayer = 0;
  Ops<T> *ops = nullptr;
  std::vector<std::shared_ptr<Layer<T>>> layers;
  std::vector<std::string> names;
  std::vector<runtime::LayerKind> kinds;
  StageLayout layout;
  bool head = false, embedding = false;
  Checkpointing checkpointing = Checkpointing::None;
  double *apartDoubleGrads = nullptr; ///< placeExpertsApart's doubleGrads
  int64_t tableCopy = -1;             ///< tableCopyAt()
};

} // namespace conduit::model

#endif // CONDUIT_RUNTIME_MODEL_GPT_H
