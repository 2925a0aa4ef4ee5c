//===- TensorShare.cpp - a layer's figures on one tensor rank -------------===//

#include "analysis/TensorShare.h"

#include "job/TransformerCosts.h"

#include <algorithm>

using namespace conduit;

TensorShare conduit::tensorShare(const SplitLayer &layer, int64_t tensor, bool sequenceParallel,
                                 int64_t expert) {
  const int64_t t = tensor;
  const bool sequence = sequenceParallel;
  // The replicated part whole, the rest divided (rounded up: a rank holds at least its share).
  auto split = [t](int64_t whole, int64_t replicated) {
    replicated = std::min(replicated, whole);
    return replicated + (whole - replicated + t - 1) / t;
  };
  const int64_t activation = layer.activationBytes;
  const int64_t replicatedActivation = sequence ? 0 : layer.replicatedActivationBytes;
  TensorShare share;
  const int64_t experts = std::clamp<int64_t>(layer.expertParams, 0, layer.params);
  const int64_t e = std::max<int64_t>(expert, 1);
  share.expertParams = (experts + e - 1) / e;
  share.params = split(layer.params - experts, layer.replicatedParams) + share.expertParams;
  share.activationBytes = split(activation, replicatedActivation);
  // A deferred weight gradient keeps its GEMMs' inputs and output gradients: without sequence
  // parallelism the replicated inputs (the activations' replicated part) come with as many
  // bytes of whole output gradients (of the row-parallel projections, and the norms'); the
  // embedding's (token ids, output gradient) is whole.
  const int64_t weightGradient = layer.weightGradientBytes.value_or(activation);
  const int64_t replicatedWeightGradient = sequence          ? 0
                                           : layer.embedding ? weightGradient
                                                             : 2 * replicatedActivation;
  share.weightGradientBytes = split(weightGradient, replicatedWeightGradient);
  share.checkpointBytes = sequence ? split(layer.checkpointBytes, 0) : layer.checkpointBytes;
  share.outputBytes = sequence ? split(layer.outputBytes, 0) : layer.outputBytes;
  share.selectiveBytes = std::min(split(layer.selectiveBytes, 0), share.activationBytes);
  return share;
}

SplitLayer conduit::splitLayer(const LayerSpec &layer, uint32_t recomputeModules) {
  SplitLayer out;
  out.embedding = layer.kind == runtime::LayerKind::Embedding;
  out.params = layer.params;
  out.replicatedParams = layer.replicatedParams.value_or(0);
  out.expertParams = layer.expertParams;
  out.activationBytes = layer.activationBytes;
  out.replicatedActivationBytes = layer.replicatedActivationBytes.value_or(0);
  out.weightGradientBytes = layer.weightGradientBytes;
  out.checkpointBytes = layer.checkpointBytes;
  out.outputBytes = layer.outputBytes;
  out.selectiveBytes = selectiveBytesOf(layer, recomputeModules).value_or(0);
  return out;
}
