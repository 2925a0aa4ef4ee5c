//===- HuggingFace.cpp - import of Hugging Face model configs -------------===//
//
// Key names per family follow the transformers library's configuration classes
// (GPT2Config, LlamaConfig, MistralConfig, Qwen2Config).
//
//===----------------------------------------------------------------------===//

#include "job/HuggingFace.h"

#include "job/TransformerCosts.h"

using namespace conduit;

absl::Span<const std::string_view> conduit::huggingFaceModelTypes() {
  static constexpr std::string_view kTypes[] = {"gpt2", "llama", "mistral", "qwen2"};
  return kTypes;
}

namespace {

/// GPT-2: learned positions, LayerNorm, GELU MLP, biases everywhere, tied embeddings.
void readGpt2(ObjectReader &config, TransformerSpec &t) {
  auto layers = config.integer("n_layer", 1, kMaxLayers);
  auto hidden = config.integer("n_embd", 1, kMaxHidden);
  auto heads = config.integer("n_head", 1, kMaxHeads);
  auto positions = config.integer("n_positions", 1, kMaxSeqLength);
  auto vocab = config.integer("vocab_size", 1, kMaxVocab);
  std::optional<int64_t> inner;
  if (const Json *v = config.value("n_inner"); v && !v->is_null())
    inner = config.integer("n_inner", 1, kMaxFfn);
  auto tie = config.boolean("tie_word_embeddings");
  auto eps = config.number("layer_norm_epsilon", 0, 0.1, /*minExclusive=*/true);
  if (config.failed() || !layers || !hidden || !heads || !positions || !vocab)
    return;
  t.numLayers = *layers;
  t.hiddenSize = *hidden;
  t.numHeads = *heads;
  t.numKvHeads = *heads;
  t.ffnHiddenSize = inner.value_or(4 * *hidden);
  t.seqLength = *positions;
  t.vocabSize = *vocab;
  t.mlp = MlpKind::Gelu;
  t.norm = NormKind::LayerNorm;
  t.position = PositionKind::Learned;
  t.tieEmbeddings = tie.value_or(true);
  t.bias = BiasKind::All;
  t.normEps = eps.value_or(1e-5);
}

/// Llama, Mistral, Qwen2: rotary positions, RMSNorm, SwiGLU MLP, grouped-query attention.
void readLlamaFamily(ObjectReader &config, TransformerSpec &t, bool qkvBias) {
  auto layers = config.integer("num_hidden_layers", 1, kMaxLayers);
  auto hidden = config.integer("hidden_size", 1, kMaxHidden);
  auto heads = config.integer("num_attention_heads", 1, kMaxHeads);
  auto kvHeads = config.integer("num_key_value_heads", 1, kMaxHeads);
  auto ffn = config.integer("intermediate_size", 1, kMaxFfn);
  auto positions = config.integer("max_position_embeddings", 1, kMaxSeqLength);
  auto vocab = config.integer("vocab_size", 1, kMaxVocab);
  auto tie = config.boolean("tie_word_embeddings");
  auto theta = config.number("rope_theta", 1, 1e12, /*minExclusive=*/true);
  auto eps = config.number("rms_norm_eps", 0, 0.1, /*minExclusive=*/true);
  if (config.failed())
    return;
  for (std::string_view key : {"num_hidden_layers", "hidden_size", "num_attention_heads",
                               "intermediate_size", "max_position_embeddings", "vocab_size"})
    if (!config.require(key))
      return;
  t.numLayers = *layers;
  t.hiddenSize = *hidden;
  t.numHeads = *heads;
  t.numKvHeads = kvHeads.value_or(*heads);
  t.ffnHiddenSize = *ffn;
  t.seqLength = *positions;
  t.vocabSize = *vocab;
  t.mlp = MlpKind::SwiGLU;
  t.norm = NormKind::RMSNorm;
  t.position = PositionKind::Rotary;
  t.tieEmbeddings = tie.value_or(false);
  t.bias = qkvBias ? BiasKind::QKV : BiasKind::None;
  // The transformers library's defaults when a config leaves them out.
  t.ropeTheta = theta.value_or(10000.0);
  t.normEps = eps.value_or(1e-6);
}

} // namespace

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
  if (name == "gpt2") {
    for (std::string_view key : {"n_layer", "n_embd", "n_head", "n_positions", "vocab_size"})
      if (!config.require(key))
        return std::nullopt;
    readGpt2(config, t);
  } else {
    readLlamaFamily(config, t, /*qkvBias=*/name == "qwen2");
  }
  if (diag.failed())
    return std::nullopt;
  if (std::optional<ShapeProblem> problem = checkTransformerShape(t)) {
    // The same relation under the names of this config's family.
    const bool gpt2 = name == "gpt2";
    const char *key = problem->key == "num_heads" ? (gpt2 ? "n_head" : "num_attention_heads")
                                                  : "num_key_value_heads";
    diag.report(key, problem->message);
    return std::nullopt;
  }
  return t;
}
