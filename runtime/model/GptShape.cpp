//===- GptShape.cpp - the decoder's shape from the plan --------------------===//
//
// GptShape::fromPlan checks the plan's transformer against what the layer units implement and
// how the tensor group splits it, naming the job key to change; activationElements bounds
// what a forward keeps, for the memory check before anything is allocated.
//
//===----------------------------------------------------------------------===//

#include "runtime/model/GptShape.h"

#include "runtime/plan/Limits.h"

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace conduit::model {

namespace {

/// Latent attention the layer (layers/LatentAttention.h) does not implement: value heads wider
/// than the query/key heads, or with q/k norms; naming the key to change.
absl::Status refuseLatentAttentionTheLayerLacks(const runtime::Plan &plan) {
  const runtime::Transformer &t = *plan.transformer;
  if (t.numKvHeads != t.numHeads || t.qkNorm || t.headDim != 0)
    return absl::InvalidArgumentError(
        "latent attention has a key and a value per query head, its own head widths and no q/k "
        "norms; compile the job again without model.num_kv_heads, model.head_dim and "
        "model.qk_norm");
  if (t.qkNopeHeadDim < 0 || t.qkRopeHeadDim < 0 || t.vHeadDim < 1 || t.qLoraRank < 0 ||
      t.qkNopeHeadDim + t.qkRopeHeadDim < 1 || (t.position == 1 && t.qkRopeHeadDim % 2 != 0))
    return absl::InvalidArgumentError(absl::StrCat(
        "latent attention's heads are ", t.qkNopeHeadDim, " + ", t.qkRopeHeadDim,
        " wide for queries and keys and ", t.vHeadDim,
        " for values; compile the job again with model.latent_attention's head widths in range"));
  if (t.vHeadDim > t.qkNopeHeadDim + t.qkRopeHeadDim)
    return absl::FailedPreconditionError(absl::StrCat(
        "latent attention's value heads (", t.vHeadDim,
        " wide) are wider than its query/key heads (", t.qkNopeHeadDim + t.qkRopeHeadDim,
        "), which conduit-run does not train; compile the job again with "
        "model.latent_attention.v_head_dim at most qk_nope_head_dim + qk_rope_head_dim"));
  return absl::OkStatus();
}

/// Multi-token prediction and a mixture of experts the layers or the backends cannot run,
/// naming the key to change.
absl::Status refuseWhatTheRuntimeLacks(const runtime::Plan &plan) {
  const runtime::Transformer &t = *plan.transformer;
  if (t.usesLatentAttention())
    CONDUIT_RETURN_IF_ERROR(refuseLatentAttentionTheLayerLacks(plan));
  if (!t.isMoe()) {
    if (plan.config.expert > 1)
      return absl::InvalidArgumentError(
          absl::StrCat("the plan has ", plan.config.expert,
                       " expert-parallel ranks but the model has no experts (parallelism.expert)"));
    return absl::OkStatus();
  }
  const struct {
    const char *key;
    bool bad;
    std::string what;
  } checks[] = {
      {"model.moe.num_experts", t.numExperts > limits::kMaxFfn,
       absl::StrCat(t.numExperts, " experts")},
      {"model.moe.top_k", t.topK < 1 || t.topK > t.numExperts,
       absl::StrCat("top_k ", t.topK, " with ", t.numExperts, " experts")},
      {"model.moe.expert_ffn_hidden_size",
       t.expertFfnHiddenSize < 1 || t.expertFfnHiddenSize > limits::kMaxFfn,
       absl::StrCat("an expert width of ", t.expertFfnHiddenSize)},
      {"model.moe.shared_ffn_hidden_size",
       t.sharedExperts < 0 || (t.sharedExperts > 0 && (t.sharedFfnHiddenSize < 1 ||
                                                       t.sharedFfnHiddenSize > limits::kMaxFfn)),
       absl::StrCat(t.sharedExperts, " shared experts of width ", t.sharedFfnHiddenSize)},
      {"model.moe.shared_expert_gate", t.sharedExpertGate && t.sharedExperts == 0,
       "a gate on shared experts there are none of"},
      {"model.moe.router", t.router > 1, absl::StrCat("router kind ", int(t.router))},
      {"model.moe.aux_loss_coefficient",
       !(std::isfinite(t.auxLossCoefficient) && t.auxLossCoefficient >= 0),
       absl::StrCat("an auxiliary-loss coefficient of ", t.auxLossCoefficient)},
      {"model.moe.z_loss_coefficient",
       !(std::isfinite(t.zLossCoefficient) && t.zLossCoefficient >= 0),
       absl::StrCat("a z-loss coefficient of ", t.zLossCoefficient)},
      {"model.moe.bias_update_rate",
       !(std::isfinite(t.biasUpdateRate) && t.biasUpdateRate >= 0) ||
           (t.biasUpdateRate > 0 && t.router != 1),
       absl::StrCat("a bias update rate of ", t.biasUpdateRate, " with the ",
                    t.router == 1 ? "sigmoid" : "softmax", " router")},
      {"model.moe.capacity_factor", !(std::isfinite(t.capacityFactor) && t.capacityFactor >= 0),
       absl::StrCat("a capacity factor of ", t.capacityFactor)},
      {"model.moe.dense_layers", t.denseLayers < 0 || t.denseLayers > t.numLayers,
       absl::StrCat(t.denseLayers, " dense layers of ", t.numLayers)},
      {"model.moe.router_groups",
       t.routerGroups < 1 || t.numExperts % t.routerGroups != 0 || t.routerGroupTopK < 1 ||
           t.routerGroupTopK > t.routerGroups ||
           t.topK > t.routerGroupTopK * (t.numExperts / t.routerGroups),
       absl::StrCat(t.numExperts, " experts in ", t.routerGroups, " groups, ", t.topK,
                    " from the best ", t.routerGroupTopK)},
  };
  for (const auto &c : checks)
    if (c.bad)
      return absl::InvalidArgumentError(absl::StrCat("the model's mixture of experts has ", c.what,
                                                     "; compile the job again with ", c.key,
                                                     " in range"));
  const int64_t e = plan.config.expert, ranks = int64_t(plan.config.data) * plan.config.tensor;
  if (e < 1 || t.numExperts % e != 0 || ranks % e != 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "the plan divides ", t.numExperts, " experts over expert groups of ", e, " of its ", ranks,
        " data- and tensor-parallel ranks; compile the job again with "
        "parallelism.expert dividing both"));
  // The ranks holding the same experts (the expert-data group, D x T / E of them) sum their
  // gradients in the data-parallel reductions: over that group with E > 1 or T > 1 (a segment
  // of its own, Plan::expertsApart), over the replicas otherwise. With one replica the plan
  // has no reductions.
  if (plan.config.data == 1 && ranks / e > 1)
    return absl::FailedPreconditionError(absl::StrCat(
        "each routed expert is held by ", ranks / e,
        " tensor-parallel ranks, whose gradients for it need summing, but with one replica "
        "the plan reduces no gradients; compile the job again with parallelism.expert ",
        plan.config.tensor, " (or parallelism.data above 1)"));
  // With T > 1 each tensor rank routes its T-th of each sample's tokens.
  if (plan.config.tensor > 1 && t.seqLength % plan.config.tensor != 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "each of the plan's ", plan.config.tensor,
        " tensor-parallel ranks routes its part of a sample's ", t.seqLength,
        " tokens through the experts; compile the job again with parallelism.tensor dividing "
        "model.seq_length"));
  return absl::OkStatus();
}

} // namespace

absl::StatusOr<GptShape> GptShape::fromPlan(const runtime::Plan &plan) {
  if (!plan.transformer)
    return absl::FailedPreconditionError(
        "the plan's model is a layer list, not a transformer; conduit-run trains GPT-style "
        "and Llama-style transformers only");
  const runtime::Transformer &t = *plan.transformer;
  // readPlan bounds these; a plan built in memory may not have been read.
  const struct {
    const char *key;
    int64_t value, most;
  } dimensions[] = {{"num_layers", t.numLayers, limits::kMaxLayers},
                    {"hidden_size", t.hiddenSize, limits::kMaxHidden},
                    {"num_heads", t.numHeads, limits::kMaxHeads},
                    {"ffn_hidden_size", t.ffnHiddenSize, limits::kMaxFfn},
                    {"seq_length", t.seqLength, limits::kMaxSeqLength},
                    {"vocab_size", t.vocabSize, limits::kMaxVocab}};
  for (const auto &d : dimensions)
    if (d.value < 1 || d.value > d.most)
      return absl::InvalidArgumentError(absl::StrCat("the model's ", d.key, " is ", d.value,
                                                     "; it must lie between 1 and ", d.most));
  const struct {
    const char *key;
    uint8_t value, most;
  } kinds[] = {
      {"mlp", t.mlp, 1}, {"norm", t.norm, 1}, {"position", t.position, 1}, {"bias", t.bias, 2}};
  for (const auto &k : kinds)
    if (k.value > k.most)
      return absl::InvalidArgumentError(absl::StrCat("the model's ", k.key, " kind is ",
                                                     int(k.value), "; conduit-run knows 0 to ",
                                                     int(k.most)));
  // Latent attention's heads have widths of their own (refuseLatentAttentionTheLayerLacks).
  const bool latent = t.usesLatentAttention();
  if (!latent && t.headDim == 0 && t.hiddenSize % t.numHeads != 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "the hidden size ", t.hiddenSize, " is not a multiple of the head count ", t.numHeads,
        "; compile the job again with model.hidden_size a multiple of model.num_heads, or "
        "model.head_dim set"));
  if (t.numKvHeads < 1 || t.numKvHeads > t.numHeads || t.numHeads % t.numKvHeads != 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "the model's ", t.numKvHeads, " key/value heads do not divide its ", t.numHeads,
        " attention heads; compile the job again with model.num_kv_heads a divisor of "
        "model.num_heads"));
  const bool rotary = t.position == 1;
  const int64_t headWidth = t.headDim > 0 ? t.headDim : t.hiddenSize / t.numHeads;
  if (!latent && rotary && headWidth % 2 != 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "rotary positions rotate pairs of dimensions, but the heads are ", headWidth,
        " wide; compile the job again with an even model.head_dim (or model.hidden_size / "
        "model.num_heads)"));
  if (rotary && !(std::isfinite(t.ropeTheta) && t.ropeTheta > 0))
    return absl::InvalidArgumentError(
        absl::StrCat("the model's rotary base is ", t.ropeTheta,
                     "; compile the job again with model.rope_theta a positive number"));
  if (!(std::isfinite(t.normEps) && t.normEps > 0))
    return absl::InvalidArgumentError(
        absl::StrCat("the model's norm epsilon is ", t.normEps,
                     "; compile the job again with model.norm_eps a positive number"));
  const int64_t tensor = plan.config.tensor;
  if (tensor < 1)
    return absl::InvalidArgumentError(
        absl::StrCat("the plan's tensor-parallel size is ", tensor, "; it must be at least 1"));
  const struct {
    const char *key;
    int64_t value;
  } split[] = {{"model.num_heads", t.numHeads},
               {"model.num_kv_heads", t.numKvHeads},
               {"model.ffn_hidden_size", t.ffnHiddenSize},
               {"model.vocab_size", t.vocabSize},
               {"model.seq_length", plan.config.sequenceParallel ? t.seqLength : tensor}};
  for (const auto &d : split)
    if (d.value % tensor != 0)
      return absl::InvalidArgumentError(
          absl::StrCat("tensor parallelism splits ", d.key, " (", d.value, ") over ", tensor,
                       " ranks; compile the job again with parallelism.tensor dividing it"));
  GptShape shape;
  if (absl::Status moe = refuseWhatTheRuntimeLacks(plan); !moe.ok())
    return moe;
  if (t.isMoe()) {
    shape.experts = t.numExperts;
    shape.topK = t.topK;
    shape.expertFfn = t.expertFfnHiddenSize;
    shape.sharedFfn = t.sharedExperts > 0 ? t.sharedFfnHiddenSize : 0;
    shape.sharedGate = shape.sharedFfn > 0 && t.sharedExpertGate;
    shape.denseBlocks = t.denseLayers;
    shape.sigmoidRouter = t.router == 1;
    shape.normalizeTopK = t.normalizeTopK;
    shape.auxLossCoefficient = t.auxLossCoefficient;
    shape.zLossCoefficient = t.zLossCoefficient;
    shape.dropByWeight = t.dropByWeight;
    shape.biasUpdateRate = t.biasUpdateRate;
    shape.routedScaling = t.routedScalingFactor;
    shape.capacityFactor = t.capacityFactor;
    shape.routerGroups = t.routerGroups;
    shape.routerGroupTopK = t.routerGroupTopK;
    shape.expertSize = plan.config.expert;
  }
  shape.tensorSize = tensor;
  shape.sequenceParallel = plan.config.sequenceParallel && tensor > 1;
  shape.blocks = t.numLayers;
  shape.hidden = t.hiddenSize;
  shape.heads = t.numHeads;
  shape.kvHeads = t.numKvHeads;
  shape.headWidth = t.headDim;
  shape.qkNorm = t.qkNorm;
  shape.ffn = t.ffnHiddenSize;
  shape.seq = t.seqLength;
  shape.vocab = t.vocabSize;
  shape.qkvBias = t.bias != 2;
  shape.otherBias = t.bias == 0;
  shape.gated = t.mlp == 1;
  shape.rmsNorm = t.norm == 1;
  shape.rotary = rotary;
  shape.tied = t.tieEmbeddings;
  shape.ropeTheta = t.ropeTheta;
  shape.ropeScaling = t.ropeScaling;
  shape.normEps = t.normEps;
  shape.mtpLayers = t.mtpLayers;
  shape.mtpLossCoefficient = t.mtpLossCoefficient;
  if (latent) {
    shape.qLora = t.qLoraRank;
    shape.kvLora = t.kvLoraRank;
    shape.qkNope = t.qkNopeHeadDim;
    shape.qkRope = t.qkRopeHeadDim;
    shape.vHead = t.vHeadDim;
  }
  return shape;
}

std::optional<int64_t> GptShape::activationElements(int64_t samples, int64_t blocks,
                                                    bool head) const {
  using limits::checkedAdd;
  using limits::checkedMul;
  // What the block and the head keep (their own buffers and their units' `keep`), per
  // sample, plus each layer's input and output. Per block row: 6h (x, the two norms' outputs,
  // the residual x2; the layer's input and output), the attention output (q wide), the qkv
  // projection, with q/k norms their inputs and one statistic per head, the MLP's first
  // projection (twice as wide for SwiGLU) and its activation, and the norms' 4 statistics
  // (RMSNorm keeps 2; the bound counts 4).
  // Latent attention keeps its q, k and v heads qkHead() wide (v zero-padded), its output, the
  // two latents before and after their norms with their statistics, and the shared rotary key.
  const int64_t attentionRow =
      latent() ? 3 * heads * qkHead() + heads * vHead + 2 * qLora + 2 * kvLora + 2 + qkRope
               : qWidth() + qkvWidth() + (qkNorm ? qWidth() + kvWidth() + heads + numKvHeads() : 0);
  const std::optional<int64_t> row = checkedMul(seq, hidden),
                               attention = checkedMul(heads, seq, seq),
                               blockRows =
                                   checkedMul(seq, 6 * hidden + attentionRow + upWidth() + ffn + 4),
                               headRows = checkedMul(seq, 3 * hidden + 2 + 2 * vocab);
  if (!row || !attention || !blockRows || !headRows)
    return std::nullopt;
  std::optional<int64_t> block = checkedAdd(*blockRows, *attention);
  if (block && moe()) {
    // A block with experts keeps, in place of the dense MLP's two tensors, per token: the
    // router's scores, each of its k assignments' input, first projection, activation and
    // output, and the shared experts' first projection and activation (with a gate, their
    // output too). A bound for every block.
    const int64_t expertUp = gated ? 2 * expertFfn : expertFfn;
    const int64_t sharedUp = gated ? 2 * sharedFfn : sharedFfn;
    const std::optional<int64_t> assignment = checkedMul(topK, expertUp + expertFfn + 2 * hidden);
    const std::optional<int64_t> moeRows =
        assignment ? checkedMul(seq, 6 * hidden + attentionRow + 4 + experts + sharedUp +
                                         sharedFfn + (sharedGate ? hidden : 0) + *assignment)
                   : std::nullopt;
    block = moeRows ? checkedAdd(std::max(*blockRows, *moeRows), *attention) : std::nullopt;
  }
  std::optional<int64_t> chain = block ? checkedMul(blocks, *block) : std::nullopt;
  // The head, and with it the multi-token prediction modules (counted among `blocks`), each
  // of which keeps a head's tensors too, and its embedding and two norms' (4h a row).
  if (chain && head)
    chain = checkedAdd(*chain, *headRows);
  if (chain && head && mtpLayers > 0) {
    const std::optional<int64_t> module = checkedMul(seq, 7 * hidden + 2 + 2 * vocab);
    const std::optional<int64_t> modules = module ? checkedMul(mtpLayers, *module) : std::nullopt;
    chain = modules ? checkedAdd(*chain, *modules) : std::nullopt;
  }
  return chain ? checkedMul(samples, *chain) : std::nullopt;
}

} // namespace conduit::model
