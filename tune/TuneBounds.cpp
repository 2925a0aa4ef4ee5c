//===- TuneBounds.cpp - lower bounds of a configuration's figures ---------===//
//
// The memory conventions are PeakMemory.cpp's (parameters and activations in the training
// type, fp32 gradients, Adam's fp32 moments and master copy, sharded state split evenly over
// the replicas and rounded up); the durations are the cost model's, as the plan simulator
// prices them (PlanCosts::fromCostModel).
//
//===----------------------------------------------------------------------===//

#include "tune/TuneBounds.h"

#include "analysis/JobCosts.h"
#include "analysis/MemoryBound.h"
#include "analysis/PlanCosts.h"
#include "analysis/TensorShare.h"
#include "job/TransformerCosts.h"
#include "runtime/plan/TensorCollectives.h"
#include "scheduling/Schedulers.h"

#include <algorithm>
#include <limits>
#include <optional>

using namespace conduit;
using namespace conduit::detail;

runtime::Sharding detail::effectiveSharding(const ParallelismSpec &p) {
  return p.data > 1 ? p.sharding : runtime::Sharding::None;
}

bool detail::hasExperts(const Job &job) {
  return job.model.transformer && job.model.transformer->moe;
}

runtime::Transformer detail::collectiveShape(const Job &job) {
  const TransformerSpec &t = *job.model.transformer;
  runtime::Transformer x;
  x.numLayers = t.numLayers;
  x.hiddenSize = t.hiddenSize;
  x.numHeads = t.numHeads;
  x.headDim = t.headDim.value_or(0);
  x.qkNorm = t.qkNorm;
  x.mtpLayers = t.mtpLayers;
  x.seqLength = t.seqLength;
  x.mlp = static_cast<uint8_t>(t.mlp);
  if (const std::optional<LatentAttentionSpec> &mla = t.latentAttention) {
    x.qLoraRank = mla->qLoraRank;
    x.kvLoraRank = mla->kvLoraRank;
    x.qkNopeHeadDim = mla->qkNopeHeadDim;
    x.qkRopeHeadDim = mla->qkRopeHeadDim;
    x.vHeadDim = mla->vHeadDim;
  }
  if (!t.moe)
    return x;
  const MoeSpec &m = *t.moe;
  x.numExperts = m.numExperts;
  x.topK = m.topK;
  x.expertFfnHiddenSize = m.expertFfnHiddenSize;
  x.sharedExperts = m.sharedExperts;
  x.sharedExpertGate = m.sharedExpertGate;
  x.denseLayers = m.denseLayers;
  x.imbalance = moeImbalance(job).value;
  x.routerGroups = m.routerGroups;
  x.routerGroupTopK = m.routerGroupTopK;
  x.dispatch = static_cast<uint8_t>(m.dispatch);
  x.fp8Dispatch = m.fp8Dispatch;
  x.auxLossCoefficient = m.auxLossCoefficient;
  x.capacityFactor = m.capacityFactor.value_or(0);
  x.dropByWeight = m.dropPolicy == DropPolicy::Probs;
  x.biasUpdateRate = m.biasUpdateRate;
  return x;
}

TensorShare detail::shareOf(const LayerSpec &layer, const ParallelismSpec &par) {
  return tensorShare(splitLayer(layer, par.recomputeModules), par.tensor, par.sequenceParallel,
                     par.expert);
}

namespace {

Collective collectiveOf(runtime::Op op) {
  switch (op) {
  case runtime::Op::TensorAllGather:
    return Collective::AllGather;
  case runtime::Op::TensorReduceScatter:
    return Collective::ReduceScatter;
  default:
    return Collective::AllReduce;
  }
}

/// Of a stage's four figures (forward, whole backward, input and weight gradient), `kind`'s.
template <typename T>
const T &byKind(sched::ActionKind kind, const T &forward, const T &backward, const T &input,
                const T &weight) {
  switch (kind) {
  case sched::ActionKind::Backward:
    return backward;
  case sched::ActionKind::BackwardInput:
    return input;
  case sched::ActionKind::BackwardWeight:
    return weight;
  default:
    return forward;
  }
}

} // namespace

double BoundCalculator::Stage::time(sched::ActionKind kind) const {
  return byKind(kind, forwardS, backwardS, inputS, weightS);
}

double BoundCalculator::Stage::computeTime(sched::ActionKind kind) const {
  return byKind(kind, computeForwardS, computeBackwardS, computeInputS, computeWeightS);
}

double BoundCalculator::Stage::allToAllTime(sched::ActionKind kind) const {
  static const double kNone = 0;
  return byKind(kind, allToAllForwardS, allToAllBackwardS, allToAllInputS, kNone);
}

const std::vector<int64_t> &BoundCalculator::Stage::allToAllBytes(sched::ActionKind kind) const {
  static const std::vector<int64_t> kNone;
  return byKind(kind, allToAllForwardBytes, allToAllBackwardBytes, allToAllInputBytes, kNone);
}

const std::vector<double> &BoundCalculator::Stage::cuts(sched::ActionKind kind) const {
  static const std::vector<double> kWhole{1};
  return byKind(kind, forwardCuts, backwardCuts, inputCuts, kWhole);
}

sched::ActionTimes BoundCalculator::actionTimes(const std::vector<Stage> &st, int64_t microbatches,
                                                const sched::Schedule *allToAllsOf) {
  sched::ActionTimes times;
  for (const Stage &stage : st) {
    times.forward.emplace_back(microbatches, stage.forwardS);
    times.backward.emplace_back(microbatches, stage.backwardS);
    times.input.emplace_back(microbatches, stage.inputS);
    times.weight.emplace_back(microbatches, stage.weightS);
  }
  if (!allToAllsOf)
    return times;
  auto allToAll = [&](const sched::Action &a) { return st[a.stage].allToAllTime(a.kind); };
  for (size_t r = 0; r < allToAllsOf->ranks.size(); ++r) {
    const std::vector<sched::Action> &actions = allToAllsOf->ranks[r];
    for (size_t i = 0; i < actions.size(); ++i) {
      const sched::Action &a = actions[i];
      if (!allToAllsOf->startsPair(static_cast<int64_t>(r), i)) {
        times.at(a) += allToAll(a);
        continue;
      }
      // A pair takes at least the longer of its two computes and its all-to-alls.
      const sched::Action &b = actions[++i];
      times.at(b) += std::max(0.0, allToAll(a) + allToAll(b) - times.of(a) - times.of(b));
    }
  }
  return times;
}

BoundCalculator::DataParallelWork::DataParallelWork(const Job &job, const CostModel &cost,
                                                    const std::vector<Stage> &st,
                                                    const ExpertData &experts)
    : cost(cost), st(st), experts(experts), replicas(job.parallelism.data),
      elementBytes(job.training.elementBytes()),
      adam(job.training.optimizer == runtime::Optimizer::Adam),
      sharded(effectiveSharding(job.parallelism) != runtime::Sharding::None),
      reductionKind(sharded ? Collective::ReduceScatter : Collective::AllReduce) {}

int64_t BoundCalculator::DataParallelWork::replicated(int64_t s) const {
  return st[s].params - apart(s);
}

double BoundCalculator::DataParallelWork::both(Collective kind, int64_t s, int64_t r,
                                               int64_t bytesPerParam) const {
  double t =
      cost.collectiveTime(kind, replicated(s) * bytesPerParam, replicas, cost.dataParallelRing(r));
  // Nothing moves over an expert-data group of one rank (the experts whole on it).
  if (apart(s) > 0 && experts.members > 1)
    t += cost.collectiveTime(kind, apart(s) * bytesPerParam, experts.members, experts.rings[r]);
  return t;
}

double BoundCalculator::DataParallelWork::reduction(int64_t s, int64_t r, Collective kind) const {
  return both(kind, s, r, runtime::kGradientBytes);
}

double BoundCalculator::DataParallelWork::gather(int64_t s, int64_t r) const {
  return both(Collective::AllGather, s, r, elementBytes);
}

double BoundCalculator::DataParallelWork::optimizerStep(int64_t s) const {
  return cost.replicaOptimizerStepTime(adam, st[s].params, replicas, sharded, apart(s),
                                       experts.members);
}

const BoundCalculator::ExpertData &BoundCalculator::expertData(const Job &job,
                                                               const CostModel &cost) {
  const ParallelismSpec &par = job.parallelism;
  static const ExpertData kTogether;
  if (!hasExperts(job) || (par.expert <= 1 && par.tensor <= 1))
    return kTogether;
  const bool pipelineInner = par.rankOrder == RankOrder::PipelineInner;
  ExpertData &out =
      expertGroups[std::make_tuple(par.pipeline, par.data, pipelineInner, par.tensor, par.expert)];
  if (out.members > 0)
    return out;
  runtime::Config config;
  config.pipeline = static_cast<int32_t>(par.pipeline);
  config.data = static_cast<int32_t>(par.data);
  config.pipelineInner = pipelineInner;
  config.tensor = static_cast<int32_t>(par.tensor);
  config.expert = static_cast<int32_t>(par.expert);
  out.members = par.data * par.tensor / par.expert;
  for (int64_t r = 0; r < par.pipeline; ++r) {
    out.rings.push_back(expertDataRing(cost, config, r));
    if (par.expert > 1)
      out.allToAllPeers.push_back(expertPeers(config, cost, r));
  }
  return out;
}

int64_t BoundCalculator::staticMemoryBound(const Job &job, const ParallelismSpec &par) {
  return memoryLowerBound(job, par).staticBytes;
}

llvm::Expected<const CostModel *> BoundCalculator::costModel(const Job &job) {
  const ParallelismSpec &par = job.parallelism;
  const bool pipelineInner = par.rankOrder == RankOrder::PipelineInner;
  // A mixture of experts is priced with the routing imbalance of its micro-batch size
  // (jobCostInputs()); a dense model's costs do not depend on it.
  std::unique_ptr<CostModel> &slot = costModels[std::make_tuple(
      checkpointingKey(par), par.pipeline, par.data, pipelineInner, par.tensor,
      par.sequenceParallel, par.expert, hasExperts(job) ? par.microbatchSize : 0)];
  if (!slot) {
    CostInputs in = jobCostInputs(job);
    in.pipeline = par.pipeline;
    in.data = par.data;
    in.tensor = par.tensor;
    in.sequenceParallel = par.sequenceParallel;
    in.pipelineInner = pipelineInner;
    in.checkpointing = par.checkpointing;
    in.recomputeModules = par.selectiveModules();
    llvm::Expected<CostModel> built = CostModel::build(in);
    if (!built)
      return built.takeError();
    slot = std::make_unique<CostModel>(std::move(*built));
  }
  return slot.get();
}

llvm::Expected<const std::vector<BoundCalculator::Stage> *>
BoundCalculator::stages(const Job &job) {
  const ParallelismSpec &par = job.parallelism;
  auto key = std::make_tuple(par.numStages(), par.microbatchSize, checkpointingKey(par), par.tensor,
                             par.sequenceParallel, par.expert);
  if (auto it = partitions.find(key); it != partitions.end())
    return &it->second;
  llvm::Expected<const CostModel *> cost = costModel(job);
  if (!cost)
    return cost.takeError();
  // Each layer's times on one micro-batch, shared by every partition of the same compute
  // (they depend on neither P nor D); the stage sums below add them in the cost model's order.
  LayerTimes &times = layerTimes[std::make_tuple(par.microbatchSize, checkpointingKey(par),
                                                 par.tensor, par.sequenceParallel, par.expert)];
  if (times.forward.empty())
    for (int64_t l = 0; l < (*cost)->numLayers(); ++l) {
      times.forward.push_back((*cost)->forwardTime(l, par.microbatchSize));
      times.backward.push_back((*cost)->backwardTime(l, par.microbatchSize));
      times.input.push_back((*cost)->inputGradientTime(l, par.microbatchSize));
      times.weight.push_back((*cost)->weightGradientTime(l, par.microbatchSize));
      if (runtime::recomputesWhole(par.checkpointing))
        times.recompute.push_back((*cost)->recomputeTime(l, par.microbatchSize));
    }
  auto sum = [](const std::vector<double> &perLayer, const Stage &stage) {
    double total = 0;
    for (int64_t l = stage.first; l < stage.end; ++l)
      total += perLayer[l];
    return total;
  };
  // The partition conduit-partition-stages computes: one micro-batch through each layer.
  sched::PartitionProblem problem;
  problem.numStages = par.numStages();
  if (const int64_t mtp = job.model.transformer ? job.model.transformer->mtpLayers : 0; mtp > 0)
    problem.tailLayers = mtp + 1; // the modules with the head
  for (size_t l = 0; l < times.forward.size(); ++l)
    problem.layerCosts.push_back(times.forward[l] + times.backward[l]);
  llvm::Expected<sched::Partition> partition = sched::partitionMinMax(problem);
  if (!partition)
    return partition.takeError();
  std::vector<Stage> out;
  out.reserve(partition->numStages());
  std::vector<LayerBytes> layers;
  // A block with experts holds its routed tokens at the busiest expert rank's load, as the
  // memory plan counts them (passes/PeakMemory.cpp): beyond the mean its layer states,
  // (imbalance - 1) times the mean, of its T-th of the tokens, per sample.
  int64_t routedSurcharge = 0;
  if (const double imbalance = hasExperts(job) ? moeImbalance(job).value : 1; imbalance > 1)
    routedSurcharge =
        static_cast<int64_t>(static_cast<double>(moeRoutedActivationBytes(
                                 *job.model.transformer, job.training.elementBytes())) *
                             (imbalance - 1) / static_cast<double>(par.tensor));
  for (int64_t s = 0; s < partition->numStages(); ++s) {
    Stage stage;
    stage.first = partition->bounds[s];
    stage.end = partition->bounds[s + 1];
    // What one rank of the tensor group holds, as the compiler's memory plan counts it.
    layers.clear();
    for (int64_t l = stage.first; l < stage.end; ++l) {
      const TensorShare share = shareOf(job.model.layers[l], par);
      stage.params += share.params;
      stage.expertParams += share.expertParams;
      const int64_t surcharge = job.model.layers[l].expertParams > 0 ? routedSurcharge : 0;
      layers.push_back({share.activationBytes + surcharge, share.checkpointBytes,
                        share.weightGradientBytes, share.selectiveBytes, job.model.layers[l].kind});
    }
    stage.activations = stageActivations(layers, par.checkpointing);
    out.push_back(stage);
  }
  // The durations of a stage's forward and backward on one micro-batch, shared by every shape
  // with this partition (the compute does not depend on P or D, nor the tensor group's link on
  // more than T, nor the fastest all-to-all of its expert group on more than E). A mixture of
  // experts' blocks issue their own list of collectives (TensorCollectives.h), with the expert
  // all-to-alls over E > 1 ranks, q/k norms their gains' all-reduce, and latent attention its
  // replicated parameters'.
  const std::optional<runtime::Transformer> routing =
      job.model.transformer ? std::optional(collectiveShape(job)) : std::nullopt;
  runtime::Config tensorConfig;
  if (par.tensor > 1 || par.expert > 1) {
    tensorConfig.tensor = static_cast<int32_t>(par.tensor);
    tensorConfig.sequenceParallel = par.sequenceParallel;
    tensorConfig.checkpointing = par.checkpointing;
    tensorConfig.recomputeModules = par.recomputeModules;
    tensorConfig.tokensPerSample = job.model.tokensPerSample;
    tensorConfig.dtype = job.training.dtype;
    tensorConfig.expert = static_cast<int32_t>(par.expert);
    if (tensorLayers.empty())
      for (const LayerSpec &layer : job.model.layers) {
        runtime::Layer l;
        l.kind = layer.kind;
        l.checkpointBytes = layer.checkpointBytes;
        l.outputBytes = layer.outputBytes;
        l.fwdFlops = layer.fwdFlops;
        tensorLayers.push_back(l);
      }
  }
  const int64_t b = par.microbatchSize;
  // What a pass of a stage issues: its tensor collectives' time, and its expert all-to-alls' at
  // the fastest any placement of the expert group allows (fastestExpertAllToAll).
  struct Issued {
    double tensor = 0, allToAll = 0;
    std::vector<int64_t> allToAllBytes;
  };
  auto issued = [&](const Stage &stage, runtime::Op pass) {
    Issued out;
    if (par.tensor <= 1 && par.expert <= 1)
      return out;
    for (const runtime::TensorCollective &x : runtime::tensorCollectives(
             tensorConfig, tensorLayers, static_cast<int32_t>(stage.first),
             static_cast<int32_t>(stage.end), pass, b, routing ? &*routing : nullptr)) {
      if (x.isExpertAllToAll()) {
        out.allToAll += fastestExpertAllToAll(**cost, x.bytes, par.expert, *routing);
        out.allToAllBytes.push_back(x.bytes);
      } else
        out.tensor += (*cost)->tensorCollectiveTime(collectiveOf(x.op), x.bytes);
    }
    return out;
  };
  // A compute and the tensor collectives it issues on the compute stream, as the simulator
  // charges them (PlanCosts): all of the collectives after the compute, or, with sequence
  // parallelism and tensor_comm_overlap, pipelined with it (the longer of the two). A whole
  // backward issues what its input and weight gradients issue together, so its time bounds the
  // two halves' as well.
  auto withCollectives = [&](const Issued &x, double compute) {
    return par.sequenceParallel && par.tensorCommOverlap ? std::max(compute, x.tensor)
                                                         : compute + x.tensor;
  };
  for (Stage &stage : out) {
    stage.computeForwardS = sum(times.forward, stage);
    stage.computeBackwardS = sum(times.backward, stage);
    stage.computeInputS = sum(times.input, stage);
    stage.computeWeightS = sum(times.weight, stage);
    const Issued forward = issued(stage, runtime::Op::Forward),
                 backward = issued(stage, runtime::Op::Backward),
                 input = issued(stage, runtime::Op::BackwardInput),
                 weight = issued(stage, runtime::Op::BackwardWeight);
    stage.forwardS = withCollectives(forward, stage.computeForwardS);
    stage.backwardS = withCollectives(backward, stage.computeBackwardS);
    stage.inputS = withCollectives(input, stage.computeInputS);
    stage.weightS = withCollectives(weight, stage.computeWeightS);
    stage.allToAllForwardS = forward.allToAll;
    stage.allToAllBackwardS = backward.allToAll;
    stage.allToAllInputS = input.allToAll;
    stage.allToAllForwardBytes = forward.allToAllBytes;
    stage.allToAllBackwardBytes = backward.allToAllBytes;
    stage.allToAllInputBytes = input.allToAllBytes;
    // How a paired step cuts each pass between its all-to-alls, as the plan's pricing does.
    if (par.expert > 1 && routing) {
      auto again = [&](int32_t l) { return times.recompute[l]; };
      auto cut = [&](runtime::Op pass, const std::vector<double> &perLayer) {
        return computeSegments(
            *routing, tensorLayers, static_cast<int32_t>(stage.first),
            static_cast<int32_t>(stage.end), pass, [&](int32_t l) { return perLayer[l]; },
            times.recompute.empty() ? nullptr : llvm::function_ref<double(int32_t)>(again));
      };
      stage.forwardCuts = cut(runtime::Op::Forward, times.forward);
      stage.backwardCuts = cut(runtime::Op::Backward, times.backward);
      stage.inputCuts = cut(runtime::Op::BackwardInput, times.input);
    }
    // Searches hold thousands of partitions.
    for (auto *held : {&stage.forwardCuts, &stage.backwardCuts, &stage.inputCuts})
      held->shrink_to_fit();
    for (auto *held :
         {&stage.allToAllForwardBytes, &stage.allToAllBackwardBytes, &stage.allToAllInputBytes})
      held->shrink_to_fit();
  }
  return &(partitions[key] = std::move(out));
}

void BoundCalculator::useContext(const std::string &jobContext) {
  if (jobContext != context) {
    costModels.clear();
    tensorLayers.clear();
    layerTimes.clear();
    partitions.clear();
    schedules.clear();
    quick.clear();
    expertGroups.clear();
    context = jobContext;
  }
}

llvm::Expected<Bounds> BoundCalculator::bounds(const Job &job, const std::string &jobContext,
                                               bool timed) {
  useContext(jobContext);
  llvm::Expected<const ScheduleFacts *> factsOr = schedule(job);
  if (!factsOr)
    return factsOr.takeError();
  return boundsFrom(job, **factsOr, timed);
}

llvm::Expected<Bounds> BoundCalculator::quickBounds(const Job &job, const std::string &jobContext) {
  useContext(jobContext);
  const ParallelismSpec &par = job.parallelism;
  // Where the compiler may pair a rank's computes (DualPipeV, and depth-first run as combined
  // 1F1B), a pair hides its all-to-alls behind its computes.
  const bool allToAlls = hasExperts(job) && par.expert > 1;
  const bool mayPair = allToAlls && (par.schedule == runtime::Schedule::DualPipeV ||
                                     par.schedule == runtime::Schedule::DepthFirst);
  const auto key =
      std::make_tuple(par.pipeline, par.numStages(), par.microbatches, par.microbatchSize,
                      par.tensor, par.sequenceParallel, par.expert, par.data, checkpointingKey(par),
                      static_cast<int>(effectiveSharding(par)), static_cast<int>(par.rankOrder),
                      static_cast<int>(par.placement), par.splitBackward, mayPair);
  if (auto it = quick.find(key); it != quick.end())
    return it->second;
  llvm::Expected<const std::vector<Stage> *> stageList = stages(job);
  if (!stageList)
    return stageList.takeError();
  const int64_t numStages = par.numStages();
  llvm::Expected<std::vector<int64_t>> rankOf = sched::placeStages(
      numStages, par.pipeline,
      par.placement == Placement::V ? sched::Placement::V : sched::Placement::Loop);
  if (!rankOf)
    return rankOf.takeError();
  // Without the schedule: each rank computes its micro-batches' forwards and backwards one at a
  // time, and nothing is known of when a stage's last backward ends or what it holds.
  ScheduleFacts facts;
  facts.rankOf = std::move(*rankOf);
  facts.computeEnd.assign(par.pipeline, 0);
  for (int64_t s = 0; s < numStages; ++s)
    facts.computeEnd[facts.rankOf[s]] += static_cast<double>(par.microbatches) *
                                         ((**stageList)[s].forwardS + (**stageList)[s].backwardS);
  // A mixture of experts' all-to-alls, at the fastest any placement allows: each follows its
  // compute on the compute stream where the compute runs alone, and a pair lasts at least as
  // long as its all-to-alls, which share one link. So a rank that may pair its computes takes
  // at least the longer of its computes and its all-to-alls, one that does not both.
  if (allToAlls) {
    std::vector<double> allToAll(par.pipeline, 0);
    for (int64_t s = 0; s < numStages; ++s) {
      const Stage &stage = (**stageList)[s];
      allToAll[facts.rankOf[s]] +=
          static_cast<double>(par.microbatches) *
          (stage.allToAllForwardS +
           (par.splitBackward ? stage.allToAllInputS : stage.allToAllBackwardS));
    }
    for (int64_t r = 0; r < par.pipeline; ++r)
      facts.computeEnd[r] =
          mayPair ? std::max(facts.computeEnd[r], allToAll[r]) : facts.computeEnd[r] + allToAll[r];
  }
  facts.lastBackwardEnd.assign(numStages, 0);
  facts.forwardHeld.assign(numStages, 0);
  facts.backwardHeld.assign(numStages, 0);
  facts.forwardHeldWithGradients.assign(numStages, 0);
  facts.backwardHeldWithGradients.assign(numStages, 0);
  facts.forwardHeldWithAllGradients.assign(numStages, 0);
  facts.backwardHeldWithAllGradients.assign(numStages, 0);
  llvm::Expected<Bounds> out = boundsFrom(job, facts);
  if (out)
    quick.emplace(key, *out);
  return out;
}

llvm::Expected<Bounds> BoundCalculator::boundsFrom(const Job &job, const ScheduleFacts &facts,
                                                   bool timed) {
  llvm::Expected<const CostModel *> costOr = costModel(job);
  if (!costOr)
    return costOr.takeError();
  const CostModel &cost = **costOr;
  const std::vector<Stage> &st = **stages(job);

  const ParallelismSpec &par = job.parallelism;
  const runtime::Sharding sharding = effectiveSharding(par);
  const bool dataParallel = par.data > 1;
  const int64_t numStages = par.numStages();
  const DataParallelWork work(job, cost, st, expertData(job, cost));

  // Each rank's static state and the most it holds beside it while it computes.
  std::vector<int64_t> rankStatic(par.pipeline, 0), rankActive(par.pipeline, 0);
  for (int64_t s = 0; s < numStages; ++s) {
    const int64_t r = facts.rankOf[s];
    rankStatic[r] += staticStateBytes(job, par, st[s].params, st[s].expertParams);
    const int64_t gathered = dataParallel && sharding == runtime::Sharding::Full
                                 ? work.allocated(s) * job.training.elementBytes()
                                 : 0;
    if (dataParallel && runtime::shardsGradients(sharding) &&
        par.gradientReduction == runtime::GradientReduction::Run)
      // Reduced after each run: a backward holds its own stage's full buffer, at least.
      rankActive[r] = std::max(
          {rankActive[r], facts.forwardHeld[s] + gathered,
           facts.backwardHeld[s] + work.allocated(s) * runtime::kGradientBytes + gathered});
    else if (dataParallel && runtime::shardsGradients(sharding) && work.expertBuffers())
      rankActive[r] = std::max({rankActive[r], facts.forwardHeldWithAllGradients[s] + gathered,
                                facts.backwardHeldWithAllGradients[s] + gathered});
    else if (dataParallel && runtime::shardsGradients(sharding))
      rankActive[r] = std::max({rankActive[r], facts.forwardHeldWithGradients[s] + gathered,
                                facts.backwardHeldWithGradients[s] + gathered});
    else
      rankActive[r] = std::max(
          {rankActive[r], facts.forwardHeld[s] + gathered, facts.backwardHeld[s] + gathered});
  }
  // Untimed, a configuration whose memory bound exceeds the device is refused on it alone: its
  // step bound is left at 0, which bounds every step.
  if (!timed && job.cluster.memoryBytes > 0) {
    Bounds refused;
    for (int64_t r = 0; r < par.pipeline; ++r)
      refused.peakMemoryBytes = std::max(refused.peakMemoryBytes, rankStatic[r] + rankActive[r]);
    if (refused.peakMemoryBytes > job.cluster.memoryBytes)
      return refused;
  }

  // Sharded: no rank computes before the parameters of a stage of its are gathered (full
  // sharding's residency, or the step's gather of the shards the previous step updated).
  double shift = 0;
  if (dataParallel && sharding != runtime::Sharding::None) {
    shift = std::numeric_limits<double>::infinity();
    for (int64_t s = 0; s < numStages; ++s)
      shift = std::min(shift, work.gather(s, facts.rankOf[s]));
  }
  std::vector<double> rankEnd(par.pipeline);
  for (int64_t r = 0; r < par.pipeline; ++r)
    rankEnd[r] = shift + facts.computeEnd[r];
  double step = 0;
  for (int64_t s = 0; s < numStages; ++s) {
    const int64_t r = facts.rankOf[s];
    const double optimizer = work.optimizerStep(s);
    // The optimizer steps run on the compute stream after the rank's last compute.
    rankEnd[r] += optimizer;
    if (!dataParallel)
      continue;
    // Each stage's reduction starts after its last backward, its optimizer step after the
    // reduction.
    step = std::max(step, shift + facts.lastBackwardEnd[s] + work.reduction(s, r) + optimizer);
  }
  for (double end : rankEnd)
    step = std::max(step, end);
  // What holds for any order of a rank's stages. A rank's collectives run one at a time on its
  // collective stream, in program order. Its last compute completes the gradients of some
  // stage, whose reduction and then optimizer step follow it; and the last reduction comes
  // after every earlier collective: at least one parameter all-gather per stage when sharded
  // (full sharding's residencies, or the gathers of updated parameters that open the step),
  // and every other stage's reduction.
  if (dataParallel) {
    const double inf = std::numeric_limits<double>::infinity();
    std::vector<double> minTail(par.pipeline, inf), minOptimizer(par.pipeline, inf),
        collectives(par.pipeline, 0);
    for (int64_t s = 0; s < numStages; ++s) {
      const int64_t r = facts.rankOf[s];
      const double optimizer = work.optimizerStep(s), reduce = work.reduction(s, r);
      minTail[r] = std::min(minTail[r], reduce + optimizer);
      minOptimizer[r] = std::min(minOptimizer[r], optimizer);
      collectives[r] += reduce + (sharding != runtime::Sharding::None ? work.gather(s, r) : 0);
    }
    for (int64_t r = 0; r < par.pipeline; ++r) {
      if (minTail[r] == inf)
        continue;
      step = std::max(step, shift + facts.computeEnd[r] + minTail[r]);
      step = std::max(step, collectives[r] + minOptimizer[r]);
    }
  }
  // Timed, the order's collectives are placed: with full sharding, what each compute holds of
  // the activations and of the gathered parameters together.
  std::vector<int64_t> heldAtComputes;
  if (timed)
    step = std::max(step, streamsEnd(job, cost, st, work, facts, heldAtComputes));

  Bounds out;
  out.stepTimeS = step;
  for (int64_t r = 0; r < par.pipeline; ++r) {
    if (!heldAtComputes.empty())
      rankActive[r] = std::max(rankActive[r], heldAtComputes[r]);
    out.peakMemoryBytes = std::max(out.peakMemoryBytes, rankStatic[r] + rankActive[r]);
  }
  return out;
}
