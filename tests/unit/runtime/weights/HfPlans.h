//===- HfPlans.h - small plans of Hugging Face's architectures ---*- C++ -*-===//
//
// For the tests of the Hugging Face weights: plans whose layers have the parameter counts of
// the layout HfWeights.h documents, computed here, not by the model, so that the two are
// checked against each other.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_TESTS_UNIT_RUNTIME_WEIGHTS_HFPLANS_H
#define CONDUIT_TESTS_UNIT_RUNTIME_WEIGHTS_HFPLANS_H

#include "runtime/plan/Plan.h"

#include <string>

namespace conduit::runtime {

/// A plan of the transformer `t` with one layer per embedding, block and head, each with the
/// parameter count of Conduit's layout.
inline Plan planOf(const Transformer &t) {
  const int64_t h = t.hiddenSize, hd = t.headDim > 0 ? t.headDim : h / t.numHeads,
                q = t.numHeads * hd, kvd = t.numKvHeads * hd, f = t.ffnHiddenSize, v = t.vocabSize;
  const int64_t norms = t.norm == 0 ? 2 : 1, qkvBias = t.bias != 2, other = t.bias == 0;
  const int64_t up = t.mlp == 1 ? 2 * f : f;
  // The attention's matrices and its biases but the output projection's, its q/k norms; with
  // latent attention the down projections, the latents' gains, the up projections and Wo.
  const int64_t heads = t.numHeads, qk = heads * (t.qkNopeHeadDim + t.qkRopeHeadDim),
                rq = t.qLoraRank, rkv = t.kvLoraRank;
  const int64_t attention =
      t.usesLatentAttention()
          ? (rq > 0 ? h * rq + rq + rq * qk : h * qk) + h * (rkv + t.qkRopeHeadDim) + rkv +
                rkv * heads * (t.qkNopeHeadDim + t.vHeadDim) + heads * t.vHeadDim * h
          : h * (q + 2 * kvd) + qkvBias * (q + 2 * kvd) + q * h + (t.qkNorm ? 2 * hd : 0);
  Plan plan;
  plan.transformer = t;
  plan.layers.push_back(
      {"embedding", LayerKind::Embedding, v * h + (t.position == 0 ? t.seqLength * h : 0)});
  for (int64_t b = 0; b < t.numLayers; ++b)
    plan.layers.push_back(
        {"block." + std::to_string(b), LayerKind::Block,
         2 * norms * h + attention + other * h + h * up + other * up + f * h + other * h});
  plan.layers.push_back({"head", LayerKind::Head, norms * h + v * h});
  return plan;
}

inline Transformer gpt2() {
  Transformer t;
  t.numLayers = 2;
  t.hiddenSize = 8;
  t.numHeads = 2;
  t.numKvHeads = 2;
  t.ffnHiddenSize = 12;
  t.seqLength = 5;
  t.vocabSize = 11;
  return t;
}

inline Transformer llama() {
  Transformer t = gpt2();
  t.numKvHeads = 1; // kvd = 4
  t.mlp = 1;
  t.norm = 1;
  t.position = 1;
  t.bias = 2;
  t.tieEmbeddings = true;
  t.ropeTheta = 500000;
  t.normEps = 1e-6;
  return t;
}

/// DeepSeek-V3's attention on the Llama model: a query latent of rank 5, a key/value latent of
/// rank 3, heads 4 + 2 wide for queries and keys and 3 for values; a key and a value per head.
inline Transformer deepSeek() {
  Transformer t = llama();
  t.numKvHeads = t.numHeads;
  t.tieEmbeddings = false;
  t.qLoraRank = 5;
  t.kvLoraRank = 3;
  t.qkNopeHeadDim = 4;
  t.qkRopeHeadDim = 2;
  t.vHeadDim = 3;
  return t;
}

} // namespace conduit::runtime

#endif // CONDUIT_TESTS_UNIT_RUNTIME_WEIGHTS_HFPLANS_H
