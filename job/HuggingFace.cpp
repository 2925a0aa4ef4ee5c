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

/// Llama, Mistral, Qwen2: rotary positions, RMSNorm, SwiGLU MLP, grouped-query attention.
void readLlamaFamily(ObjectReader &config, TransformerSpec &t, bool qkvBias) {
  if (!readShape(config, kLlamaKeys, t))
    return;
  auto kvHeads = config.integer("num_key_value_heads", 1, kMaxHeads);
  auto ffn = config.integer("intermediate_size", 1, kMaxFfn);
  auto tie = config.boolean("tie_word_embeddings");
  auto theta = config.number("rope_theta", 1, 1e12, /*minExclusive=*/true);
  auto eps = config.number("rms_norm_eps", 0, 0.1, /*minExclusive=*/true);
  if (config.failed() || !config.require("intermediate_size"))
    return;
  t.numKvHeads = kvHeads.value_or(t.numHeads);
  t.ffnHiddenSize = *ffn;
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
  const bool gpt2 = name == "gpt2";
  if (gpt2)
    readGpt2(config, t);
  else
    readLlamaFamily(config, t, /*qkvBias=*/name == "qwen2");
  if (diag.failed())
    return std::nullopt;
  if (std::optional<ShapeProblem> problem = checkTransformerShape(t)) {
    // The same relation under the names of this config's family.
    const std::string key(problem->key == "num_heads" ? (gpt2 ? kGpt2Keys : kLlamaKeys).heads
                                                      : std::string_view("num_key_value_heads"));
    diag.report(key, problem->message);
    return std::nullopt;
  }
  return t;
}
