//===- CostModel.cpp - time of compute and communication ------------------===//

#include "analysis/CostModel.h"

#include "analysis/ProfileReader.h"
#include "runtime/plan/MemoryKinds.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

using namespace conduit;

llvm::Expected<CostModel> CostModel::build(const CostInputs &in) {
  CostModel cost;
  const Cluster &cluster = in.cluster;
  cost.flopRate = cluster.peakFlops * cluster.efficiency;
  cost.memoryBandwidth = cluster.memoryBandwidth * cluster.kernels.streamShare();
  cost.parameterBytes = in.parameterBytes;
  cost.momentBytes = in.momentBytes;
  cost.optimizerKernels = in.optimizerKernels;
  cost.launchOverheadS = cluster.launchOverheadS;
  cost.latencyS = cluster.latencyS;
  cost.intraBandwidth = cluster.intraNodeBandwidth;
  cost.interBandwidth = cluster.interNodeBandwidth;
  cost.gpusPerNode = cluster.gpusPerNode;
  cost.pipeline = in.pipeline;
  cost.data = in.data;
  cost.tensor = in.tensor;
  cost.sequenceParallelOn = in.sequenceParallel;
  cost.pipelineInner = in.pipelineInner;
  if (in.tensor < 1)
    return llvm::createStringError("parallelism.tensor must be at least 1, not " +
                                   std::to_string(in.tensor));
  for (size_t l = 0; l < in.fwdFlops.size(); ++l) {
    const runtime::LayerKind kind = l < in.kinds.size() ? in.kinds[l] : runtime::LayerKind::Custom;
    cost.layers.push_back({in.fwdFlops[l], in.bwdFlops[l],
                           l < in.bwdWeightFlops.size() ? in.bwdWeightFlops[l] : in.bwdFlops[l] / 2,
                           std::nullopt, false, runtime::recomputesWhole(in.checkpointing, kind)});
  }

  if (const std::optional<TransformerShape> &shape = in.transformer) {
    if (!(cluster.memoryBandwidth > 0))
      return llvm::createStringError(
          "cluster.memory_bandwidth must be positive (bytes/s) to price a transformer's layers");
    const int64_t blocks = shape->numLayers + shape->mtpLayers;
    if (static_cast<int64_t>(cost.layers.size()) != blocks + 2)
      return llvm::createStringError(
          "the transformer has " + std::to_string(blocks) +
          " blocks and multi-token prediction modules, so its chain has " +
          std::to_string(blocks + 2) + " layers, but the model has " +
          std::to_string(cost.layers.size()));
    cost.roofline = Roofline::of(cluster, shape->elementBytes);
    TransformerShape x = *shape;
    x.recomputeModules = in.recomputeModules;
    const int64_t last = blocks + 1;
    for (int64_t l = 0; l <= last; ++l) {
      TransformerLayer kind = l == 0            ? TransformerLayer::Embedding
                              : l == last       ? TransformerLayer::Head
                              : l > x.numLayers ? TransformerLayer::Mtp
                                                : TransformerLayer::Block;
      cost.layers[l].work = transformerWork(x, kind, in.tensor, in.sequenceParallel, l - 1);
      // A block's work depends on the shape and on whether it has experts only.
      if (kind == TransformerLayer::Block && l >= 2) {
        Layer &layer = cost.layers[l];
        const Layer &previous = cost.layers[l - 1];
        layer.repeatsPrevious = x.blockHasExperts(l - 1) == x.blockHasExperts(l - 2) &&
                                layer.fwdFlops == previous.fwdFlops &&
                                layer.bwdFlops == previous.bwdFlops &&
                                layer.wgradFlops == previous.wgradFlops;
      }
    }
  }

  // A pipeline rank's data-parallel groups: one per tensor rank, its replicas.
  std::vector<int64_t> replicas(in.data);
  for (int64_t p = 0; p < in.pipeline; ++p) {
    Ring slowest = Ring::fastest();
    for (int64_t t = 0; t < in.tensor; ++t) {
      for (int64_t d = 0; d < in.data; ++d)
        replicas[d] = cost.globalRank(p, d, t);
      slowest = Ring::slower(slowest, cost.ringOver(replicas));
    }
    cost.dataParallelRings.push_back(slowest);
  }

  // A tensor group is the T consecutive global ranks of one (pipeline rank, replica).
  if (in.tensor > 1) {
    std::vector<int64_t> group(in.tensor);
    cost.tensorGroupRing = Ring::fastest();
    for (int64_t first = 0; first < in.pipeline * in.data * in.tensor; first += in.tensor) {
      std::iota(group.begin(), group.end(), first);
      cost.tensorGroupRing = Ring::slower(cost.tensorGroupRing, cost.ringOver(group));
    }
  }

  if (!cluster.profile.empty()) {
    const std::string &path = cluster.profile;
    llvm::Expected<MeasuredProfile> profile = readProfile(path);
    if (!profile)
      return profile.takeError();
    cost.profiles = std::move(profile->layers);
    cost.optimizerSPerParam = profile->optimizerSPerParam;
    cost.profiledAdam = profile->optimizerAdam;
    cost.instructionOverheadS = profile->instructionOverheadS;
    cost.measuredLatencyS = profile->transportLatencyS;
    cost.measuredBandwidth = profile->transportBandwidth;
    cost.hostProgress = profile->backend == "cpu";
    if (cost.profiles.size() != cost.layers.size())
      return llvm::createStringError(
          path + ": the profile has " + std::to_string(cost.profiles.size()) +
          " layers but the model has " + std::to_string(cost.layers.size()));
    for (size_t l = 0; l < cost.layers.size(); ++l) {
      if (cost.profiles[l].name != in.names[l])
        return llvm::createStringError(path + ": layers[" + std::to_string(l) + "] is '" +
                                       cost.profiles[l].name + "' but the model's layer " +
                                       std::to_string(l) + " is '" + in.names[l] +
                                       "'; the profile was measured on another model");
    }
  }
  return cost;
}

namespace {
/// FLOPs per parameter of one optimizer update (Adam: moments, bias correction, update).
double optimizerFlopsPerParam(bool adam) { return adam ? 10 : 2; }
} // namespace

int64_t CostModel::optimizerBytesPerParam(bool adam, int64_t parameterBytes, int64_t momentBytes,
                                          OptimizerKernels kernels) {
  const int64_t g = runtime::kGradientBytes, m = momentBytes, p = 4;
  // The working copy of 16-bit parameters: written beside the master in a fused kernel, a cast
  // reading the master again otherwise.
  const int64_t copy = parameterBytes == 4                  ? 0
                       : kernels == OptimizerKernels::Fused ? parameterBytes
                                                            : p + parameterBytes;
  if (!adam || kernels == OptimizerKernels::Fused) // SGD's one operation: p -= lr * g
    return g + (adam ? 2 * 2 * m : 0) + 2 * p + copy;
  // Adam as PyTorch's multi-tensor AdamW runs it (torch/optim/adamw.py, _multi_tensor_adamw),
  // a temporary t of the second moment's type: m.lerp_(g) (m, g in; m out), v.mul_ (v; v),
  // v.addcmul_(g, g) (v, g; v), t = v.sqrt() (v; t), t.div_ (t; t), t.add_(eps) (t; t),
  // p.addcdiv_(m, t) (p, m, t; p): 14m + 16 bytes. One tensor at a time (Composer's
  // DecoupledAdamW) the first moment takes m.mul_ then m.add_(g): 2m more.
  const int64_t foreach =
      (2 * m + g) + 2 * m + (2 * m + g) + 2 * m + 2 * m + 2 * m + (2 * p + 2 * m);
  return foreach + (kernels == OptimizerKernels::PerTensor ? 2 * m : 0) + copy;
}

double CostModel::optimizerStepTime(bool adam, int64_t params) const {
  const double n = static_cast<double>(params);
  if (optimizerSPerParam)
    return n * *optimizerSPerParam * optimizerFlopsPerParam(adam) /
           optimizerFlopsPerParam(profiledAdam);
  const double compute = n * optimizerFlopsPerParam(adam) / flopRate;
  if (!(memoryBandwidth > 0))
    return compute;
  const double bytes = n * static_cast<double>(optimizerBytesPerParam(
                               adam, parameterBytes, momentBytes, optimizerKernels));
  return std::max(compute, bytes / memoryBandwidth);
}

double CostModel::replicaOptimizerStepTime(bool adam, int64_t params, int64_t replicas,
                                           bool sharded, int64_t experts,
                                           int64_t expertReplicas) const {
  if (!sharded)
    return optimizerStepTime(adam, params);
  experts = std::clamp<int64_t>(experts, 0, params);
  return optimizerStepTime(
      adam, llvm::divideCeilSigned(params - experts, replicas) +
                llvm::divideCeilSigned(experts, std::max<int64_t>(expertReplicas, 1)));
}

double CostModel::analyticTime(int64_t layer, Pass pass, int64_t samples) const {
  const Layer &l = layers[layer];
  if (l.work) {
    switch (pass) {
    case Pass::Forward:
      return roofline.time(l.work->forward, samples) +
             roofline.time(l.work->attentionCore, samples);
    case Pass::Input:
      return roofline.time(l.work->inputGradient, samples);
    case Pass::Weight:
      return roofline.time(l.work->weightGradient, samples);
    }
  }
  const double flops = pass == Pass::Forward ? l.fwdFlops
                       : pass == Pass::Input ? l.bwdFlops - l.wgradFlops
                                             : l.wgradFlops;
  return flops * static_cast<double>(samples) / (flopRate * static_cast<double>(tensor));
}

double CostModel::forwardTime(int64_t layer, int64_t samples) const {
  if (!profiles.empty())
    return profiledTime(profiles[layer].forwardS, profiles[layer], samples);
  return launchOverheadS + analyticTime(layer, Pass::Forward, samples);
}

double CostModel::recomputeTime(int64_t layer, int64_t samples) const {
  if (layers[layer].recomputedWhole)
    return forwardTime(layer, samples);
  return selectiveRecomputeTime(layer, samples);
}

double CostModel::selectiveRecomputeTime(int64_t layer, int64_t samples) const {
  const Layer &l = layers[layer];
  if (!l.work)
    return 0;
  const double repeated = roofline.time(l.work->recomputed, samples);
  if (profiles.empty() || repeated == 0)
    return repeated;
  return forwardTime(layer, samples) * repeated / analyticTime(layer, Pass::Forward, samples);
}

double CostModel::backwardTime(int64_t layer, int64_t samples) const {
  double time = !profiles.empty()
                    ? profiledTime(profiles[layer].backwardS, profiles[layer], samples)
                    : launchOverheadS + analyticTime(layer, Pass::Input, samples) +
                          analyticTime(layer, Pass::Weight, samples);
  return time + recomputeTime(layer, samples);
}

double CostModel::weightShare(int64_t layer) const {
  const Layer &l = layers[layer];
  return l.bwdFlops > 0 ? l.wgradFlops / l.bwdFlops : 0.5;
}

double CostModel::inputGradientTime(int64_t layer, int64_t samples) const {
  double time;
  if (profiles.empty())
    time = launchOverheadS + analyticTime(layer, Pass::Input, samples);
  else if (!profiles[layer].inputS.empty())
    time = profiledTime(profiles[layer].inputS, profiles[layer], samples);
  else
    time = (1 - weightShare(layer)) *
           profiledTime(profiles[layer].backwardS, profiles[layer], samples);
  return time + recomputeTime(layer, samples);
}

double CostModel::weightGradientTime(int64_t layer, int64_t samples) const {
  if (profiles.empty())
    return launchOverheadS + analyticTime(layer, Pass::Weight, samples);
  if (!profiles[layer].weightS.empty())
    return profiledTime(profiles[layer].weightS, profiles[layer], samples);
  return weightShare(layer) * profiledTime(profiles[layer].backwardS, profiles[layer], samples);
}

double CostModel::stageSum(int64_t first, int64_t end, int64_t samples,
                           double (CostModel::*time)(int64_t, int64_t) const) const {
  double total = 0, last = 0;
  for (int64_t l = first; l < end; ++l) {
    if (l == first || !repeatsPrevious(l))
      last = (this->*time)(l, samples);
    total += last;
  }
  return total;
}

double CostModel::withOverhead(double time, size_t kind) const {
  const std::optional<double> &overhead = instructionOverheadS[kind];
  return overhead ? time + *overhead : time;
}

// The kinds in the order of the profile's instruction_overhead_s (ProfileReader.h).
double CostModel::stageForwardTime(int64_t first, int64_t end, int64_t samples) const {
  return withOverhead(stageSum(first, end, samples, &CostModel::forwardTime), 0);
}
double CostModel::stageBackwardTime(int64_t first, int64_t end, int64_t samples) const {
  return withOverhead(stageSum(first, end, samples, &CostModel::backwardTime), 1);
}
double CostModel::stageInputGradientTime(int64_t first, int64_t end, int64_t samples) const {
  return withOverhead(stageSum(first, end, samples, &CostModel::inputGradientTime), 2);
}
double CostModel::stageWeightGradientTime(int64_t first, int64_t end, int64_t samples) const {
  return withOverhead(stageSum(first, end, samples, &CostModel::weightGradientTime), 3);
}

CostModel::MicrobatchTimes
CostModel::stageMicrobatchTimes(int64_t first, int64_t end,
                                const std::vector<int64_t> &boundaries) const {
  MicrobatchTimes times;
  for (size_t m = 0; m + 1 < boundaries.size(); ++m) {
    const int64_t samples = boundaries[m + 1] - boundaries[m];
    const bool sameAsPrevious = m > 0 && samples == boundaries[m] - boundaries[m - 1];
    times.forward.push_back(sameAsPrevious ? times.forward.back()
                                           : stageForwardTime(first, end, samples));
    times.backward.push_back(sameAsPrevious ? times.backward.back()
                                            : stageBackwardTime(first, end, samples));
    times.input.push_back(sameAsPrevious ? times.input.back()
                                         : stageInputGradientTime(first, end, samples));
    times.weight.push_back(sameAsPrevious ? times.weight.back()
                                          : stageWeightGradientTime(first, end, samples));
  }
  return times;
}

int64_t CostModel::globalRank(int64_t pipelineRank, int64_t replica, int64_t tensorRank) const {
  const int64_t outer =
      pipelineInner ? replica * pipeline + pipelineRank : pipelineRank * data + replica;
  return outer * tensor + tensorRank;
}

Link CostModel::linkBetween(int64_t a, int64_t b) const {
  return a / gpusPerNode == b / gpusPerNode ? Link::IntraNode : Link::InterNode;
}

Ring Ring::slower(Ring a, Ring b) {
  if (a.link != b.link)
    return a.link == Link::InterNode ? a : b;
  return {a.link, std::min(a.adapters, b.adapters)};
}

Ring CostModel::ringOver(const std::vector<int64_t> &members) const {
  std::vector<int64_t> nodes;
  nodes.reserve(members.size());
  for (int64_t member : members)
    nodes.push_back(member / gpusPerNode);
  llvm::sort(nodes);
  // Count each node's members (a run of the sorted node numbers); the fewest set the pace.
  Ring ring{nodes.front() == nodes.back() ? Link::IntraNode : Link::InterNode,
            static_cast<int64_t>(nodes.size())};
  for (size_t first = 0; first < nodes.size();) {
    size_t end = first;
    while (end < nodes.size() && nodes[end] == nodes[first])
      ++end;
    ring.adapters = std::min(ring.adapters, static_cast<int64_t>(end - first));
    first = end;
  }
  return ring;
}

Ring CostModel::dataParallelRing(int64_t pipelineRank) const {
  return dataParallelRings[pipelineRank];
}

Link CostModel::pipelineLink(int64_t fromRank, int64_t toRank) const {
  for (int64_t d = 0; d < data; ++d)
    for (int64_t t = 0; t < tensor; ++t)
      if (linkBetween(globalRank(fromRank, d, t), globalRank(toRank, d, t)) == Link::InterNode)
        return Link::InterNode;
  return Link::IntraNode;
}

double CostModel::bandwidth(Link link) const {
  if (link == Link::IntraNode)
    return measuredBandwidth ? *measuredBandwidth : intraBandwidth;
  return interBandwidth;
}

double CostModel::ringBandwidth(Ring ring) const {
  if (ring.link == Link::IntraNode || ring.adapters <= 1)
    return bandwidth(ring.link);
  return std::min(static_cast<double>(ring.adapters) * interBandwidth, bandwidth(Link::IntraNode));
}

double CostModel::latency(Link link) const {
  return link == Link::IntraNode && measuredLatencyS ? *measuredLatencyS : latencyS;
}

double CostModel::transferTime(int64_t bytes, Link link) const {
  return latency(link) + static_cast<double>(bytes) / bandwidth(link);
}

double CostModel::collectiveTime(Collective kind, int64_t bytes, int64_t members, Ring ring) const {
  if (members <= 1)
    return 0;
  const double n = static_cast<double>(members);
  const double steps = kind == Collective::AllReduce ? 2 * (n - 1) : n - 1;
  return steps * (latency(ring.link) + static_cast<double>(bytes) / n / ringBandwidth(ring));
}

double CostModel::tensorCollectiveTime(Collective kind, int64_t bytes) const {
  return collectiveTime(kind, bytes, tensor, tensorGroupRing);
}

double CostModel::allToAllTime(int64_t bytes, int64_t members, Link link) const {
  if (members <= 1)
    return 0;
  const double n = static_cast<double>(members);
  return latency(link) + static_cast<double>(bytes) * (n - 1) / n / bandwidth(link);
}
