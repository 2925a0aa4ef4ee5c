//===- HfConfigOmissionsTest.cpp - what a written config.json cannot say --===//
//
// Each part of a model that its Hugging Face family's config has no key for is named, with the
// job key to change; a model each family's config says whole has none.
//
//===----------------------------------------------------------------------===//

#include "runtime/weights/HfWeights.h"
#include "tests/unit/runtime/weights/HfPlans.h"

#include <gtest/gtest.h>

#include <functional>

namespace conduit::runtime {
namespace {

/// The job keys hfConfigOmissions names for `t`, in its order.
std::vector<std::string> keysOf(const Transformer &t) {
  std::vector<std::string> keys;
  for (const std::string &omission : hfConfigOmissions(planOf(t))) {
    const size_t open = omission.find("(model."), close = omission.find_first_of(" )", open + 1);
    EXPECT_NE(open, std::string::npos) << omission;
    keys.push_back(omission.substr(open + 1, close - open - 1));
  }
  return keys;
}

using Keys = std::vector<std::string>;

Transformer withExperts(Transformer t) {
  t.numExperts = 4;
  t.topK = 2;
  t.expertFfnHiddenSize = 6;
  t.normalizeTopK = true;
  return t;
}

TEST(HfConfigOmissionsTest, EachFamilySaysItsOwnModelWhole) {
  Transformer qwen2 = llama(), qwen3 = llama(), llamaBiased = llama();
  qwen2.bias = 1;
  qwen3.qkNorm = true;
  llamaBiased.bias = 0;
  Transformer qwenMoe = withExperts(qwen2);
  qwenMoe.sharedExperts = 1;
  qwenMoe.sharedFfnHiddenSize = 6;
  qwenMoe.denseLayers = 1;
  qwenMoe.normalizeTopK = false;
  Transformer deepSeekMoe = withExperts(deepSeek());
  deepSeekMoe.router = 1;
  deepSeekMoe.routerGroups = 2;
  deepSeekMoe.denseLayers = 1;
  for (const Transformer &t : {gpt2(), llama(), qwen2, qwen3, llamaBiased, withExperts(llama()),
                               qwenMoe, withExperts(qwen3), deepSeek(), deepSeekMoe})
    EXPECT_EQ(hfConfigOmissions(planOf(t)), Keys{}) << hfModelType(planOf(t));
}

TEST(HfConfigOmissionsTest, NamesWhatTheConfigCannotSay) {
  const struct {
    const char *what;
    Transformer base;
    std::function<void(Transformer &)> change;
    Keys keys;
  } cases[] = {
      {"GPT-2 without biases", gpt2(), [](Transformer &t) { t.bias = 2; }, {"model.bias"}},
      {"GPT-2 with grouped-query attention",
       gpt2(),
       [](Transformer &t) { t.numKvHeads = 1; },
       {"model.num_kv_heads"}},
      // With all three it is GPT-2's model, with GPT-2's names.
      {"Llama with LayerNorm and learned positions",
       llama(),
       [](Transformer &t) {
         t.norm = 0;
         t.position = 0;
       },
       {"model.norm", "model.position"}},
      {"Llama with GELU", llama(), [](Transformer &t) { t.mlp = 0; }, {"model.mlp"}},
      {"Qwen3 with biases on q, k and v",
       llama(),
       [](Transformer &t) {
         t.qkNorm = true;
         t.bias = 1;
       },
       {"model.bias"}},
      {"experts with biases",
       withExperts(llama()),
       [](Transformer &t) { t.bias = 0; },
       {"model.bias"}},
      {"Mixtral with a dense block, not renormalised",
       withExperts(llama()),
       [](Transformer &t) {
         t.denseLayers = 1;
         t.normalizeTopK = false;
       },
       {"model.moe.dense_layers", "model.moe.normalize_top_k"}},
      {"Mixtral routed by sigmoid over groups",
       withExperts(llama()),
       [](Transformer &t) {
         t.router = 1;
         t.routerGroups = 2;
       },
       {"model.moe.router", "model.moe.router_groups"}},
      {"DeepSeek-V3 routed by softmax",
       withExperts(deepSeek()),
       [](Transformer &) {},
       {"model.moe.router"}},
      {"Qwen3-MoE with a shared expert",
       withExperts(llama()),
       [](Transformer &t) {
         t.qkNorm = true;
         t.sharedExperts = 1;
         t.sharedFfnHiddenSize = 6;
       },
       {"model.moe.shared_experts"}},
      {"a capacity",
       withExperts(llama()),
       [](Transformer &t) { t.capacityFactor = 1.25; },
       {"model.moe.capacity_factor"}},
  };
  for (const auto &c : cases) {
    Transformer t = c.base;
    c.change(t);
    EXPECT_EQ(keysOf(t), c.keys) << c.what;
  }
}

} // namespace
} // namespace conduit::runtime
