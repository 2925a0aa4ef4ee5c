//===- TransformerCosts.cpp - analytic costs of transformer layers --------===//
//
// Per sample of s tokens, with h hidden, a heads, kv key/value heads of h/a each, f FFN width,
// V vocabulary and e bytes per element. FLOPs count matrix multiplications (2 per
// multiply-add) and the two attention products over the full s x s score matrix, as Megatron-LM
// does; element-wise work is left out. Backward = 2 x forward, of which the weight-gradient
// GEMMs (one per weight matrix, as many FLOPs as its forward GEMM) are W and the rest (input
// gradients and the attention products) is I. These are model FLOPs, the same for either
// attention kernel (a fused kernel executes fewer; the cost model prices what it executes).
// Activation bytes follow Korthikanti et al. (arXiv 2205.05198) without dropout, without the
// s x s scores under flash attention. See docs/cost-model.md.
//
//===----------------------------------------------------------------------===//

#include "job/TransformerCosts.h"

#include "absl/status/status.h"

#include <algorithm>

#include <cmath>
#include <string>

using namespace conduit;

namespace {

constexpr double kExactLimit = 9007199254740992.0; // 2^53

struct Shape {
  explicit Shape(const TransformerSpec &t)
      : s(t.seqLength), h(t.hiddenSize), a(t.numHeads),
        kvd(t.hiddenSize / t.numHeads * t.numKvHeads), f(t.ffnHiddenSize), v(t.vocabSize),
        gated(t.mlp == MlpKind::SwiGLU), layerNorm(t.norm == NormKind::LayerNorm),
        learned(t.position == PositionKind::Learned), bias(t.bias),
        flash(t.attention == AttentionKind::Flash) {}
  double s, h, a, kvd, f, v;
  bool gated, layerNorm, learned;
  BiasKind bias;
  bool flash;

  double normParams() const { return layerNorm ? 2 * h : h; }

  /// What a tensor-parallel group keeps whole in a block: the two norms and the biases added
  /// after the row-parallel reductions (attention output, MLP down projection).
  double blockReplicatedParams() const {
    return 2 * normParams() + (bias == BiasKind::All ? 2 * h : 0);
  }
  /// Without sequence parallelism every rank keeps the norms' inputs and the inputs of the
  /// column-parallel GEMMs (QKV, MLP up) whole: Korthikanti et al.'s replicated terms.
  double blockReplicatedActivationElements() const { return 4 * s * h; }

  double blockParams() const {
    double attention = 2 * h * h + 2 * h * kvd;
    double mlp = (gated ? 3 : 2) * h * f;
    double biases = 0;
    if (bias == BiasKind::All)
      biases = (h + 2 * kvd) + h + (gated ? 2 * f : f) + h;
    else if (bias == BiasKind::QKV)
      biases = h + 2 * kvd;
    return attention + mlp + biases + 2 * normParams();
  }

  /// The GEMMs with a weight: forward, and again as the weight gradient in the backward.
  double blockWeightFlops() const {
    double weights = 2 * h * h + 2 * h * kvd + (gated ? 3 : 2) * h * f;
    return 2 * s * weights;
  }
  double blockForwardFlops() const { return blockWeightFlops() + 4 * s * s * h; }

  /// Elements kept for the backward: attention (Q/K/V input, Q, K, V, the softmax output
  /// when eager, projection input), the two norm inputs, and the MLP (input and hidden
  /// activations). A fused kernel keeps no s x s scores, only their softmax statistics
  /// (flashStatisticsBytes).
  double blockActivationElements() const {
    double attention = 3 * s * h + 2 * s * kvd + (flash ? 0 : a * s * s);
    double norms = 2 * s * h;
    double mlp = s * h + (gated ? 3 : 2) * s * f;
    return attention + norms + mlp;
  }
  /// Of those, the attention core's (the softmax output): what selective checkpointing
  /// recomputes from Q, K and V instead of keeping (Korthikanti et al.'s 5as² per sample
  /// is this, with dropout's mask and output).
  double blockAttentionCoreElements() const { return flash ? 0 : a * s * s; }
  /// A fused kernel's softmax statistics: one fp32 log-sum-exp per query and head.
  double flashStatisticsBytes() const { return flash ? 4 * a * s : 0; }

  /// Elements a deferred weight gradient keeps: the input and the output gradient of every
  /// weight GEMM (QKV, output projection, up/gate, down) and, for each norm's weights, its
  /// normalised input and output gradient.
  double blockWeightGradientElements() const {
    double gemms =
        s * (h + (h + 2 * kvd)) + s * (h + h) + s * (h + (gated ? 2 : 1) * f) + s * (f + h);
    return gemms + 2 * (2 * s * h);
  }
};

/// Checks that every figure of `layer` is a representable count, then converts it.
absl::Status addLayer(std::vector<LayerSpec> &layers, std::string name, runtime::LayerKind kind,
                      double params, double fwd, double bwd, double wgrad, double activation,
                      double checkpoint, double output, double wgradBytes, double replicatedParams,
                      double replicatedActivation) {
  for (double value : {params, fwd, bwd, wgrad, activation, checkpoint, output, wgradBytes})
    if (!(value >= 0 && value <= kExactLimit))
      return absl::InvalidArgumentError(
          "layer '" + name +
          "' would have a figure above 2^53 (parameters, FLOPs or bytes per "
          "sample); the model shape is too large: reduce hidden_size, ffn_hidden_size, "
          "seq_length or vocab_size");
  LayerSpec layer;
  layer.name = std::move(name);
  layer.kind = kind;
  layer.params = static_cast<int64_t>(params);
  layer.fwdFlops = fwd;
  layer.bwdFlops = bwd;
  layer.bwdWeightFlops = wgrad;
  layer.activationBytes = static_cast<int64_t>(activation);
  layer.checkpointBytes = static_cast<int64_t>(checkpoint);
  layer.outputBytes = static_cast<int64_t>(output);
  layer.weightGradientBytes = static_cast<int64_t>(wgradBytes);
  layer.replicatedParams = static_cast<int64_t>(replicatedParams);
  layer.replicatedActivationBytes = static_cast<int64_t>(replicatedActivation);
  layers.push_back(std::move(layer));
  return absl::OkStatus();
}

} // namespace

namespace {

/// "4 or 5": the divisors of `n` nearest to `target` from below and above.
std::string nearestDivisors(int64_t n, int64_t target) {
  int64_t below = std::min(target, n), above = std::max<int64_t>(target, 1);
  while (below > 1 && n % below != 0)
    --below;
  while (above < n && n % above != 0)
    ++above;
  if (above > n || n % above != 0 || above == below)
    return std::to_string(below);
  return std::to_string(below) + " or " + std::to_string(above);
}

} // namespace

std::optional<ShapeProblem> conduit::checkTransformerShape(const TransformerSpec &t) {
  if (t.hiddenSize % t.numHeads != 0)
    return ShapeProblem{
        "num_heads",
        std::to_string(t.numHeads) + " attention heads do not divide the hidden size " +
            std::to_string(t.hiddenSize) + "; use " + nearestDivisors(t.hiddenSize, t.numHeads) +
            " heads, or a hidden_size that is a multiple of " + std::to_string(t.numHeads)};
  if (t.position == PositionKind::Rotary && (t.hiddenSize / t.numHeads) % 2 != 0)
    return ShapeProblem{"num_heads", "rotary positions rotate pairs of a head's dimensions, but " +
                                         std::to_string(t.numHeads) + " heads of " +
                                         std::to_string(t.hiddenSize) + " give heads of " +
                                         std::to_string(t.hiddenSize / t.numHeads) +
                                         " dimensions; choose a hidden_size and num_heads whose "
                                         "quotient is even"};
  if (t.numKvHeads > t.numHeads || t.numHeads % t.numKvHeads != 0)
    return ShapeProblem{"num_kv_heads",
                        std::to_string(t.numKvHeads) + " key/value heads do not divide the " +
                            std::to_string(t.numHeads) + " attention heads; use " +
                            nearestDivisors(t.numHeads, t.numKvHeads) + " key/value heads"};
  return std::nullopt;
}

absl::StatusOr<std::vector<LayerSpec>> conduit::expandTransformer(const TransformerSpec &spec,
                                                                  int64_t elementBytes) {
  const Shape x(spec);
  const double e = static_cast<double>(elementBytes);
  std::vector<LayerSpec> layers;
  layers.reserve(spec.numLayers + 2);

  // Embedding: token (and learned position) tables; keeps the token ids (int32). Its backward
  // is all weight gradient (the rows of the table).
  if (absl::Status err = addLayer(layers, "embedding", runtime::LayerKind::Embedding,
                                  x.v * x.h + (x.learned ? x.s * x.h : 0), x.s * x.h, x.s * x.h,
                                  x.s * x.h, 4 * x.s, 4 * x.s, e * x.s * x.h,
                                  4 * x.s + e * x.s * x.h, x.learned ? x.s * x.h : 0, 4 * x.s);
      !err.ok())
    return err;

  const double fwd = x.blockForwardFlops();
  for (int64_t i = 0; i < spec.numLayers; ++i) {
    if (absl::Status err =
            addLayer(layers, "block." + std::to_string(i), runtime::LayerKind::Block,
                     x.blockParams(), fwd, 2 * fwd, x.blockWeightFlops(),
                     e * x.blockActivationElements() + x.flashStatisticsBytes(), e * x.s * x.h,
                     e * x.s * x.h, e * x.blockWeightGradientElements(), x.blockReplicatedParams(),
                     e * x.blockReplicatedActivationElements());
        !err.ok())
      return err;
    layers.back().attentionCoreBytes = static_cast<int64_t>(e * x.blockAttentionCoreElements());
  }

  // Head: final norm, LM head, cross-entropy; keeps fp32 logits for the loss gradient.
  double headFwd = 2 * x.s * x.h * x.v;
  if (absl::Status err =
          addLayer(layers, "head", runtime::LayerKind::Head, x.normParams() + x.v * x.h, headFwd,
                   2 * headFwd, headFwd, 2 * e * x.s * x.h + 4 * x.s * x.v, e * x.s * x.h, 4,
                   3 * e * x.s * x.h + 4 * x.s * x.v, x.normParams(), 2 * e * x.s * x.h);
      !err.ok())
    return err;
  return layers;
}

int64_t conduit::transformerParameters(const TransformerSpec &spec) {
  const Shape x(spec);
  double total = x.v * x.h + (x.learned ? x.s * x.h : 0) + spec.numLayers * x.blockParams() +
                 x.normParams() + (spec.tieEmbeddings ? 0 : x.v * x.h);
  return static_cast<int64_t>(total);
}
