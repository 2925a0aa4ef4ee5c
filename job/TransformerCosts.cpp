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
        d(t.headDim ? double(*t.headDim) : double(t.hiddenSize / t.numHeads)), q(a * d),
        kvd(d * t.numKvHeads), f(t.ffnHiddenSize), v(t.vocabSize), gated(t.mlp == MlpKind::SwiGLU),
        layerNorm(t.norm == NormKind::LayerNorm), learned(t.position == PositionKind::Learned),
        bias(t.bias), flash(fusedAttention(t.attention)), qkNorm(t.qkNorm),
        eager(t.elementwise != ElementwiseKind::Fused),
        eagerNorm(t.elementwise == ElementwiseKind::Eager && t.norm == NormKind::RMSNorm),
        mla(t.latentAttention), moe(t.moe) {}
  double s, h, a;
  double d;   ///< per-head width of queries, keys and values (without latent attention)
  double q;   ///< query width a x d
  double kvd; ///< key (and value) width
  double f, v;
  bool gated, layerNorm, learned;
  BiasKind bias;
  bool flash, qkNorm;
  bool eager;     ///< PyTorch's eager element-wise kernels (model.elementwise)
  bool eagerNorm; ///< and its RMSNorm in fp32 tensor ops
  std::optional<LatentAttentionSpec> mla;
  std::optional<MoeSpec> moe;

  double normParams() const { return layerNorm ? 2 * h : h; }

  /// A multi-token prediction module (TransformerSpec::mtpLayers) is block numLayers + k of
  /// the model's kind and, around it: the two norms of its inputs (the previous depth's hidden
  /// state and the embedding of the token k + 1 ahead, read from the main model's table), the
  /// projection of their concatenation (2h -> h), the shared head's own norm, and the main
  /// model's output head with a loss of its own. The embedding and head weights are the main
  /// model's, counted there.
  double mtpExtraParams() const { return 2 * h * h + 3 * normParams(); }
  double mtpExtraForwardFlops() const { return 2 * s * 2 * h * h + 2 * s * h * v; }
  /// Kept: the two norms' inputs, the projection's input (2h), the head's norm input and its
  /// normalised output, and the fp32 logits for the loss's gradient.
  double mtpExtraActivationBytes(double e) const {
    return e * 6 * s * h + 4 * s * v + eagerNormBytes(3 * s * h);
  }

  /// What PyTorch's eager mode keeps beyond fused kernels, in bytes: an RMSNorm in fp32 ops
  /// keeps its input cast to fp32 and its unweighted output (in the element type) where the
  /// fused kernel keeps the input, 4 bytes an element more.
  double eagerNormBytes(double elements) const { return eagerNorm ? 4 * elements : 0; }
  /// In a block: the norms' (the two, and q/k norms), SiLU's output beside its input in a dense
  /// SwiGLU MLP or the shared experts (one hidden activation more; routed experts as priced),
  /// and the keys and values repeated to every query head for the attention core.
  double eagerBlockBytes(int64_t b, double e) const {
    if (!eager)
      return 0;
    return eagerNormBytes(2 * s * h + (qkNorm && !mla ? s * (q + kvd) : 0)) +
           e * (s * eagerSwigluWidth(b) + (!mla && kvd < q ? 2 * s * (q - kvd) : 0));
  }
  double eagerSwigluWidth(int64_t b) const {
    return !eager || !gated ? 0 : hasExperts(b) ? sharedWidth() : f;
  }
  /// GEMMs of an MLP of width `width` (up, gate when SwiGLU, down).
  double mlpWeights(double width) const { return (gated ? 3 : 2) * h * width; }
  double mlpBiases(double width) const {
    return bias == BiasKind::All ? (gated ? 2 : 1) * width + h : 0;
  }

  // Attention. Without latent attention: Q (h -> a d), K and V (h -> kv heads x d each), the
  // output projection (a d -> h). With it (DeepSeek-V2/V3): queries through a rank-q_lora
  // latent (or directly), keys and values through a shared rank-kv_lora latent that also
  // yields the rotary key part, expanded per head into nope + v; out: a x v -> h.
  double qkHead() const { return mla ? double(mla->qkNopeHeadDim + mla->qkRopeHeadDim) : d; }
  double vHead() const { return mla ? double(mla->vHeadDim) : d; }
  double attentionWeights() const {
    if (!mla)
      return 2 * h * q + 2 * h * kvd;
    const double ql = double(mla->qLoraRank), kvl = double(mla->kvLoraRank),
                 rope = double(mla->qkRopeHeadDim), nope = double(mla->qkNopeHeadDim);
    const double query = ql > 0 ? h * ql + ql * a * qkHead() : h * a * qkHead();
    return query + h * (kvl + rope) + kvl * a * (nope + vHead()) + a * vHead() * h;
  }
  /// The attention's parameters outside its weight matrices: biases, latent norms, q/k norms.
  double attentionOtherParams() const {
    double extra = qkNorm ? 2 * d : 0;
    if (mla)
      extra += double(mla->kvLoraRank) + double(mla->qLoraRank);
    if (bias == BiasKind::All)
      extra += mla ? h : (q + 2 * kvd) + h;
    else if (bias == BiasKind::QKV)
      extra += mla ? 0 : q + 2 * kvd;
    return extra;
  }
  /// What tensor parallelism keeps whole in the attention: latent attention's down
  /// projections and their norms (its up projections are split by heads).
  double attentionReplicatedParams() const {
    if (!mla)
      return 0;
    const double ql = double(mla->qLoraRank), kvl = double(mla->kvLoraRank);
    return (ql > 0 ? h * ql + ql : 0) + h * (kvl + double(mla->qkRopeHeadDim)) + kvl;
  }
  /// The two products of the core over the full s x s scores: Q K^T and P V.
  double attentionCoreFlops() const { return 2 * s * s * a * (qkHead() + vHead()); }

  // The MLP of block `b`: dense, or a router (h -> N, no bias; a per-expert bias for sigmoid
  // routing), shared experts of total width fs and N routed experts of width fe, top_k of
  // them active per token.
  bool hasExperts(int64_t b) const { return moe && b >= moe->denseLayers; }
  double routerParams() const {
    return h * double(moe->numExperts) + (moe->router == RouterKind::Sigmoid ? moe->numExperts : 0);
  }
  double sharedWidth() const { return double(moe->sharedFfnHiddenSize); }
  /// The shared experts' gate (Qwen2-MoE's): a vector of h, one product per token.
  double gateParams() const { return moe->sharedExpertGate ? h : 0; }
  double expertWidth() const { return double(moe->expertFfnHiddenSize); }
  double routedParams() const {
    return double(moe->numExperts) * (mlpWeights(expertWidth()) + mlpBiases(expertWidth()));
  }
  double mlpParams(int64_t b) const {
    if (!hasExperts(b))
      return mlpWeights(f) + mlpBiases(f);
    const double shared =
        sharedWidth() > 0 ? mlpWeights(sharedWidth()) + mlpBiases(sharedWidth()) : 0;
    return routerParams() + shared + gateParams() + routedParams();
  }
  /// The MLP's weight GEMMs one token passes through (the router, the shared experts and its
  /// top_k experts): its active parameters.
  double mlpActiveWeights(int64_t b) const {
    if (!hasExperts(b))
      return mlpWeights(f);
    return h * double(moe->numExperts) + mlpWeights(sharedWidth()) + gateParams() +
           double(moe->topK) * mlpWeights(expertWidth());
  }

  double blockParams(int64_t b) const {
    return attentionWeights() + attentionOtherParams() + mlpParams(b) + 2 * normParams();
  }
  double blockExpertParams(int64_t b) const { return hasExperts(b) ? routedParams() : 0; }

  /// What a tensor-parallel group keeps whole in a block: the two norms, the biases added
  /// after the row-parallel reductions (attention output, MLP down projection), latent
  /// attention's down projections, the router and the shared experts' gate. Routed experts are
  /// divided over the expert group instead (LayerSpec::expertParams), and shared experts split
  /// as a dense MLP.
  double blockReplicatedParams(int64_t b) const {
    double whole = 2 * normParams() + (bias == BiasKind::All ? 2 * h : 0) + (qkNorm ? 2 * d : 0) +
                   attentionReplicatedParams();
    if (hasExperts(b))
      whole +=
          routerParams() + gateParams() - (sharedWidth() > 0 ? 0 : (bias == BiasKind::All ? h : 0));
    return whole;
  }
  /// Without sequence parallelism every rank keeps the norms' inputs and the inputs of the
  /// column-parallel GEMMs (QKV, MLP up) whole: Korthikanti et al.'s replicated terms, latent
  /// attention's latents (computed whole on every rank), and a shared experts' gate's output
  /// and values (every rank gates the whole sequence).
  double blockReplicatedActivationBytes(int64_t b, double e, double i) const {
    // Of them, the QKV (or down projections') input, a dense MLP's input and the normalised
    // latents are linear layers' inputs (blockLinearInputElements).
    double whole =
        e * 4 * s * h - (e - i) * s * h * (hasExperts(b) ? 1 : 2) + eagerNormBytes(2 * s * h);
    if (mla)
      whole += e * latentElements() - (e - i) * normalisedLatentElements();
    if (hasExperts(b) && gateParams() > 0)
      whole += e * (s * h + s);
    return whole;
  }

  /// The GEMMs with a weight: forward, and again as the weight gradient in the backward.
  double blockWeightFlops(int64_t b) const {
    return 2 * s * (attentionWeights() + mlpActiveWeights(b));
  }
  double blockForwardFlops(int64_t b) const { return blockWeightFlops(b) + attentionCoreFlops(); }

  /// Latent attention's latents kept for the backward: the query latent (norm input and
  /// output) and the key/value latent with its rotary part, and the normalised latent.
  double latentElements() const {
    const double ql = double(mla->qLoraRank), kvl = double(mla->kvLoraRank);
    return 2 * s * ql + s * (kvl + double(mla->qkRopeHeadDim)) + s * kvl;
  }
  /// Of the latents, the normalised ones: the up projections' inputs.
  double normalisedLatentElements() const {
    return s * double(mla->qLoraRank) + s * double(mla->kvLoraRank);
  }

  /// Elements kept for the backward: attention (Q/K/V input, Q, K, V, the softmax output
  /// when eager, projection input; with q/k norms their inputs, Q and K before them), the two
  /// norm inputs, and the MLP (input and hidden activations). A fused kernel keeps no s x s
  /// scores, only their softmax statistics (flashStatisticsBytes).
  double attentionActivationElements() const {
    const double scores = flash ? 0 : a * s * s;
    if (!mla)
      return s * h + 2 * s * q + 2 * s * kvd + (qkNorm ? s * (q + kvd) : 0) + scores;
    // Input, latents, Q, K (every head), V, the output projection's input.
    return s * h + latentElements() + 2 * s * a * qkHead() + 2 * s * a * vHead() + scores;
  }
  double blockActivationElements(int64_t b) const {
    const double norms = 2 * s * h;
    return attentionActivationElements() + norms + mlpActivationElements(b);
  }
  double mlpActivationElements(int64_t b) const {
    if (!hasExperts(b))
      return s * h + (gated ? 3 : 2) * s * f;
    // The input, the router's logits and probabilities, the shared experts' hidden
    // activations (with a gate, their output and the gate's values too), and the routed part
    // (moeRoutedElements).
    return s * h + 2 * s * double(moe->numExperts) + (gated ? 3 : 2) * s * sharedWidth() +
           (gateParams() > 0 ? s * h + s : 0) + moeRoutedElements();
  }
  /// The routed tokens' activations at the mean load: top_k copies of each token dispatched
  /// and each expert's hidden activations for them (its first projection's output and its
  /// weighted activation). The routing weights are applied to the activation, as
  /// Megatron-Core's grouped experts apply them, so no output is kept for the combine.
  double moeRoutedElements() const {
    const double k = double(moe->topK);
    return k * s * h + k * (gated ? 3 : 2) * s * expertWidth();
  }
  /// Of blockActivationElements, the inputs of the block's linear layers that their weight
  /// gradients read, which an FP8 run keeps cast to one byte (TrainingSpec::savedInputBytes):
  /// the QKV input (latent attention: the down projections' input and the normalised latents,
  /// the up projections' inputs), the output projection's input, a dense MLP's input and
  /// activation output; in a block with experts the shared experts' activation output, the
  /// dispatched tokens and the routed experts' activation outputs (the block's normed
  /// activations stay in the training type there: the router reads them).
  double blockLinearInputElements(int64_t b) const {
    const double attention = s * h + (mla ? normalisedLatentElements() + s * a * vHead() : s * q);
    if (!hasExperts(b))
      return attention + s * h + s * f;
    const double k = double(moe->topK);
    return attention + s * sharedWidth() + k * s * h + k * s * expertWidth();
  }
  /// The block's kept activations, in bytes: e per element, i per linear layer's input.
  double blockActivationBytes(int64_t b, double e, double i) const {
    return e * blockActivationElements(b) - (e - i) * blockLinearInputElements(b) +
           flashStatisticsBytes() + routingBytes(b) + eagerBlockBytes(b, e);
  }
  /// The routing of each token: top_k expert indices (int32) and weights (fp32).
  double routingBytes(int64_t b) const { return hasExperts(b) ? 8 * s * double(moe->topK) : 0; }
  /// Of those, what each recompute module drops (runtime::RecomputeModule, by bit):
  /// core_attn the attention core's softmax output, which is recomputed from Q, K and V
  /// (Korthikanti et al.'s 5as² per sample is this, with dropout's mask and output); none
  /// under a fused kernel; layernorm the two norms' outputs (the inputs of the QKV and MLP
  /// projections); mlp a dense MLP's hidden activations; moe_act the routed experts'
  /// activation outputs (the down projections' inputs); mla_up_proj latent attention's
  /// per-head queries, keys and values, recomputed from the latents. op (torchtitan's
  /// op-level policy, dense blocks without latent attention) all but what it saves: the
  /// block's input, the fused attention's output, and the outputs of every second matrix
  /// product in torchtitan's order (wq, wk, wv, wo, then w1, w3, w2 for SwiGLU or up, down for
  /// GELU): wq, wv, w1 (up) and, for SwiGLU, w2. PyTorch's eager mode adds what it keeps
  /// (eagerBlockBytes) to layernorm's (the fp32 copies) and mlp's (SiLU's output).
  /// In bytes: e per element, i per linear layer's input (blockLinearInputElements).
  std::array<double, runtime::kRecomputeModuleNames.size()> blockModuleBytes(int64_t b, double e,
                                                                             double i) const {
    std::array<double, runtime::kRecomputeModuleNames.size()> out{};
    out[0] = flash ? 0 : e * a * s * s;
    out[1] = i * s * h + (hasExperts(b) ? e : i) * s * h + eagerNormBytes(2 * s * h);
    out[2] =
        hasExperts(b) ? 0 : e * (gated ? 2 : 1) * s * f + i * s * f + e * s * eagerSwigluWidth(b);
    out[3] = hasExperts(b) ? i * double(moe->topK) * s * expertWidth() : 0;
    out[4] = mla ? e * s * a * (2 * qkHead() + vHead()) : 0;
    if (!hasExperts(b) && !mla) {
      // The fused attention's output (the output projection's input) and its statistics.
      const double kept = e * s * (h + q + kvd + f + (gated ? h : 0)) +
                          (flash ? i * s * q + flashStatisticsBytes() : 0);
      out[5] = std::max(0.0, blockActivationBytes(b, e, i) - kept);
    }
    return out;
  }
  /// A fused kernel's softmax statistics: one fp32 log-sum-exp per query and head.
  double flashStatisticsBytes() const { return flash ? 4 * a * s : 0; }

  /// Elements a deferred weight gradient keeps: the input and the output gradient of every
  /// weight GEMM and, for each norm's weights, its normalised input and output gradient.
  double blockWeightGradientElements(int64_t b) const {
    double attention;
    if (!mla) {
      attention = s * (h + (q + 2 * kvd)) + s * (q + h);
    } else {
      const double ql = double(mla->qLoraRank), kvl = double(mla->kvLoraRank),
                   rope = double(mla->qkRopeHeadDim), nope = double(mla->qkNopeHeadDim);
      const double query = ql > 0 ? s * (h + ql) + s * (ql + a * qkHead()) : s * (h + a * qkHead());
      attention = query + s * (h + kvl + rope) + s * (kvl + a * (nope + vHead())) +
                  s * (a * vHead() + h) + 2 * s * (ql + kvl);
    }
    auto mlp = [&](double width, double tokens) {
      return tokens * (h + (gated ? 2 : 1) * width) + tokens * (width + h);
    };
    double ffn;
    if (!hasExperts(b))
      ffn = mlp(f, s);
    else
      ffn = s * (h + double(moe->numExperts) + (gateParams() > 0 ? 1 : 0)) +
            (sharedWidth() > 0 ? mlp(sharedWidth(), s) : 0) +
            mlp(expertWidth(), double(moe->topK) * s);
    return attention + ffn + 2 * (2 * s * h);
  }
  /// Of those, the linear layers' inputs (an FP8 run keeps them cast): the inputs of every
  /// weight GEMM but the router's.
  double blockWeightGradientLinearInputs(int64_t b) const {
    double attention = s * h + s * q;
    if (mla) {
      const double ql = double(mla->qLoraRank), kvl = double(mla->kvLoraRank);
      attention = s * h + (ql > 0 ? s * ql : 0) + s * h + s * kvl + s * a * vHead();
    }
    if (!hasExperts(b))
      return attention + s * (h + f);
    return attention + (sharedWidth() > 0 ? s * (h + sharedWidth()) : 0) +
           double(moe->topK) * s * (h + expertWidth());
  }
  /// And their output gradients: an FP8 run's input-gradient pass casts each for its own GEMM,
  /// in both layouts, and the deferred weight gradient reads the transposed cast (Transformer
  /// Engine's delayed weight gradients; DeepSeek-V3's Wgrad takes FP8 operands).
  double blockWeightGradientLinearOutputGradients(int64_t b) const {
    const double up = gated ? 2 : 1;
    double attention = s * (q + 2 * kvd) + s * h;
    if (mla) {
      const double ql = double(mla->qLoraRank), kvl = double(mla->kvLoraRank),
                   rope = double(mla->qkRopeHeadDim), nope = double(mla->qkNopeHeadDim);
      attention = (ql > 0 ? s * ql : 0) + s * a * qkHead() + s * (kvl + rope) +
                  s * a * (nope + vHead()) + s * h;
    }
    if (!hasExperts(b))
      return attention + s * (up * f + h);
    return attention + (sharedWidth() > 0 ? s * (up * sharedWidth() + h) : 0) +
           double(moe->topK) * s * (up * expertWidth() + h);
  }
  double blockWeightGradientBytes(int64_t b, double e, double i) const {
    return e * blockWeightGradientElements(b) -
           (e - i) *
               (blockWeightGradientLinearInputs(b) + blockWeightGradientLinearOutputGradients(b));
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
  // Even with an explicit head width (Qwen3) the heads divide the hidden size: the plan file
  // and the runtime's shapes rely on it.
  if (t.hiddenSize % t.numHeads != 0)
    return ShapeProblem{
        "num_heads",
        std::to_string(t.numHeads) + " attention heads do not divide the hidden size " +
            std::to_string(t.hiddenSize) + "; use " + nearestDivisors(t.hiddenSize, t.numHeads) +
            " heads, or a hidden_size that is a multiple of " + std::to_string(t.numHeads)};
  const bool rotary = t.position == PositionKind::Rotary;
  if (rotary && t.headDim && *t.headDim % 2 != 0)
    return ShapeProblem{"head_dim", "rotary positions rotate pairs of a head's dimensions, but "
                                    "head_dim is " +
                                        std::to_string(*t.headDim) + "; make it even"};
  if (rotary && !t.headDim && !t.latentAttention && (t.hiddenSize / t.numHeads) % 2 != 0)
    return ShapeProblem{"num_heads", "rotary positions rotate pairs of a head's dimensions, but " +
                                         std::to_string(t.numHeads) + " heads of " +
                                         std::to_string(t.hiddenSize) + " give heads of " +
                                         std::to_string(t.hiddenSize / t.numHeads) +
                                         " dimensions; choose a hidden_size and num_heads whose "
                                         "quotient is even"};
  if (t.ropeScaling.scaled() && !rotary)
    return ShapeProblem{"rope_scaling", "extends rotary positions' context, and the positions are "
                                        "learned; remove rope_scaling, or set position "
                                        "\"rotary\""};
  if (t.numKvHeads > t.numHeads || t.numHeads % t.numKvHeads != 0)
    return ShapeProblem{"num_kv_heads",
                        std::to_string(t.numKvHeads) + " key/value heads do not divide the " +
                            std::to_string(t.numHeads) + " attention heads; use " +
                            nearestDivisors(t.numHeads, t.numKvHeads) + " key/value heads"};
  if (const std::optional<LatentAttentionSpec> &a = t.latentAttention) {
    if (t.headDim)
      return ShapeProblem{"head_dim", "latent attention sets its own head widths "
                                      "(latent_attention.qk_nope_head_dim, qk_rope_head_dim and "
                                      "v_head_dim); remove head_dim"};
    if (t.qkNorm)
      return ShapeProblem{"qk_norm", "latent attention normalises its latents, not each head's "
                                     "queries and keys; remove qk_norm"};
    if (t.numKvHeads != t.numHeads)
      return ShapeProblem{"num_kv_heads",
                          "latent attention expands its latent into keys and values for every "
                          "head; num_kv_heads must equal num_heads (" +
                              std::to_string(t.numHeads) + ") or be left out"};
    if (a->qkNopeHeadDim + a->qkRopeHeadDim < 1)
      return ShapeProblem{"latent_attention.qk_nope_head_dim",
                          "the query/key heads have no dimensions (qk_nope_head_dim and "
                          "qk_rope_head_dim are both 0)"};
    if (rotary && a->qkRopeHeadDim % 2 != 0)
      return ShapeProblem{"latent_attention.qk_rope_head_dim",
                          "rotary positions rotate pairs of dimensions, but qk_rope_head_dim is " +
                              std::to_string(a->qkRopeHeadDim) + "; make it even"};
  }
  if (const std::optional<MoeSpec> &m = t.moe) {
    if (m->topK > m->numExperts)
      return ShapeProblem{"moe.top_k",
                          "each token is routed to " + std::to_string(m->topK) +
                              " experts, and there are only " + std::to_string(m->numExperts) +
                              " (moe.num_experts); use at most " + std::to_string(m->numExperts)};
    if (m->denseLayers >= t.numLayers)
      return ShapeProblem{"moe.dense_layers",
                          std::to_string(m->denseLayers) + " leading dense blocks of the " +
                              std::to_string(t.numLayers) +
                              " leave no block with experts; use fewer than num_layers, or "
                              "remove model.moe"};
    const double experts = static_cast<double>(m->numExperts);
    if (m->imbalance && *m->imbalance > experts)
      return ShapeProblem{"moe.imbalance",
                          "bounds the busiest expert rank's routed tokens over the mean, which is "
                          "at most the expert count " +
                              std::to_string(m->numExperts) + "; use a value from 1 to " +
                              std::to_string(m->numExperts)};
    if (m->capacityFactor && *m->capacityFactor > experts)
      return ShapeProblem{"moe.capacity_factor",
                          "above the expert count " + std::to_string(m->numExperts) +
                              " it never drops a token; remove it for dropless routing"};
    if (m->numExperts % m->routerGroups != 0)
      return ShapeProblem{"moe.router_groups",
                          std::to_string(m->routerGroups) + " groups do not divide the " +
                              std::to_string(m->numExperts) +
                              " experts (moe.num_experts); use a divisor of it"};
    if (m->routerGroupTopK > m->routerGroups)
      return ShapeProblem{"moe.router_group_top_k",
                          "each token may use " + std::to_string(m->routerGroupTopK) +
                              " groups, and there are only " + std::to_string(m->routerGroups) +
                              " (moe.router_groups); use at most " +
                              std::to_string(m->routerGroups)};
    const int64_t reachable = m->routerGroupTopK * (m->numExperts / m->routerGroups);
    if (m->topK > reachable)
      return ShapeProblem{"moe.top_k", "each token is routed to " + std::to_string(m->topK) +
                                           " experts, and its " +
                                           std::to_string(m->routerGroupTopK) +
                                           " groups (moe.router_group_top_k) hold only " +
                                           std::to_string(reachable) + "; use at most " +
                                           std::to_string(reachable) + ", or allow more groups"};
  }
  return std::nullopt;
}

double conduit::defaultMoeImbalance(const MoeSpec &moe, int64_t expert, int64_t tokensPerRank) {
  if (moe.capacityFactor)
    return std::max(1.0, *moe.capacityFactor);
  if (expert <= 1 || tokensPerRank <= 0)
    return 1.0;
  // Each rank of the group receives, on average, mu = tokens x top_k routed assignments; with
  // uniform routing a rank's load is Binomial(E mu, 1/E), of variance mu (1 - 1/E), and the
  // largest of E such loads exceeds the mean by about sqrt(2 ln E) standard deviations (Raab
  // and Steger, "Balls into Bins", 1998).
  const double e = static_cast<double>(expert);
  const double mu = static_cast<double>(tokensPerRank) * static_cast<double>(moe.topK);
  // Group-limited routing sends a token's experts in clumps: top_k / router_group_top_k to
  // each chosen group, all of them to one rank where a group lies within a rank. A load made
  // of clumps of c has c times the variance of one made of single assignments.
  double clump = 1;
  if (moe.routerGroupTopK < moe.routerGroups) {
    const double ranksPerGroup = std::max(1.0, e / static_cast<double>(moe.routerGroups));
    clump = std::max(1.0, static_cast<double>(moe.topK) /
                              (static_cast<double>(moe.routerGroupTopK) * ranksPerGroup));
  }
  return std::min(e, 1.0 + std::sqrt(2.0 * std::log(e) * (1.0 - 1.0 / e) * clump / mu));
}

std::optional<int64_t> conduit::selectiveBytesOf(const LayerSpec &layer, uint32_t modules) {
  if (!layer.moduleBytes)
    return std::nullopt;
  int64_t bytes = 0;
  for (size_t m = 0; m < layer.moduleBytes->size(); ++m)
    if (modules & (1u << m))
      bytes += (*layer.moduleBytes)[m];
  return std::min(bytes, layer.activationBytes);
}

absl::StatusOr<std::vector<LayerSpec>> conduit::expandTransformer(const TransformerSpec &spec,
                                                                  int64_t elementBytes,
                                                                  int64_t savedInputBytes) {
  const Shape x(spec);
  const double e = static_cast<double>(elementBytes);
  const double i = static_cast<double>(savedInputBytes > 0 ? savedInputBytes : elementBytes);
  std::vector<LayerSpec> layers;
  layers.reserve(spec.numLayers + spec.mtpLayers + 2);

  // Embedding: token (and learned position) tables; keeps the token ids (int32). Its backward
  // is all weight gradient (the rows of the table).
  if (absl::Status err = addLayer(layers, "embedding", runtime::LayerKind::Embedding,
                                  x.v * x.h + (x.learned ? x.s * x.h : 0), x.s * x.h, x.s * x.h,
                                  x.s * x.h, 4 * x.s, 4 * x.s, e * x.s * x.h,
                                  4 * x.s + e * x.s * x.h, x.learned ? x.s * x.h : 0, 4 * x.s);
      !err.ok())
    return err;

  // The blocks, then the multi-token prediction modules (Shape::mtpExtraParams): module k
  // takes the main hidden state (and, from the second on, the previous module's) and passes
  // the main one on to the head with its own.
  const int64_t mtp = spec.mtpLayers;
  for (int64_t b = 0; b < spec.numLayers + mtp; ++b) {
    const int64_t k = b - spec.numLayers; // the module's depth, or negative for a block
    const double fwd = x.blockForwardFlops(b) + (k >= 0 ? x.mtpExtraForwardFlops() : 0);
    const double sh = e * x.s * x.h;
    const std::string name = k < 0 ? "block." + std::to_string(b) : "mtp." + std::to_string(k);
    // The first module keeps the last stage's copy of the token table, unless the head's tied
    // matrix is that copy (TransformerSpec::sharesTokenTable).
    const double tableCopy = k == 0 && !spec.tieEmbeddings ? x.v * x.h : 0;
    if (absl::Status err =
            addLayer(layers, name, runtime::LayerKind::Block,
                     x.blockParams(b) + (k >= 0 ? x.mtpExtraParams() : 0) + tableCopy, fwd, 2 * fwd,
                     x.blockWeightFlops(b) + (k >= 0 ? x.mtpExtraForwardFlops() : 0),
                     x.blockActivationBytes(b, e, i) + (k >= 0 ? x.mtpExtraActivationBytes(e) : 0),
                     k > 0 ? 2 * sh : sh, k >= 0 && k + 1 < mtp ? 2 * sh : sh,
                     x.blockWeightGradientBytes(b, e, i) + (k >= 0 ? 4 * sh + e * x.s * x.v : 0),
                     // A module's norms and projection are whole on every tensor rank.
                     x.blockReplicatedParams(b) + (k >= 0 ? x.mtpExtraParams() : 0),
                     x.blockReplicatedActivationBytes(b, e, i) + (k >= 0 ? 4 * sh : 0));
        !err.ok())
      return err;
    const auto modules = x.blockModuleBytes(b, e, i);
    auto &bytes = layers.back().moduleBytes.emplace();
    for (size_t m = 0; m < modules.size(); ++m)
      bytes[m] = static_cast<int64_t>(modules[m]);
    layers.back().expertParams = static_cast<int64_t>(x.blockExpertParams(b));
  }

  // Head: final norm, LM head, cross-entropy; keeps fp32 logits for the loss gradient.
  double headFwd = 2 * x.s * x.h * x.v;
  if (absl::Status err = addLayer(layers, "head", runtime::LayerKind::Head,
                                  x.normParams() + x.v * x.h, headFwd, 2 * headFwd, headFwd,
                                  2 * e * x.s * x.h + 4 * x.s * x.v + x.eagerNormBytes(x.s * x.h),
                                  e * x.s * x.h, 4, 3 * e * x.s * x.h + 4 * x.s * x.v,
                                  x.normParams(), 2 * e * x.s * x.h + x.eagerNormBytes(x.s * x.h));
      !err.ok())
    return err;
  return layers;
}

namespace {

/// The embedding and head parameters, counting tied tables once.
double endParams(const TransformerSpec &spec, const Shape &x) {
  return x.v * x.h + (x.learned ? x.s * x.h : 0) + x.normParams() +
         (spec.tieEmbeddings ? 0 : x.v * x.h);
}

} // namespace

int64_t conduit::transformerParameters(const TransformerSpec &spec) {
  const Shape x(spec);
  double total = endParams(spec, x) + double(spec.mtpLayers) * x.mtpExtraParams();
  for (int64_t i = 0; i < spec.numLayers + spec.mtpLayers; ++i)
    total += x.blockParams(i);
  return static_cast<int64_t>(total);
}

int64_t conduit::transformerActiveParameters(const TransformerSpec &spec) {
  const Shape x(spec);
  double total = endParams(spec, x) + double(spec.mtpLayers) * x.mtpExtraParams();
  for (int64_t i = 0; i < spec.numLayers + spec.mtpLayers; ++i) {
    total += x.blockParams(i);
    if (x.hasExperts(i))
      total -= x.routedParams() * (1 - double(spec.moe->topK) / double(spec.moe->numExperts));
  }
  return static_cast<int64_t>(total);
}

int64_t conduit::moeRoutedActivationBytes(const TransformerSpec &spec, int64_t elementBytes) {
  if (!spec.moe)
    return 0;
  return static_cast<int64_t>(double(elementBytes) * Shape(spec).moeRoutedElements());
}
