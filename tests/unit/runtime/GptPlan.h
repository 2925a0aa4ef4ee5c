//===- GptPlan.h - a plan that holds just a GPT's layer chain ---*- C++ -*-===//
//
// For the model tests: the transformer section and the layers of a plan for a GptShape, with
// the parameter counts the model computes, so that LayerChain::build accepts it.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_TESTS_UNIT_GPTPLAN_H
#define CONDUIT_TESTS_UNIT_GPTPLAN_H

#include "runtime/model/Gpt.h"

#include <string>

namespace conduit::model {

/// A GPT-style model small enough for gradient checks in double: 2 blocks of width 8.
inline GptShape tinyShape(bool qkvBias = true, bool otherBias = true) {
  GptShape s;
  s.blocks = 2;
  s.hidden = 8;
  s.heads = 2;
  s.ffn = 12;
  s.seq = 5;
  s.vocab = 11;
  s.qkvBias = qkvBias;
  s.otherBias = otherBias;
  return s;
}

/// `s` with DeepSeek's multi-head latent attention: a query latent of rank 6, a key/value
/// latent of rank 5, each head 4 + 2 wide for queries and keys and 3 for values.
inline GptShape withLatentAttention(GptShape s) {
  s.kvHeads = 0;
  s.qLora = 6;
  s.kvLora = 5;
  s.qkNope = 4;
  s.qkRope = 2;
  s.vHead = 3;
  return s;
}

inline runtime::Plan planFor(const GptShape &s) {
  runtime::Plan plan;
  runtime::Transformer t;
  t.numLayers = s.blocks;
  t.hiddenSize = s.hidden;
  t.numHeads = s.heads;
  t.numKvHeads = s.numKvHeads();
  t.headDim = s.headWidth;
  t.qkNorm = s.qkNorm;
  t.ffnHiddenSize = s.ffn;
  t.seqLength = s.seq;
  t.vocabSize = s.vocab;
  t.bias = s.qkvBias ? (s.otherBias ? 0 : 1) : 2;
  t.mlp = s.gated ? 1 : 0;
  t.norm = s.rmsNorm ? 1 : 0;
  t.position = s.rotary ? 1 : 0;
  t.tieEmbeddings = s.tied;
  t.ropeTheta = s.ropeTheta;
  t.ropeScaling = s.ropeScaling;
  t.routedScalingFactor = s.routedScaling;
  t.normEps = s.normEps;
  t.numExperts = s.experts;
  t.topK = s.topK;
  t.expertFfnHiddenSize = s.expertFfn;
  t.router = s.sigmoidRouter ? 1 : 0;
  t.normalizeTopK = s.normalizeTopK;
  t.auxLossCoefficient = s.auxLossCoefficient;
  t.zLossCoefficient = s.zLossCoefficient;
  t.sharedExperts = s.sharedFfn > 0 ? 1 : 0;
  t.sharedFfnHiddenSize = s.sharedFfn;
  t.sharedExpertGate = s.sharedGate;
  t.denseLayers = s.denseBlocks;
  t.capacityFactor = s.capacityFactor;
  t.dropByWeight = s.dropByWeight;
  t.qLoraRank = s.qLora;
  t.kvLoraRank = s.kvLora;
  t.qkNopeHeadDim = s.qkNope;
  t.qkRopeHeadDim = s.qkRope;
  t.vHeadDim = s.vHead;
  t.mtpLayers = s.mtpLayers;
  t.mtpLossCoefficient = s.mtpLossCoefficient;
  plan.transformer = t;
  auto add = [&](const std::string &name, runtime::LayerKind kind) {
    runtime::Layer layer;
    layer.name = name;
    layer.kind = kind;
    layer.params =
        makeLayer<double>(kind, s, Checkpointing::None, static_cast<int64_t>(plan.layers.size()))
            ->numParams();
    plan.layers.push_back(layer);
  };
  add("embedding", runtime::LayerKind::Embedding);
  for (int64_t b = 0; b < s.blocks; ++b)
    add("block." + std::to_string(b), runtime::LayerKind::Block);
  for (int64_t k = 0; k < s.mtpLayers; ++k)
    add("mtp." + std::to_string(k), runtime::LayerKind::Block);
  add("head", runtime::LayerKind::Head);
  return plan;
}

} // namespace conduit::model

#endif // CONDUIT_TESTS_UNIT_GPTPLAN_H
