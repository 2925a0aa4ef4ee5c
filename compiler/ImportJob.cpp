//===- ImportJob.cpp - job -> pipe IR -------------------------------------===//

#include "compiler/ImportJob.h"

#include "analysis/JobCosts.h"
#include "dialects/pipe/PipeOps.h"
#include "job/TransformerCosts.h"
#include "mlir/IR/Builders.h"

#include <algorithm>

using namespace conduit;
using namespace mlir;

namespace {

pipe::ParallelismAttr buildParallelism(MLIRContext *ctx, const ParallelismSpec &p) {
  return pipe::ParallelismAttr::get(
      ctx, p.pipeline, p.data, p.stagesPerDevice, toDialect<pipe::ScheduleKind>(p.schedule),
      p.groupSize, p.microbatches, p.microbatchSize, toDialect<pipe::Sharding>(p.sharding),
      toDialect<pipe::Checkpointing>(p.checkpointing), p.fsdpWindow,
      toDialect<pipe::RankOrder>(p.rankOrder), toDialect<pipe::Placement>(p.placement),
      p.splitBackward, p.tensor, p.sequenceParallel, p.expert, p.tensorCommOverlap,
      toDialect<pipe::GradientReduction>(p.gradientReduction),
      static_cast<pipe::RecomputeModule>(p.recomputeModules),
      p.splitBackward ? p.maxDeferredWeightGradients.value_or(-1) : -1);
}

pipe::ClusterAttr buildCluster(MLIRContext *ctx, const Cluster &c) {
  return pipe::ClusterAttr::get(ctx, c.preset, c.peakFlops, c.efficiency, c.memoryBandwidth,
                                c.memoryBytes, c.gpusPerNode, c.intraNodeBandwidth,
                                c.interNodeBandwidth, c.latencyS, c.launchOverheadS, c.profile);
}

pipe::TrainingAttr buildTraining(MLIRContext *ctx, const TrainingSpec &t) {
  return pipe::TrainingAttr::get(
      ctx, toDialect<pipe::DType>(t.dtype), toDialect<pipe::Optimizer>(t.optimizer), t.seed,
      t.learningRate, toDialect<pipe::DataKind>(t.data), t.dataPath,
      toDialect<pipe::TokenType>(t.dataDtype),
      toDialect<pipe::MasterWeights>(t.masterWeights.value_or(MasterWeights::Separate)),
      toDialect<pipe::Fp8Scaling>(t.fp8Scaling.value_or(Fp8Scaling::Delayed)),
      toDialect<pipe::AdamMoments>(t.adamMoments.value_or(runtime::AdamMoments::FP32)),
      toDialect<pipe::OptimizerKernels>(t.optimizerKernels.value_or(OptimizerKernels::Fused)));
}

/// The job's mixture of experts, with the imbalance resolved (moeImbalance, analysis/JobCosts.h).
pipe::MoeAttr buildMoe(MLIRContext *ctx, const TransformerSpec &t, double imbalance) {
  if (!t.moe)
    return {};
  const MoeSpec &m = *t.moe;
  return pipe::MoeAttr::get(
      ctx, m.numExperts, m.topK, m.expertFfnHiddenSize, toDialect<pipe::RouterKind>(m.router),
      m.normalizeTopK, m.auxLossCoefficient, m.sharedExperts, m.sharedFfnHiddenSize, m.denseLayers,
      m.capacityFactor.value_or(0), imbalance, m.routerGroups, m.routerGroupTopK,
      toDialect<pipe::DispatchKind>(m.dispatch), m.fp8Dispatch,
      toDialect<pipe::ExpertKernels>(m.kernels), m.biasUpdateRate, m.routedScalingFactor,
      m.sharedExpertGate, m.zLossCoefficient, toDialect<pipe::DropPolicy>(m.dropPolicy));
}

pipe::TransformerAttr buildTransformer(MLIRContext *ctx, const TransformerSpec &t,
                                       double imbalance) {
  pipe::LatentAttentionAttr latent;
  if (const std::optional<LatentAttentionSpec> &a = t.latentAttention)
    latent = pipe::LatentAttentionAttr::get(ctx, a->qLoraRank, a->kvLoraRank, a->qkNopeHeadDim,
                                            a->qkRopeHeadDim, a->vHeadDim, a->ropeInterleave);
  pipe::RopeScalingAttr rope;
  if (const runtime::RopeScaling &r = t.ropeScaling; r.scaled())
    rope = pipe::RopeScalingAttr::get(
        ctx, toDialect<pipe::RopeType>(r.type), r.factor, r.originalPositions, r.lowFreqFactor,
        r.highFreqFactor, r.betaFast, r.betaSlow, r.truncate, r.attentionFactor, r.mscaleAllDim);
  return pipe::TransformerAttr::get(
      ctx, t.numLayers, t.hiddenSize, t.numHeads, t.numKvHeads, t.ffnHiddenSize, t.seqLength,
      t.vocabSize, toDialect<pipe::MlpKind>(t.mlp), toDialect<pipe::NormKind>(t.norm),
      toDialect<pipe::PositionKind>(t.position), t.tieEmbeddings, toDialect<pipe::BiasKind>(t.bias),
      t.ropeTheta, t.normEps, toDialect<pipe::AttentionKind>(t.attention),
      toDialect<pipe::ElementwiseKind>(t.elementwise), t.headDim.value_or(0), t.qkNorm, t.mtpLayers,
      t.mtpLossCoefficient, latent, buildMoe(ctx, t, imbalance), rope);
}

/// A symbol name from the job name: letters, digits and '_' only.
std::string symbolName(llvm::StringRef name) {
  std::string out;
  for (char c : name)
    out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out.front())))
    out.insert(out.begin(), '_');
  return out;
}

} // namespace

OwningOpRef<ModuleOp> conduit::importJob(const Job &job, MLIRContext &context) {
  context.getOrLoadDialect<pipe::PipeDialect>();
  MLIRContext *ctx = &context;
  Location loc = FileLineColLoc::get(ctx, job.path, 1, 1);
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  OpBuilder builder = OpBuilder::atBlockEnd(module->getBody());

  auto model = pipe::ModelOp::create(
      builder, loc, symbolName(job.name), pipe::Phase::Model,
      buildParallelism(ctx, job.parallelism), buildCluster(ctx, job.cluster),
      buildTraining(ctx, job.training),
      job.model.transformer ? buildTransformer(ctx, *job.model.transformer, moeImbalance(job).value)
                            : pipe::TransformerAttr(),
      job.parallelism.stageLayers.empty()
          ? DenseI64ArrayAttr()
          : builder.getDenseI64ArrayAttr(job.parallelism.stageLayers),
      /*microbatch_partitions=*/Attribute(), builder.getStringAttr(job.path),
      job.model.tokensPerSample);

  if (job.parallelism.autoPartitions) {
    model.setMicrobatchPartitionsAttr(builder.getStringAttr("auto"));
  } else if (!job.parallelism.microbatchPartitions.empty()) {
    SmallVector<Attribute> perStage;
    for (const std::vector<int64_t> &sizes : job.parallelism.microbatchPartitions)
      perStage.push_back(builder.getDenseI64ArrayAttr(sizes));
    model.setMicrobatchPartitionsAttr(builder.getArrayAttr(perStage));
  }

  Block *body = builder.createBlock(&model.getBody());
  builder.setInsertionPointToEnd(body);
  for (const LayerSpec &layer : job.model.layers)
    pipe::LayerOp::create(
        builder, loc, layer.name, toDialect<pipe::LayerKind>(layer.kind), layer.params,
        layer.fwdFlops, layer.bwdFlops, layer.bwdWeightFlops, layer.activationBytes,
        layer.checkpointBytes, layer.outputBytes, layer.weightGradientBytes, layer.replicatedParams,
        layer.replicatedActivationBytes, selectiveBytesOf(layer, job.parallelism.recomputeModules),
        layer.expertParams ? std::optional<int64_t>(layer.expertParams) : std::nullopt);
  return module;
}
