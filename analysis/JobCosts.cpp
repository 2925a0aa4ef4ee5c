//===- JobCosts.cpp - what the cost model reads of a job ------------------===//

#include "analysis/JobCosts.h"

using namespace conduit;

TransformerShape conduit::transformerShape(const TransformerSpec &spec, int64_t elementBytes) {
  TransformerShape shape;
  shape.numLayers = spec.numLayers;
  shape.seqLength = spec.seqLength;
  shape.hiddenSize = spec.hiddenSize;
  shape.numHeads = spec.numHeads;
  shape.numKvHeads = spec.numKvHeads;
  shape.ffnHiddenSize = spec.ffnHiddenSize;
  shape.vocabSize = spec.vocabSize;
  shape.gated = spec.mlp == MlpKind::SwiGLU;
  shape.rotary = spec.position == PositionKind::Rotary;
  shape.elementBytes = elementBytes;
  shape.flashAttention = spec.attention == AttentionKind::Flash;
  return shape;
}

CostInputs conduit::jobCostInputs(const Job &job) {
  CostInputs in;
  in.cluster = job.cluster;
  if (job.model.transformer) {
    in.transformer = transformerShape(*job.model.transformer, job.training.elementBytes());
    in.transformer->fp8 = job.training.dtype == runtime::DType::FP8;
  }
  for (const LayerSpec &layer : job.model.layers) {
    in.names.push_back(layer.name);
    in.fwdFlops.push_back(layer.fwdFlops);
    in.bwdFlops.push_back(layer.bwdFlops);
    in.bwdWeightFlops.push_back(layer.bwdWeightFlops);
  }
  return in;
}
