//===- HfConfigOmissionsTest.cpp - what a written config.json cannot say --===//
//
// Each part of a model that its Hugging Face family's config has no key for is named, with the
// job key to change; a model each family's config says whole has none. The contract behind
// it: the config.json written for a model with no omission, read back as a Hugging Face config
// (job/HuggingFace.h, what a job on that file plans), is the same model; with one, another.
//
//===----------------------------------------------------------------------===//

#include "job/HuggingFace.h"
#include "job/JsonReader.h"
#include "runtime/weights/HfWeights.h"
#include "tests/unit/runtime/weights/HfPlans.h"

#include <gtest/gtest.h>

#include <functional>

namespace conduit::runtime {
namespace {

using Keys = std::vector<std::string>;

/// The job keys hfConfigOmissions names for `t`, in its order.
Keys keysOf(const Transformer &t) {
  Keys keys;
  for (const std::string &omission : hfConfigOmissions(planOf(t))) {
    const size_t open = omission.find("(model."), close = omission.find_first_of(" )", open + 1);
    EXPECT_NE(open, std::string::npos) << omission;
    keys.push_back(omission.substr(open + 1, close - open - 1));
  }
  return keys;
}

/// Whether the config.json written for `t`, read back, plans the same model in what the
/// omissions speak of: the layers' kinds, the heads, the multi-token prediction modules, the
/// experts and their routing.
bool readsBackTheSame(const Transformer &t) {
  Diagnostics diag("config.json");
  std::optional<Json> json = parseJsonText(hfConfigJson(planOf(t)), diag);
  EXPECT_TRUE(json);
  std::optional<TransformerSpec> back = parseHuggingFaceConfig(*json, diag);
  EXPECT_TRUE(back) << hfModelType(planOf(t)) << ": " << diag.getError()->str();
  if (!back)
    return false;
  bool same = uint8_t(back->bias) == t.bias && uint8_t(back->norm) == t.norm &&
              uint8_t(back->mlp) == t.mlp && uint8_t(back->position) == t.position &&
              back->numKvHeads == t.numKvHeads && back->qkNorm == t.qkNorm &&
              back->mtpLayers == t.mtpLayers && back->moe.has_value() == t.isMoe();
  if (same && back->moe) {
    const MoeSpec &m = *back->moe;
    same = m.numExperts == t.numExperts && m.topK == t.topK && m.normalizeTopK == t.normalizeTopK &&
           m.denseLayers == t.denseLayers && uint8_t(m.router) == t.router &&
           (m.routerGroupTopK < m.routerGroups) == t.groupLimited() &&
           (m.sharedExperts > 0) == (t.sharedExperts > 0) &&
           m.capacityFactor.value_or(0) == t.capacityFactor;
  }
  return same;
}

Transformer withExperts(Transformer t) {
  t.numExperts = 4;
  t.topK = 2;
  t.expertFfnHiddenSize = 6;
  t.normalizeTopK = true;
  return t;
}

Transformer changed(Transformer t, const std::function<void(Transformer &)> &change) {
  change(t);
  return t;
}

struct Case {
  const char *what;
  Transformer model;
  Keys keys;                   ///< what hfConfigOmissions names
  bool conduitReadsIt = false; ///< an omission of Hugging Face's model only
};

std::vector<Case> cases() {
  const Transformer qwen2 = changed(llama(), [](Transformer &t) { t.bias = 1; });
  const Transformer qwen3 = changed(llama(), [](Transformer &t) { t.qkNorm = true; });
  const Transformer mixtral = withExperts(llama());
  const Transformer qwenMoe = changed(withExperts(qwen2), [](Transformer &t) {
    t.sharedExperts = 1;
    t.sharedFfnHiddenSize = 6;
    t.sharedExpertGate = true;
    t.denseLayers = 1;
    t.normalizeTopK = false;
  });
  const Transformer deepSeekMoe = changed(withExperts(deepSeek()), [](Transformer &t) {
    t.router = 1;
    t.routerGroups = 2;
    t.denseLayers = 1;
  });
  return {
      // Said whole.
      {"GPT-2", gpt2(), {}},
      {"Llama", llama(), {}},
      {"Llama with every bias", changed(llama(), [](Transformer &t) { t.bias = 0; }), {}},
      {"Qwen2", qwen2, {}},
      {"Qwen3", qwen3, {}},
      {"Mixtral", mixtral, {}},
      {"Qwen2-MoE", qwenMoe, {}},
      {"Qwen3-MoE", withExperts(qwen3), {}},
      {"DeepSeek-V3's attention", deepSeek(), {}},
      {"DeepSeek-V3", deepSeekMoe, {}},
      // Not.
      {"GPT-2 without biases", changed(gpt2(), [](Transformer &t) { t.bias = 2; }), {"model.bias"}},
      {"GPT-2 with grouped-query attention",
       changed(gpt2(), [](Transformer &t) { t.numKvHeads = 1; }),
       {"model.num_kv_heads"}},
      // With all three it is GPT-2's model, with GPT-2's names.
      {"Llama with LayerNorm and learned positions",
       changed(llama(),
               [](Transformer &t) {
                 t.norm = 0;
                 t.position = 0;
               }),
       {"model.norm", "model.position"}},
      {"Llama with GELU", changed(llama(), [](Transformer &t) { t.mlp = 0; }), {"model.mlp"}},
      // Only DeepSeek-V3's config counts multi-token prediction modules, and a job on it plans
      // them only with model.mtp_layers beside its path.
      {"Llama with a module",
       changed(llama(), [](Transformer &t) { t.mtpLayers = 1; }),
       {"model.mtp_layers"}},
      {"DeepSeek-V3's attention with a module",
       changed(deepSeek(), [](Transformer &t) { t.mtpLayers = 1; }),
       {"model.mtp_layers"}},
      {"Qwen3 with biases on q, k and v",
       changed(qwen3, [](Transformer &t) { t.bias = 1; }),
       {"model.bias"}},
      {"GPT-2's parts with experts",
       withExperts(gpt2()),
       {"model.norm", "model.position", "model.mlp", "model.bias"}},
      {"Mixtral with biases", changed(mixtral, [](Transformer &t) { t.bias = 0; }), {"model.bias"}},
      {"Qwen2-MoE without biases",
       changed(qwenMoe, [](Transformer &t) { t.bias = 2; }),
       {"model.bias"}},
      {"Mixtral with a dense block, not renormalised",
       changed(mixtral,
               [](Transformer &t) {
                 t.denseLayers = 1;
                 t.normalizeTopK = false;
               }),
       {"model.moe.dense_layers", "model.moe.normalize_top_k"}},
      {"Mixtral routed by sigmoid over groups",
       changed(mixtral,
               [](Transformer &t) {
                 t.router = 1;
                 t.routerGroups = 2;
               }),
       {"model.moe.router", "model.moe.router_groups"}},
      {"DeepSeek-V3 routed by softmax", withExperts(deepSeek()), {"model.moe.router"}, true},
      {"DeepSeek-V3 routed by softmax over groups",
       changed(withExperts(deepSeek()), [](Transformer &t) { t.routerGroups = 2; }),
       {"model.moe.router", "model.moe.router_groups"}},
      {"Qwen3-MoE with a shared expert",
       changed(withExperts(qwen3),
               [](Transformer &t) {
                 t.sharedExperts = 1;
                 t.sharedFfnHiddenSize = 6;
               }),
       {"model.moe.shared_experts"}},
      {"a capacity",
       changed(mixtral, [](Transformer &t) { t.capacityFactor = 1.25; }),
       {"model.moe.capacity_factor"}},
  };
}

TEST(HfConfigOmissionsTest, NamesWhatTheConfigCannotSay) {
  for (const Case &c : cases())
    EXPECT_EQ(keysOf(c.model), c.keys) << c.what;
}

TEST(HfConfigOmissionsTest, AConfigWithoutOmissionsReadsBackAsTheModel) {
  for (const Case &c : cases())
    EXPECT_EQ(readsBackTheSame(c.model), c.keys.empty() || c.conduitReadsIt) << c.what;
}

} // namespace
} // namespace conduit::runtime
