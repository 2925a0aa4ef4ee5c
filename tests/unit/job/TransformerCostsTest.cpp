//===- TransformerCostsTest.cpp - analytic transformer costs --------------===//
//
// Checks the layer formulas against published model sizes and against the 6N + attention rule
// for training FLOPs per token.
//
//===----------------------------------------------------------------------===//

#include "job/TransformerCosts.h"
#include "tests/unit/job/GptShape.h"

#include <gtest/gtest.h>

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
  EXPECT_EQ(block.attentionCoreBytes, 2 * 16 * 512 * 512);
  EXPECT_FALSE((*layers)[0].attentionCoreBytes.has_value());
  EXPECT_FALSE(layers->back().attentionCoreBytes.has_value());
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
  EXPECT_EQ(block.attentionCoreBytes, 0);
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
