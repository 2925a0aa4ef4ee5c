//===- HuggingFace.cpp - import of Hugging Face model configs -------------===//
//
// Key names per family follow the transformers library's configuration classes
// (GPT2Config, LlamaConfig, MistralConfig, Qwen2Config, MixtralConfig, Qwen2MoeConfig,
// Qwen3MoeConfig) and DeepSeek's DeepseekV3Config. What a family's config states that the
// model here cannot express (a routing method, interleaved dense and sparse blocks, biases on
// the output projection) is refused naming the key; what does not change the computation the
// compiler plans is read past (docs/job-file.md lists both).
//
//===----------------------------------------------------------------------===//

#include "job/HuggingFace.h"

#include "job/TransformerCosts.h"

#include "absl/strings/str_cat.h"

using namespace conduit;

absl::Span<const std::string_view> conduit::huggingFaceModelTypes() {
  static constexpr std::string_view kTypes[] = {"gpt2",      "llama",     "mistral",
                                                "qwen2",     "qwen3",     "mixtral",
                                                "qwen2_moe", "qwen3_moe", "deepseek_v3"};
  return kTypes;
}

namespace {

/// How a family's config.json names the keys every decoder has. The keys are required; the
/// rest of a family's keys have defaults (the transformers library's).
struct ShapeKeys {
  std::string_view layers, hidden, heads, positions;
};

constexpr ShapeKeys kGpt2Keys{"n_layer", "n_embd", "n_head", "n_positions"};
constexpr ShapeKeys kLlamaKeys{"num_hidden_layers", "hidden_size", "num_attention_heads",
                               "max_position_embeddings"};

/// Reads the keys every family has, under the family's names, with `vocab_size`, which all
/// families spell alike. Returns false after a problem (reported) or a missing key.
bool readShape(ObjectReader &config, const ShapeKeys &keys, TransformerSpec &t) {
  auto layers = config.integer(keys.layers, 1, kMaxLayers);
  auto hidden = config.integer(keys.hidden, 1, kMaxHidden);
  auto heads = config.integer(keys.heads, 1, kMaxHeads);
  auto positions = config.integer(keys.positions, 1, kMaxSeqLength);
  auto vocab = config.integer("vocab_size", 1, kMaxVocab);
  if (config.failed())
    return false;
  for (std::string_view key : {keys.layers, keys.hidden, keys.heads, keys.positions})
    if (!config.require(key))
      return false;
  if (!config.require("vocab_size"))
    return false;
  t.numLayers = *layers;
  t.hiddenSize = *hidden;
  t.numHeads = *heads;
  t.numKvHeads = *heads;
  t.seqLength = *positions;
  t.vocabSize = *vocab;
  return true;
}

/// GPT-2: learned positions, LayerNorm, GELU MLP, biases everywhere, tied embeddings.
void readGpt2(ObjectReader &config, TransformerSpec &t) {
  if (!readShape(config, kGpt2Keys, t))
    return;
  std::optional<int64_t> inner;
  if (const Json *v = config.value("n_inner"); v && !v->is_null())
    inner = config.integer("n_inner", 1, kMaxFfn);
  auto tie = config.boolean("tie_word_embeddings");
  auto eps = config.number("layer_norm_epsilon", 0, 0.1, /*minExclusive=*/true);
  if (config.failed())
    return;
  t.ffnHiddenSize = inner.value_or(4 * t.hiddenSize);
  t.mlp = MlpKind::Gelu;
  t.norm = NormKind::LayerNorm;
  t.position = PositionKind::Learned;
  t.tieEmbeddings = tie.value_or(true);
  t.bias = BiasKind::All;
  t.normEps = eps.value_or(1e-5);
}

/// Llama, Mistral, Qwen2, Qwen3: rotary positions, RMSNorm, SwiGLU MLP, grouped-query
/// attention, and heads of their own width where head_dim is not hidden_size / num_heads
/// (Mistral NeMo, Qwen3).
void readLlamaFamily(ObjectReader &config, TransformerSpec &t, bool qkvBias) {
  if (!readShape(config, kLlamaKeys, t))
    return;
  std::optional<int64_t> headDim;
  if (const Json *v = config.value("head_dim"); v && !v->is_null())
    headDim = config.integer("head_dim", 1, kMaxHidden);
  auto kvHeads = config.integer("num_key_value_heads", 1, kMaxHeads);
  auto ffn = config.integer("intermediate_size", 1, kMaxFfn);
  auto tie = config.boolean("tie_word_embeddings");
  auto theta = config.number("rope_theta", 1, 1e12, /*minExclusive=*/true);
  auto eps = config.number("rms_norm_eps", 0, 0.1, /*minExclusive=*/true);
  if (config.failed() || !config.require("intermediate_size"))
    return;
  t.numKvHeads = kvHeads.value_or(t.numHeads);
  if (headDim && *headDim * t.numHeads != t.hiddenSize)
    t.headDim = headDim;
  t.ffnHiddenSize = *ffn;
  t.mlp = MlpKind::SwiGLU;
  t.norm = NormKind::RMSNorm;
  t.position = PositionKind::Rotary;
  t.tieEmbeddings = tie.value_or(false);
  t.bias = qkvBias ? BiasKind::QKV : BiasKind::None;
  // The transformers library's defaults when a config leaves them out.
  t.ropeTheta = theta.value_or(10000.0);
  t.normEps = eps.value_or(1e-6);
  // The context extension: rope_scaling, or (the library's newer name) rope_parameters, which
  // also carries the base.
  for (std::string_view key : {"rope_scaling", "rope_parameters"}) {
    const Json *rope = config.value(key);
    if (!rope || rope->is_null())
      continue;
    const Json *object = config.object(key);
    if (!object)
      return;
    ObjectReader reader(*object, config.keyPath(key), config.getDiagnostics());
    if (key == "rope_parameters")
      if (auto base = reader.number("rope_theta", 1, 1e12, /*minExclusive=*/true))
        t.ropeTheta = *base;
    std::optional<runtime::RopeScaling> scaling = readRopeScaling(reader, t.seqLength);
    if (!scaling)
      return;
    // The library's dynamic scaling grows the base past the config's max_position_embeddings,
    // whatever rope_scaling says of an original context.
    if (scaling->type == runtime::RopeType::Dynamic)
      scaling->originalPositions = t.seqLength;
    t.ropeScaling = *scaling;
    break;
  }
}

/// The transformers library's rule for yarn's magnitude on cos and sin where the config does
/// not state attention_factor: mscale(factor, mscale) / mscale(factor, mscale_all_dim) when both
/// are given and not 0, else mscale(factor, 1).
double yarnAttentionFactor(double factor, std::optional<double> mscale,
                           std::optional<double> mscaleAllDim) {
  if (mscale.value_or(0) != 0 && mscaleAllDim.value_or(0) != 0)
    return runtime::yarnMscale(factor, *mscale) / runtime::yarnMscale(factor, *mscaleAllDim);
  return runtime::yarnMscale(factor, 1);
}

/// `key`'s number where present and not null (Hugging Face writes null for "unset").
std::optional<double> optionalNumber(ObjectReader &section, std::string_view key, double min,
                                     double max, bool minExclusive = false) {
  if (const Json *v = section.value(key); !v || v->is_null())
    return std::nullopt;
  return section.number(key, min, max, minExclusive);
}

/// A key whose value, when present and not null, must be `expected` (a JSON value): what the
/// model here cannot express otherwise. Returns false after reporting it.
bool requireValue(ObjectReader &config, std::string_view key, const Json &expected,
                  std::string_view why) {
  const Json *v = config.value(key);
  if (!v || v->is_null() || *v == expected)
    return true;
  config.getDiagnostics().report(config.keyPath(key),
                                 "is " + describeJson(*v) + "; " + std::string(why));
  return false;
}

/// The routed experts every family names alike (num_experts_per_tok) and the load-balancing
/// loss's coefficient under `auxKey`.
void readRouting(ObjectReader &config, MoeSpec &m, std::string_view auxKey, double auxDefault) {
  auto topK = config.integer("num_experts_per_tok", 1, kMaxExperts);
  auto aux = config.number(auxKey, 0, 1e3);
  if (config.failed() || !config.require("num_experts_per_tok"))
    return;
  m.topK = *topK;
  m.auxLossCoefficient = aux.value_or(auxDefault);
}

/// Llama's optional biases: attention_bias on the attention's four projections and mlp_bias
/// on the MLP's three, both or neither (bias "all" or "none"); one alone the model here does
/// not have.
void readLlamaBiases(ObjectReader &config, TransformerSpec &t) {
  auto attention = config.boolean("attention_bias");
  auto mlp = config.boolean("mlp_bias");
  if (config.failed())
    return;
  if (attention.value_or(false) != mlp.value_or(false)) {
    const std::string_view key = attention.value_or(false) ? "attention_bias" : "mlp_bias";
    config.getDiagnostics().report(
        config.keyPath(key),
        "is true and " + std::string(key == "attention_bias" ? "mlp_bias" : "attention_bias") +
            " is not: the model here has biases on every projection (bias \"all\"), on q, k "
            "and v only (bias \"qkv\", Qwen2's) or none; set both alike");
    return;
  }
  if (attention.value_or(false))
    t.bias = BiasKind::All;
}

/// Qwen3's attention on Llama's decoder: RMSNorm on each head's queries and keys, no biases.
void readQwen3(ObjectReader &config, TransformerSpec &t) {
  readLlamaFamily(config, t, /*qkvBias=*/false);
  if (config.failed() ||
      !requireValue(config, "attention_bias", false,
                    "Qwen3's attention biases sit on every projection, which the model here "
                    "has only together with the MLP's (bias \"all\"); use a config without them"))
    return;
  t.qkNorm = true;
}

/// Mixtral: Mistral's decoder with num_local_experts SwiGLU experts of intermediate_size,
/// top num_experts_per_tok by a softmax over the chosen experts' logits (a softmax over all of
/// them, renormalised over the chosen).
void readMixtral(ObjectReader &config, TransformerSpec &t) {
  readLlamaFamily(config, t, /*qkvBias=*/false);
  auto experts = config.integer("num_local_experts", 1, kMaxExperts);
  if (config.failed() || !config.require("num_local_experts"))
    return;
  MoeSpec m;
  m.numExperts = *experts;
  m.expertFfnHiddenSize = t.ffnHiddenSize;
  m.normalizeTopK = true;
  readRouting(config, m, "router_aux_loss_coef", 0.001);
  t.moe = m;
}

/// Qwen2-MoE and Qwen3-MoE: num_experts experts of moe_intermediate_size; Qwen2-MoE adds a
/// shared expert of shared_expert_intermediate_size and biases on Q, K and V; Qwen3 has
/// explicit head widths and RMSNorm on each head's queries and keys. Blocks in
/// mlp_only_layers, and those decoder_sparse_step skips, keep the dense MLP: the model here
/// has them only as leading blocks.
void readQwenMoe(ObjectReader &config, TransformerSpec &t, bool qwen3) {
  if (qwen3)
    readQwen3(config, t);
  else
    readLlamaFamily(config, t, /*qkvBias=*/true);
  auto experts = config.integer("num_experts", 1, kMaxExperts);
  auto width = config.integer("moe_intermediate_size", 1, kMaxFfn);
  auto normalize = config.boolean("norm_topk_prob");
  std::optional<int64_t> shared;
  if (!qwen3)
    if (const Json *v = config.value("shared_expert_intermediate_size"); v && !v->is_null())
      shared = config.integer("shared_expert_intermediate_size", 0, kMaxFfn);
  auto step = config.integer("decoder_sparse_step", 1, kMaxLayers);
  if (config.failed() || !config.require("num_experts") || !config.require("moe_intermediate_size"))
    return;
  if (step.value_or(1) != 1) {
    config.getDiagnostics().report(
        config.keyPath("decoder_sparse_step"),
        "is " + std::to_string(*step) + ": experts in every " + std::to_string(*step) +
            "th block only; the model here has dense blocks only before the first MoE block "
            "(moe.dense_layers), so it needs 1");
    return;
  }
  // mlp_only_layers: a leading run 0, 1, ..., k-1 is dense_layers k; anything else is refused.
  int64_t dense = 0;
  if (const Json *only = config.value("mlp_only_layers"); only && !only->is_null()) {
    if (!only->is_array()) {
      config.getDiagnostics().report(config.keyPath("mlp_only_layers"),
                                     "expected an array of block indices, got " +
                                         describeJson(*only));
      return;
    }
    for (size_t i = 0; i < only->size(); ++i)
      if (jsonInteger((*only)[i]) != std::optional<int64_t>(int64_t(i))) {
        config.getDiagnostics().report(
            config.keyPath("mlp_only_layers"),
            "lists dense blocks other than a leading run 0, 1, 2, ...; the model here has dense "
            "blocks only before the first MoE block (moe.dense_layers)");
        return;
      }
    dense = static_cast<int64_t>(only->size());
  }
  MoeSpec m;
  m.numExperts = *experts;
  m.expertFfnHiddenSize = *width;
  m.normalizeTopK = normalize.value_or(false);
  m.denseLayers = dense;
  if (shared.value_or(0) > 0) {
    m.sharedExperts = 1;
    m.sharedFfnHiddenSize = *shared;
    m.sharedExpertGate = true; // Qwen2MoeSparseMoeBlock always gates its shared expert
  }
  readRouting(config, m, "router_aux_loss_coef", 0.001);
  t.moe = m;
}

/// DeepSeek-V3: multi-head latent attention, first_k_dense_replace dense blocks of
/// intermediate_size, then n_routed_experts experts of moe_intermediate_size with
/// n_shared_experts shared ones, chosen by a sigmoid per expert with a per-expert bias
/// (topk_method "noaux_tc", auxiliary-loss-free balancing) or greedily by softmax.
void readDeepSeekV3(ObjectReader &config, TransformerSpec &t) {
  readLlamaFamily(config, t, /*qkvBias=*/false);
  if (config.failed())
    return;
  LatentAttentionSpec a;
  std::optional<int64_t> qLora;
  if (const Json *v = config.value("q_lora_rank"); v && !v->is_null())
    qLora = config.integer("q_lora_rank", 1, kMaxHidden);
  auto kvLora = config.integer("kv_lora_rank", 1, kMaxHidden);
  auto nope = config.integer("qk_nope_head_dim", 0, kMaxHidden);
  auto rope = config.integer("qk_rope_head_dim", 0, kMaxHidden);
  auto v = config.integer("v_head_dim", 1, kMaxHidden);
  auto experts = config.integer("n_routed_experts", 1, kMaxExperts);
  auto width = config.integer("moe_intermediate_size", 1, kMaxFfn);
  auto shared = config.integer("n_shared_experts", 0, kMaxExperts);
  auto dense = config.integer("first_k_dense_replace", 0, kMaxLayers);
  auto normalize = config.boolean("norm_topk_prob");
  auto groups = config.integer("n_group", 1, kMaxExperts);
  auto groupTopK = config.integer("topk_group", 1, kMaxExperts);
  auto routedScaling = config.number("routed_scaling_factor", 0, 1e3, /*minExclusive=*/true);
  constexpr std::string_view kScoring[] = {"softmax", "sigmoid"};
  std::optional<size_t> scoring = config.choice("scoring_func", kScoring);
  constexpr std::string_view kTopK[] = {"noaux_tc", "greedy"};
  std::optional<size_t> topkMethod = config.choice("topk_method", kTopK);
  if (config.failed())
    return;
  // first_k_dense_replace covering every block is a model without experts (DeepSeek's
  // attention alone, as --save-params writes one), which needs no expert keys.
  const bool withoutExperts = dense.value_or(0) >= t.numLayers;
  for (std::string_view key :
       {"kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"})
    if (!config.require(key))
      return;
  if (!withoutExperts)
    for (std::string_view key : {"n_routed_experts", "moe_intermediate_size"})
      if (!config.require(key))
        return;
  if (!requireValue(config, "attention_bias", false,
                    "biases on the attention's projections are not part of DeepSeek-V3 as "
                    "planned here; use a config without them") ||
      !requireValue(config, "moe_layer_freq", 1,
                    "experts in every few blocks only; the model here has dense blocks only "
                    "before the first MoE block (first_k_dense_replace), so it needs 1"))
    return;
  a.qLoraRank = qLora.value_or(0);
  a.kvLoraRank = *kvLora;
  a.qkNopeHeadDim = *nope;
  a.qkRopeHeadDim = *rope;
  a.vHeadDim = *v;
  // Hugging Face's DeepseekV3Config defaults to interleaved rotary pairs, DeepSeek's layout.
  a.ropeInterleave = config.boolean("rope_interleave").value_or(true);
  t.latentAttention = a;
  if (withoutExperts)
    return;
  MoeSpec m;
  m.numExperts = *experts;
  m.expertFfnHiddenSize = *width;
  m.sharedExperts = shared.value_or(0);
  m.sharedFfnHiddenSize = m.sharedExperts * m.expertFfnHiddenSize;
  m.denseLayers = dense.value_or(0);
  m.normalizeTopK = normalize.value_or(false);
  // DeepseekV3Config's default, DeepSeek-V3's value.
  m.routedScalingFactor = routedScaling.value_or(2.5);
  // DeepSeek's defaults: sigmoid scores chosen with the per-expert bias (noaux_tc).
  const bool sigmoid = scoring.value_or(1) == 1;
  m.router = sigmoid ? RouterKind::Sigmoid : RouterKind::Softmax;
  if (sigmoid != (topkMethod.value_or(0) == 0)) {
    config.getDiagnostics().report(
        config.keyPath("topk_method"),
        std::string("\"") + std::string(kTopK[topkMethod.value_or(0)]) + "\" with scoring_func \"" +
            std::string(kScoring[scoring.value_or(1)]) +
            "\"; the model here routes by sigmoid with a per-expert bias (noaux_tc) or by "
            "softmax (greedy)");
    return;
  }
  // noaux_tc limits each token to the topk_group best of n_group groups of experts
  // (node-limited routing); greedy routes over all of them.
  if (sigmoid) {
    m.routerGroups = groups.value_or(1);
    m.routerGroupTopK = groupTopK.value_or(m.routerGroups);
  }
  readRouting(config, m, "aux_loss_alpha", 0.001);
  t.moe = m;
}

/// The key of `family`'s config that a shape problem's job key (under `model`) stands for.
std::string_view familyKey(std::string_view type, std::string_view jobKey) {
  const bool gpt2 = type == "gpt2";
  if (jobKey == "num_heads")
    return gpt2 ? kGpt2Keys.heads : kLlamaKeys.heads;
  if (jobKey == "num_kv_heads")
    return "num_key_value_heads";
  const bool deepseek = type == "deepseek_v3";
  if (jobKey == "moe.top_k")
    return "num_experts_per_tok";
  if (jobKey == "moe.dense_layers")
    return deepseek ? "first_k_dense_replace" : "mlp_only_layers";
  if (jobKey == "moe.router_groups")
    return "n_group";
  if (jobKey == "moe.router_group_top_k")
    return "topk_group";
  if (jobKey.substr(0, 17) == "latent_attention.")
    return jobKey.substr(17);
  return jobKey;
}

} // namespace

std::optional<runtime::RopeScaling> conduit::readRopeScaling(ObjectReader &section,
                                                             int64_t positions) {
  using runtime::RopeType;
  // Older configs (and DeepSeek's) name the type `type`; the library saves both.
  const std::string_view typeKey =
      section.value("rope_type") || !section.value("type") ? "rope_type" : "type";
  if (!section.require(typeKey))
    return std::nullopt;
  std::optional<size_t> type = section.choice(typeKey, runtime::kRopeTypeNames);
  if (!type)
    return std::nullopt;
  if (typeKey == "rope_type" && section.value("type")) {
    std::optional<size_t> other = section.choice("type", runtime::kRopeTypeNames);
    if (!other)
      return std::nullopt;
    if (*other != *type) {
      section.getDiagnostics().report(section.keyPath("type"),
                                      "names another type than rope_type; give one of them");
      return std::nullopt;
    }
  }
  runtime::RopeScaling r;
  r.type = static_cast<RopeType>(*type);
  if (r.type == RopeType::Default)
    return r;
  if (!section.require("factor"))
    return std::nullopt;
  r.factor = section.number("factor", 1, 1e6).value_or(1);
  if (r.type == RopeType::Llama3)
    for (std::string_view key :
         {"original_max_position_embeddings", "low_freq_factor", "high_freq_factor"})
      if (!section.require(key))
        return std::nullopt;
  if (r.type != RopeType::Linear) {
    std::optional<int64_t> original;
    if (const Json *v = section.value("original_max_position_embeddings"); v && !v->is_null())
      original = section.integer("original_max_position_embeddings", 1, kMaxSeqLength);
    r.originalPositions = original.value_or(positions);
  }
  if (r.type == RopeType::Llama3) {
    r.lowFreqFactor = section.number("low_freq_factor", 1e-6, 1e6).value_or(1);
    r.highFreqFactor = section.number("high_freq_factor", 1e-6, 1e6).value_or(4);
    if (!section.failed() && !(r.highFreqFactor > r.lowFreqFactor)) {
      section.getDiagnostics().report(
          section.keyPath("high_freq_factor"),
          "is not above low_freq_factor; wavelengths between original_max_position_embeddings / "
          "high_freq_factor and / low_freq_factor are blended, so it must exceed it");
      return std::nullopt;
    }
  }
  if (r.type == RopeType::Yarn) {
    r.betaFast = optionalNumber(section, "beta_fast", 1e-6, 1e6).value_or(32);
    r.betaSlow = optionalNumber(section, "beta_slow", 1e-6, 1e6).value_or(1);
    if (auto truncate = section.boolean("truncate"))
      r.truncate = *truncate;
    std::optional<double> mscale = optionalNumber(section, "mscale", 0, 1e3);
    std::optional<double> mscaleAllDim = optionalNumber(section, "mscale_all_dim", 0, 1e3);
    r.mscaleAllDim = mscaleAllDim.value_or(0);
    r.attentionFactor = optionalNumber(section, "attention_factor", 1e-3, 1e3)
                            .value_or(yarnAttentionFactor(r.factor, mscale, mscaleAllDim));
    if (!section.failed() && !(r.attentionFactor >= 1e-3 && r.attentionFactor <= 1e3)) {
      section.getDiagnostics().report(
          section.keyPath("mscale"),
          absl::StrCat("with mscale_all_dim gives cos and sin a magnitude of ", r.attentionFactor,
                       "; it must lie between 0.001 and 1000 (or state attention_factor)"));
      return std::nullopt;
    }
  }
  if (section.failed())
    return std::nullopt;
  return r;
}

std::optional<TransformerSpec> conduit::readHuggingFaceConfig(std::string_view path,
                                                              Diagnostics &diag) {
  std::optional<Json> root = loadJsonFile(path, diag);
  if (!root)
    return std::nullopt;
  return parseHuggingFaceConfig(*root, diag);
}

std::optional<TransformerSpec> conduit::parseHuggingFaceConfig(const Json &root,
                                                               Diagnostics &diag) {
  if (!root.is_object()) {
    diag.report("", "expected a JSON object, got " + describeJson(root));
    return std::nullopt;
  }
  ObjectReader config(root, "", diag);
  if (!config.require("model_type"))
    return std::nullopt;
  std::optional<size_t> type = config.choice("model_type", huggingFaceModelTypes());
  if (!type)
    return std::nullopt;

  TransformerSpec t;
  const std::string_view name = huggingFaceModelTypes()[*type];
  if (name == "gpt2")
    readGpt2(config, t);
  else if (name == "mixtral")
    readMixtral(config, t);
  else if (name == "qwen3")
    readQwen3(config, t);
  else if (name == "qwen2_moe" || name == "qwen3_moe")
    readQwenMoe(config, t, /*qwen3=*/name == "qwen3_moe");
  else if (name == "deepseek_v3")
    readDeepSeekV3(config, t);
  else
    readLlamaFamily(config, t, /*qkvBias=*/name == "qwen2");
  if (name == "llama" && !diag.failed())
    readLlamaBiases(config, t);
  if (diag.failed())
    return std::nullopt;
  if (std::optional<ShapeProblem> problem = checkTransformerShape(t)) {
    // The same relation under the names of this config's family.
    diag.report(std::string(familyKey(name, problem->key)), problem->message);
    return std::nullopt;
  }
  return t;
}
