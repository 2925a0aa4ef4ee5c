//===- Gpt.h - the decoder the runtime trains -------------------*- C++ -*-===//
//
// The layers of the plan's transformer chain, GPT-style or Llama-style as the plan's model
// says: the embedding (token table, and learned positions unless rotary), the pre-norm blocks
// (causal self-attention, multi-head or grouped-query, with optional rotary positions, and a
// GELU or SwiGLU MLP, each with a residual; LayerNorm or RMSNorm) and the head (final norm,
// LM head, untied or tied to the token table's layout, cross-entropy). Each layer keeps its
// parameters in one flat array, in a fixed order, so that a stage is a contiguous slice of the
// model and a data-parallel shard is a slice of a stage. Parameters are initialised from
// (seed, global layer index) only.
//
// With tensor parallelism (GptShape::tensorSize T > 1) each layer holds its tensor rank's part,
// as Megatron-LM splits it (Shoeybi et al., arXiv:1909.08053): the qkv projection by heads and
// the MLP's first projection by columns (column-parallel), the attention's output and the
// MLP's second projection by rows (row-parallel, their biases added once after the group's
// all-reduce), the token table and the LM head by vocabulary, with the parallel
// cross-entropy; norms are replicated. With sequence parallelism (Korthikanti et al.,
// arXiv:2205.05198) the activations between layers, the norms and the residuals are split
// along the sequence, and all-gathers and reduce-scatters replace the all-reduces. The layers
// call their Ops's TensorGroup in the order runtime/plan/TensorCollectives.h states.
//
// The element type is a template parameter: float for training, double for gradient checks.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_MODEL_GPT_H
#define CONDUIT_RUNTIME_MODEL_GPT_H

#include "runtime/Status.h"
#include "runtime/model/Ops.h"
#include "runtime/plan/Plan.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace conduit::model {

/// The dimensions and variant of the model, validated for what this runtime implements. The
/// defaults are the GPT-style decoder.
struct GptShape {
  int64_t blocks = 0, hidden = 0, heads = 0, ffn = 0, seq = 0, vocab = 0;
  int64_t kvHeads = 0;                   ///< key/value heads, a divisor of heads; 0: as heads
  bool qkvBias = true, otherBias = true; ///< bias "all": both; "qkv": the first; "none": neither
  bool gated = false;                    ///< SwiGLU MLP (W1 is [h × 2f]: gate, then up), else GELU
  bool rmsNorm = false;                  ///< RMSNorm (gain only), else LayerNorm (gain and bias)
  bool rotary = false;      ///< rotary positions on q and k, else a learned position table
  bool tied = false;        ///< the LM head has the token table's layout [vocab × h]
  double ropeTheta = 10000; ///< the rotary base
  double normEps = 1e-5;    ///< the norms' epsilon
  /// Tensor parallelism: the group's size T, this rank's place in it, and whether the
  /// activations between layers are split along the sequence.
  int64_t tensorSize = 1, tensorRank = 0;
  bool sequenceParallel = false;

  bool tensorParallel() const { return tensorSize > 1; }
  /// The unsplit model's shape (tensor size 1).
  GptShape whole() const {
    GptShape w = *this;
    w.tensorSize = 1;
    w.tensorRank = 0;
    w.sequenceParallel = false;
    return w;
  }
  /// This tensor rank's part: attention heads, key/value heads, FFN width, vocabulary rows,
  /// and the tokens of a sample between layers (all of them without sequence parallelism).
  int64_t localHeads() const { return heads / tensorSize; }
  int64_t localKvHeads() const { return numKvHeads() / tensorSize; }
  int64_t localFfn() const { return ffn / tensorSize; }
  int64_t localVocab() const { return vocab / tensorSize; }
  int64_t localSeq() const { return sequenceParallel ? seq / tensorSize : seq; }
  int64_t localQkvWidth() const { return (localHeads() + 2 * localKvHeads()) * headDim(); }
  int64_t localUpWidth() const { return gated ? 2 * localFfn() : localFfn(); }

  int64_t headDim() const { return hidden / heads; }
  int64_t numKvHeads() const { return kvHeads > 0 ? kvHeads : heads; }
  /// The width of k (and of v) per token, and of the fused [q | k | v] projection.
  int64_t kvWidth() const { return numKvHeads() * headDim(); }
  int64_t qkvWidth() const { return hidden + 2 * kvWidth(); }
  /// The width of the MLP's first projection: f, or gate and up (2f) for SwiGLU.
  int64_t upWidth() const { return gated ? 2 * ffn : ffn; }
  /// Parameters of one norm: gain, and bias for LayerNorm.
  int64_t normParams() const { return rmsNorm ? hidden : 2 * hidden; }
  /// Elements the forward of `samples` samples through `blocks` blocks (and the head, when
  /// `head`) keeps for its backward, layer inputs included; nullopt when the count does not
  /// fit in an int64. Within the limits of Limits.h one sample's count always fits.
  std::optional<int64_t> activationElements(int64_t samples, int64_t blocks, bool head) const;
  /// The shape of the plan's transformer, split over the plan's tensor groups (tensorRank 0;
  /// a backend sets its own); an error names what this runtime cannot build.
  static absl::StatusOr<GptShape> fromPlan(const runtime::Plan &plan);
};

/// A run of a tensor rank's parameters of a layer in the whole layer's: `length` elements at
/// `whole` in the unsplit layer's flat parameters and at `local` in the rank's.
struct ParameterRun {
  int64_t whole = 0, local = 0, length = 0;
};
/// Where each of the tensor rank's parameters of a layer of kind `kind` lies in the whole
/// layer's, in local order; replicated parameters (norms, row-parallel biases, the position
/// table) are in every rank's. One run of the whole layer without tensor parallelism.
std::vector<ParameterRun> tensorSlice(runtime::LayerKind kind, const GptShape &shape);
/// The parameters tensor rank shape.tensorRank holds of layers [first, end) of `plan` (a
/// stage), and its part of them from the whole layers' flat parameters `whole`.
int64_t tensorParams(const runtime::Plan &plan, const GptShape &shape, int64_t first, int64_t end);
std::vector<float> tensorPart(const runtime::Plan &plan, const GptShape &shape, int64_t first,
                              int64_t end, const float *whole);
/// The whole layers' flat parameters of layers [first, end) from every tensor rank's part,
/// `parts` holding rank r's at r · tensorParams(...) (an all-gather of the group).
std::vector<float> wholeFromTensorParts(const runtime::Plan &plan, const GptShape &shape,
                                        int64_t first, int64_t end, const float *parts);
/// Fills host `params`, the tensor rank's part of layer `layer` of kind `kind`, with the
/// slice of exactly what the unsplit layer gets from (seed, layer).
template <typename T>
void initialiseLayer(runtime::LayerKind kind, const GptShape &shape, T *params, uint64_t seed,
                     int64_t layer);

/// The tokens of a batch of whole sequences and their next-token targets.
struct Tokens {
  const int32_t *tokens = nullptr;
  const int32_t *targets = nullptr;
  int64_t samples = 0;
  /// Factor on the loss gradient: 1 / (tokens in the global batch) for a mean loss.
  double lossScale = 1;
};

/// What a layer keeps from its forward for its backward (memory of the layer's Ops), and from
/// its input gradient for its weight gradient.
template <typename T> struct LayerCache {
  std::vector<Buffer<T>> saved; ///< by the forward; what only the input gradient reads goes there
  /// By backwardInput for backwardWeight: the output gradients of the layer's weight GEMMs,
  /// norms and embedding. Copies or buffers of its own, since the buffer the upstream gradient
  /// arrived in is reused before a deferred weight gradient runs.
  std::vector<Buffer<T>> stash;
  std::vector<int32_t> tokens; ///< embedding: the input tokens (host)
  int64_t samples = 0;
};

/// One layer's math, written once against Ops. Parameters and activations are memory of the
/// Ops passed in; initialise() works on host memory.
template <typename T> class Layer {
public:
  virtual ~Layer() = default;
  virtual int64_t numParams() const = 0;
  /// Fills host `params` from (seed, global layer index).
  virtual void initialise(T *params, uint64_t seed, int64_t layerIndex) const = 0;
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

/// What a forward keeps for its backward, as the plan's activation checkpointing says: with
/// Full a chain keeps each layer's input and its backward recomputes one layer at a time; with
/// Selective a block keeps everything but its attention probabilities, which its backward
/// recomputes from the saved q, k and v.
using runtime::Checkpointing;

/// The layer of kind `kind` for this shape.
template <typename T>
std::unique_ptr<Layer<T>> makeLayer(runtime::LayerKind kind, const GptShape &shape,
                                    Checkpointing checkpointing = Checkpointing::None);

/// A contiguous range of layers run as one unit (a pipeline stage, or the whole model) on one
/// Ops.
template <typename T> class LayerChain {
public:
  /// Layers [first, end) of `plan`; checks that each has the parameter count the plan states
  /// (of the whole layer: each tensor rank holds its part of it).
  /// `checkpointing` says what a forward keeps (by default everything: the reference).
  static absl::StatusOr<LayerChain> build(const runtime::Plan &plan, const GptShape &shape,
                                          int64_t first, int64_t end, Ops<T> &ops,
                                          Checkpointing checkpointing = Checkpointing::None);

  int64_t numParams() const { return offsets.back(); }
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

  /// Where layer `i` of the chain starts in the chain's flat parameters.
  int64_t offset(size_t i) const { return offsets[i]; }
  size_t size() const { return layers.size(); }
  const std::string &name(size_t i) const { return names[i]; }
  /// The global index of layer `i` of the chain.
  int64_t globalLayer(size_t i) const { return firstLayer + static_cast<int64_t>(i); }
  Ops<T> &operations() const { return *ops; }

private:
  /// Input gradients from the last layer to the first; with `dparams`, each layer's weight
  /// gradient right after its input gradient, releasing its cache (the whole backward holds
  /// one layer's stash at a time). With full checkpointing each layer's forward runs again
  /// first, from its kept input, and the input is released after its backward.
  void inputPass(const T *params, Cache &cache, const T *dy, T *dx, T *dparams,
                 std::vector<double> *seconds) const;
  /// Full checkpointing: layer `k`'s forward again, into its cache, as working memory; the
  /// loss it computes was counted by the first forward.
  void recompute(size_t k, const T *params, Cache &cache) const;

  GptShape shape;
  int64_t firstLayer = 0;
  Ops<T> *ops = nullptr;
  std::vector<std::shared_ptr<Layer<T>>> layers;
  std::vector<std::string> names;
  std::vector<runtime::LayerKind> kinds;
  std::vector<int64_t> offsets{0};
  bool head = false, embedding = false;
  bool keepInputs = false; ///< full checkpointing
};

} // namespace conduit::model

#endif // CONDUIT_RUNTIME_MODEL_GPT_H
