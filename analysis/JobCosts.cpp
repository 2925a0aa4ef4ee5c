//===- JobCosts.cpp - what the cost model reads of a job ------------------===//

#include "analysis/JobCosts.h"

#include "analysis/ProfileReader.h"
#include "job/TransformerCosts.h"

#include <algorithm>

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
  shape.attention = spec.attention;
  shape.elementwise = spec.elementwise;
  shape.rmsNorm = spec.norm == NormKind::RMSNorm;
  shape.headDim = spec.headDim.value_or(0);
  shape.qkNorm = spec.qkNorm;
  shape.mtpLayers = spec.mtpLayers;
  if (const std::optional<LatentAttentionSpec> &mla = spec.latentAttention) {
    shape.qLoraRank = mla->qLoraRank;
    shape.kvLoraRank = mla->kvLoraRank;
    shape.qkNopeHeadDim = mla->qkNopeHeadDim;
    shape.qkRopeHeadDim = mla->qkRopeHeadDim;
    shape.vHeadDim = mla->vHeadDim;
  }
  if (const std::optional<MoeSpec> &moe = spec.moe) {
    shape.numExperts = moe->numExperts;
    shape.topK = moe->topK;
    shape.expertFfnHiddenSize = moe->expertFfnHiddenSize;
    shape.sharedFfnHiddenSize = moe->sharedFfnHiddenSize;
    shape.sharedExpertGate = moe->sharedExpertGate;
    shape.denseLayers = moe->denseLayers;
    shape.imbalance = moe->imbalance.value_or(1);
    shape.megatronExperts = moe->kernels == ExpertKernels::Megatron;
  }
  return shape;
}

CostInputs conduit::jobCostInputs(const Job &job) {
  CostInputs in;
  in.cluster = job.cluster;
  in.parameterBytes = job.training.storedParameterBytes();
  in.momentBytes = job.training.momentBytes();
  in.optimizerKernels = job.training.optimizerKernels.value_or(OptimizerKernels::Fused);
  if (job.model.transformer) {
    in.transformer = transformerShape(*job.model.transformer, job.training.elementBytes());
    in.transformer->fp8 = job.training.dtype == runtime::DType::FP8;
    in.transformer->fp8CurrentScaling = job.training.fp8Scaling == Fp8Scaling::Current;
    if (job.model.transformer->moe) {
      // The expert group and the imbalance the plan is priced with (as the import resolves it).
      const ParallelismSpec &p = job.parallelism;
      in.transformer->expert = p.expert;
      in.transformer->imbalance = moeImbalance(job).value;
    }
  }
  for (const LayerSpec &layer : job.model.layers) {
    in.names.push_back(layer.name);
    in.kinds.push_back(layer.kind);
    in.fwdFlops.push_back(layer.fwdFlops);
    in.bwdFlops.push_back(layer.bwdFlops);
    in.bwdWeightFlops.push_back(layer.bwdWeightFlops);
  }
  return in;
}

MoeImbalance conduit::moeImbalance(const Job &job) {
  using Source = MoeImbalance::Source;
  if (!job.model.transformer || !job.model.transformer->moe)
    return {};
  const MoeSpec &moe = *job.model.transformer->moe;
  if (moe.imbalance)
    return {*moe.imbalance, Source::Stated};
  const ParallelismSpec &p = job.parallelism;
  if (!job.cluster.profile.empty()) {
    llvm::Expected<MeasuredProfile> profile = readProfile(job.cluster.profile);
    if (!profile)
      llvm::consumeError(profile.takeError());
    else if (profile->routedLoad && profile->routedLoad->expert == p.expert)
      return {profile->routedLoad->peak, Source::Measured};
  }
  const int64_t tokensPerRank =
      p.microbatchSize * job.model.transformer->seqLength / std::max<int64_t>(p.tensor, 1);
  return {defaultMoeImbalance(moe, p.expert, tokensPerRank), Source::Default};
}
