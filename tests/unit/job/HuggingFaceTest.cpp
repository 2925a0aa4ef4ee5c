//===- HuggingFaceTest.cpp - Hugging Face configs read as the job's model --===//
//
// The shipped configs of every family, each family's own keys (head widths, q/k norms,
// biases, mixtures of experts, rotary extensions, routed scaling) and the keys the model here
// cannot express, refused by name.
//
//===----------------------------------------------------------------------===//

#include "job/HuggingFace.h"
#include "job/JsonReader.h"

#include <gtest/gtest.h>

#include <functional>

using namespace conduit;

namespace {

struct HfCase {
  const char *dir;
  int64_t layers, hidden, heads, kvHeads, ffn;
  bool tied;
  BiasKind bias;
};

TEST(HuggingFace, ShippedConfigs) {
  const HfCase cases[] = {
      {"gpt2", 12, 768, 12, 12, 3072, true, BiasKind::All},
      {"llama-2-7b", 32, 4096, 32, 32, 11008, false, BiasKind::None},
      {"mistral-7b", 32, 4096, 32, 8, 14336, false, BiasKind::None},
      {"qwen2-0.5b", 24, 896, 14, 2, 4864, true, BiasKind::QKV},
      {"mixtral-8x7b", 32, 4096, 32, 8, 14336, false, BiasKind::None},
      {"qwen1.5-moe-a2.7b", 24, 2048, 16, 16, 5632, false, BiasKind::QKV},
      {"qwen3-30b-a3b", 48, 2048, 32, 4, 6144, false, BiasKind::None},
      {"deepseek-v3", 61, 7168, 128, 128, 18432, false, BiasKind::None},
  };
  for (const HfCase &c : cases) {
    std::string path = std::string(CONDUIT_TESTDATA) + "/hf/" + c.dir + "/config.json";
    Diagnostics diag(path);
    std::optional<TransformerSpec> t = readHuggingFaceConfig(path, diag);
    ASSERT_TRUE(t) << diag.getError()->str();
    EXPECT_EQ(t->numLayers, c.layers) << c.dir;
    EXPECT_EQ(t->hiddenSize, c.hidden) << c.dir;
    EXPECT_EQ(t->numHeads, c.heads) << c.dir;
    EXPECT_EQ(t->numKvHeads, c.kvHeads) << c.dir;
    EXPECT_EQ(t->ffnHiddenSize, c.ffn) << c.dir;
    EXPECT_EQ(t->tieEmbeddings, c.tied) << c.dir;
    EXPECT_EQ(t->bias, c.bias) << c.dir;
  }
}

/// The shipped config `dir` as JSON, edited by `edit`, read as a Hugging Face config.
std::optional<TransformerSpec> readEditedConfig(const std::string &dir,
                                                const std::function<void(Json &)> &edit,
                                                std::string *error) {
  std::string path = std::string(CONDUIT_TESTDATA) + "/hf/" + dir + "/config.json";
  Diagnostics diag("config.json");
  std::optional<Json> root = loadJsonFile(path, diag);
  EXPECT_TRUE(root);
  edit(*root);
  std::optional<TransformerSpec> t = parseHuggingFaceConfig(*root, diag);
  if (!t && error)
    *error = diag.getError()->str();
  return t;
}

TEST(HuggingFace, HeadWidthsAndQwen3) {
  std::string error;
  // A Llama-family head_dim other than hidden_size / num_heads (Mistral NeMo's 128 of 5120 /
  // 32) is the model's head width; the usual one is the default.
  std::optional<TransformerSpec> t =
      readEditedConfig("mistral-7b", [](Json &c) { c["head_dim"] = 96; }, &error);
  ASSERT_TRUE(t) << error;
  EXPECT_EQ(t->headDim, 96);
  EXPECT_FALSE(t->qkNorm);
  t = readEditedConfig("mistral-7b", [](Json &c) { c["head_dim"] = 128; }, &error);
  ASSERT_TRUE(t) << error;
  EXPECT_FALSE(t->headDim);
  // Qwen3 (dense): Qwen3-MoE's attention, its head_dim and q/k norms, without the experts.
  t = readEditedConfig("qwen3-30b-a3b", [](Json &c) { c["model_type"] = "qwen3"; }, &error);
  ASSERT_TRUE(t) << error;
  EXPECT_FALSE(t->moe);
  EXPECT_EQ(t->headDim, 128);
  EXPECT_TRUE(t->qkNorm);
  EXPECT_EQ(t->bias, BiasKind::None);
  EXPECT_EQ(t->ffnHiddenSize, 6144);
  EXPECT_FALSE(readEditedConfig(
      "qwen3-30b-a3b",
      [](Json &c) {
        c["model_type"] = "qwen3";
        c["attention_bias"] = true;
      },
      &error));
  EXPECT_NE(error.find("attention_bias: is true;"), std::string::npos) << error;
}

TEST(HuggingFace, MixturesOfExperts) {
  std::string error;
  auto read = [&](const std::string &dir) { return readEditedConfig(dir, [](Json &) {}, &error); };
  // Mixtral: 8 experts of intermediate_size, top 2, renormalised, aux 0.02.
  std::optional<TransformerSpec> t = read("mixtral-8x7b");
  ASSERT_TRUE(t && t->moe) << error;
  EXPECT_EQ(t->moe->numExperts, 8);
  EXPECT_EQ(t->moe->topK, 2);
  EXPECT_EQ(t->moe->expertFfnHiddenSize, 14336);
  EXPECT_TRUE(t->moe->normalizeTopK);
  EXPECT_DOUBLE_EQ(t->moe->auxLossCoefficient, 0.02);
  EXPECT_EQ(t->moe->router, RouterKind::Softmax);
  EXPECT_EQ(t->moe->denseLayers, 0);
  EXPECT_DOUBLE_EQ(t->ropeTheta, 1e6);
  // Qwen1.5-MoE (qwen2_moe): 60 experts of 1408, top 4, not renormalised, one shared expert of
  // 5632, biases on Q, K and V.
  t = read("qwen1.5-moe-a2.7b");
  ASSERT_TRUE(t && t->moe) << error;
  EXPECT_EQ(t->moe->numExperts, 60);
  EXPECT_EQ(t->moe->topK, 4);
  EXPECT_EQ(t->moe->expertFfnHiddenSize, 1408);
  EXPECT_FALSE(t->moe->normalizeTopK);
  EXPECT_EQ(t->moe->sharedExperts, 1);
  EXPECT_EQ(t->moe->sharedFfnHiddenSize, 5632);
  EXPECT_TRUE(t->moe->sharedExpertGate); // Qwen2-MoE always gates its shared expert
  EXPECT_DOUBLE_EQ(t->moe->auxLossCoefficient, 0.001);
  // Qwen3-30B-A3B: head_dim 128 (wider than 2048 / 32), q/k norms, 128 experts of 768, top 8.
  t = read("qwen3-30b-a3b");
  ASSERT_TRUE(t && t->moe) << error;
  EXPECT_EQ(t->headDim, 128);
  EXPECT_TRUE(t->qkNorm);
  EXPECT_EQ(t->moe->numExperts, 128);
  EXPECT_EQ(t->moe->topK, 8);
  EXPECT_EQ(t->moe->expertFfnHiddenSize, 768);
  EXPECT_TRUE(t->moe->normalizeTopK);
  EXPECT_EQ(t->moe->sharedExperts, 0);
  // DeepSeek-V3: latent attention, 3 dense blocks, 256 experts of 2048 and one shared, top 8
  // by sigmoid scores with the per-expert bias.
  t = read("deepseek-v3");
  ASSERT_TRUE(t && t->moe && t->latentAttention) << error;
  EXPECT_EQ(t->latentAttention->qLoraRank, 1536);
  EXPECT_EQ(t->latentAttention->kvLoraRank, 512);
  EXPECT_EQ(t->latentAttention->qkNopeHeadDim, 128);
  EXPECT_EQ(t->latentAttention->qkRopeHeadDim, 64);
  EXPECT_EQ(t->latentAttention->vHeadDim, 128);
  // DeepSeek's released weights pair rotary dimensions 2i and 2i + 1: Hugging Face's default.
  EXPECT_TRUE(t->latentAttention->ropeInterleave);
  EXPECT_EQ(t->moe->numExperts, 256);
  EXPECT_EQ(t->moe->topK, 8);
  EXPECT_EQ(t->moe->expertFfnHiddenSize, 2048);
  EXPECT_EQ(t->moe->sharedExperts, 1);
  EXPECT_EQ(t->moe->sharedFfnHiddenSize, 2048);
  EXPECT_FALSE(t->moe->sharedExpertGate);
  EXPECT_EQ(t->moe->denseLayers, 3);
  EXPECT_EQ(t->moe->router, RouterKind::Sigmoid);
  EXPECT_TRUE(t->moe->normalizeTopK);
  EXPECT_DOUBLE_EQ(t->moe->auxLossCoefficient, 0.001);
  // Node-limited routing: each token's experts from the best 4 of 8 groups.
  EXPECT_EQ(t->moe->routerGroups, 8);
  EXPECT_EQ(t->moe->routerGroupTopK, 4);
  EXPECT_EQ(t->ffnHiddenSize, 18432);
  // A leading run of mlp_only_layers is the dense blocks; a softmax DeepSeek routes greedily.
  t = readEditedConfig(
      "qwen3-30b-a3b", [](Json &c) { c["mlp_only_layers"] = Json::parse("[0, 1]"); }, &error);
  ASSERT_TRUE(t) << error;
  EXPECT_EQ(t->moe->denseLayers, 2);
  t = readEditedConfig(
      "deepseek-v3",
      [](Json &c) {
        c["scoring_func"] = "softmax";
        c["topk_method"] = "greedy";
        c["q_lora_rank"] = nullptr;
        c["rope_interleave"] = false;
      },
      &error);
  ASSERT_TRUE(t) << error;
  EXPECT_EQ(t->moe->router, RouterKind::Softmax);
  EXPECT_EQ(t->latentAttention->qLoraRank, 0);
  EXPECT_FALSE(t->latentAttention->ropeInterleave);
  EXPECT_EQ(t->moe->routerGroups, 1); // greedy routes over every expert
  EXPECT_EQ(t->moe->routerGroupTopK, 1);
  // Without topk_group every group is allowed.
  t = readEditedConfig("deepseek-v3", [](Json &c) { c.erase("topk_group"); }, &error);
  ASSERT_TRUE(t) << error;
  EXPECT_EQ(t->moe->routerGroupTopK, 8);
}

TEST(HuggingFace, UnsupportedMixtureKeysAreRefused) {
  const struct {
    const char *dir;
    std::function<void(Json &)> edit;
    const char *says;
  } cases[] = {
      {"deepseek-v3", [](Json &c) { c["topk_method"] = "group_limited_greedy"; },
       "topk_method: unknown value \"group_limited_greedy\"; expected one of \"noaux_tc\", "
       "\"greedy\""},
      {"deepseek-v3", [](Json &c) { c["topk_method"] = "greedy"; },
       "topk_method: \"greedy\" with scoring_func \"sigmoid\""},
      {"deepseek-v3", [](Json &c) { c["scoring_func"] = "relu"; }, "scoring_func: unknown value"},
      {"deepseek-v3", [](Json &c) { c["moe_layer_freq"] = 2; }, "moe_layer_freq: is 2;"},
      {"deepseek-v3", [](Json &c) { c["attention_bias"] = true; }, "attention_bias: is true;"},
      {"deepseek-v3", [](Json &c) { c.erase("kv_lora_rank"); }, "kv_lora_rank"},
      {"deepseek-v3", [](Json &c) { c["qk_rope_head_dim"] = 63; },
       "qk_rope_head_dim: rotary positions"},
      {"qwen3-30b-a3b", [](Json &c) { c["decoder_sparse_step"] = 2; }, "decoder_sparse_step: is 2"},
      {"qwen3-30b-a3b", [](Json &c) { c["mlp_only_layers"] = Json::parse("[1]"); },
       "mlp_only_layers: lists dense blocks other than a leading run"},
      {"qwen3-30b-a3b", [](Json &c) { c["attention_bias"] = true; }, "attention_bias: is true;"},
      {"qwen3-30b-a3b", [](Json &c) { c["num_experts_per_tok"] = 129; },
       "num_experts_per_tok: each token is routed to 129 experts"},
      {"qwen1.5-moe-a2.7b", [](Json &c) { c.erase("moe_intermediate_size"); },
       "moe_intermediate_size"},
      {"mixtral-8x7b", [](Json &c) { c.erase("num_local_experts"); }, "num_local_experts"},
      {"deepseek-v3", [](Json &c) { c["n_group"] = 7; }, "n_group: 7 groups do not divide"},
      {"deepseek-v3", [](Json &c) { c["topk_group"] = 9; }, "topk_group: each token may use 9"},
      {"deepseek-v3", [](Json &c) { c["topk_group"] = 0; }, "topk_group"},
  };
  for (const auto &c : cases) {
    std::string error;
    EXPECT_FALSE(readEditedConfig(c.dir, c.edit, &error)) << c.says;
    EXPECT_NE(error.find(c.says), std::string::npos) << error;
  }
}

// first_k_dense_replace covering every block is DeepSeek's attention without experts, as
// Hugging Face builds it and --save-params writes it: the expert keys are not needed.
TEST(HuggingFace, DeepSeekWithEveryBlockDenseHasNoExperts) {
  std::string error;
  std::optional<TransformerSpec> t = readEditedConfig(
      "deepseek-v3",
      [](Json &c) {
        c["first_k_dense_replace"] = 61;
        c.erase("n_routed_experts");
        c.erase("moe_intermediate_size");
      },
      &error);
  ASSERT_TRUE(t) << error;
  EXPECT_FALSE(t->moe);
  EXPECT_TRUE(t->latentAttention);
  EXPECT_FALSE(
      readEditedConfig("deepseek-v3", [](Json &c) { c.erase("n_routed_experts"); }, &error));
  EXPECT_NE(error.find("n_routed_experts: missing required key"), std::string::npos) << error;
}

TEST(HuggingFace, LlamaBiasesBothOrNeither) {
  std::string error;
  // attention_bias and mlp_bias together: biases on every projection.
  std::optional<TransformerSpec> t = readEditedConfig(
      "llama-2-7b",
      [](Json &c) {
        c["attention_bias"] = true;
        c["mlp_bias"] = true;
      },
      &error);
  ASSERT_TRUE(t) << error;
  EXPECT_EQ(t->bias, BiasKind::All);
  t = readEditedConfig("llama-2-7b", [](Json &c) { c["mlp_bias"] = false; }, &error);
  ASSERT_TRUE(t) << error;
  EXPECT_EQ(t->bias, BiasKind::None);
  // One alone is refused naming it.
  EXPECT_FALSE(readEditedConfig("llama-2-7b", [](Json &c) { c["attention_bias"] = true; }, &error));
  EXPECT_NE(error.find("attention_bias: is true and mlp_bias is not"), std::string::npos) << error;
  EXPECT_FALSE(readEditedConfig("llama-2-7b", [](Json &c) { c["mlp_bias"] = true; }, &error));
  EXPECT_NE(error.find("mlp_bias: is true and attention_bias is not"), std::string::npos) << error;
}

TEST(HuggingFace, RotaryExtensionsAndRoutedScaling) {
  std::string error;
  // DeepSeek-V3's own: yarn, factor 40 over 4096 positions, mscale = mscale_all_dim = 1 (so the
  // rotation's magnitude is 1 and the softmax factor (0.1 ln 40 + 1)²), routed experts × 2.5.
  std::optional<TransformerSpec> t = readEditedConfig("deepseek-v3", [](Json &) {}, &error);
  ASSERT_TRUE(t && t->moe) << error;
  const runtime::RopeScaling &yarn = t->ropeScaling;
  EXPECT_EQ(yarn.type, runtime::RopeType::Yarn);
  EXPECT_EQ(yarn.factor, 40);
  EXPECT_EQ(yarn.originalPositions, 4096);
  EXPECT_EQ(yarn.betaFast, 32);
  EXPECT_EQ(yarn.betaSlow, 1);
  EXPECT_TRUE(yarn.truncate);
  EXPECT_DOUBLE_EQ(yarn.attentionFactor, 1);
  EXPECT_EQ(yarn.mscaleAllDim, 1);
  EXPECT_NEAR(yarn.latentSoftmaxFactor(), 1.873854, 1e-6);
  EXPECT_EQ(t->moe->routedScalingFactor, 2.5);
  // DeepseekV3Config's default scaling is DeepSeek-V3's 2.5 too.
  t = readEditedConfig("deepseek-v3", [](Json &c) { c.erase("routed_scaling_factor"); }, &error);
  ASSERT_TRUE(t) << error;
  EXPECT_EQ(t->moe->routedScalingFactor, 2.5);
  // yarn without mscale: the magnitude is the library's 0.1 ln factor + 1 (Qwen's yarn, factor
  // 4 over 32768 positions); the original context defaults to the config's positions.
  t = readEditedConfig(
      "qwen3-30b-a3b",
      [](Json &c) { c["rope_scaling"] = Json::parse(R"({"rope_type": "yarn", "factor": 4.0})"); },
      &error);
  ASSERT_TRUE(t) << error;
  EXPECT_DOUBLE_EQ(t->ropeScaling.attentionFactor, 0.1 * std::log(4.0) + 1);
  EXPECT_EQ(t->ropeScaling.originalPositions, t->seqLength);
  EXPECT_EQ(t->ropeScaling.mscaleAllDim, 0);
  EXPECT_EQ(t->ropeScaling.latentSoftmaxFactor(), 1);
  // Llama 3.1's rope_scaling, on Llama 2's config.
  t = readEditedConfig(
      "llama-2-7b",
      [](Json &c) {
        c["rope_theta"] = 500000.0;
        c["rope_scaling"] = Json::parse(R"({"factor": 8.0, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0, "original_max_position_embeddings": 8192,
            "rope_type": "llama3"})");
      },
      &error);
  ASSERT_TRUE(t) << error;
  EXPECT_EQ(t->ropeScaling.type, runtime::RopeType::Llama3);
  EXPECT_EQ(t->ropeScaling.factor, 8);
  EXPECT_EQ(t->ropeScaling.lowFreqFactor, 1);
  EXPECT_EQ(t->ropeScaling.highFreqFactor, 4);
  EXPECT_EQ(t->ropeScaling.originalPositions, 8192);
  EXPECT_EQ(t->ropeScaling.attentionFactor, 1);
  // Dynamic NTK scaling grows the base past the config's max_position_embeddings (Llama 2's
  // 4096), as the library does, whatever rope_scaling says of an original context.
  t = readEditedConfig(
      "llama-2-7b",
      [](Json &c) {
        c["rope_scaling"] = Json::parse(
            R"({"type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 2048})");
      },
      &error);
  ASSERT_TRUE(t) << error;
  EXPECT_EQ(t->ropeScaling.type, runtime::RopeType::Dynamic);
  EXPECT_EQ(t->ropeScaling.factor, 2);
  EXPECT_EQ(t->ropeScaling.originalPositions, 4096);
  EXPECT_EQ(t->ropeScaling.attentionFactor, 1);
  // The library's newer rope_parameters, with the base inside; "default" extends nothing.
  t = readEditedConfig(
      "llama-2-7b",
      [](Json &c) {
        c.erase("rope_theta");
        c["rope_parameters"] = Json::parse(R"({"rope_type": "default", "rope_theta": 500000})");
      },
      &error);
  ASSERT_TRUE(t) << error;
  EXPECT_EQ(t->ropeTheta, 500000);
  EXPECT_FALSE(t->ropeScaling.scaled());
  // Mixtral has no routed scaling: 1.
  t = readEditedConfig("mixtral-8x7b", [](Json &) {}, &error);
  ASSERT_TRUE(t && t->moe) << error;
  EXPECT_EQ(t->moe->routedScalingFactor, 1);
  EXPECT_FALSE(t->ropeScaling.scaled());
}

TEST(HuggingFace, RotaryExtensionsRefused) {
  const struct {
    const char *scaling;
    const char *says;
  } cases[] = {
      {R"({"type": "longrope", "factor": 2.0})", "rope_scaling.type: unknown value \"longrope\""},
      {R"({"rope_type": "dynamic"})", "rope_scaling.factor"},
      {R"({"rope_type": "linear"})", "rope_scaling.factor"},
      {R"({"rope_type": "linear", "factor": 0.5})", "rope_scaling.factor"},
      {R"({"rope_type": "llama3", "factor": 8.0, "high_freq_factor": 4.0,
           "original_max_position_embeddings": 8192})",
       "rope_scaling.low_freq_factor"},
      {R"({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0, "high_freq_factor": 4.0,
           "original_max_position_embeddings": 8192})",
       "rope_scaling.high_freq_factor: is not above low_freq_factor"},
      {R"({"rope_type": "yarn", "factor": 4.0, "beta_fast": 0})", "rope_scaling.beta_fast"},
      {R"("yarn")", "rope_scaling"},
      {R"({"rope_type": "yarn", "type": "linear", "factor": 4.0})",
       "rope_scaling.type: names another type than rope_type"},
      {R"({"rope_type": "yarn", "factor": 1e6, "mscale": 1000, "mscale_all_dim": 0.001})",
       "rope_scaling.mscale: with mscale_all_dim gives cos and sin a magnitude of"},
  };
  for (const auto &c : cases) {
    std::string error;
    EXPECT_FALSE(readEditedConfig(
        "llama-2-7b", [&](Json &config) { config["rope_scaling"] = Json::parse(c.scaling); },
        &error))
        << c.says;
    EXPECT_NE(error.find(c.says), std::string::npos) << error;
  }
}

} // namespace
