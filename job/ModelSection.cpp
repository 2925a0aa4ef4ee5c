//===- ModelSection.cpp - the job file's model section --------------------===//
//
// Three kinds of model: a transformer shape (expanded into its layer chain by
// TransformerCosts.h), a Hugging Face config.json whose shape the job's own keys may shrink,
// and an explicit list of layers with their costs.
//
//===----------------------------------------------------------------------===//

#include "job/HuggingFace.h"
#include "job/JobParser.h"
#include "job/TransformerCosts.h"
#include "runtime/plan/Limits.h"

using namespace conduit;
using namespace conduit::detail;

namespace {

constexpr std::string_view kModelKinds[] = {"transformer", "layers", "hf"};

} // namespace

void JobParser::parseModel(ObjectReader &section, ModelSpec &m, const TrainingSpec &training) {
  if (!section.require("kind"))
    return;
  std::optional<size_t> kind = section.choice("kind", kModelKinds);
  if (!kind)
    return;
  m.kind = std::string(kModelKinds[*kind]);
  if (m.kind == "layers") {
    // The transformer's variants describe a shape; a layer list states its costs itself.
    for (std::string_view key : {"moe", "latent_attention", "head_dim", "qk_norm", "mtp_layers",
                                 "mtp_loss_coefficient", "rope_scaling"})
      if (section.value(key)) {
        diag.report(section.keyPath(key),
                    "applies to a transformer (model.kind \"transformer\" or \"hf\"); a layer "
                    "list states each layer's costs itself");
        return;
      }
    parseLayers(section, m);
    section.rejectUnknownKeys();
    return;
  }
  if (m.kind == "transformer") {
    TransformerSpec t;
    parseTransformer(section, t);
    m.transformer = t;
  } else {
    parseHuggingFace(section, m);
  }
  section.rejectUnknownKeys();
  if (diag.failed())
    return;
  m.tokensPerSample = m.transformer->seqLength;
  absl::StatusOr<std::vector<LayerSpec>> layers =
      expandTransformer(*m.transformer, training.elementBytes(), training.savedInputBytes());
  if (!layers.ok()) {
    diag.report("model", std::string(layers.status().message()));
    return;
  }
  m.layers = std::move(*layers);
}

void JobParser::parseTransformer(ObjectReader &section, TransformerSpec &t) {
  for (std::string_view key :
       {"num_layers", "hidden_size", "num_heads", "seq_length", "vocab_size"})
    if (!section.require(key))
      return;
  readShape(section, t);
  if (t.numKvHeads == 0)
    t.numKvHeads = t.numHeads;
  if (t.ffnHiddenSize == 0)
    t.ffnHiddenSize = 4 * t.hiddenSize;
  checkShape(section, t);
}

void JobParser::parseHuggingFace(ObjectReader &section, ModelSpec &m) {
  if (!section.require("path"))
    return;
  std::optional<std::string> hfPath = section.string("path");
  if (!hfPath)
    return;
  std::string config = resolvePath(path, *hfPath);
  if (!isRegularFile(config)) {
    diag.report(section.keyPath("path"),
                "cannot read the Hugging Face config \"" + config +
                    "\"; name a model's config.json (relative paths start at the job file)");
    return;
  }
  Diagnostics hfDiag(config);
  std::optional<TransformerSpec> t = readHuggingFaceConfig(hfDiag.getFile(), hfDiag);
  diag.adopt(hfDiag);
  if (!t)
    return;
  // The job's own transformer keys override the config's (a smaller model of the family).
  // Fewer heads keep the config's heads per key/value head unless the job says otherwise.
  const int64_t groups = t->numHeads / t->numKvHeads;
  readShape(section, *t);
  if (section.value("num_heads") && !section.value("num_kv_heads") && t->numHeads % groups == 0)
    t->numKvHeads = t->numHeads / groups;
  checkShape(section, *t);
  m.transformer = t;
}

void JobParser::readShape(ObjectReader &section, TransformerSpec &t) {
  const struct {
    const char *key;
    int64_t most;
    int64_t TransformerSpec::*field;
  } counts[] = {{"num_layers", limits::kMaxLayers, &TransformerSpec::numLayers},
                {"hidden_size", limits::kMaxHidden, &TransformerSpec::hiddenSize},
                {"num_heads", limits::kMaxHeads, &TransformerSpec::numHeads},
                {"num_kv_heads", limits::kMaxHeads, &TransformerSpec::numKvHeads},
                {"ffn_hidden_size", limits::kMaxFfn, &TransformerSpec::ffnHiddenSize},
                {"seq_length", limits::kMaxSeqLength, &TransformerSpec::seqLength},
                {"vocab_size", limits::kMaxVocab, &TransformerSpec::vocabSize}};
  for (const auto &c : counts)
    if (auto value = section.integer(c.key, 1, c.most))
      t.*c.field = *value;
  if (auto mlp = readEnum<MlpKind>(section, "mlp"))
    t.mlp = *mlp;
  if (auto norm = readEnum<NormKind>(section, "norm"))
    t.norm = *norm;
  if (auto position = readEnum<PositionKind>(section, "position"))
    t.position = *position;
  if (auto tie = section.boolean("tie_embeddings"))
    t.tieEmbeddings = *tie;
  if (auto bias = readEnum<BiasKind>(section, "bias"))
    t.bias = *bias;
  if (auto theta = section.number("rope_theta", 1, 1e12, /*minExclusive=*/true))
    t.ropeTheta = *theta;
  if (auto eps = section.number("norm_eps", 0, 0.1, /*minExclusive=*/true))
    t.normEps = *eps;
  if (auto attention = readEnum<AttentionKind>(section, "attention"))
    t.attention = *attention;
  if (auto mtp = section.integer("mtp_layers", 0, limits::kMaxMtpLayers))
    t.mtpLayers = *mtp;
  if (auto lambda = section.number("mtp_loss_coefficient", 0, 1e3, /*minExclusive=*/true))
    t.mtpLossCoefficient = *lambda;
  if (auto elementwise = readEnum<ElementwiseKind>(section, "elementwise"))
    t.elementwise = *elementwise;
  if (auto headDim = section.integer("head_dim", 1, limits::kMaxHidden))
    t.headDim = *headDim;
  if (auto qkNorm = section.boolean("qk_norm"))
    t.qkNorm = *qkNorm;
  if (const Json *rope = section.object("rope_scaling")) {
    // In place of the config's: the job states the whole extension.
    ObjectReader reader(*rope, section.keyPath("rope_scaling"), diag);
    if (std::optional<runtime::RopeScaling> scaling = readRopeScaling(reader, t.seqLength)) {
      reader.rejectUnknownKeys();
      t.ropeScaling = *scaling;
    }
  }
  if (const Json *latent = section.object("latent_attention")) {
    ObjectReader reader(*latent, section.keyPath("latent_attention"), diag);
    readLatentAttention(reader, t);
  }
  if (const Json *moe = section.object("moe")) {
    ObjectReader reader(*moe, section.keyPath("moe"), diag);
    readMoe(reader, t);
  }
}

void JobParser::readLatentAttention(ObjectReader &section, TransformerSpec &t) {
  // Over the Hugging Face config's values when it has them (a smaller model of the family).
  const bool whole = !t.latentAttention;
  if (whole)
    for (std::string_view key :
         {"kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"})
      if (!section.require(key))
        return;
  LatentAttentionSpec a = t.latentAttention.value_or(LatentAttentionSpec{});
  const struct {
    const char *key;
    int64_t least;
    int64_t LatentAttentionSpec::*field;
  } dims[] = {{"q_lora_rank", 0, &LatentAttentionSpec::qLoraRank},
              {"kv_lora_rank", 1, &LatentAttentionSpec::kvLoraRank},
              {"qk_nope_head_dim", 0, &LatentAttentionSpec::qkNopeHeadDim},
              {"qk_rope_head_dim", 0, &LatentAttentionSpec::qkRopeHeadDim},
              {"v_head_dim", 1, &LatentAttentionSpec::vHeadDim}};
  for (const auto &d : dims)
    if (auto value = section.integer(d.key, d.least, limits::kMaxHidden))
      a.*d.field = *value;
  if (auto interleave = section.boolean("rope_interleave"))
    a.ropeInterleave = *interleave;
  section.rejectUnknownKeys();
  t.latentAttention = a;
}

void JobParser::readMoe(ObjectReader &section, TransformerSpec &t) {
  // Over the Hugging Face config's values when it has them (a smaller model of the family).
  const bool whole = !t.moe;
  if (whole)
    for (std::string_view key : {"num_experts", "top_k", "expert_ffn_hidden_size"})
      if (!section.require(key))
        return;
  MoeSpec m = t.moe.value_or(MoeSpec{});
  if (auto n = section.integer("num_experts", 1, limits::kMaxExperts))
    m.numExperts = *n;
  if (auto k = section.integer("top_k", 1, limits::kMaxExperts))
    m.topK = *k;
  if (auto f = section.integer("expert_ffn_hidden_size", 1, limits::kMaxFfn))
    m.expertFfnHiddenSize = *f;
  if (auto router = readEnum<RouterKind>(section, "router"))
    m.router = *router;
  if (auto normalize = section.boolean("normalize_top_k"))
    m.normalizeTopK = *normalize;
  if (auto aux = section.number("aux_loss_coefficient", 0, 1e3))
    m.auxLossCoefficient = *aux;
  if (auto z = section.number("z_loss_coefficient", 0, 1e3))
    m.zLossCoefficient = *z;
  if (auto rate = section.number("bias_update_rate", 0, 1))
    m.biasUpdateRate = *rate;
  std::optional<int64_t> shared = section.integer("shared_experts", 0, limits::kMaxExperts);
  if (shared)
    m.sharedExperts = *shared;
  std::optional<int64_t> sharedFfn = section.integer("shared_ffn_hidden_size", 1, limits::kMaxFfn);
  if (sharedFfn)
    m.sharedFfnHiddenSize = *sharedFfn;
  else if (shared)
    // DeepSeek's convention: each shared expert as wide as a routed one.
    m.sharedFfnHiddenSize = m.sharedExperts * m.expertFfnHiddenSize;
  std::optional<bool> gate = section.boolean("shared_expert_gate");
  if (gate)
    m.sharedExpertGate = *gate;
  if (auto dense = section.integer("dense_layers", 0, limits::kMaxLayers))
    m.denseLayers = *dense;
  if (section.value("capacity_factor"))
    m.capacityFactor =
        section.number("capacity_factor", 0, limits::kMaxExperts, /*minExclusive=*/true);
  std::optional<DropPolicy> drop = readEnum<DropPolicy>(section, "drop_policy");
  if (drop)
    m.dropPolicy = *drop;
  if (section.value("imbalance"))
    m.imbalance = section.number("imbalance", 1, limits::kMaxExperts);
  std::optional<int64_t> groups = section.integer("router_groups", 1, limits::kMaxExperts);
  if (groups)
    m.routerGroups = *groups;
  if (auto groupTopK = section.integer("router_group_top_k", 1, limits::kMaxExperts))
    m.routerGroupTopK = *groupTopK;
  else if (groups)
    m.routerGroupTopK = *groups;
  if (auto dispatch = readEnum<DispatchKind>(section, "dispatch"))
    m.dispatch = *dispatch;
  if (auto fp8 = section.boolean("fp8_dispatch"))
    m.fp8Dispatch = *fp8;
  if (auto kernels = readEnum<ExpertKernels>(section, "kernels"))
    m.kernels = *kernels;
  if (auto scaling = section.number("routed_scaling_factor", 0, 1e3, /*minExclusive=*/true))
    m.routedScalingFactor = *scaling;
  section.rejectUnknownKeys();
  if (m.sharedExperts == 0 && m.sharedFfnHiddenSize > 0 && sharedFfn)
    diag.report(section.keyPath("shared_ffn_hidden_size"),
                "sizes the shared experts, and there are none (moe.shared_experts is 0); set "
                "shared_experts, or remove shared_ffn_hidden_size");
  if (m.sharedExperts == 0 && m.sharedExpertGate && gate)
    diag.report(section.keyPath("shared_expert_gate"),
                "gates the shared experts, and there are none (moe.shared_experts is 0); set "
                "shared_experts, or remove shared_expert_gate");
  if (drop && !m.capacityFactor)
    diag.report(section.keyPath("drop_policy"),
                "says which assignments a capacity drops, and the model is dropless (no "
                "moe.capacity_factor); set capacity_factor, or remove drop_policy");
  if (m.sharedExperts == 0) {
    m.sharedFfnHiddenSize = 0;
    m.sharedExpertGate = false;
  }
  if (m.biasUpdateRate > 0 && m.router != RouterKind::Sigmoid)
    diag.report(section.keyPath("bias_update_rate"),
                "moves the sigmoid router's per-expert bias by the load, and the softmax router "
                "has no bias; set moe.router to \"sigmoid\", or remove bias_update_rate");
  t.moe = m;
}

void JobParser::checkShape(ObjectReader &section, const TransformerSpec &t) {
  if (section.failed())
    return;
  if (std::optional<ShapeProblem> problem = checkTransformerShape(t))
    diag.report(section.keyPath(problem->key), problem->message);
}

void JobParser::parseLayers(ObjectReader &section, ModelSpec &m) {
  if (!section.require("layers"))
    return;
  if (auto tokens = section.integer("tokens_per_sample", 1, limits::kMaxSeqLength))
    m.tokensPerSample = *tokens;
  const Json *layers = section.array("layers");
  if (!layers)
    return;
  if (layers->empty() || static_cast<int64_t>(layers->size()) > limits::kMaxLayers) {
    diag.report(section.keyPath("layers"), "expected between 1 and " +
                                               std::to_string(limits::kMaxLayers) +
                                               " layers, got " + std::to_string(layers->size()));
    return;
  }
  int64_t previousOutput = 0;
  for (size_t i = 0; i < layers->size(); ++i) {
    const Json &value = (*layers)[i];
    std::string at = section.elementPath("layers", i);
    if (!value.is_object()) {
      diag.report(at, "expected an object, got " + describeJson(value));
      return;
    }
    ObjectReader entry(value, at, diag);
    for (std::string_view key :
         {"name", "params", "fwd_flops", "bwd_flops", "activation_bytes", "output_bytes"})
      if (!entry.require(key))
        return;
    LayerSpec layer;
    layer.name = entry.string("name").value_or("");
    if (auto kind = readEnum<runtime::LayerKind>(entry, "kind"))
      layer.kind = *kind;
    layer.params = entry.integer("params", 0, limits::kMaxExact).value_or(0);
    layer.fwdFlops = entry.number("fwd_flops", 0, 9e15).value_or(0);
    layer.bwdFlops = entry.number("bwd_flops", 0, 9e15).value_or(0);
    // Half of the backward computes weight gradients unless the layer says otherwise.
    layer.bwdWeightFlops = entry.number("bwd_weight_flops", 0, 9e15).value_or(layer.bwdFlops / 2);
    if (layer.bwdWeightFlops > layer.bwdFlops)
      diag.report(at + ".bwd_weight_flops",
                  "the weight-gradient FLOPs exceed bwd_flops; W is the part of the backward "
                  "that computes weight gradients, so it is at most bwd_flops");
    layer.activationBytes = entry.integer("activation_bytes", 0, limits::kMaxExact).value_or(0);
    layer.outputBytes = entry.integer("output_bytes", 0, limits::kMaxExact).value_or(0);
    layer.weightGradientBytes = entry.integer("weight_gradient_bytes", 0, limits::kMaxExact);
    layer.replicatedParams = entry.integer("replicated_params", 0, layer.params);
    layer.replicatedActivationBytes =
        entry.integer("replicated_activation_bytes", 0, layer.activationBytes);
    // By default checkpointing keeps the layer's input: the previous layer's output.
    layer.checkpointBytes =
        entry.integer("checkpoint_bytes", 0, limits::kMaxExact).value_or(previousOutput);
    entry.rejectUnknownKeys();
    if (diag.failed())
      return;
    previousOutput = layer.outputBytes;
    m.layers.push_back(std::move(layer));
  }
}
