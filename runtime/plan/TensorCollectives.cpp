//===- TensorCollectives.cpp - what a tensor group communicates ----------===//

#include "runtime/plan/TensorCollectives.h"

#include "runtime/plan/Limits.h"

#include <limits>

namespace conduit::runtime {

namespace {

/// a x b x ..., or the largest int64 when the product does not fit: the plan reader meets
/// such a count in a hostile plan only, and no instruction's bytes can equal it.
template <typename... Factors> int64_t product(Factors... factors) {
  return limits::checkedMul(factors...).value_or(std::numeric_limits<int64_t>::max());
}

} // namespace

void appendLayerCollectives(const Config &config, const std::vector<Layer> &layers, int32_t layer,
                            Op pass, int64_t samples, std::vector<TensorCollective> &out) {
  if (config.tensor <= 1)
    return;
  const Layer &l = layers[layer];
  const bool sp = config.sequenceParallel;
  auto add = [&](Op op, int64_t bytes) { out.push_back({op, layer, bytes}); };
  // The norms' gradients with sequence parallelism: a gain and a bias of one token's hidden
  // activations' bytes per norm.
  auto normBytes = [&](int64_t norms, int64_t sampleBytes) {
    return config.tokensPerSample > 0 ? norms * 2 * (sampleBytes / config.tokensPerSample) : 0;
  };
  constexpr Op kReduce = Op::TensorAllReduce, kGather = Op::TensorAllGather,
               kScatter = Op::TensorReduceScatter;
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
    const int64_t x = product(samples, l.outputBytes);
    if (pass == Op::Forward || pass == Op::BackwardInput) {
      for (int sublayer = 0; sublayer < 2; ++sublayer) {
        if (sp) {
          add(kGather, x);
          add(kScatter, x);
        } else {
          add(kReduce, x);
        }
      }
    } else if (pass == Op::BackwardWeight && sp) {
      add(kGather, x);
      add(kGather, x);
      add(kReduce, normBytes(2, l.outputBytes));
    }
    return;
  }
  }
}

std::vector<TensorCollective> tensorCollectives(const Config &config,
                                                const std::vector<Layer> &layers, int32_t first,
                                                int32_t end, Op compute, int64_t samples) {
  std::vector<TensorCollective> out;
  if (config.tensor <= 1)
    return out;
  if (compute == Op::Forward) {
    for (int32_t l = first; l < end; ++l)
      appendLayerCollectives(config, layers, l, Op::Forward, samples, out);
    return out;
  }
  const bool recomputed = config.checkpointing == Checkpointing::Full;
  for (int32_t l = end - 1; l >= first; --l) {
    if (compute != Op::BackwardWeight) {
      if (recomputed)
        appendLayerCollectives(config, layers, l, Op::Forward, samples, out);
      appendLayerCollectives(config, layers, l, Op::BackwardInput, samples, out);
    }
    if (compute != Op::BackwardInput)
      appendLayerCollectives(config, layers, l, Op::BackwardWeight, samples, out);
  }
  return out;
}

} // namespace conduit::runtime
