//===- GptShape.h - the dimensions and variant of the decoder ---*- C++ -*-===//
//
// What the runtime builds from the plan's transformer section: the dimensions, the GPT-style or
// Llama-style variant (norm, MLP, positions, grouped-query attention, biases, tied head), and
// this rank's place in its tensor group. Every layer unit (runtime/model/layers/) sizes its
// parameters and activations from it: the whole unit's with tensor size 1, this tensor rank's
// part of it otherwise.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_MODEL_GPTSHAPE_H
#define CONDUIT_RUNTIME_MODEL_GPTSHAPE_H

#include "runtime/Status.h"
#include "runtime/plan/Plan.h"

#include <cstdint>
#include <optional>

namespace conduit::model {

/// The dimensions and variant of the model, validated for what this runtime implements. The
/// defaults are the GPT-style decoder.
struct GptShape {
  int64_t blocks = 0, hidden = 0, heads = 0, ffn = 0, seq = 0, vocab = 0;
  int64_t kvHeads = 0;   ///< key/value heads, a divisor of heads; 0: as heads
  int64_t headWidth = 0; ///< each head's width; 0: hidden / heads (Qwen3 and Mistral NeMo set it)
  bool qkNorm = false;   ///< RMSNorm on each head's queries and keys, before rotary (Qwen3)
  bool qkvBias = true, otherBias = true; ///< bias "all": both; "qkv": the first; "none": neither
  bool gated = false;                    ///< SwiGLU MLP (W1 is [h × 2f]: gate, then up), else GELU
  bool rmsNorm = false;                  ///< RMSNorm (gain only), else LayerNorm (gain and bias)
  bool rotary = false;      ///< rotary positions on q and k, else a learned position table
  bool tied = false;        ///< the LM head has the token table's layout [vocab × h]
  double ropeTheta = 10000; ///< the rotary base
  /// The rotary context extension (Hugging Face's rope_scaling); type Default: none.
  runtime::RopeScaling ropeScaling;
  double normEps = 1e-5; ///< the norms' epsilon
  /// Tensor parallelism: the group's size T, this rank's place in it, and whether the
  /// activations between layers are split along the sequence.
  int64_t tensorSize = 1, tensorRank = 0;
  bool sequenceParallel = false;
  /// A mixture of experts (layers/Moe.h) in the blocks after the first `denseBlocks`: the
  /// experts, how many each token takes, their width and the shared experts' (0: none), the
  /// router (sigmoid, else softmax), renormalised top-k weights, the auxiliary loss's and the
  /// router z-loss's coefficients and the capacity factor (0: dropless). experts 0: every
  /// block is dense.
  int64_t experts = 0, topK = 0, expertFfn = 0, sharedFfn = 0, denseBlocks = 0;
  /// The shared experts' output multiplied per token by sigmoid(x · wg) (Qwen2-MoE's
  /// shared_expert_gate; only with shared experts).
  bool sharedGate = false;
  /// Expert parallelism: the members of an expert group, each computing and holding
  /// experts/expertSize of the experts (for the group's tokens), and this rank's place in it:
  /// it holds experts [expertRank · localExperts(), (expertRank + 1) · localExperts()).
  int64_t expertSize = 1, expertRank = 0;
  bool sigmoidRouter = false, normalizeTopK = false;
  double auxLossCoefficient = 0, zLossCoefficient = 0, capacityFactor = 0;
  /// With a capacity, an expert keeps a sample's assignments of the highest routing weight
  /// (else the first in token order).
  bool dropByWeight = false;
  /// The routed experts' weights times this after the router chose and normalised them
  /// (DeepSeek-V3's routed_scaling_factor).
  double routedScaling = 1;
  /// The sigmoid router's bias moved by the load (runtime::Transformer::biasUpdateRate); 0:
  /// it stays. Above 0 the router's backward adds each expert's count of choices to the bias's
  /// gradient.
  double biasUpdateRate = 0;
  /// Group-limited routing: each token's experts from the routerGroupTopK best of
  /// routerGroups consecutive groups (1 and 1: unlimited).
  int64_t routerGroups = 1, routerGroupTopK = 1;
  /// Multi-head latent attention (layers/LatentAttention.h; DeepSeek-V2/V3): the query
  /// latent's rank (0: queries projected directly), the key/value latent's (0: no latent
  /// attention), and each head's query/key width without and with rotary positions and its
  /// value width.
  int64_t qLora = 0, kvLora = 0, qkNope = 0, qkRope = 0, vHead = 0;
  /// Multi-token prediction (layers/Mtp.h; DeepSeek-V3): the modules after the blocks, each a
  /// layer of the chain, and their losses' weight λ (λ / mtpLayers times their sum).
  int64_t mtpLayers = 0;
  double mtpLossCoefficient = 0;

  bool moe() const { return experts > 0; }
  runtime::RotaryPositions rotaryPositions() const { return {ropeTheta, ropeScaling, seq}; }
  bool latent() const { return kvLora > 0; }
  /// Latent attention's query/key width per head.
  int64_t qkHead() const { return qkNope + qkRope; }
  /// Whether the layer at global index `layer` of the chain is a block with experts, or a
  /// multi-token prediction module whose block has them (the embedding is layer 0, block b is
  /// layer b + 1, module k layer blocks + 1 + k).
  bool layerHasExperts(int64_t layer) const {
    return moe() && layer >= 1 && layer <= blocks + mtpLayers && layer - 1 >= denseBlocks;
  }
  /// The depth of the multi-token prediction module at global index `layer` (0 for the
  /// first), or -1 for another layer.
  int64_t mtpDepth(int64_t layer) const {
    const int64_t k = layer - 1 - blocks;
    return k >= 0 && k < mtpLayers ? k : -1;
  }

  bool tensorParallel() const { return tensorSize > 1; }
  bool expertParallel() const { return moe() && expertSize > 1; }
  /// Whether the routed experts are a segment of their own (runtime::Plan::expertsApart).
  bool expertsApart() const { return moe() && (expertParallel() || tensorParallel()); }
  /// Whether a rank holds only a part of some layers (tensor or expert parallelism).
  bool split() const { return tensorParallel() || expertParallel(); }
  int64_t localExperts() const { return experts / expertSize; }
  int64_t firstLocalExpert() const { return expertRank * localExperts(); }
  /// The unsplit model's shape (tensor and expert size 1).
  GptShape whole() const {
    GptShape w = *this;
    w.tensorSize = 1;
    w.tensorRank = 0;
    w.sequenceParallel = false;
    w.expertSize = 1;
    w.expertRank = 0;
    return w;
  }
  /// This tensor rank's part: attention heads, key/value heads, FFN width, vocabulary rows,
  /// and the tokens of a sample between layers (all of them without sequence parallelism).
  int64_t localHeads() const { return heads / tensorSize; }
  int64_t localKvHeads() const { return numKvHeads() / tensorSize; }
  int64_t localFfn() const { return ffn / tensorSize; }
  int64_t localVocab() const { return vocab / tensorSize; }
  int64_t localSeq() const { return sequenceParallel ? seq / tensorSize : seq; }
  int64_t localQkvWidth() const { return (localHeads() + 2 * localKvHeads()) * headDim(); }
  int64_t localUpWidth() const { return gated ? 2 * localFfn() : localFfn(); }

  int64_t headDim() const { return headWidth > 0 ? headWidth : hidden / heads; }
  int64_t numKvHeads() const { return kvHeads > 0 ? kvHeads : heads; }
  /// The width of q per token, which is also the attention output's (the output projection's
  /// input): hidden unless the heads have a width of their own.
  int64_t qWidth() const { return heads * headDim(); }
  /// The width of k (and of v) per token, and of the fused [q | k | v] projection.
  int64_t kvWidth() const { return numKvHeads() * headDim(); }
  int64_t qkvWidth() const { return qWidth() + 2 * kvWidth(); }
  /// The width of the MLP's first projection: f, or gate and up (2f) for SwiGLU.
  int64_t upWidth() const { return gated ? 2 * ffn : ffn; }
  /// Parameters of one norm: gain, and bias for LayerNorm.
  int64_t normParams() const { return rmsNorm ? hidden : 2 * hidden; }
  /// Elements the forward of `samples` samples through `blocks` blocks (the multi-token
  /// prediction modules counted among them; and the head, when `head`, with what the modules
  /// keep beyond a block's) keeps for its backward, layer inputs included; nullopt when the count
  /// does not fit in an int64. Within the limits of Limits.h one sample's count always fits.
  std::optional<int64_t> activationElements(int64_t samples, int64_t blocks, bool head) const;
  /// The shape of the plan's transformer, split over the plan's tensor groups (tensorRank 0;
  /// a backend sets its own); an error names what this runtime cannot build.
  static absl::StatusOr<GptShape> fromPlan(const runtime::Plan &plan);
};

} // namespace conduit::model

#endif // CONDUIT_RUNTIME_MODEL_GPTSHAPE_H
