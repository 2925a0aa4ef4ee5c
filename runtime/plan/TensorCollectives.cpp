//===- TensorCollectives.cpp - what a compute communicates inside itself --===//

#include "runtime/plan/TensorCollectives.h"

#include "runtime/plan/Limits.h"

#include <cmath>
#include <limits>

namespace conduit::runtime {

namespace {

/// a x b x ..., or the largest int64 when the product does not fit: the plan reader meets
/// such a count in a hostile plan only, and no instruction's bytes can equal it.
template <typename... Factors> int64_t product(Factors... factors) {
  return limits::checkedMul(factors...).value_or(std::numeric_limits<int64_t>::max());
}

int64_t ceilDiv(int64_t a, int64_t b) { return b > 0 ? a / b + (a % b != 0) : a; }

/// Whether any all-to-all is issued at all: a mixture of experts over more than one rank.
bool expertParallel(const Config &config, const Transformer *transformer) {
  return transformer && transformer->isMoe() && config.expert > 1;
}

} // namespace

bool layerHasExperts(const Transformer *transformer, const std::vector<Layer> &layers,
                     int32_t layer) {
  return transformer && layer > 0 && layer < static_cast<int32_t>(layers.size()) &&
         layers[layer].kind == LayerKind::Block && transformer->blockHasExperts(layer - 1);
}

int64_t expertAllToAllBytes(const Config &config, const Transformer &transformer, int64_t samples,
                            bool toExperts) {
  const int64_t tokens =
      ceilDiv(product(samples, config.tokensPerSample), std::max<int32_t>(config.tensor, 1));
  // The routed assignments of the busiest rank, bounded by the stated imbalance (>= 1). A
  // double holds the product exactly while it stays below 2^53, far above any real count.
  const double routed =
      std::ceil(static_cast<double>(tokens) * static_cast<double>(transformer.topK) *
                std::max(1.0, transformer.imbalance));
  if (!(routed < 9.0e15))
    return std::numeric_limits<int64_t>::max();
  const int64_t h = transformer.hiddenSize;
  // FP8 to the experts: a byte an element and an fp32 scale per 128 (DeepSeek-V3's 1 x 128
  // activation tiles).
  if (toExperts && transformer.fp8Dispatch)
    return product(static_cast<int64_t>(routed), h + 4 * ceilDiv(h, 128));
  return product(static_cast<int64_t>(routed), h, config.elementBytes());
}

std::vector<int64_t> tensorGroupRanks(const Config &config, int64_t pipelineRank, int64_t replica) {
  std::vector<int64_t> ranks;
  for (int64_t t = 0; t < std::max<int32_t>(config.tensor, 1); ++t)
    ranks.push_back(config.globalRank(pipelineRank, replica, t));
  return ranks;
}

std::vector<int64_t> expertGroupRanks(const Config &config, int64_t pipelineRank, int64_t replica,
                                      int64_t tensorRank) {
  const int64_t t = std::max<int32_t>(config.tensor, 1), e = std::max<int32_t>(config.expert, 1);
  const int64_t first = (replica * t + tensorRank) / e * e;
  std::vector<int64_t> ranks;
  for (int64_t i = first; i < first + e; ++i)
    ranks.push_back(config.globalRank(pipelineRank, i / t, i % t));
  return ranks;
}

std::vector<int64_t> expertDataGroupRanks(const Config &config, int64_t pipelineRank,
                                          int64_t replica, int64_t tensorRank) {
  const int64_t t = std::max<int32_t>(config.tensor, 1), e = std::max<int32_t>(config.expert, 1);
  std::vector<int64_t> ranks;
  for (int64_t i = (replica * t + tensorRank) % e; i < int64_t(config.data) * t; i += e)
    ranks.push_back(config.globalRank(pipelineRank, i / t, i % t));
  return ranks;
}

void appendLayerCollectives(const Config &config, const std::vector<Layer> &layers, int32_t layer,
                            Op pass, int64_t samples, std::vector<TensorCollective> &out,
                            const Transformer *transformer) {
  const bool experts =
      expertParallel(config, transformer) && layerHasExperts(transformer, layers, layer);
  if (config.tensor <= 1 && !experts)
    return;
  const Layer &l = layers[layer];
  const bool sp = config.sequenceParallel;
  auto add = [&](Op op, int64_t bytes) { out.push_back({op, layer, bytes}); };
  constexpr Op kReduce = Op::TensorAllReduce, kGather = Op::TensorAllGather,
               kScatter = Op::TensorReduceScatter;
  // One token's bytes of activations whose sample takes `sampleBytes`.
  auto tokenBytes = [&](int64_t sampleBytes) {
    return config.tokensPerSample > 0 ? sampleBytes / config.tokensPerSample : 0;
  };
  // The norms' gradients with sequence parallelism: a gain and a bias of one token's hidden
  // activations' bytes per norm.
  auto normBytes = [&](int64_t norms, int64_t sampleBytes) {
    return norms * 2 * tokenBytes(sampleBytes);
  };
  // The q/k norms' gains (two of a head's width), at the activations' element bytes: each
  // tensor rank normalises its own heads, so their gradients are summed over the group.
  const bool qkNorms = config.tensor > 1 && transformer && transformer->qkNorm;
  auto qkNormBytes = [&](int64_t sampleBytes) {
    const int64_t h = transformer->hiddenSize,
                  d = transformer->headDim > 0 ? transformer->headDim : h / transformer->numHeads;
    return h > 0 ? 2 * d * (tokenBytes(sampleBytes) / h) : 0;
  };
  // Latent attention over a tensor group. Its replicated parameters (the down projections and
  // the latents' gains), at the activations' element bytes: each tensor rank's gradients come
  // from its own heads, so they are summed over the group. With sequence parallelism and a query
  // latent each rank computes the latents of its rows, and the group gathers them (`l`: the
  // normalised latents and the rotary key of every token) where the attention gathers its
  // input, and reduce-scatters their gradients where the attention reduce-scatters its input's;
  // the weight pass gathers the normalised latents again (`u`). The recomputed heads
  // (`mla_up_proj`) with sequence parallelism gather again what the forward gathered.
  const bool latent = config.tensor > 1 && transformer && transformer->usesLatentAttention();
  const bool latentShards = latent && sp && transformer->qLoraRank > 0;
  auto latentBytes = [&](int64_t sampleBytes) {
    const Transformer &t = *transformer;
    const int64_t h = t.hiddenSize, ql = t.qLoraRank, kvl = t.kvLoraRank;
    const int64_t elements = (ql > 0 ? h * ql + ql : 0) + h * (kvl + t.qkRopeHeadDim) + kvl;
    return h > 0 ? product(elements, tokenBytes(sampleBytes) / h) : 0;
  };
  // The rows of `width` elements a token, of the micro-batch's whole sequence.
  auto latentRowBytes = [&](int64_t sampleBytes, int64_t width) {
    const int64_t h = transformer->hiddenSize;
    return h > 0 ? product(samples, config.tokensPerSample, width, tokenBytes(sampleBytes) / h) : 0;
  };
  const bool latentRegathers = latent && sp && config.checkpointing == Checkpointing::Selective &&
                               (config.recomputeModules & kRecomputeLatentUpProjection) != 0;
  // What a block's attention adds to its weight pass after its gathered input: the q/k norms'
  // gains, or latent attention's replicated parameters.
  auto attentionSums = [&](int64_t sampleBytes) {
    if (qkNorms)
      add(kReduce, qkNormBytes(sampleBytes));
    if (latent)
      add(kReduce, latentBytes(sampleBytes));
  };
  switch (l.kind) {
  case LayerKind::Embedding: {
    const int64_t x = product(samples, l.outputBytes);
    if (pass == Op::Forward)
      add(sp ? kScatter : kReduce, x);
    else if (pass == Op::BackwardInput && sp)
      add(kGather, x);
    return;
  }
  case LayerKind::Head: {
    const int64_t input = layer > 0 ? layers[layer - 1].outputBytes : l.checkpointBytes,
                  x = product(samples, input);
    const int64_t ce = product(samples, config.tokensPerSample, int64_t(sizeof(float)));
    if (pass == Op::Forward) {
      if (sp)
        add(kGather, x);
      for (int i = 0; i < 3; ++i)
        add(kReduce, ce);
    } else if (pass == Op::BackwardInput) {
      add(sp ? kScatter : kReduce, x);
    } else if (pass == Op::BackwardWeight && sp) {
      add(kGather, x);
      add(kReduce, normBytes(1, input));
    }
    return;
  }
  case LayerKind::Block:
  case LayerKind::Custom: {
    // A multi-token prediction module (a block after the model's num_layers): its own
    // embedding's lookup and head's cross-entropy around its block, whose activations are one
    // hidden state a token (the module passes on two, l.outputBytes).
    const bool module = transformer && transformer->mtpLayers > 0 &&
                        layer > transformer->numLayers &&
                        layer <= transformer->numLayers + transformer->mtpLayers;
    const int64_t out = module ? layers[transformer->numLayers].outputBytes : l.outputBytes;
    const int64_t x = product(samples, out);
    const bool tensor = config.tensor > 1;
    auto blockCollectives = [&] {
      // A sublayer's pair (attention or dense MLP): one all-reduce, or with sequence
      // parallelism the gather of its input and the reduce-scatter of its output.
      auto sublayer = [&] {
        if (!tensor)
          return;
        if (sp) {
          add(kGather, x);
          add(kScatter, x);
        } else {
          add(kReduce, x);
        }
      };
      // The attention's: a sublayer's, but latent attention on each rank's rows gathers its
      // latents in the forward and reduce-scatters their gradients in the input pass, whose
      // recomputed heads gather first what the forward gathered.
      const Transformer *t = transformer;
      const int64_t latents =
          latentShards ? latentRowBytes(out, t->qLoraRank + t->kvLoraRank + t->qkRopeHeadDim) : 0;
      auto attention = [&](Op attentionPass) {
        if (attentionPass == Op::BackwardInput && latentRegathers)
          add(kGather, latentShards ? latents : x);
        if (!latentShards) {
          sublayer();
        } else if (attentionPass == Op::Forward) {
          add(kGather, latents);
          add(kScatter, x);
        } else {
          add(kGather, x);
          add(kScatter, latents);
        }
      };
      // What the attention's weight pass gathers again with sequence parallelism: its input, or
      // latent attention's normalised latents.
      auto attentionInput = [&] {
        add(kGather, latentShards ? latentRowBytes(out, t->qLoraRank + t->kvLoraRank) : x);
      };
      if (transformer && layerHasExperts(transformer, layers, layer)) {
        // Routed experts over the expert group; shared experts split as the dense MLP. With
        // T > 1 each tensor rank routes the tokens of its T-th of each sample: the router's
        // gradient (with a bias moved by the load, and the choices' counts after it; with a
        // shared experts' gate, its gradient from the same tokens after them), and with
        // the auxiliary loss each sample's routing statistics (a count and a summed score per
        // expert), are summed over the group; with a capacity each member's counts of its
        // choices per sample and expert (or, dropping by weight, each assignment's expert and
        // weight) are gathered first.
        const bool shared = transformer->sharedExperts > 0;
        const int64_t routerBytes =
            transformer->numExperts *
                (tokenBytes(out) + (transformer->balancesBias() ? config.elementBytes() : 0)) +
            (transformer->sharedExpertGate ? tokenBytes(out) : 0);
        const bool auxStatistics = tensor && transformer->auxLossCoefficient > 0;
        const bool capacityCounts = tensor && transformer->capacityFactor > 0;
        // The first of each pair carries the tokens (forward) or their output gradients
        // (backward) to the experts.
        auto routed = [&](Op first, Op second) {
          if (experts) {
            add(first, expertAllToAllBytes(config, *transformer, samples, /*toExperts=*/true));
            add(second, expertAllToAllBytes(config, *transformer, samples, /*toExperts=*/false));
          }
          if (tensor && !sp)
            add(kGather, x); // each tensor rank routed its T-th of the tokens
        };
        if (pass == Op::Forward) {
          attention(pass);
          if (shared)
            sublayer();
          if (capacityCounts)
            // Per sample, each member's counts of its choices per expert; or, dropping by
            // weight, the expert and the weight of each of its assignments (the whole sample's
            // gathered, k per token).
            add(kGather, transformer->dropByWeight
                             ? product(samples, 2 * transformer->seqLength * transformer->topK,
                                       int64_t(sizeof(float)))
                             : product(samples, config.tensor * transformer->numExperts,
                                       int64_t(sizeof(float))));
          if (auxStatistics)
            add(kReduce, product(samples, 2 * transformer->numExperts, int64_t(sizeof(float))));
          routed(Op::ExpertDispatch, Op::ExpertCombine);
        } else if (pass == Op::BackwardInput) {
          if (shared)
            sublayer();
          routed(Op::ExpertCombine, Op::ExpertDispatch);
          attention(pass);
        } else if (pass == Op::BackwardWeight && tensor) {
          if (sp && shared)
            add(kGather, x);
          add(kReduce, routerBytes);
          if (sp)
            attentionInput();
          attentionSums(out);
          if (sp)
            add(kReduce, normBytes(2, out));
        }
        return;
      }
      if (!tensor)
        return;
      // A recomputed MLP (selective checkpointing's `mlp`) runs its first projection again
      // before its input gradient, on the whole sequence: sequence parallelism gathers it again.
      const bool regathers = sp && config.checkpointing == Checkpointing::Selective &&
                             (config.recomputeModules & kRecomputeMlp) != 0;
      if (pass == Op::BackwardInput && regathers)
        add(kGather, x);
      if (pass == Op::Forward) {
        attention(pass);
        sublayer(); // MLP
      } else if (pass == Op::BackwardInput) {
        sublayer(); // MLP
        attention(pass);
      } else if (pass == Op::BackwardWeight) {
        if (sp) {
          add(kGather, x); // the MLP's input
          attentionInput();
        }
        attentionSums(out);
        if (sp)
          add(kReduce, normBytes(2, out));
      }
      return;
    };
    // Around the module's block: the lookup summed over the group (the embedding's forward),
    // the head's statistics and its input gradient, the table's gradient gathered over the
    // sequence, the normed rows gathered again for the head's matrix, and with sequence
    // parallelism its norms' and M's gradients (three norms and 2h x h), summed.
    const int64_t ce = product(samples, config.tokensPerSample, int64_t(sizeof(float)));
    if (module && tensor && pass == Op::Forward)
      add(sp ? kScatter : kReduce, x);
    if (module && tensor && pass == Op::BackwardInput)
      add(sp ? kScatter : kReduce, x);
    if (module && tensor && sp && pass == Op::BackwardWeight)
      add(kGather, x);
    blockCollectives();
    if (module && tensor && pass == Op::Forward) {
      if (sp)
        add(kGather, x);
      for (int i = 0; i < 3; ++i)
        add(kReduce, ce);
    }
    if (module && tensor && sp && pass == Op::BackwardInput)
      add(kGather, x);
    if (module && tensor && sp && pass == Op::BackwardWeight) {
      const int64_t h = transformer->hiddenSize;
      add(kReduce, normBytes(3, out) + product(2 * h, h, config.elementBytes()));
    }
    return;
  }
  }
}

std::vector<TensorCollective> tensorCollectives(const Config &config,
                                                const std::vector<Layer> &layers, int32_t first,
                                                int32_t end, Op compute, int64_t samples,
                                                const Transformer *transformer) {
  std::vector<TensorCollective> out;
  if (config.tensor <= 1 && !expertParallel(config, transformer))
    return out;
  if (compute == Op::Forward) {
    for (int32_t l = first; l < end; ++l)
      appendLayerCollectives(config, layers, l, Op::Forward, samples, out, transformer);
    return out;
  }
  for (int32_t l = end - 1; l >= first; --l) {
    if (compute != Op::BackwardWeight) {
      if (recomputesWhole(config.checkpointing, layers[l].kind))
        appendLayerCollectives(config, layers, l, Op::Forward, samples, out, transformer);
      appendLayerCollectives(config, layers, l, Op::BackwardInput, samples, out, transformer);
    }
    if (compute != Op::BackwardInput)
      appendLayerCollectives(config, layers, l, Op::BackwardWeight, samples, out, transformer);
  }
  return out;
}

const std::vector<TensorCollective> &TensorCollectiveCache::of(int32_t first, int32_t end,
                                                               Op compute, int64_t samples) {
  auto [it, added] = known.try_emplace({first, end, compute, samples});
  if (added)
    it->second = tensorCollectives(*config, *layers, first, end, compute, samples, transformer);
  return it->second;
}

} // namespace conduit::runtime
