//===- HfWeightsTest.cpp - Conduit's parameters as Hugging Face tensors ----===//
//
// The names, shapes and layouts of both architectures (GPT-2, and Llama with its Qwen2 and
// Qwen3 variants, and their mixtures of experts), config.json, a model written and read back, and
// the refusals of a file that does not hold exactly the model's tensors. Parameter counts are
// computed here from the layout HfWeights.h documents, not from the model, so that the two are
// checked against each other.
//
//===----------------------------------------------------------------------===//

#include "runtime/weights/HfWeights.h"
#include "tests/unit/runtime/weights/HfPlans.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>

namespace conduit::runtime {
namespace {

namespace fs = std::filesystem;

/// Qwen3's attention on the Llama model: heads 6 wide (not 8 / 2), q/k norms.
Transformer qwen3() {
  Transformer t = llama();
  t.headDim = 6;
  t.qkNorm = true;
  return t;
}

std::map<std::string, HfTensor> byName(const std::vector<HfTensor> &tensors) {
  std::map<std::string, HfTensor> out;
  for (const HfTensor &t : tensors)
    if (!t.tied)
      out[t.name] = t;
  return out;
}

using Shape = std::vector<int64_t>;

TEST(HfWeightsTest, Gpt2NamesAndShapes) {
  const Plan plan = planOf(gpt2());
  absl::StatusOr<std::vector<HfTensor>> tensors = hfTensors(plan);
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  EXPECT_STREQ(hfArchitecture(plan), "gpt2");
  const std::map<std::string, Shape> expected = {{"transformer.wte.weight", {11, 8}},
                                                 {"transformer.wpe.weight", {5, 8}},
                                                 {"transformer.h.0.ln_1.weight", {8}},
                                                 {"transformer.h.0.ln_1.bias", {8}},
                                                 {"transformer.h.0.attn.c_attn.weight", {8, 24}},
                                                 {"transformer.h.0.attn.c_attn.bias", {24}},
                                                 {"transformer.h.0.attn.c_proj.weight", {8, 8}},
                                                 {"transformer.h.0.attn.c_proj.bias", {8}},
                                                 {"transformer.h.0.ln_2.weight", {8}},
                                                 {"transformer.h.0.ln_2.bias", {8}},
                                                 {"transformer.h.0.mlp.c_fc.weight", {8, 12}},
                                                 {"transformer.h.0.mlp.c_fc.bias", {12}},
                                                 {"transformer.h.0.mlp.c_proj.weight", {12, 8}},
                                                 {"transformer.h.0.mlp.c_proj.bias", {8}},
                                                 {"transformer.ln_f.weight", {8}},
                                                 {"transformer.ln_f.bias", {8}},
                                                 {"lm_head.weight", {11, 8}}};
  const auto got = byName(*tensors);
  for (const auto &[name, shape] : expected) {
    ASSERT_TRUE(got.count(name)) << name;
    EXPECT_EQ(got.at(name).shape, shape) << name;
  }
  EXPECT_EQ(got.size(), 4 + 12 * 2 + 1u);
  EXPECT_TRUE(got.count("transformer.h.1.mlp.c_proj.bias"));
  // Conv1D weights keep Conduit's layout; only the untied LM head is transposed.
  EXPECT_FALSE(got.at("transformer.h.0.attn.c_attn.weight").transpose);
  EXPECT_TRUE(got.at("lm_head.weight").transpose);
  // Every parameter belongs to exactly one tensor.
  int64_t total = 0;
  for (const HfTensor &t : *tensors)
    total += t.elements();
  int64_t params = 0;
  for (const Layer &l : plan.layers)
    params += l.params;
  EXPECT_EQ(total, params);
}

TEST(HfWeightsTest, Gpt2WithoutBiasesAndTied) {
  Transformer t = gpt2();
  t.bias = 2;
  t.tieEmbeddings = true;
  absl::StatusOr<std::vector<HfTensor>> tensors = hfTensors(planOf(t));
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  const auto got = byName(*tensors);
  EXPECT_FALSE(got.count("transformer.h.0.attn.c_attn.bias"));
  EXPECT_FALSE(got.count("transformer.h.0.mlp.c_fc.bias"));
  EXPECT_FALSE(got.count("lm_head.weight"));
  const HfTensor &tied = tensors->back();
  EXPECT_TRUE(tied.tied);
  EXPECT_EQ(tied.name, "transformer.wte.weight");
  EXPECT_EQ(tied.shape, (Shape{11, 8}));
  EXPECT_FALSE(tied.transpose);
}

TEST(HfWeightsTest, LlamaNamesShapesAndTransposes) {
  const Plan plan = planOf(llama());
  absl::StatusOr<std::vector<HfTensor>> tensors = hfTensors(plan);
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  EXPECT_STREQ(hfArchitecture(plan), "llama");
  const std::map<std::string, Shape> expected = {
      {"model.embed_tokens.weight", {11, 8}},
      {"model.layers.0.input_layernorm.weight", {8}},
      {"model.layers.0.self_attn.q_proj.weight", {8, 8}},
      {"model.layers.0.self_attn.k_proj.weight", {4, 8}},
      {"model.layers.0.self_attn.v_proj.weight", {4, 8}},
      {"model.layers.0.self_attn.o_proj.weight", {8, 8}},
      {"model.layers.0.post_attention_layernorm.weight", {8}},
      {"model.layers.0.mlp.gate_proj.weight", {12, 8}},
      {"model.layers.0.mlp.up_proj.weight", {12, 8}},
      {"model.layers.0.mlp.down_proj.weight", {8, 12}},
      {"model.norm.weight", {8}}};
  const auto got = byName(*tensors);
  for (const auto &[name, shape] : expected) {
    ASSERT_TRUE(got.count(name)) << name;
    EXPECT_EQ(got.at(name).shape, shape) << name;
  }
  EXPECT_EQ(got.size(), 2 + 9 * 2u) << "no biases, no betas, no position table, no lm_head";

  // Values: PyTorch's [out × in] is the transpose of Conduit's [in × out].
  const Layer &block = plan.layers[1];
  std::vector<float> params(block.params);
  std::iota(params.begin(), params.end(), 0.0f);
  const int64_t h = 8, width = 16; // Wqkv [8 × (8 + 2·4)] after norm1's gamma
  const float *wqkv = params.data() + h;
  for (const char *name : {"q_proj", "k_proj"}) {
    const HfTensor &t = got.at(std::string("model.layers.0.self_attn.") + name + ".weight");
    std::vector<float> out(t.elements());
    exportHfTensor(t, params.data(), out.data());
    const int64_t column = name[0] == 'q' ? 0 : h;
    for (int64_t o = 0; o < t.shape[0]; ++o)
      for (int64_t i = 0; i < h; ++i)
        ASSERT_EQ(out[o * h + i], wqkv[i * width + column + o]) << name << " " << o << " " << i;
  }
  // SwiGLU's W1: gate columns first, then up.
  const HfTensor &up = got.at("model.layers.0.mlp.up_proj.weight");
  EXPECT_EQ(up.colBegin, 12);
  EXPECT_EQ(up.colEnd, 24);
}

TEST(HfWeightsTest, Qwen3NamesShapesAndConfig) {
  const Plan plan = planOf(qwen3());
  absl::StatusOr<std::vector<HfTensor>> tensors = hfTensors(plan);
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  EXPECT_STREQ(hfArchitecture(plan), "qwen3");
  const auto got = byName(*tensors);
  // q is 2 heads of 6, k and v one head of 6; o maps the 12 back to the hidden 8.
  const std::map<std::string, Shape> expected = {
      {"model.layers.0.self_attn.q_proj.weight", {12, 8}},
      {"model.layers.0.self_attn.k_proj.weight", {6, 8}},
      {"model.layers.0.self_attn.v_proj.weight", {6, 8}},
      {"model.layers.0.self_attn.o_proj.weight", {8, 12}},
      {"model.layers.0.self_attn.q_norm.weight", {6}},
      {"model.layers.0.self_attn.k_norm.weight", {6}}};
  for (const auto &[name, shape] : expected) {
    ASSERT_TRUE(got.count(name)) << name;
    EXPECT_EQ(got.at(name).shape, shape) << name;
  }
  EXPECT_EQ(got.size(), 2 + 11 * 2u) << "the Llama tensors and two norms a block";
  // The gains follow Wo [12 × 8] in the block: after norm1 [8], Wqkv [8 × 24].
  EXPECT_EQ(got.at("model.layers.1.self_attn.q_norm.weight").offset, 8 + 8 * 24 + 12 * 8);
  EXPECT_EQ(got.at("model.layers.1.self_attn.k_norm.weight").offset, 8 + 8 * 24 + 12 * 8 + 6);
  EXPECT_EQ(got.at("model.layers.1.self_attn.v_proj.weight").colBegin, 18);

  const auto config = nlohmann::json::parse(hfConfigJson(plan));
  EXPECT_EQ(config["architectures"][0], "Qwen3ForCausalLM");
  EXPECT_EQ(config["model_type"], "qwen3");
  EXPECT_EQ(config["head_dim"], 6);
  EXPECT_EQ(config["attention_bias"], false);
  EXPECT_FALSE(config.contains("mlp_bias"));
}

TEST(HfWeightsTest, ExportThenImportRestoresEveryLayer) {
  Transformer directQueries = deepSeek();
  directQueries.qLoraRank = 0;
  for (Transformer t : {gpt2(), llama(), qwen3(), deepSeek(), directQueries}) {
    t.bias = 0;
    t.tieEmbeddings = false;
    const Plan plan = planOf(t);
    absl::StatusOr<std::vector<HfTensor>> tensors = hfTensors(plan);
    ASSERT_TRUE(tensors.ok()) << tensors.status();
    for (size_t l = 0; l < plan.layers.size(); ++l) {
      std::vector<float> params(plan.layers[l].params), back(params.size(), -1.0f);
      for (size_t i = 0; i < params.size(); ++i)
        params[i] = static_cast<float>(i * 7 % 13) - 6;
      for (const HfTensor &x : *tensors)
        if (x.layer == static_cast<int64_t>(l)) {
          std::vector<float> values(x.elements());
          exportHfTensor(x, params.data(), values.data());
          importHfTensor(x, values.data(), back.data());
        }
      EXPECT_EQ(back, params) << hfArchitecture(plan) << " layer " << l;
    }
  }
}

TEST(HfWeightsTest, QwenWhenOnlyQkvHaveBiases) {
  Transformer t = llama();
  t.bias = 1;
  const Plan plan = planOf(t);
  absl::StatusOr<std::vector<HfTensor>> tensors = hfTensors(plan);
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  const auto got = byName(*tensors);
  EXPECT_EQ(got.at("model.layers.1.self_attn.k_proj.bias").shape, (Shape{4}));
  EXPECT_FALSE(got.count("model.layers.1.self_attn.o_proj.bias"));
  const auto config = nlohmann::json::parse(hfConfigJson(plan));
  EXPECT_EQ(config["architectures"][0], "Qwen2ForCausalLM");
  EXPECT_EQ(config["model_type"], "qwen2");
}

/// The Llama-style model with a mixture of experts in its second block: 4 experts of width 6,
/// 2 per token; the block's parameter count from the layout HfWeights.h and Moe.h document.
Plan moePlanOf(Transformer t) {
  t.numExperts = 4;
  t.topK = 2;
  t.expertFfnHiddenSize = 6;
  t.denseLayers = 1;
  t.normalizeTopK = true;
  Plan plan = planOf(t);
  const int64_t h = t.hiddenSize, f = t.ffnHiddenSize, other = t.bias == 0;
  const int64_t up = t.mlp == 1 ? 2 : 1, shared = t.sharedExperts > 0 ? t.sharedFfnHiddenSize : 0;
  // An MLP of width w: W1, W2 and, with bias "all", b1 and b2.
  auto mlp = [&](int64_t w) { return w > 0 ? (up + 1) * h * w + other * (up * w + h) : 0; };
  plan.layers[2].params += -mlp(f) + h * 4 + (t.router == 1 ? 4 : 0) + mlp(shared) +
                           (t.sharedExpertGate ? h : 0) + 4 * mlp(6);
  return plan;
}

TEST(HfWeightsTest, MixtralNamesAndShapes) {
  const Plan plan = moePlanOf(llama());
  absl::StatusOr<std::vector<HfTensor>> tensors = hfTensors(plan);
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  EXPECT_STREQ(hfArchitecture(plan), "mixtral");
  const auto got = byName(*tensors);
  // The first block is dense, the second has experts.
  EXPECT_TRUE(got.count("model.layers.0.mlp.gate_proj.weight"));
  EXPECT_FALSE(got.count("model.layers.1.mlp.gate_proj.weight"));
  EXPECT_EQ(got.at("model.layers.1.block_sparse_moe.gate.weight").shape, (Shape{4, 8}));
  for (int e = 0; e < 4; ++e) {
    const std::string expert = "model.layers.1.block_sparse_moe.experts." + std::to_string(e);
    EXPECT_EQ(got.at(expert + ".w1.weight").shape, (Shape{6, 8}));
    EXPECT_EQ(got.at(expert + ".w3.weight").shape, (Shape{6, 8}));
    EXPECT_EQ(got.at(expert + ".w2.weight").shape, (Shape{8, 6}));
  }
  // The router first, then expert 0's gate columns of its W1, transposed.
  const HfTensor &w1 = got.at("model.layers.1.block_sparse_moe.experts.0.w1.weight");
  const HfTensor &router = got.at("model.layers.1.block_sparse_moe.gate.weight");
  EXPECT_EQ(w1.offset, router.offset + 8 * 4);
  EXPECT_EQ(w1.colBegin, 0);
  EXPECT_EQ(w1.colEnd, 6);
  EXPECT_TRUE(w1.transpose);
  const auto config = nlohmann::json::parse(hfConfigJson(plan));
  EXPECT_EQ(config["architectures"][0], "MixtralForCausalLM");
  EXPECT_EQ(config["model_type"], "mixtral");
  EXPECT_EQ(config["num_local_experts"], 4);
  EXPECT_EQ(config["num_experts_per_tok"], 2);
  EXPECT_EQ(config["intermediate_size"], 6);
  // Mixtral's config has no routed scaling: a plan that scales is refused naming the key.
  Transformer scaled = llama();
  scaled.routedScalingFactor = 2.5;
  absl::StatusOr<std::vector<HfTensor>> refused = hfTensors(moePlanOf(scaled));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("model.moe.routed_scaling_factor 1"), std::string::npos)
      << refused.status();
}

TEST(HfWeightsTest, QwenMoeNamesWithSharedExperts) {
  Transformer t = llama();
  t.sharedExperts = 1;
  t.sharedFfnHiddenSize = 10;
  const Plan plan = moePlanOf(t);
  absl::StatusOr<std::vector<HfTensor>> tensors = hfTensors(plan);
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  EXPECT_STREQ(hfArchitecture(plan), "qwen2_moe");
  const auto got = byName(*tensors);
  EXPECT_EQ(got.at("model.layers.1.mlp.gate.weight").shape, (Shape{4, 8}));
  EXPECT_EQ(got.at("model.layers.1.mlp.shared_expert.gate_proj.weight").shape, (Shape{10, 8}));
  EXPECT_EQ(got.at("model.layers.1.mlp.shared_expert.down_proj.weight").shape, (Shape{8, 10}));
  EXPECT_EQ(got.at("model.layers.1.mlp.shared_expert.down_proj.weight").scale, 2.0f);
  EXPECT_TRUE(got.at("model.layers.1.mlp.shared_expert_gate.weight").zero);
  EXPECT_EQ(got.at("model.layers.1.mlp.shared_expert_gate.weight").shape, (Shape{1, 8}));
  EXPECT_EQ(got.at("model.layers.1.mlp.experts.3.up_proj.weight").shape, (Shape{6, 8}));
  EXPECT_EQ(got.at("model.layers.1.mlp.experts.3.down_proj.weight").shape, (Shape{8, 6}));
  const auto config = nlohmann::json::parse(hfConfigJson(plan));
  EXPECT_EQ(config["architectures"][0], "Qwen2MoeForCausalLM");
  EXPECT_EQ(config["model_type"], "qwen2_moe");
  EXPECT_EQ(config["num_experts"], 4);
  EXPECT_EQ(config["moe_intermediate_size"], 6);
  EXPECT_EQ(config["shared_expert_intermediate_size"], 10);
  EXPECT_EQ(config["intermediate_size"], 12);
  EXPECT_EQ(config["norm_topk_prob"], true);
  EXPECT_EQ(config["mlp_only_layers"], nlohmann::json::array({0}));
}

// Qwen2-MoE's gate on the shared expert, where the model has one: the gate's own vector (after
// the shared expert's parameters, before the routed experts'), and the shared expert's down
// projection as it is.
TEST(HfWeightsTest, QwenMoeSharedExpertGate) {
  Transformer t = llama();
  t.sharedExperts = 1;
  t.sharedFfnHiddenSize = 10;
  t.sharedExpertGate = true;
  const Plan plan = moePlanOf(t);
  absl::StatusOr<std::vector<HfTensor>> tensors = hfTensors(plan);
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  EXPECT_STREQ(hfArchitecture(plan), "qwen2_moe");
  const auto got = byName(*tensors);
  const HfTensor &gate = got.at("model.layers.1.mlp.shared_expert_gate.weight");
  EXPECT_FALSE(gate.zero);
  EXPECT_EQ(gate.shape, (Shape{1, 8}));
  const HfTensor &down = got.at("model.layers.1.mlp.shared_expert.down_proj.weight");
  EXPECT_EQ(down.scale, 1.0f);
  EXPECT_EQ(gate.offset, down.offset + 10 * 8);
  EXPECT_EQ(got.at("model.layers.1.mlp.experts.0.gate_proj.weight").offset, gate.offset + 8);
  // DeepSeek-V3's shared experts have no gate: its names cannot say one.
  Transformer deepSeekGated = deepSeek();
  deepSeekGated.sharedExperts = 1;
  deepSeekGated.sharedFfnHiddenSize = 12;
  deepSeekGated.sharedExpertGate = true;
  absl::StatusOr<std::vector<HfTensor>> refused = hfTensors(moePlanOf(deepSeekGated));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("model.moe.shared_expert_gate false"),
            std::string::npos)
      << refused.status();
}

TEST(HfWeightsTest, Qwen3MoeNamesAndConfig) {
  const Plan plan = moePlanOf(qwen3());
  absl::StatusOr<std::vector<HfTensor>> tensors = hfTensors(plan);
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  EXPECT_STREQ(hfArchitecture(plan), "qwen3_moe");
  const auto got = byName(*tensors);
  EXPECT_EQ(got.at("model.layers.1.self_attn.q_norm.weight").shape, (Shape{6}));
  EXPECT_EQ(got.at("model.layers.1.mlp.gate.weight").shape, (Shape{4, 8}));
  EXPECT_EQ(got.at("model.layers.1.mlp.experts.3.gate_proj.weight").shape, (Shape{6, 8}));
  EXPECT_FALSE(got.count("model.layers.1.mlp.shared_expert_gate.weight"));
  const auto config = nlohmann::json::parse(hfConfigJson(plan));
  EXPECT_EQ(config["architectures"][0], "Qwen3MoeForCausalLM");
  EXPECT_EQ(config["model_type"], "qwen3_moe");
  EXPECT_EQ(config["head_dim"], 6);
  EXPECT_EQ(config["num_experts"], 4);
  EXPECT_EQ(config["moe_intermediate_size"], 6);
  EXPECT_FALSE(config.contains("shared_expert_intermediate_size"));
  EXPECT_EQ(config["mlp_only_layers"], nlohmann::json::array({0}));
}

TEST(HfWeightsTest, MoeBiasNames) {
  Transformer t = llama();
  t.bias = 0;
  t.router = 1;
  const auto got = byName(*hfTensors(moePlanOf(t)));
  EXPECT_EQ(got.at("model.layers.1.block_sparse_moe.gate.e_score_correction_bias").shape,
            (Shape{4}));
  EXPECT_EQ(got.at("model.layers.1.block_sparse_moe.experts.2.w1.bias").shape, (Shape{6}));
  EXPECT_EQ(got.at("model.layers.1.block_sparse_moe.experts.2.w2.bias").shape, (Shape{8}));
}

TEST(HfWeightsTest, MoeExportThenImportRestoresEveryLayer) {
  Transformer shared = llama();
  shared.sharedExperts = 1;
  shared.sharedFfnHiddenSize = 10;
  Transformer gelu = shared;
  gelu.mlp = 0;
  // GPT-style biases on every expert, and the sigmoid router's bias.
  Transformer biased = gelu;
  biased.bias = 0;
  biased.router = 1;
  Transformer deepSeekShared = deepSeek();
  deepSeekShared.sharedExperts = 1;
  deepSeekShared.sharedFfnHiddenSize = 12;
  deepSeekShared.router = 1;
  for (const Transformer &t : {llama(), shared, gelu, biased, qwen3(), deepSeekShared}) {
    const Plan plan = moePlanOf(t);
    absl::StatusOr<std::vector<HfTensor>> tensors = hfTensors(plan);
    ASSERT_TRUE(tensors.ok()) << tensors.status();
    std::vector<float> params(plan.layers[2].params), back(params.size(), -1.0f);
    for (size_t i = 0; i < params.size(); ++i)
      params[i] = static_cast<float>(i * 7 % 13) - 6;
    int64_t covered = 0;
    for (const HfTensor &x : *tensors)
      if (x.layer == 2) {
        std::vector<float> values(x.elements());
        exportHfTensor(x, params.data(), values.data());
        importHfTensor(x, values.data(), back.data());
        covered += x.zero ? 0 : x.elements();
      }
    EXPECT_EQ(back, params) << hfArchitecture(plan);
    EXPECT_EQ(covered, plan.layers[2].params) << "every parameter in exactly one tensor";
  }
}

TEST(HfWeightsTest, DeepSeekV3NamesShapesAndConfig) {
  const Plan plan = planOf(deepSeek());
  absl::StatusOr<std::vector<HfTensor>> tensors = hfTensors(plan);
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  EXPECT_STREQ(hfArchitecture(plan), "deepseek_v3");
  const auto got = byName(*tensors);
  // nn.Linear's [out × in]: 2 heads of 4 + 2 query/key columns and 4 + 3 key/value ones.
  const std::string a = "model.layers.1.self_attn.";
  EXPECT_EQ(got.at(a + "q_a_proj.weight").shape, (Shape{5, 8}));
  EXPECT_EQ(got.at(a + "q_a_layernorm.weight").shape, (Shape{5}));
  EXPECT_EQ(got.at(a + "q_b_proj.weight").shape, (Shape{12, 5}));
  EXPECT_EQ(got.at(a + "kv_a_proj_with_mqa.weight").shape, (Shape{5, 8}));
  EXPECT_EQ(got.at(a + "kv_a_layernorm.weight").shape, (Shape{3}));
  EXPECT_EQ(got.at(a + "kv_b_proj.weight").shape, (Shape{14, 3}));
  EXPECT_EQ(got.at(a + "o_proj.weight").shape, (Shape{8, 6}));
  EXPECT_TRUE(got.at(a + "kv_b_proj.weight").transpose);
  for (const char *absent : {"q_proj", "k_proj", "v_proj"})
    EXPECT_FALSE(got.count(a + absent + ".weight")) << absent;
  EXPECT_TRUE(got.count("model.layers.1.mlp.gate_proj.weight"));
  auto config = nlohmann::json::parse(hfConfigJson(plan));
  EXPECT_EQ(config["architectures"][0], "DeepseekV3ForCausalLM");
  EXPECT_EQ(config["model_type"], "deepseek_v3");
  // Biases on q, k and v alone (Qwen2's) leave it DeepSeek's: it has no q, k or v projection.
  Transformer qkvBias = deepSeek();
  qkvBias.bias = 1;
  EXPECT_EQ(nlohmann::json::parse(hfConfigJson(planOf(qkvBias)))["model_type"], "deepseek_v3");
  EXPECT_EQ(config["q_lora_rank"], 5);
  EXPECT_EQ(config["kv_lora_rank"], 3);
  EXPECT_EQ(config["qk_nope_head_dim"], 4);
  EXPECT_EQ(config["qk_rope_head_dim"], 2);
  EXPECT_EQ(config["v_head_dim"], 3);
  EXPECT_EQ(config["rope_interleave"], false);
  EXPECT_EQ(config["num_key_value_heads"], 2);
  EXPECT_EQ(config["first_k_dense_replace"], 2) << "no block has experts";
  EXPECT_EQ(config["attention_bias"], false);
  EXPECT_FALSE(config.contains("mlp_bias"));

  // Queries projected directly: q_proj, and q_lora_rank null.
  Transformer direct = deepSeek();
  direct.qLoraRank = 0;
  const auto directNames = byName(*hfTensors(planOf(direct)));
  EXPECT_EQ(directNames.at(a + "q_proj.weight").shape, (Shape{12, 8}));
  EXPECT_FALSE(directNames.count(a + "q_a_proj.weight"));
  EXPECT_TRUE(nlohmann::json::parse(hfConfigJson(planOf(direct)))["q_lora_rank"].is_null());
}

// DeepSeek's released layout (rope_interleave true): Hugging Face pairs each rotary part's
// dimensions 2i and 2i + 1 where Conduit rotates i with i + dr/2, so q_b_proj's rows of each
// head's rotary part (and kv_a_proj_with_mqa's of the shared key) are Conduit's columns in the
// order 0, dr/2, 1, dr/2 + 1, ...; the nope parts, the latents and the rest are as they are.
TEST(HfWeightsTest, DeepSeekV3InterleavedRotaryColumns) {
  Transformer t = deepSeek(); // 2 heads of 4 nope + 2 rope; key/value latent 3, shared key 2
  t.qkRopeHeadDim = 6;        // so that the order is not its own inverse: 0, 3, 1, 4, 2, 5
  t.ropeInterleave = true;
  const Plan plan = planOf(t);
  absl::StatusOr<std::vector<HfTensor>> tensors = hfTensors(plan);
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  const auto got = byName(*tensors);
  const HfTensor &qb = got.at("model.layers.1.self_attn.q_b_proj.weight");
  const std::vector<int64_t> headOrder = {0, 1, 2, 3, 4, 7, 5, 8, 6, 9};
  for (int64_t c = 0; c < 20; ++c)
    EXPECT_EQ(qb.conduitColumn(c), (c / 10) * 10 + headOrder[c % 10]) << c;
  const HfTensor &kva = got.at("model.layers.1.self_attn.kv_a_proj_with_mqa.weight");
  const std::vector<int64_t> keyOrder = {0, 1, 2, 3, 6, 4, 7, 5, 8};
  for (int64_t c = 0; c < 9; ++c)
    EXPECT_EQ(kva.conduitColumn(c), keyOrder[c]) << c;
  // Exported, Hugging Face's column 2i + 1 of a head's rotary part is Conduit's i + dr/2: in
  // the first head, Conduit's column 4 + 3 is q_b_proj's row 4 + 1 (nn.Linear is [out, in]).
  std::vector<float> layer(plan.layers[1].params);
  for (size_t i = 0; i < layer.size(); ++i)
    layer[i] = static_cast<float>(i);
  std::vector<float> rows(qb.elements());
  exportHfTensor(qb, layer.data(), rows.data());
  EXPECT_EQ(rows[5 * qb.rows + 0], layer[qb.offset + 0 * qb.cols + 7]);
  EXPECT_EQ(rows[6 * qb.rows + 2], layer[qb.offset + 2 * qb.cols + 5]);
  EXPECT_EQ(got.at("model.layers.1.self_attn.kv_b_proj.weight").ropeWidth, 0);
  EXPECT_EQ(nlohmann::json::parse(hfConfigJson(plan))["rope_interleave"], true);
  // Written and read back, every parameter where it was; and without a query latent, q_proj
  // takes the query heads' order.
  Transformer direct = t;
  direct.qLoraRank = 0;
  for (const Transformer &x : {t, direct}) {
    const Plan p = planOf(x);
    const std::vector<HfTensor> all = *hfTensors(p);
    std::vector<float> params(p.layers[1].params), back(params.size(), -1.0f);
    for (size_t i = 0; i < params.size(); ++i)
      params[i] = static_cast<float>(i);
    for (const HfTensor &h : all)
      if (h.layer == 1) {
        std::vector<float> values(h.elements());
        exportHfTensor(h, params.data(), values.data());
        importHfTensor(h, values.data(), back.data());
      }
    EXPECT_EQ(back, params);
  }
  const auto directNames = byName(*hfTensors(planOf(direct)));
  const HfTensor &q = directNames.at("model.layers.1.self_attn.q_proj.weight");
  for (int64_t c = 0; c < 20; ++c)
    EXPECT_EQ(q.conduitColumn(c), (c / 10) * 10 + headOrder[c % 10]) << c;
  // Without rotary positions nothing is rotated: the columns stay as they are.
  Transformer learned = t;
  learned.position = 0;
  const auto learnedNames = byName(*hfTensors(planOf(learned)));
  const HfTensor &plain = learnedNames.at("model.layers.1.self_attn.q_b_proj.weight");
  for (int64_t c = 0; c < 20; ++c)
    EXPECT_EQ(plain.conduitColumn(c), c) << c;
}

TEST(HfWeightsTest, DeepSeekV3MoeNamesAndConfig) {
  Transformer t = deepSeek();
  t.sharedExperts = 1;
  t.sharedFfnHiddenSize = 12;
  t.router = 1;
  const Plan plan = moePlanOf(t);
  absl::StatusOr<std::vector<HfTensor>> tensors = hfTensors(plan);
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  const auto got = byName(*tensors);
  const std::string m = "model.layers.1.mlp.";
  EXPECT_EQ(got.at(m + "gate.weight").shape, (Shape{4, 8}));
  EXPECT_EQ(got.at(m + "gate.e_score_correction_bias").shape, (Shape{4}));
  EXPECT_EQ(got.at(m + "experts.3.gate_proj.weight").shape, (Shape{6, 8}));
  EXPECT_EQ(got.at(m + "experts.3.down_proj.weight").shape, (Shape{8, 6}));
  // DeepSeek's shared experts: no gate, so their down projection is Conduit's as it is.
  EXPECT_EQ(got.at(m + "shared_experts.up_proj.weight").shape, (Shape{12, 8}));
  EXPECT_EQ(got.at(m + "shared_experts.down_proj.weight").scale, 1.0f);
  EXPECT_FALSE(got.count(m + "shared_expert_gate.weight"));
  EXPECT_FALSE(got.count(m + "shared_expert.up_proj.weight"));
  auto config = nlohmann::json::parse(hfConfigJson(plan));
  EXPECT_EQ(config["model_type"], "deepseek_v3");
  EXPECT_EQ(config["n_routed_experts"], 4);
  EXPECT_EQ(config["num_experts_per_tok"], 2);
  EXPECT_EQ(config["moe_intermediate_size"], 6);
  EXPECT_EQ(config["n_shared_experts"], 2);
  EXPECT_EQ(config["first_k_dense_replace"], 1);
  EXPECT_EQ(config["norm_topk_prob"], true);
  EXPECT_EQ(config["n_group"], 1);
  EXPECT_EQ(config["topk_group"], 1);
  EXPECT_EQ(config["routed_scaling_factor"], 1.0);
  EXPECT_EQ(config["scoring_func"], "sigmoid");
  EXPECT_EQ(config["topk_method"], "noaux_tc");
  EXPECT_FALSE(config.contains("router_aux_loss_coef"));
  // DeepSeek-V3's config says the shared width as a count of routed experts' widths: another
  // width has no file, refused naming the key.
  t.sharedFfnHiddenSize = 10;
  absl::StatusOr<std::vector<HfTensor>> odd = hfTensors(moePlanOf(t));
  ASSERT_FALSE(odd.ok());
  EXPECT_NE(odd.status().message().find("model.moe.shared_ffn_hidden_size a multiple of"),
            std::string::npos)
      << odd.status();
}

TEST(HfWeightsTest, DeepSeekV3MultiTokenPredictionNames) {
  // Two modules after the 2 blocks take DeepSeek's names as layers 2 and 3: their own tensors
  // (the first's copy of the token table as embed_tokens) and the head's matrix again as
  // shared_head.head, then a block's.
  Transformer t = deepSeek();
  t.mtpLayers = 2;
  t.mtpLossCoefficient = 0.1;
  auto planWithModules = [](const Transformer &x) {
    Plan plan = planOf(x);
    const int64_t h = x.hiddenSize, own = 3 * h + 2 * h * h + plan.layers[1].params;
    const int64_t table = x.tieEmbeddings ? 0 : x.vocabSize * h;
    plan.layers.insert(plan.layers.end() - 1, {"mtp.0", LayerKind::Block, table + own});
    plan.layers.insert(plan.layers.end() - 1, {"mtp.1", LayerKind::Block, own});
    return plan;
  };
  const Plan plan = planWithModules(t);
  absl::StatusOr<std::vector<HfTensor>> tensors = hfTensors(plan);
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  const auto got = byName(*tensors);
  const std::string m = "model.layers.2.";
  EXPECT_EQ(got.at(m + "embed_tokens.weight").shape, (Shape{11, 8}));
  EXPECT_EQ(got.at(m + "enorm.weight").shape, (Shape{8}));
  EXPECT_EQ(got.at(m + "hnorm.weight").shape, (Shape{8}));
  EXPECT_EQ(got.at(m + "eh_proj.weight").shape, (Shape{8, 16}));
  EXPECT_TRUE(got.at(m + "eh_proj.weight").transpose);
  EXPECT_EQ(got.at(m + "shared_head.norm.weight").shape, (Shape{8}));
  EXPECT_EQ(got.at(m + "shared_head.head.weight").shape, (Shape{11, 8}));
  EXPECT_EQ(got.at(m + "shared_head.head.weight").layer, 5) << "the head's matrix";
  EXPECT_EQ(got.at(m + "shared_head.head.weight").offset, 8) << "after the head's norm";
  EXPECT_TRUE(got.count(m + "self_attn.q_a_proj.weight"));
  EXPECT_FALSE(got.count("model.layers.3.embed_tokens.weight")) << "the first module's only";
  EXPECT_TRUE(got.count("model.layers.3.shared_head.head.weight"));
  EXPECT_EQ(nlohmann::json::parse(hfConfigJson(plan))["num_nextn_predict_layers"], 2);
  // Every parameter of each module in exactly one of its tensors, and back.
  for (int64_t l : {3, 4}) {
    std::vector<float> params(plan.layers[l].params), back(params.size(), -1.0f);
    for (size_t i = 0; i < params.size(); ++i)
      params[i] = static_cast<float>(i * 7 % 13) - 6;
    int64_t covered = 0;
    for (const HfTensor &x : *tensors)
      if (x.layer == l) {
        std::vector<float> values(x.elements());
        exportHfTensor(x, params.data(), values.data());
        importHfTensor(x, values.data(), back.data());
        covered += x.elements();
      }
    EXPECT_EQ(back, params) << l;
    EXPECT_EQ(covered, plan.layers[l].params) << l;
  }
  // Tied, the head's matrix is the table: no module names either.
  Transformer tied = t;
  tied.tieEmbeddings = true;
  const auto tiedNames = byName(*hfTensors(planWithModules(tied)));
  EXPECT_FALSE(tiedNames.count(m + "embed_tokens.weight"));
  EXPECT_FALSE(tiedNames.count(m + "shared_head.head.weight"));
  // GPT-2's names have no modules: refused naming the key.
  Transformer gpt = gpt2();
  gpt.mtpLayers = 1;
  gpt.mtpLossCoefficient = 0.1;
  absl::StatusOr<std::vector<HfTensor>> refused = hfTensors(planOf(gpt));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("model.mtp_layers"), std::string::npos)
      << refused.status();
}

TEST(HfWeightsTest, ConfigJson) {
  auto config = nlohmann::json::parse(hfConfigJson(planOf(llama())));
  EXPECT_EQ(config["architectures"][0], "LlamaForCausalLM");
  EXPECT_EQ(config["model_type"], "llama");
  EXPECT_EQ(config["hidden_size"], 8);
  EXPECT_EQ(config["intermediate_size"], 12);
  EXPECT_EQ(config["num_attention_heads"], 2);
  EXPECT_EQ(config["num_key_value_heads"], 1);
  EXPECT_EQ(config["num_hidden_layers"], 2);
  EXPECT_EQ(config["vocab_size"], 11);
  EXPECT_EQ(config["max_position_embeddings"], 5);
  EXPECT_EQ(config["rms_norm_eps"], 1e-6);
  EXPECT_EQ(config["rope_theta"], 500000.0);
  EXPECT_EQ(config["tie_word_embeddings"], true);
  EXPECT_EQ(config["hidden_act"], "silu");
  EXPECT_EQ(config["torch_dtype"], "float32");

  config = nlohmann::json::parse(hfConfigJson(planOf(gpt2())));
  EXPECT_EQ(config["architectures"][0], "GPT2LMHeadModel");
  EXPECT_EQ(config["model_type"], "gpt2");
  EXPECT_EQ(config["n_embd"], 8);
  EXPECT_EQ(config["n_head"], 2);
  EXPECT_EQ(config["n_layer"], 2);
  EXPECT_EQ(config["n_positions"], 5);
  EXPECT_EQ(config["n_inner"], 12);
  EXPECT_EQ(config["vocab_size"], 11);
  EXPECT_EQ(config["layer_norm_epsilon"], 1e-5);
  EXPECT_EQ(config["activation_function"], "gelu_new");
  EXPECT_EQ(config["tie_word_embeddings"], false);
  EXPECT_FALSE(config.contains("rope_scaling"));

  // A context extension under Hugging Face's rope_scaling keys: llama3's four, yarn's with its
  // magnitude stated.
  Transformer extended = llama();
  extended.ropeScaling.type = RopeType::Llama3;
  extended.ropeScaling.factor = 8;
  extended.ropeScaling.originalPositions = 8192;
  config = nlohmann::json::parse(hfConfigJson(planOf(extended)));
  EXPECT_EQ(config["rope_scaling"], nlohmann::json::parse(R"({"rope_type": "llama3", "factor": 8.0,
                "original_max_position_embeddings": 8192, "low_freq_factor": 1.0,
                "high_freq_factor": 4.0})"));
  extended.ropeScaling.type = RopeType::Yarn;
  extended.ropeScaling.attentionFactor = 1.25;
  extended.ropeScaling.truncate = false;
  config = nlohmann::json::parse(hfConfigJson(planOf(extended)));
  EXPECT_EQ(config["rope_scaling"], nlohmann::json::parse(R"({"rope_type": "yarn", "factor": 8.0,
                "original_max_position_embeddings": 8192, "beta_fast": 32.0, "beta_slow": 1.0,
                "attention_factor": 1.25, "truncate": false})"));
  // Its positions are the extended context (the transformers library's 4.5x versions take the
  // factor as their ratio to the original's).
  EXPECT_EQ(config["max_position_embeddings"], 8 * 8192);
  // Dynamic NTK scaling: the library grows the base past max_position_embeddings, so that is
  // where the threshold goes, whatever length the plan trained.
  extended = llama();
  extended.ropeScaling.type = RopeType::Dynamic;
  extended.ropeScaling.factor = 2;
  extended.ropeScaling.originalPositions = 3;
  ASSERT_NE(extended.seqLength, 3);
  config = nlohmann::json::parse(hfConfigJson(planOf(extended)));
  EXPECT_EQ(config["rope_scaling"], nlohmann::json::parse(R"({"rope_type": "dynamic",
                "factor": 2.0, "original_max_position_embeddings": 3})"));
  EXPECT_EQ(config["max_position_embeddings"], 3);
}

TEST(HfWeightsTest, RefusesALayerOfAnotherLayout) {
  Plan plan = planOf(gpt2());
  plan.layers[1].params += 1;
  absl::StatusOr<std::vector<HfTensor>> tensors = hfTensors(plan);
  ASSERT_FALSE(tensors.ok());
  EXPECT_NE(tensors.status().message().find("layer block.0: the plan counts"), std::string::npos);
  plan.transformer.reset();
  EXPECT_FALSE(hfTensors(plan).ok());
}

/// Every parameter of `plan`, distinct values; the tied head's copy equal to the token table.
std::vector<float> parametersOf(const Plan &plan) {
  int64_t total = 0;
  for (const Layer &l : plan.layers)
    total += l.params;
  std::vector<float> params(total);
  for (int64_t i = 0; i < total; ++i)
    params[i] = 0.001f * static_cast<float>(i);
  if (plan.transformer->tieEmbeddings) {
    const int64_t table = plan.transformer->vocabSize * plan.transformer->hiddenSize;
    std::copy(params.begin(), params.begin() + table, params.end() - table);
  }
  return params;
}

TEST(HfWeightsTest, WritesAModelAndReadsItBack) {
  for (const Transformer &t : {gpt2(), llama()}) {
    const Plan plan = planOf(t);
    const std::string dir =
        (fs::path(testing::TempDir()) / (std::string("hf-") + hfArchitecture(plan))).string();
    const std::vector<float> params = parametersOf(plan);
    ASSERT_TRUE(writeHfModel(plan, dir, params.data(), /*step=*/4).ok());
    EXPECT_TRUE(fs::exists(fs::path(dir) / "config.json"));
    EXPECT_FALSE(fs::exists(fs::path(dir) / "model.safetensors.tmp"));
    absl::StatusOr<HfModelFile> model = openHfModel(plan, dir + "/model.safetensors");
    ASSERT_TRUE(model.ok()) << model.status();
    EXPECT_EQ(model->files[0].header().metadata.at("format"), "pt");
    EXPECT_EQ(model->step, 4);
    absl::StatusOr<std::vector<float>> back =
        readHfLayers(*model, plan, 0, static_cast<int64_t>(plan.layers.size()));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, params) << hfArchitecture(plan);
    // A stage's layers alone.
    absl::StatusOr<std::vector<float>> blocks = readHfLayers(*model, plan, 1, 3);
    ASSERT_TRUE(blocks.ok());
    const int64_t first = plan.layers[0].params;
    EXPECT_EQ(*blocks, std::vector<float>(params.begin() + first, params.begin() + first +
                                                                      plan.layers[1].params +
                                                                      plan.layers[2].params));
  }
}

TEST(HfWeightsTest, RefusesFilesWithoutExactlyTheModelsTensors) {
  const Plan plan = planOf(gpt2());
  absl::StatusOr<std::vector<HfTensor>> tensors = hfTensors(plan);
  ASSERT_TRUE(tensors.ok());
  const std::string path = (fs::path(testing::TempDir()) / "hf-bad.safetensors").string();
  std::vector<float> zeros(1 << 12);
  // Writes the model's tensors changed by `edit`, then returns the refusal's message.
  auto refusal = [&](auto edit) {
    std::vector<TensorSpec> specs;
    for (const HfTensor &t : *tensors)
      specs.push_back({t.name, t.shape});
    edit(specs);
    std::vector<const float *> values(specs.size(), zeros.data());
    EXPECT_TRUE(writeSafeTensors(path, specs, values).ok());
    absl::StatusOr<HfModelFile> model = openHfModel(plan, path);
    return model.ok() ? std::string() : std::string(model.status().message());
  };
  EXPECT_EQ(refusal([](std::vector<TensorSpec> &) {}), "");
  // Without Conduit's metadata a file starts at step 0; with a step that is not one, it is
  // refused.
  {
    std::vector<TensorSpec> specs;
    for (const HfTensor &t : *tensors)
      specs.push_back({t.name, t.shape});
    std::vector<const float *> values(specs.size(), zeros.data());
    ASSERT_TRUE(writeSafeTensors(path, specs, values, {{"conduit.step", "-3"}}).ok());
    absl::StatusOr<HfModelFile> model = openHfModel(plan, path);
    ASSERT_FALSE(model.ok());
    EXPECT_NE(model.status().message().find("the metadata's conduit.step \"-3\" is not a step"),
              std::string::npos)
        << model.status();
    ASSERT_TRUE(writeSafeTensors(path, specs, values).ok());
    model = openHfModel(plan, path);
    ASSERT_TRUE(model.ok());
    EXPECT_EQ(model->step, 0);
  }
  EXPECT_NE(refusal([](std::vector<TensorSpec> &s) { s.erase(s.begin() + 5); })
                .find("tensor \"transformer.h.0.attn.c_attn.bias\" is missing (the model needs "
                      "[24])"),
            std::string::npos);
  EXPECT_NE(refusal([](std::vector<TensorSpec> &s) {
              s.push_back({"extra.weight", {2}});
            }).find("tensor \"extra.weight\" is not a parameter of this model"),
            std::string::npos);
  EXPECT_NE(refusal([](std::vector<TensorSpec> &s) { s[4].shape = {24, 8}; })
                .find("tensor \"transformer.h.0.attn.c_attn.weight\" has shape [24, 8]; the "
                      "model needs [8, 24]"),
            std::string::npos);
  // A dtype other than the three floats.
  const std::string json = R"({"transformer.wte.weight":{"dtype":"I32","shape":[11,8],)"
                           R"("data_offsets":[0,352]}})";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    const uint64_t n = json.size();
    out.write(reinterpret_cast<const char *>(&n), 8);
    out << json << std::string(352, '\0');
  }
  absl::StatusOr<HfModelFile> model = openHfModel(plan, path);
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find(
                "tensor \"transformer.wte.weight\" has dtype I32; conduit-run reads F32, BF16, "
                "F16 and F8_E4M3 with block scales"),
            std::string::npos)
      << model.status();
}

} // namespace
} // namespace conduit::runtime
