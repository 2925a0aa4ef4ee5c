//===- HfFamily.h - which Hugging Face family a model is written as --*- C++ -*-===//
//
// The plan's transformer decides the names (HfWeights.cpp) and the config (HfConfig.cpp) of
// the Hugging Face family it is written as; both read these rules.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_WEIGHTS_HFFAMILY_H
#define CONDUIT_RUNTIME_WEIGHTS_HFFAMILY_H

#include "runtime/plan/Plan.h"

namespace conduit::runtime {

/// Llama's names (and its family's: Qwen2, Qwen3, Mixtral, Qwen2-MoE, Qwen3-MoE, DeepSeek-V3)
/// for a model with any of Llama's parts, or with what GPT-2 does not have (heads of their own
/// width, q/k norms, latent attention, experts).
inline bool isLlama(const Transformer &t) {
  return t.norm == 1 || t.mlp == 1 || t.position == 1 || t.headDim != 0 || t.qkNorm ||
         t.usesLatentAttention() || t.isMoe();
}
/// DeepSeek-V3's names and config: latent attention.
inline bool isDeepSeek(const Transformer &t) { return t.usesLatentAttention(); }
/// Qwen3's attention: q/k norms.
inline bool isQwen3(const Transformer &t) { return t.qkNorm; }
/// A mixture of experts takes the Qwen MoE names for its router and routed experts where its
/// attention is DeepSeek-V3's, Qwen2's (biases on q, k and v only) or Qwen3's, or it has shared
/// experts, else Mixtral's.
inline bool isQwenMoe(const Transformer &t) {
  return t.isMoe() && (isDeepSeek(t) || t.bias == 1 || isQwen3(t) || t.sharedExperts > 0);
}
/// Each head's width.
inline int64_t headWidth(const Transformer &t) {
  return t.headDim > 0 ? t.headDim : t.hiddenSize / t.numHeads;
}

} // namespace conduit::runtime

#endif // CONDUIT_RUNTIME_WEIGHTS_HFFAMILY_H
