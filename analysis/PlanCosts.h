//===- PlanCosts.h - the duration of every instruction of a plan -*- C++ -*-===//
//
// What the simulator (analysis/Simulator.h) charges for each instruction: computes per stage
// and micro-batch from the cost model (or unit costs, for comparing schedules with their
// textbook definitions), transfers and collectives over their links, the share of the
// tensor group's collectives that a compute does not hide, and the expert all-to-alls: whole
// where nothing computes beside them, and in a paired step (a forward paired with the next
// compute, DualPipe's overlapped chunks) only what the pair's chunks leave exposed.
//
// A paired step's chunks: each half is a chain of compute segments cut by its all-to-alls (a
// block with experts: attention and router, dispatch, the routed experts, combine; its
// backward: combine's gradient, the experts', dispatch's gradient, attention; a recomputed
// forward's first), the routed experts' segment the block's time in the ratio of their FLOPs
// (top-k experts of the block's forward FLOPs). The two chains share one compute stream and
// one link: a segment starts once its stream is free and the all-to-all before it arrived,
// an all-to-all once the link is free and the segment before it ended, whichever can start
// first going first. So each all-to-all of one half runs while the other half computes, and
// each chunk costs the longer of its compute and its communication. The step takes the
// chains' end; what exceeds the two computes is the exposed all-to-all time, charged to the
// pair's all-to-alls in proportion to their whole times.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_ANALYSIS_PLANCOSTS_H
#define CONDUIT_ANALYSIS_PLANCOSTS_H

#include "analysis/CostModel.h"
#include "runtime/plan/Plan.h"

#include "llvm/ADT/STLFunctionalExtras.h"

#include <array>
#include <optional>
#include <utility>
#include <vector>

namespace conduit {

/// The expected number of nodes a token's `topK` experts lie on, its experts chosen at random
/// among `experts` spread evenly over `nodes` nodes (consecutive experts on a node) and, with
/// group-limited routing (`groupTopK` below `groups`), among the experts of `groupTopK` of the
/// `groups` consecutive groups chosen at random. Where groups and nodes do not nest (neither
/// count divides the other) the limit is left out, which counts more nodes.
double expectedTokenNodes(int64_t experts, int64_t topK, int64_t groups, int64_t groupTopK,
                          int64_t nodes);

/// An expert all-to-all in which a rank sends `bytes`, 1/`members` to each member of its group
/// (one share stays), for a rank with `peers` (its group's members on other nodes, and in its
/// own node): the shares for its node's members go over the node's links and those for other
/// nodes over the network, at the same time, so it takes the longer of the two parts. Per node
/// (Transformer::dispatch 1, DeepEP), a token crosses the network once for each other node its
/// experts lie on, to the member with its own index there, which passes each copy on to the
/// member holding the expert over the node's links; every member forwards as much as it
/// receives.
double expertAllToAllTime(const CostModel &cost, int64_t bytes, int64_t members,
                          std::pair<int64_t, int64_t> peers, const runtime::Transformer &t);
/// The least expertAllToAllTime of a rank of any group of `members` ranks, wherever they are
/// placed: over every split of its other members between its own node (fewer than
/// gpus_per_node) and the network. What conduit-tune's bounds charge before ranks are placed.
double fastestExpertAllToAll(const CostModel &cost, int64_t bytes, int64_t members,
                             const runtime::Transformer &t);

/// The busiest member of the expert groups of pipeline rank `pipelineRank`: its peers on
/// other nodes and in its own node, the most of the former first (what expertAllToAllTime
/// prices that rank's all-to-alls with).
std::pair<int64_t, int64_t> expertPeers(const runtime::Config &config, const CostModel &cost,
                                        int64_t pipelineRank);
/// The slowest ring among the expert-data groups of pipeline rank `pipelineRank`
/// (runtime::expertDataGroupRanks, one per remainder mod E): where the routed experts'
/// reductions and gathers run when they are apart (runtime::Plan::expertsApart).
Ring expertDataRing(const CostModel &cost, const runtime::Config &config, int64_t pipelineRank);

/// The SMs per-node dispatch kernels take while they run: DeepSeek-V3's (arXiv 2412.19437,
/// §3.2.2: 20 of H800's 132 "sufficient to fully utilize" IB and NVLink) and Megatron-Core's
/// default for DeepEP (`moe_deepep_num_sms`).
constexpr int64_t kDispatchSms = 20;

/// A paired step's time: two chains of compute segments cut by all-to-alls (each chain one
/// more segment than all-to-alls) on one compute stream and one link, each item started as
/// soon as its resource is free and the item before it in its chain ended (the first chain
/// where both can). A segment computes at `sharedRate` of its speed while an all-to-all is
/// in flight (the SMs the all-to-all's kernels take: kDispatchSms for per-node dispatch,
/// kCollectiveOverlapSlowdown for NCCL's), else at full speed.
double pairedStepTime(const std::vector<double> *const compute[2],
                      const std::vector<double> *const comm[2], double sharedRate);
/// The rate at which a paired step's computation runs while one of its all-to-alls is in
/// flight (pairedStepTime's `sharedRate`): per-node dispatch kernels (Transformer::dispatch 1)
/// take kDispatchSms of the device's SMs, NCCL's all-to-all slows it as its other collectives
/// do (CostModel::slowsBesideCollectives), and elsewhere nothing.
double pairedComputeRate(const CostModel &cost, const runtime::Transformer &t);
/// The compute segments between the expert all-to-alls of one pass `op` through layers
/// [first, end) (one more than its all-to-alls; the file comment says where they cut), from
/// each layer's time in that pass (`time(layer)`, CostModel's for the micro-batch) and, with
/// full checkpointing, the forward its backward recomputes (`recomputed(layer)`, null
/// without); `layers` are the plan's (their kinds and forward FLOPs).
std::vector<double> computeSegments(const runtime::Transformer &t,
                                    const std::vector<runtime::Layer> &layers, int32_t first,
                                    int32_t end, runtime::Op op,
                                    llvm::function_ref<double(int32_t)> time,
                                    llvm::function_ref<double(int32_t)> recomputed);
/// The all-to-all time a paired step leaves exposed beyond its two halves' computes: each half
/// `h` computes `own[h]` seconds cut as `cuts[h]` (scaled to add up to it) and issues the
/// all-to-alls `comms[h]` between its cuts, at `sharedRate` (pairedStepTime). Null where the
/// halves are not cut as their all-to-alls require (the step is then priced whole) or issue
/// none.
std::optional<double> pairExposedAllToAll(const std::vector<double> *const cuts[2],
                                          const double own[2],
                                          const std::vector<double> *const comms[2],
                                          double sharedRate);

/// How much longer a computation runs while a NCCL collective runs beside it on the same GPU:
/// the average compute slowdown Lee et al. measured on A100 and H100 for GPT and Llama
/// training steps with their collectives overlapped (arXiv 2507.03114: 18.9% on average, 40.0%
/// at most). It is the share of SMs the collective's kernels take (1 / 1.189 of the compute
/// rate is 21 of H100's 132 SMs; NCCL's all-gather runs 24 thread blocks there) with the
/// memory traffic and power the two share.
constexpr double kCollectiveOverlapSlowdown = 0.189;

/// One item of a rank's program, in issue order, for collectiveOverlapSurcharges: a compute or
/// an optimizer step on the compute stream, or a data-parallel all-gather or reduction (reduce-
/// scatter or all-reduce) on the collective stream, with its duration.
struct OverlapItem {
  enum class Kind : uint8_t { Compute, OptimizerStep, Gather, Reduction };
  Kind kind;
  int32_t stage;
  double seconds;
};

/// The time each compute and optimizer step of one rank's `items` loses to the collectives
/// beside it (0 for the collectives): `slowdown` times how long one runs while it overlaps
/// one, on the rank's own timeline. On that timeline the compute stream runs its items back to
/// back, a compute waiting for its stage's last all-gather before it and an optimizer step for
/// its stage's last reduction before it; a collective starts when it is issued (the compute
/// stream's time then) or when the collective before it ends. Transfers and the other ranks
/// are left out, so that the compiler's simulator (PlanCosts) and the tuner's bound
/// (tune/TuneBounds.cpp) charge the same surcharges from the same order: the bound, which
/// leaves out what only delays, stays below the simulated step.
std::vector<double> collectiveOverlapSurcharges(const std::vector<OverlapItem> &items,
                                                size_t numStages, double slowdown);

/// Durations of every kind of instruction of one plan.
class PlanCosts {
public:
  /// Durations from the cost model. `rankParams`: the parameters of each stage on one rank of
  /// its tensor group, what its optimizer step updates (the stage table states whole stages;
  /// passes/PassUtils.h, rankStageParams).
  static PlanCosts fromCostModel(const runtime::Plan &plan, const CostModel &cost,
                                 const std::vector<int64_t> &rankParams);
  /// Unit costs: a forward, an input gradient and a weight gradient take their samples' count,
  /// a whole backward twice that, everything else 0.
  static PlanCosts unit(const runtime::Plan &plan);

  /// The runtime moves messages only between computes (CostModel::progressBetweenComputes):
  /// the simulator holds a transfer until its receiver's compute at its end is over.
  bool progressBetweenComputes = false;

  double of(const runtime::Plan &plan, int32_t rank, const runtime::Instruction &inst) const;
  /// A tensor collective `inst` issued by a compute `pass` (Forward, Backward, BackwardInput,
  /// BackwardWeight) of its stage and micro-batch: the time it adds to the compute stream.
  /// Without sequence parallelism, all of it; with it and config.tensorCommOverlap (the
  /// default), the collectives are pipelined with the compute's GEMMs (as Megatron-Core's
  /// tp_comm_overlap does), so that a compute and its collectives take the longer of the two,
  /// and each collective adds its share of the excess.
  double tensorCollective(const runtime::Instruction &inst, runtime::Op pass) const;
  /// Expert all-to-all `index` of rank `rank`'s program: the time it adds to the compute
  /// stream (the file comment says how a paired step hides it).
  double expertAllToAll(int32_t rank, int64_t index) const;
  /// Its whole time, as if nothing hid it: for the busiest member of the pipeline rank's expert
  /// groups, the longer of its shares to members in its node (CostModel::allToAllTime over
  /// the node's links) and to members on other nodes (over the network). With per-node
  /// dispatch (Transformer::dispatch 1) the network carries a token once per other node its
  /// experts lie on (expectedTokenNodes) and the node's links the copies fanned out there.
  double expertAllToAllWhole(int32_t rank, int64_t index) const;

private:
  /// Fills allToAllAdded and allToAllWhole (expert parallelism only).
  void priceAllToAlls(const runtime::Plan &plan);
  /// Adds to each compute's and optimizer step's duration what it loses to the data-parallel
  /// collectives beside it (collectiveOverlapSurcharges; CostModel::slowsBesideCollectives):
  /// CPUs, unit costs, hand-built clusters and measured profiles run at full speed.
  void priceOverlaps(const runtime::Plan &plan);
  std::vector<std::vector<double>> allToAllAdded, allToAllWhole; // [rank][instruction]
  /// Tensor parallelism with sequence parallelism: per stage, micro-batch and pass (forward,
  /// backward, input, weight), the fraction of the collectives' time the compute does not hide.
  std::vector<std::vector<std::array<double, 4>>> exposed;
  std::vector<std::vector<double>> forward, backward, input, weight; // [stage][micro-batch]
  std::vector<double> optimizer;                                     // [stage]
  const CostModel *cost = nullptr;
  std::vector<Ring> dpRing;          // [group]
  std::vector<int64_t> groupMembers; // [group]: ranks x replicas
  /// Expert parallelism: a stage's routed experts on one rank (the part of its reductions and
  /// gathers that runs over the expert-data group), that group's ranks, and the slowest ring
  /// of its instances in each plan group.
  std::vector<int64_t> stageExpertParams; // [stage]
  int64_t expertDataMembers = 0, elementBytes = 2;
  std::vector<Ring> expertDataRing;       // [group]
  std::vector<std::vector<Link>> p2pLink; // [rank][peer]
};

} // namespace conduit

#endif // CONDUIT_ANALYSIS_PLANCOSTS_H
