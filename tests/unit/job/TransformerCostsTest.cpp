//===- TransformerCostsTest.cpp - analytic transformer costs --------------===//
//
// Checks the layer formulas against published model sizes and against the 6N + attention rule
// for training FLOPs per token.
//
//===----------------------------------------------------------------------===//

#include "job/TransformerCosts.h"
#include "tests/unit/job/GptShape.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace conduit;

namespace {

double totalParams(const std::vector<LayerSpec> &layers) {
  double total = 0;
  for (const LayerSpec &layer : layers)
    total += static_cast<double>(layer.params);
  return total;
}

/// Training FLOPs per token of the layer chain, forward plus backward.
double flopsPerToken(const std::vector<LayerSpec> &layers, int64_t seq) {
  double total = 0;
  for (const LayerSpec &layer : layers)
    total += layer.fwdFlops + layer.bwdFlops;
  return total / static_cast<double>(seq);
}

TEST(TransformerCosts, Gpt3Has175BParameters) {
  TransformerSpec t = gpt(96, 12288, 96, 2048, 50257);
  auto layers = expandTransformer(t, 2);
  ASSERT_TRUE(layers.ok());
  EXPECT_EQ(layers->size(), 98u);
  double n = totalParams(*layers);
  EXPECT_GE(n, 174e9);
  EXPECT_LE(n, 176e9);
  t.tieEmbeddings = true;
  double tied = static_cast<double>(transformerParameters(t));
  EXPECT_GE(tied, 174e9);
  EXPECT_LE(tied, 176e9);
  EXPECT_NEAR(n - tied, 50257.0 * 12288.0, 1.0);
}

TEST(TransformerCosts, Gpt52BShape) {
  auto layers = expandTransformer(gpt(64, 8192, 64, 2048, 51200), 2);
  ASSERT_TRUE(layers.ok());
  double n = totalParams(*layers);
  EXPECT_GE(n, 51.5e9);
  EXPECT_LE(n, 53e9);
}

TEST(TransformerCosts, TrainingFlopsAre6NPlusAttention) {
  // N counts the parameters that take part in a matrix multiply per token: everything but the
  // embedding tables, which are looked up (Kaplan et al., arXiv 2001.08361, exclude them too;
  // the LM head is kept here because its logits are a real multiply).
  for (TransformerSpec t : {gpt(96, 12288, 96, 2048, 50257), gpt(64, 8192, 64, 2048, 51200),
                            gpt(12, 768, 12, 1024, 50257)}) {
    auto layers = expandTransformer(t, 2);
    ASSERT_TRUE(layers.ok());
    double n = totalParams(*layers) - static_cast<double>(layers->front().params);
    double expected = 6 * n + 12.0 * t.numLayers * t.seqLength * t.hiddenSize;
    double got = flopsPerToken(*layers, t.seqLength);
    EXPECT_NEAR(got / expected, 1.0, 0.02) << "layers " << t.numLayers;
  }
}

TEST(TransformerCosts, Llama2_7B) {
  TransformerSpec t;
  t.numLayers = 32;
  t.hiddenSize = 4096;
  t.numHeads = 32;
  t.numKvHeads = 32;
  t.ffnHiddenSize = 11008;
  t.seqLength = 4096;
  t.vocabSize = 32000;
  t.mlp = MlpKind::SwiGLU;
  t.norm = NormKind::RMSNorm;
  t.position = PositionKind::Rotary;
  t.bias = BiasKind::None;
  // Meta reports 6.74 B parameters for Llama-2-7B.
  EXPECT_NEAR(static_cast<double>(transformerParameters(t)), 6.738e9, 0.005e9);
}

TEST(TransformerCosts, ActivationBytesFollowKorthikanti) {
  // GPT-style block without dropout, eager attention: 32*s*h + 2*a*s^2 bytes in 16-bit (per
  // sample).
  TransformerSpec t = gpt(2, 1024, 16, 512, 1000);
  t.attention = AttentionKind::Eager;
  auto layers = expandTransformer(t, 2);
  ASSERT_TRUE(layers.ok());
  const LayerSpec &block = (*layers)[1];
  EXPECT_EQ(block.kind, runtime::LayerKind::Block);
  EXPECT_EQ(block.activationBytes, 32 * 512 * 1024 + 2 * 16 * 512 * 512);
  EXPECT_EQ(block.checkpointBytes, 2 * 512 * 1024);
  EXPECT_EQ(block.outputBytes, 2 * 512 * 1024);
  EXPECT_DOUBLE_EQ(block.bwdFlops, 2 * block.fwdFlops);
  // Selective checkpointing recomputes the attention core, the 2*a*s^2 of the probabilities;
  // no other layer has one.
  EXPECT_EQ(selectiveBytesOf(block, runtime::kRecomputeCoreAttention), 2 * 16 * 512 * 512);
  EXPECT_FALSE(selectiveBytesOf((*layers)[0], runtime::kRecomputeAll).has_value());
  EXPECT_FALSE(selectiveBytesOf(layers->back(), runtime::kRecomputeAll).has_value());
}

TEST(TransformerCosts, FlashAttentionKeepsNoScores) {
  // A fused kernel keeps the softmax statistics (one fp32 per query and head) instead of the
  // a*s^2 probabilities, so selective checkpointing has nothing to recompute; the model FLOPs
  // are the same.
  TransformerSpec t = gpt(2, 1024, 16, 512, 1000);
  TransformerSpec eager = t;
  eager.attention = AttentionKind::Eager;
  ASSERT_EQ(t.attention, AttentionKind::Flash); // the default
  auto flashLayers = expandTransformer(t, 2), eagerLayers = expandTransformer(eager, 2);
  ASSERT_TRUE(flashLayers.ok() && eagerLayers.ok());
  const LayerSpec &block = (*flashLayers)[1];
  EXPECT_EQ(block.activationBytes, 32 * 512 * 1024 + 4 * 16 * 512);
  EXPECT_EQ(selectiveBytesOf(block, runtime::kRecomputeCoreAttention), 0);
  EXPECT_DOUBLE_EQ(block.fwdFlops, (*eagerLayers)[1].fwdFlops);
  EXPECT_DOUBLE_EQ(block.bwdFlops, (*eagerLayers)[1].bwdFlops);
}

TEST(TransformerCosts, GroupedQueryAttentionShrinksKeyValueWeights) {
  TransformerSpec full = gpt(1, 4096, 32, 128, 1000);
  TransformerSpec gqa = full;
  gqa.numKvHeads = 8;
  auto a = expandTransformer(full, 2), b = expandTransformer(gqa, 2);
  ASSERT_TRUE(a.ok() && b.ok());
  // K and V shrink from h x h to h x h/4 each.
  EXPECT_EQ((*a)[1].params - (*b)[1].params, 2 * (4096 * 4096 - 4096 * 1024) + 2 * (4096 - 1024));
}

TEST(TransformerCosts, AbsurdShapeIsAnErrorNotAnOverflow) {
  auto layers = expandTransformer(gpt(1, 1 << 20, 1 << 16, 1 << 24, 1 << 24), 4);
  ASSERT_FALSE(layers.ok());
  EXPECT_NE(layers.status().message().find("above 2^53"), std::string::npos);
}

TEST(TransformerCosts, ShapeRelations) {
  TransformerSpec t = gpt(1, 100, 3, 8, 8);
  ASSERT_TRUE(checkTransformerShape(t).has_value());
  t.numHeads = 4;
  t.numKvHeads = 3;
  ASSERT_TRUE(checkTransformerShape(t).has_value());
  t.numKvHeads = 2;
  EXPECT_FALSE(checkTransformerShape(t).has_value());
}

} // namespace

namespace {

/// A Llama-style shape with SwiGLU, RMSNorm, rotary positions, no biases, untied tables.
TransformerSpec llamaStyle(int64_t layers, int64_t hidden, int64_t heads, int64_t kvHeads,
                           int64_t ffn, int64_t seq, int64_t vocab) {
  TransformerSpec t = gpt(layers, hidden, heads, seq, vocab);
  t.numKvHeads = kvHeads;
  t.ffnHiddenSize = ffn;
  t.mlp = MlpKind::SwiGLU;
  t.norm = NormKind::RMSNorm;
  t.position = PositionKind::Rotary;
  t.bias = BiasKind::None;
  return t;
}

MoeSpec moe(int64_t experts, int64_t topK, int64_t width) {
  MoeSpec m;
  m.numExperts = experts;
  m.topK = topK;
  m.expertFfnHiddenSize = width;
  return m;
}

/// Two blocks of h 8, 2 heads and 1 key/value head of 4, s 4, the second block with 4 experts
/// of width 6 (top 2) and one shared expert of width 6.
TransformerSpec smallMoe() {
  TransformerSpec t = llamaStyle(2, 8, 2, 1, 16, 4, 16);
  t.moe = moe(4, 2, 6);
  t.moe->sharedExperts = 1;
  t.moe->sharedFfnHiddenSize = 6;
  t.moe->denseLayers = 1;
  return t;
}

} // namespace

TEST(TransformerCosts, MoeBlockByHand) {
  absl::StatusOr<std::vector<LayerSpec>> layers = expandTransformer(smallMoe(), 2);
  ASSERT_TRUE(layers.ok()) << layers.status();
  const LayerSpec &dense = (*layers)[1], &experts = (*layers)[2];
  // Attention: Q and O 8 x 8, K and V 8 x 4: 192. Dense MLP 3 x 8 x 16 = 384; norms 16.
  EXPECT_EQ(dense.params, 192 + 384 + 16);
  EXPECT_EQ(dense.expertParams, 0);
  // Router 8 x 4 = 32, shared expert 3 x 8 x 6 = 144, routed experts 4 x 144 = 576.
  EXPECT_EQ(experts.params, 192 + 32 + 144 + 576 + 16);
  EXPECT_EQ(experts.expertParams, 576);
  // Tensor parallelism keeps the norms and the router whole; the routed experts are the
  // expert group's.
  EXPECT_EQ(experts.replicatedParams, 16 + 32);
  EXPECT_EQ(dense.replicatedParams, 16);
  // Forward: 2 s x (attention, router, shared and 2 of the 4 experts) + the core
  // 2 s^2 a (d + d): 8 x (192 + 32 + 144 + 288) + 2 x 16 x 2 x 8.
  EXPECT_DOUBLE_EQ(experts.fwdFlops, 8.0 * 656 + 512);
  EXPECT_DOUBLE_EQ(experts.bwdFlops, 2 * experts.fwdFlops);
  EXPECT_DOUBLE_EQ(experts.bwdWeightFlops, 8.0 * 656);
  // Elements kept: attention 4 x 8 + 2 x 4 x 8 + 2 x 4 x 4 = 128, norms 64, MLP input 32,
  // router logits and probabilities 2 x 4 x 4, shared hidden 3 x 4 x 6, routed: 2 copies of
  // each token in (2 x 32; no outputs: the weights apply to the activations) and the experts'
  // hidden 2 x 3 x 4 x 6. In bf16, with the fused kernel's statistics (4 a s) and the routing
  // (8 s top_k bytes).
  const int64_t routed = 64 + 144;
  EXPECT_EQ(experts.activationBytes, 2 * (128 + 64 + 32 + 32 + 72 + routed) + 32 + 64);
  EXPECT_EQ(moeRoutedActivationBytes(smallMoe(), 2), 2 * routed);
  // Parameters: the tables 2 x 16 x 8, the final norm 8, the blocks; active: half the routed.
  EXPECT_EQ(transformerParameters(smallMoe()), 256 + 8 + 592 + 960);
  EXPECT_EQ(transformerActiveParameters(smallMoe()), 256 + 8 + 592 + 960 - 288);
}

TEST(TransformerCosts, SharedExpertGateByHand) {
  TransformerSpec t = smallMoe();
  t.moe->sharedExpertGate = true;
  absl::StatusOr<std::vector<LayerSpec>> gated = expandTransformer(t, 2),
                                         plain = expandTransformer(smallMoe(), 2);
  ASSERT_TRUE(gated.ok() && plain.ok()) << gated.status() << plain.status();
  const LayerSpec &g = (*gated)[2], &p = (*plain)[2];
  // The gate: a vector of h = 8, whole on every tensor rank, not a routed expert's.
  EXPECT_EQ(g.params, p.params + 8);
  EXPECT_EQ(g.replicatedParams.value_or(0), p.replicatedParams.value_or(0) + 8);
  EXPECT_EQ(g.expertParams, p.expertParams);
  // One product of 8 per token: 2 s h FLOPs more forward, twice that backward.
  EXPECT_DOUBLE_EQ(g.fwdFlops, p.fwdFlops + 2.0 * 4 * 8);
  EXPECT_DOUBLE_EQ(g.bwdFlops, p.bwdFlops + 4.0 * 4 * 8);
  // Kept: the shared expert's output (s h) and the gate's values (s), in bf16; without
  // sequence parallelism every tensor rank keeps them whole.
  EXPECT_EQ(g.activationBytes, p.activationBytes + 2 * (32 + 4));
  EXPECT_EQ(g.replicatedActivationBytes.value_or(0),
            p.replicatedActivationBytes.value_or(0) + 2 * (32 + 4));
  // The dense block does not change.
  EXPECT_EQ((*gated)[1].params, (*plain)[1].params);
  EXPECT_EQ(transformerParameters(t), transformerParameters(smallMoe()) + 8);
}

TEST(TransformerCosts, LatentAttentionByHand) {
  TransformerSpec t = llamaStyle(1, 8, 2, 2, 16, 4, 16);
  t.latentAttention = LatentAttentionSpec{4, 4, 2, 2, 2};
  absl::StatusOr<std::vector<LayerSpec>> layers = expandTransformer(t, 2);
  ASSERT_TRUE(layers.ok()) << layers.status();
  const LayerSpec &block = (*layers)[1];
  // q: 8 x 4 + 4 x 2 x (2 + 2); kv: 8 x (4 + 2) + 4 x 2 x (2 + 2); out: 2 x 2 x 8; the two
  // latent norms 4 + 4; the MLP 3 x 8 x 16; the block norms 16.
  const int64_t attention = 64 + 48 + 32 + 32;
  EXPECT_EQ(block.params, attention + 8 + 384 + 16);
  // The down projections and their norms are whole on every tensor rank.
  EXPECT_EQ(block.replicatedParams, 16 + (32 + 4) + 48 + 4);
  // The core over q/k heads of 4 and value heads of 2: 2 s^2 a (4 + 2).
  EXPECT_DOUBLE_EQ(block.fwdFlops, 2.0 * 4 * (attention + 384) + 2.0 * 16 * 2 * 6);
}

TEST(TransformerCosts, ExplicitHeadWidthAndQkNorm) {
  // Qwen3's heads are wider than hidden / heads: Q and O are h x a d.
  TransformerSpec t = llamaStyle(1, 8, 2, 1, 16, 4, 16);
  t.headDim = 8;
  t.qkNorm = true;
  absl::StatusOr<std::vector<LayerSpec>> layers = expandTransformer(t, 2);
  ASSERT_TRUE(layers.ok()) << layers.status();
  // Q, O 8 x 16; K, V 8 x 8; q and k norms of the head width 8 each.
  EXPECT_EQ((*layers)[1].params, 2 * 128 + 2 * 64 + 16 + 384 + 16);
}

// The published sizes. Totals within 1%. Active parameters within 1% where the publication
// rounds (Mixtral's 12.9 B); Qwen3 and DeepSeek-V3 state theirs cut to their leading digits
// (3.3 B of an exact 3.35 B, 37 B of 37.55 B: every weight a token passes through, the
// embedding table and the LM head included), so the count lies in [published, published plus
// one unit of the last digit).

TEST(TransformerCosts, Mixtral8x7B) {
  // Mistral AI, "Mixtral of Experts", arXiv 2401.04088: 46.7 B parameters, 12.9 B active.
  TransformerSpec t = llamaStyle(32, 4096, 32, 8, 14336, 32768, 32000);
  t.moe = moe(8, 2, 14336);
  EXPECT_NEAR(double(transformerParameters(t)), 46.7e9, 0.01 * 46.7e9);
  EXPECT_NEAR(double(transformerActiveParameters(t)), 12.9e9, 0.01 * 12.9e9);
}

TEST(TransformerCosts, Qwen1_5MoeA2_7B) {
  // Qwen team, "Qwen1.5-MoE: Matching 7B Model Performance with 1/3 Activated Parameters"
  // (qwenlm.github.io, 2024): 14.3 B parameters, 2.7 B activated. Every block has 60 experts of
  // 1408 (top 4) and a shared expert of 5632 with its gate; Q, K and V have biases.
  TransformerSpec t = llamaStyle(24, 2048, 16, 16, 5632, 8192, 151936);
  t.bias = BiasKind::QKV;
  t.tieEmbeddings = false;
  t.moe = moe(60, 4, 1408);
  t.moe->sharedExperts = 1;
  t.moe->sharedFfnHiddenSize = 5632;
  t.moe->sharedExpertGate = true;
  EXPECT_NEAR(double(transformerParameters(t)), 14.3e9, 0.01 * 14.3e9);
  EXPECT_NEAR(double(transformerActiveParameters(t)), 2.7e9, 0.01 * 2.7e9);
}

TEST(TransformerCosts, Qwen3_30B_A3B) {
  // Qwen team, "Qwen3 Technical Report", arXiv 2505.09388: 30.5 B parameters, 3.3 B active.
  TransformerSpec t = llamaStyle(48, 2048, 32, 4, 6144, 40960, 151936);
  t.headDim = 128;
  t.qkNorm = true;
  t.moe = moe(128, 8, 768);
  EXPECT_NEAR(double(transformerParameters(t)), 30.5e9, 0.01 * 30.5e9);
  EXPECT_GE(double(transformerActiveParameters(t)), 3.3e9);
  EXPECT_LT(double(transformerActiveParameters(t)), 3.4e9);
}

TEST(TransformerCosts, DeepSeekV3) {
  // DeepSeek-AI, "DeepSeek-V3 Technical Report", arXiv 2412.19437: 671 B parameters, 37 B
  // active, without the multi-token prediction module (14 B more), which Conduit does not
  // model.
  TransformerSpec t = llamaStyle(61, 7168, 128, 128, 18432, 4096, 129280);
  t.latentAttention = LatentAttentionSpec{1536, 512, 128, 64, 128};
  t.moe = moe(256, 8, 2048);
  t.moe->router = RouterKind::Sigmoid;
  t.moe->sharedExperts = 1;
  t.moe->sharedFfnHiddenSize = 2048;
  t.moe->denseLayers = 3;
  EXPECT_NEAR(double(transformerParameters(t)), 671e9, 0.01 * 671e9);
  EXPECT_GE(double(transformerActiveParameters(t)), 37e9);
  EXPECT_LT(double(transformerActiveParameters(t)), 38e9);
  // DeepSeek's weight documentation (README_WEIGHTS.md in github.com/deepseek-ai/DeepSeek-V3)
  // gives the main model's activated parameters as 36.6 B with the 0.9 B output head: all but
  // the input embedding table, which is looked up, not multiplied.
  EXPECT_NEAR(double(transformerActiveParameters(t)) - 129280.0 * 7168, 36.6e9, 0.01 * 36.6e9);
  // Each MoE block's routed experts: 256 x 3 x 7168 x 2048.
  absl::StatusOr<std::vector<LayerSpec>> layers = expandTransformer(t, 2);
  ASSERT_TRUE(layers.ok()) << layers.status();
  EXPECT_EQ((*layers)[3].expertParams, 0);
  EXPECT_EQ((*layers)[4].expertParams, int64_t(256) * 3 * 7168 * 2048);
}

TEST(TransformerCosts, DefaultImbalance) {
  MoeSpec m = moe(8, 2, 16);
  // One expert rank holds every expert: nothing to balance.
  EXPECT_EQ(defaultMoeImbalance(m, 1, 4096), 1.0);
  // E = 8, 4096 tokens x 2: 1 + sqrt(2 ln 8 x 7/8 / 8192).
  EXPECT_DOUBLE_EQ(defaultMoeImbalance(m, 8, 4096),
                   1 + std::sqrt(2 * std::log(8.0) * 0.875 / 8192));
  // Fewer tokens, more imbalance; never above E.
  EXPECT_GT(defaultMoeImbalance(m, 8, 16), defaultMoeImbalance(m, 8, 4096));
  EXPECT_LE(defaultMoeImbalance(m, 8, 1), 8.0);
  // Group-limited routing: the 2 experts of the best of 8 groups, one group a rank, arrive
  // at a rank together, twice the variance; a limit allowing every group changes nothing,
  // and groups spread over several ranks send single assignments.
  MoeSpec grouped = m;
  grouped.routerGroups = 8;
  grouped.routerGroupTopK = 1;
  EXPECT_DOUBLE_EQ(defaultMoeImbalance(grouped, 8, 4096),
                   1 + std::sqrt(2 * std::log(8.0) * 0.875 * 2 / 8192));
  grouped.routerGroupTopK = 8;
  EXPECT_DOUBLE_EQ(defaultMoeImbalance(grouped, 8, 4096), defaultMoeImbalance(m, 8, 4096));
  grouped.routerGroups = 2;
  grouped.routerGroupTopK = 1;
  EXPECT_DOUBLE_EQ(defaultMoeImbalance(grouped, 8, 4096), defaultMoeImbalance(m, 8, 4096));
  // A capacity factor bounds the busiest expert (tokens beyond it are dropped).
  m.capacityFactor = 1.25;
  EXPECT_EQ(defaultMoeImbalance(m, 8, 4096), 1.25);
  m.capacityFactor = 0.5;
  EXPECT_EQ(defaultMoeImbalance(m, 8, 4096), 1.0);
}

// What each of Megatron-Core's recompute modules drops from a block's activations, by hand on
// the small shapes above (s 4, h 8, bf16), and selective checkpointing's bytes as their sum.
// An FP8 run that keeps its linear layers' inputs cast (Transformer Engine) keeps them in one
// byte: the activations, what the recompute modules drop, a deferred weight gradient's inputs
// (and the output gradients the input-gradient pass cast for it) and the replicated
// activations all shrink by exactly those elements; nothing else moves.
TEST(TransformerCosts, Fp8KeepsLinearInputsInOneByte) {
  const TransformerSpec t = smallMoe();
  absl::StatusOr<std::vector<LayerSpec>> bf16 = expandTransformer(t, 2),
                                         same = expandTransformer(t, 2, 2),
                                         fp8 = expandTransformer(t, 2, 1);
  ASSERT_TRUE(bf16.ok() && same.ok() && fp8.ok());
  for (size_t l = 0; l < bf16->size(); ++l) {
    EXPECT_EQ((*same)[l].activationBytes, (*bf16)[l].activationBytes);
    EXPECT_EQ((*same)[l].moduleBytes, (*bf16)[l].moduleBytes);
    EXPECT_EQ((*fp8)[l].params, (*bf16)[l].params);
    EXPECT_EQ((*fp8)[l].fwdFlops, (*bf16)[l].fwdFlops);
  }
  // Per sample of 4 tokens, hidden 8, query width 8, FFN 16 (SwiGLU), 2 of 4 experts of 6, a
  // shared expert of 6. Dense block: the QKV input 32, the output projection's input 32, the
  // MLP's input 32 and activation output 64. Expert block: the same attention 64, the shared
  // activation 24, the dispatched tokens 2 x 32 and the routed activations 2 x 24 (its normed
  // input stays: the router reads it).
  const LayerSpec &dense = (*fp8)[1], &experts = (*fp8)[2];
  EXPECT_EQ((*bf16)[1].activationBytes - dense.activationBytes, 32 + 32 + 32 + 64);
  EXPECT_EQ((*bf16)[2].activationBytes - experts.activationBytes, 64 + 24 + 64 + 48);
  // Deferred weight gradients keep every weight GEMM's input and output gradient (all but the
  // router's) in one byte: inputs QKV 8, output projection 8, MLP up 8 and down 16; output
  // gradients QKV 8 + 2 x 4, output projection 8, MLP up 2 x 16 and down 8; for the experts
  // each MLP's up 8 and down 6, output gradients 2 x 6 and 8, the routed ones twice a token.
  EXPECT_EQ(*(*bf16)[1].weightGradientBytes - *dense.weightGradientBytes,
            4 * (8 + 8) + 4 * (8 + 16) + 4 * (8 + 2 * 4) + 4 * 8 + 4 * (2 * 16 + 8));
  EXPECT_EQ(*(*bf16)[2].weightGradientBytes - *experts.weightGradientBytes,
            4 * (8 + 8) + 4 * (8 + 6) + 2 * 4 * (8 + 6) + 4 * (8 + 2 * 4) + 4 * 8 +
                4 * (2 * 6 + 8) + 2 * 4 * (2 * 6 + 8));
  // Without sequence parallelism the QKV and a dense MLP's inputs are replicated.
  EXPECT_EQ(*(*bf16)[1].replicatedActivationBytes - *dense.replicatedActivationBytes, 64);
  EXPECT_EQ(*(*bf16)[2].replicatedActivationBytes - *experts.replicatedActivationBytes, 32);
  // The modules drop what is kept, at the width it is kept in.
  auto bytes = [](const LayerSpec &layer, uint32_t module) {
    return selectiveBytesOf(layer, module).value();
  };
  EXPECT_EQ(bytes(dense, runtime::kRecomputeLayerNorm), 32 + 32);
  EXPECT_EQ(bytes(experts, runtime::kRecomputeLayerNorm), 32 + 2 * 32);
  EXPECT_EQ(bytes(dense, runtime::kRecomputeMlp), 2 * 2 * 64 + 64);
  EXPECT_EQ(bytes(experts, runtime::kRecomputeMoeActivation), 48);
}

TEST(TransformerCosts, RecomputeModulesDropTheirActivations) {
  using runtime::kRecomputeCoreAttention, runtime::kRecomputeLayerNorm, runtime::kRecomputeMlp,
      runtime::kRecomputeMoeActivation, runtime::kRecomputeLatentUpProjection;
  TransformerSpec t = smallMoe();
  t.attention = AttentionKind::Eager;
  absl::StatusOr<std::vector<LayerSpec>> layers = expandTransformer(t, 2);
  ASSERT_TRUE(layers.ok()) << layers.status();
  const LayerSpec &dense = (*layers)[1], &experts = (*layers)[2];
  auto bytes = [](const LayerSpec &layer, uint32_t module) {
    return selectiveBytesOf(layer, module).value();
  };
  // core_attn: the a s^2 probabilities (eager); layernorm: the two norms' outputs, 2 s h.
  EXPECT_EQ(bytes(dense, kRecomputeCoreAttention), 2 * 2 * 4 * 4);
  EXPECT_EQ(bytes(dense, kRecomputeLayerNorm), 2 * 2 * 4 * 8);
  // mlp: the dense SwiGLU's gate, up and activation outputs, 3 s f; none with experts.
  EXPECT_EQ(bytes(dense, kRecomputeMlp), 2 * 3 * 4 * 16);
  EXPECT_EQ(bytes(experts, kRecomputeMlp), 0);
  // moe_act: the routed experts' activation outputs, top_k s f_e; none in a dense block.
  EXPECT_EQ(bytes(experts, kRecomputeMoeActivation), 2 * 2 * 4 * 6);
  EXPECT_EQ(bytes(dense, kRecomputeMoeActivation), 0);
  EXPECT_EQ(bytes(dense, kRecomputeLatentUpProjection), 0);
  // op (torchtitan's policy): of the dense block's 448 elements per sample (attention: the
  // norm's output 32, Q 32, K 16, V 16, the output projection's input 32, the scores 32; the
  // norms' inputs 64; the MLP's input 32 and gate, up and activation outputs 192), it keeps
  // the input 32 and the outputs of wq 32, wv 16, w1 64 and w2 32 (eager: no fused output).
  EXPECT_EQ(bytes(dense, runtime::kRecomputeOp), 2 * (448 - (32 + 32 + 16 + 64 + 32)));
  EXPECT_EQ(bytes(experts, runtime::kRecomputeOp), 0);
  EXPECT_EQ(selectiveBytesOf(experts, kRecomputeLayerNorm | kRecomputeMoeActivation),
            2 * 2 * 4 * 8 + 2 * 2 * 4 * 6);
  EXPECT_EQ(selectiveBytesOf(dense, runtime::kRecomputeAll & ~runtime::kRecomputeOp),
            2 * 2 * 4 * 4 + 2 * 2 * 4 * 8 + 2 * 3 * 4 * 16);
  // mla_up_proj: the per-head queries and keys (nope + rope wide) and values, s a (2 qk + v).
  TransformerSpec latent = llamaStyle(1, 8, 2, 2, 16, 4, 16);
  latent.latentAttention = LatentAttentionSpec{4, 4, 2, 2, 2};
  layers = expandTransformer(latent, 2);
  ASSERT_TRUE(layers.ok()) << layers.status();
  EXPECT_EQ(bytes((*layers)[1], kRecomputeLatentUpProjection), 2 * 4 * 2 * (2 * 4 + 2));
}
