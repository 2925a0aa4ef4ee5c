//===- CostModelBuilder.cpp - the cost model of IR modules ----------------===//

#include "passes/CostModelBuilder.h"

using namespace conduit;

// The dialect numbers the attention kinds as the job model does (TransformerShape::attention).
static_assert(static_cast<int>(pipe::AttentionKind::FlashTriton) ==
                  static_cast<int>(AttentionKind::FlashTriton),
              "pipe::AttentionKind and AttentionKind must agree");
static_assert(static_cast<int>(pipe::ElementwiseKind::EagerFusedNorm) ==
                  static_cast<int>(ElementwiseKind::EagerFusedNorm),
              "pipe::ElementwiseKind and ElementwiseKind must agree");

Cluster conduit::clusterFromAttr(pipe::ClusterAttr cluster) {
  Cluster c;
  c.preset = cluster.getPreset().str();
  c.peakFlops = cluster.getPeakFlops();
  c.efficiency = cluster.getEfficiency();
  c.memoryBandwidth = cluster.getMemoryBandwidth();
  c.memoryBytes = cluster.getMemoryBytes();
  c.gpusPerNode = cluster.getGpusPerNode();
  c.intraNodeBandwidth = cluster.getIntraNodeBandwidth();
  c.interNodeBandwidth = cluster.getInterNodeBandwidth();
  c.latencyS = cluster.getLatencyS();
  c.launchOverheadS = cluster.getLaunchOverheadS();
  c.profile = cluster.getProfile().str();
  c.kernels = presetKernels(c.preset);
  return c;
}

namespace {

/// The inputs both modules share: the cluster, the parallelism's links, tensor partitioning
/// and recomputation, and the transformer shape; the caller adds the layers.
CostInputs commonInputs(pipe::ClusterAttr cluster, pipe::ParallelismAttr par,
                        pipe::TrainingAttr training, pipe::TransformerAttr architecture) {
  CostInputs in;
  in.cluster = clusterFromAttr(cluster);
  in.pipeline = par.getPipeline();
  in.data = par.getData();
  in.tensor = par.getTensor();
  in.sequenceParallel = par.getSequenceParallel();
  in.pipelineInner = par.getRankOrder() == pipe::RankOrder::PipelineInner;
  in.checkpointing = static_cast<runtime::Checkpointing>(par.getCheckpointing());
  in.recomputeModules = par.getCheckpointing() == pipe::Checkpointing::Selective
                            ? static_cast<uint32_t>(par.getRecomputeModules())
                            : 0;
  in.parameterBytes = training.getStoredParameterBytes();
  in.momentBytes = training.getMomentBytes();
  in.optimizerKernels = static_cast<OptimizerKernels>(training.getOptimizerKernels());
  if (architecture) {
    TransformerShape &shape = in.transformer.emplace();
    shape.numLayers = architecture.getNumLayers();
    shape.seqLength = architecture.getSeqLength();
    shape.hiddenSize = architecture.getHiddenSize();
    shape.numHeads = architecture.getNumHeads();
    shape.numKvHeads = architecture.getNumKvHeads();
    shape.ffnHiddenSize = architecture.getFfnHiddenSize();
    shape.vocabSize = architecture.getVocabSize();
    shape.gated = architecture.getMlp() == pipe::MlpKind::SwiGLU;
    shape.rotary = architecture.getPosition() == pipe::PositionKind::Rotary;
    shape.elementBytes = training.getElementBytes();
    shape.attention = static_cast<AttentionKind>(architecture.getAttention());
    shape.elementwise = static_cast<ElementwiseKind>(architecture.getElementwise());
    shape.rmsNorm = architecture.getNorm() == pipe::NormKind::RMSNorm;
    shape.fp8 = training.getDtype() == pipe::DType::FP8;
    shape.fp8CurrentScaling = training.getFp8Scaling() == pipe::Fp8Scaling::Current;
    shape.headDim = architecture.getHeadDim();
    shape.qkNorm = architecture.getQkNorm();
    shape.mtpLayers = architecture.getMtpLayers();
    if (pipe::LatentAttentionAttr mla = architecture.getLatentAttention()) {
      shape.qLoraRank = mla.getQLoraRank();
      shape.kvLoraRank = mla.getKvLoraRank();
      shape.qkNopeHeadDim = mla.getQkNopeHeadDim();
      shape.qkRopeHeadDim = mla.getQkRopeHeadDim();
      shape.vHeadDim = mla.getVHeadDim();
    }
    if (pipe::MoeAttr moe = architecture.getMoe()) {
      shape.numExperts = moe.getNumExperts();
      shape.topK = moe.getTopK();
      shape.expertFfnHiddenSize = moe.getExpertFfnHiddenSize();
      shape.sharedFfnHiddenSize = moe.getSharedFfnHiddenSize();
      shape.sharedExpertGate = moe.getSharedExpertGate();
      shape.denseLayers = moe.getDenseLayers();
      shape.imbalance = moe.getImbalance();
      shape.expert = par.getExpert();
      shape.megatronExperts = moe.getKernels() == pipe::ExpertKernels::Megatron;
    }
  }
  return in;
}

template <typename Layers> llvm::Expected<CostModel> buildWithLayers(CostInputs in, Layers layers) {
  for (auto layer : layers) {
    in.names.push_back(layer.getName().str());
    in.kinds.push_back(static_cast<runtime::LayerKind>(layer.getKind()));
    in.fwdFlops.push_back(layer.getFwdFlops());
    in.bwdFlops.push_back(layer.getBwdFlops());
    in.bwdWeightFlops.push_back(layer.getBwdWeightFlops());
  }
  return CostModel::build(in);
}

} // namespace

llvm::Expected<CostModel> conduit::buildCostModel(pipe::ModelOp model) {
  return buildWithLayers(commonInputs(model.getCluster(), model.getParallelism(),
                                      model.getTraining(), model.getArchitectureAttr()),
                         model.getLayers());
}

llvm::Expected<CostModel> conduit::buildCostModel(plan::ProgramOp program) {
  return buildWithLayers(commonInputs(program.getCluster(), program.getParallelism(),
                                      program.getTraining(), program.getArchitectureAttr()),
                         program.getLayers());
}
