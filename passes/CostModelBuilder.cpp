//===- CostModelBuilder.cpp - the cost model of IR modules ----------------===//

#include "passes/CostModelBuilder.h"

using namespace conduit;

Cluster conduit::clusterFromAttr(pipe::ClusterAttr cluster) {
  Cluster c;
  c.preset = cluster.getPreset().str();
  c.peakFlops = cluster.getPeakFlops();
  c.efficiency = cluster.getEfficiency();
  c.memoryBytes = cluster.getMemoryBytes();
  c.gpusPerNode = cluster.getGpusPerNode();
  c.intraNodeBandwidth = cluster.getIntraNodeBandwidth();
  c.interNodeBandwidth = cluster.getInterNodeBandwidth();
  c.latencyS = cluster.getLatencyS();
  c.launchOverheadS = cluster.getLaunchOverheadS();
  c.profile = cluster.getProfile().str();
  return c;
}

namespace {

/// The inputs both modules share: the cluster and the parallelism's links and recomputation;
/// the caller adds the layers.
CostInputs commonInputs(pipe::ClusterAttr cluster, pipe::ParallelismAttr par) {
  CostInputs in;
  in.cluster = clusterFromAttr(cluster);
  in.pipeline = par.getPipeline();
  in.data = par.getData();
  in.pipelineInner = par.getRankOrder() == pipe::RankOrder::PipelineInner;
  in.recompute = par.getCheckpointing() == pipe::Checkpointing::Full;
  return in;
}

template <typename Layers> llvm::Expected<CostModel> buildWithLayers(CostInputs in, Layers layers) {
  for (auto layer : layers) {
    in.names.push_back(layer.getName().str());
    in.fwdFlops.push_back(layer.getFwdFlops());
    in.bwdFlops.push_back(layer.getBwdFlops());
    in.bwdWeightFlops.push_back(layer.getBwdWeightFlops());
  }
  return CostModel::build(in);
}

} // namespace

llvm::Expected<CostModel> conduit::buildCostModel(pipe::ModelOp model) {
  return buildWithLayers(commonInputs(model.getCluster(), model.getParallelism()),
                         model.getLayers());
}

llvm::Expected<CostModel> conduit::buildCostModel(plan::ProgramOp program) {
  return buildWithLayers(commonInputs(program.getCluster(), program.getParallelism()),
                         program.getLayers());
}
