//===- TuneBounds.h - lower bounds of a configuration's figures -*- C++ -*-===//
//
// What conduit-tune knows about a configuration before compiling it: a step time and a peak
// memory that the compiled plan cannot beat. Both come from the job alone, without IR, in two
// tiers:
//
// * the static tier: parameters, gradients and optimizer state of the fullest rank plus one
//   micro-batch's activations, with no schedule built. It refuses most configurations that
//   cannot fit.
// * the schedule tier (TuneSchedule.cpp): the partition and the schedule the compiler would
//   build (the same scheduling library calls, split backwards placed from the same compute
//   times), executed with compute only: every action as early as its rank and its
//   dependencies allow.
//   Activations held along the rank's order bound its memory from below. Timed
//   (TuneTimed.cpp), the tier runs that order again as the compiler's simulator times it, as
//   far as is known before compiling: the computes slowed beside the data-parallel
//   collectives, each result reaching another pipeline rank no sooner than its transfer
//   takes; then each rank's compute and data-parallel collective streams run it with the
//   collectives the compiler places for it (scheduling/Collectives.h), each instruction
//   waiting for what it waits for in the plan, and, with full sharding, the parameters those
//   gather count at every compute. What is left out (the transfers' order and sharing of
//   links) only delays instructions in the compiled plan, so the end of those streams bounds
//   the step from below; with one pipeline rank it is the compiled step. An order with
//   overlapped pairs (DualPipeV's, and combined 1F1B's) runs as the plan runs it, a pair's
//   halves one after the other, each waiting for its own inputs; the untimed tier keeps, for
//   DualPipeV, each rank's total work after the pipeline's fill and the collectives that must
//   follow it (the tuner compiles the order built here: it does not defer fewer weight
//   gradients to fit). A mixture of experts' computes carry their expert all-to-alls: in the
//   untimed tier at the fastest their group's placement allows, whole where the order runs a
//   compute alone and a pair's excess over its two computes; in the timed tier priced where
//   the configuration places the group, and for a pair what its chunks leave exposed
//   (pairExposedAllToAll, from the same segments and halves slowed beside collectives as the
//   plan's), each half's share after it. The routed experts apart
//   (runtime::Plan::expertsApart) are reduced, gathered and updated over their expert-data
//   group, after the dense parameters' over the replicas, as the plan prices them.
//
// Both tiers also bound each rank's collective stream for any order: its last compute
// completes some stage's gradients, whose reduction and optimizer step follow it, and the
// all-gathers of updated parameters (optimizer and gradient sharding) follow every
// reduction, one at a time.
//
// The search compiles configurations in the order of their bounds and stops where no bound
// can beat what it has found (Tune.h); every compiled configuration is checked against its
// bounds, and a bound above the compiled figure is an error, not a silent loss of exactness.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_TUNE_TUNEBOUNDS_H
#define CONDUIT_TUNE_TUNEBOUNDS_H

#include "analysis/CostModel.h"
#include "analysis/PeakMemory.h"
#include "analysis/TensorShare.h"
#include "job/JobSpec.h"
#include "runtime/plan/Plan.h"
#include "scheduling/Problems.h"
#include "scheduling/Schedulers.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace conduit {

namespace detail {
/// The sharding the plan applies: none with a single replica.
runtime::Sharding effectiveSharding(const ParallelismSpec &p);
/// Whether the job's model has routed experts.
bool hasExperts(const Job &job);
/// What a plan states of the transformer that its compute's collectives depend on
/// (runtime::Transformer): the q/k norms' gains (their size and whether they exist) and a
/// mixture of experts' routing, the fields the expert all-to-alls' list, sizes and times read,
/// with the imbalance resolved as the compiler resolves it (moeImbalance). The job's model must
/// be a transformer.
runtime::Transformer collectiveShape(const Job &job);
/// A layer as one rank of its tensor group holds it.
TensorShare shareOf(const LayerSpec &layer, const ParallelismSpec &par);
} // namespace detail

/// The checkpointing as the caches of bounds key it: the mode, and with selective
/// checkpointing what it recomputes (ParallelismSpec::selectiveModules) in the bits above.
inline int checkpointingKey(const ParallelismSpec &par) {
  return static_cast<int>(par.checkpointing) | static_cast<int>(par.selectiveModules()) << 2;
}

/// Lower bounds of the figures the compiled plan predicts.
struct Bounds {
  double stepTimeS = 0;
  /// Of the fullest rank.
  int64_t peakMemoryBytes = 0;
};

/// Computes bounds, reusing partitions and schedules across configurations that share them.
/// Not thread-safe: one per thread.
class BoundCalculator {
public:
  /// The static tier's memory bound (no schedule built) of `job` run as `par`: the static part
  /// of memoryLowerBound() (MemoryBound.h); only the model, the training section and P, D, T and
  /// the sharding of `par` matter.
  static int64_t staticMemoryBound(const Job &job, const ParallelismSpec &par);
  static int64_t staticMemoryBound(const Job &job) {
    return staticMemoryBound(job, job.parallelism);
  }
  /// Both tiers. Fails with the scheduler's message when the compiler would refuse the shape.
  /// `context` names what the job's model, cluster and training sections were made of (the
  /// values of dimensions outside `parallelism`): results are reused only within one context.
  /// `timed`: the order is run as the compiler's simulator times it, as far as that is known
  /// before compiling (streamsEnd()); without, the compute-only execution of the order alone
  /// and what holds for any order, a cheaper and lower bound. Untimed, a configuration whose
  /// memory bound exceeds the device gets a step bound of 0: it is refused on memory alone.
  llvm::Expected<Bounds> bounds(const Job &job, const std::string &context, bool timed = true);
  /// The bounds without the schedule tier (no schedule built, only the partition): each rank's
  /// compute one action at a time, the optimizer and data-parallel steps after it, and the
  /// static state of each rank's stages. Never above bounds(); the search orders by it and
  /// builds the schedule only for the configurations it cannot rule out this way.
  llvm::Expected<Bounds> quickBounds(const Job &job, const std::string &context);

private:
  /// A stage's layers and sizes.
  struct Stage {
    int64_t first = 0, end = 0, params = 0;
    /// Of params, the routed experts' (one expert rank's share).
    int64_t expertParams = 0;
    int64_t denseParams() const { return params - expertParams; }
    StageActivations activations; ///< per sample, under the job's checkpointing
    /// One micro-batch's forward, whole backward, input gradient and weight gradient, each
    /// with the tensor collectives it issues on the compute stream.
    double forwardS = 0, backwardS = 0, inputS = 0, weightS = 0;
    /// The same without the tensor collectives: the compute times the compiler schedules
    /// split backwards by (CostModel::stageMicrobatchTimes()).
    double computeForwardS = 0, computeBackwardS = 0, computeInputS = 0, computeWeightS = 0;
    /// The expert all-to-alls the forward, whole backward and input gradient issue (a mixture
    /// of experts over E > 1 ranks), at the fastest any placement of the expert group allows
    /// (fastestExpertAllToAll): what each adds to the compute stream where no paired step
    /// hides it. Not in the times above.
    double allToAllForwardS = 0, allToAllBackwardS = 0, allToAllInputS = 0;
    /// Those all-to-alls' bytes in the order they run, for pricing them where the ranks are
    /// placed.
    std::vector<int64_t> allToAllForwardBytes, allToAllBackwardBytes, allToAllInputBytes;
    const std::vector<int64_t> &allToAllBytes(sched::ActionKind kind) const;
    /// With E > 1, the compute segments between those all-to-alls (computeSegments in
    /// analysis/PlanCosts.h), which time a paired step as the plan does; a weight gradient,
    /// which issues none, is one segment.
    std::vector<double> forwardCuts, backwardCuts, inputCuts;
    const std::vector<double> &cuts(sched::ActionKind kind) const;
    /// One micro-batch's `kind` of action, with its tensor collectives and without; and its
    /// expert all-to-alls.
    double time(sched::ActionKind kind) const;
    double computeTime(sched::ActionKind kind) const;
    double allToAllTime(sched::ActionKind kind) const;
  };
  /// Every stage's times, with their tensor collectives, for each of `microbatches`; and
  /// with what the expert all-to-alls of order `allToAllsOf` add at the least: an unpaired
  /// action's own, a pair's beyond its two computes.
  static sched::ActionTimes actionTimes(const std::vector<Stage> &st, int64_t microbatches,
                                        const sched::Schedule *allToAllsOf = nullptr);
  /// What a schedule's compute-only execution gives, per rank and stage.
  struct ScheduleFacts {
    std::vector<int64_t> rankOf;         ///< per stage
    std::vector<double> computeEnd;      ///< per rank
    std::vector<double> lastBackwardEnd; ///< per stage
    /// Per stage, the most activation bytes its rank holds at one of its forwards, and at one
    /// of its backwards; and the same with the full gradient buffers that gradient and full
    /// sharding keep live between a stage's first and last backward.
    std::vector<int64_t> forwardHeld, backwardHeld;
    std::vector<int64_t> forwardHeldWithGradients, backwardHeldWithGradients;
    /// The same with the routed experts' gradient buffers too, which a step allocates unless
    /// their expert-data group is one rank (DataParallelWork::allocated()).
    std::vector<int64_t> forwardHeldWithAllGradients, backwardHeldWithAllGradients;
    /// Where the compiler's order is known: the schedule (each rank's order, without pairs),
    /// and where it runs one action at a time, when each action starts at the earliest (the
    /// compute-only start). Empty otherwise.
    sched::Schedule schedule;
    std::vector<std::vector<double>> earliestStart;
    /// Where the order is known and unpaired: per rank, per action, the activation bytes the
    /// rank holds while the action runs (the level forwardHeld and backwardHeld are the most
    /// of).
    std::vector<std::vector<int64_t>> activationsAt;
    /// Where the compiler pairs the order's steps (DualPipeV; combined 1F1B, to hide expert
    /// all-to-alls): its pairs (Schedule::pairs), which the plan runs one half after the other.
    std::vector<std::vector<int32_t>> planPairs;
  };

  /// The routed experts' data-parallel group as the plan prices it (PlanCosts): where the
  /// experts are apart (runtime::Plan::expertsApart), its D x T / E members and each pipeline
  /// rank's slowest ring; no members otherwise.
  struct ExpertData {
    int64_t members = 0;
    std::vector<Ring> rings; ///< per pipeline rank
    /// With E > 1, per pipeline rank, the busiest member of its expert groups' peers on other
    /// nodes and in its own (expertPeers), which its all-to-alls are priced with.
    std::vector<std::pair<int64_t, int64_t>> allToAllPeers;
  };
  /// What a stage's data-parallel work takes, as the simulator prices the plan's (PlanCosts):
  /// the dense parameters' collectives over the D replicas and the routed experts' apart over
  /// their expert-data group, one after the other; the optimizer step of the rank's share of
  /// both.
  class DataParallelWork {
  public:
    DataParallelWork(const Job &job, const CostModel &cost, const std::vector<Stage> &st,
                     const ExpertData &experts);
    /// Stage `s`'s gradient reduction on pipeline rank `r`: an all-reduce without sharding,
    /// else a reduce-scatter.
    double reduction(int64_t s, int64_t r) const { return reduction(s, r, reductionKind); }
    double reduction(int64_t s, int64_t r, Collective kind) const;
    /// The all-gather of stage `s`'s parameters on pipeline rank `r`.
    double gather(int64_t s, int64_t r) const;
    double optimizerStep(int64_t s) const;
    /// Of stage `s`'s parameters, those whose gathered copy (full sharding) and whole
    /// gradients (gradient and full sharding) a step allocates and frees: all but the routed
    /// experts of an expert-data group of one rank, kept whole all step (as the memory plan
    /// counts them).
    int64_t allocated(int64_t s) const {
      return experts.members == 1 ? st[s].denseParams() : st[s].params;
    }
    /// Whether the routed experts' buffers are among those allocated.
    bool expertBuffers() const { return experts.members != 1; }
    const ExpertData &expertGroups() const { return experts; }

  private:
    /// Stage `s`'s parameters reduced and gathered over the replicas, and those over the
    /// expert-data group.
    int64_t replicated(int64_t s) const;
    int64_t apart(int64_t s) const { return experts.members > 0 ? st[s].expertParams : 0; }
    double both(Collective kind, int64_t s, int64_t r, int64_t bytesPerParam) const;

    const CostModel &cost;
    const std::vector<Stage> &st;
    const ExpertData &experts;
    int64_t replicas, elementBytes;
    bool adam, sharded;
    Collective reductionKind;
  };

  llvm::Expected<const CostModel *> costModel(const Job &job);
  /// The expert-data group of `job`'s shape, priced on `cost` (the job's cost model).
  const ExpertData &expertData(const Job &job, const CostModel &cost);
  llvm::Expected<const std::vector<Stage> *> stages(const Job &job);
  llvm::Expected<const ScheduleFacts *> schedule(const Job &job);
  /// The bounds that `facts` (a schedule's, or quickBounds()' without one) give.
  llvm::Expected<Bounds> boundsFrom(const Job &job, const ScheduleFacts &facts, bool timed = false);
  /// Where `facts` hold the order: the latest end, over the ranks, of their compute and
  /// data-parallel collective streams run together (the collectives the compiler places for
  /// the order), the computes beside the collectives slowed as the compiler prices them
  /// (collectiveOverlapSurcharges in analysis/PlanCosts.h), and a result reaching another
  /// pipeline rank no sooner than its transfer takes (0 when not known); 0 when there is nothing
  /// to time beyond the compute-only order (one replica, one pipeline rank, no pairs). With full
  /// sharding,
  /// `heldAtComputes` gets, per rank, the most bytes of activations and gathered parameters
  /// it holds at one of its computes (the gathers and reshards in place); else it is emptied.
  double streamsEnd(const Job &job, const CostModel &cost, const std::vector<Stage> &st,
                    const DataParallelWork &work, const ScheduleFacts &facts,
                    std::vector<int64_t> &heldAtComputes) const;
  /// For streamsEnd(), with E > 1: per rank and action of `facts`' order, what its expert
  /// all-to-alls add to the compute stream after it, as the plan prices them (each action's
  /// surcharge beside collectives in `surcharge`, empty where nothing slows them).
  std::vector<std::vector<double>>
  allToAllsAfter(const Job &job, const CostModel &cost, const std::vector<Stage> &st,
                 const DataParallelWork &work, const ScheduleFacts &facts,
                 const std::vector<std::vector<double>> &surcharge) const;
  /// Drops the caches when the context changes.
  void useContext(const std::string &context);

  /// Each layer's forward, whole backward, input and weight gradient on one micro-batch.
  struct LayerTimes {
    std::vector<double> forward, backward, input, weight;
    /// With full checkpointing, the forward a backward recomputes (in `backward` and `input`).
    std::vector<double> recompute;
  };

  /// The context the caches below hold results for.
  std::string context;
  std::map<std::tuple<int, int64_t, int64_t, bool, int64_t, bool, int64_t, int64_t>,
           std::unique_ptr<CostModel>>
      costModels;
  /// By P, D, the rank order, T and E.
  std::map<std::tuple<int64_t, int64_t, bool, int64_t, int64_t>, ExpertData> expertGroups;
  /// The model's layers as the tensor collectives' list reads them (tensorCollectives()).
  std::vector<runtime::Layer> tensorLayers;
  /// By micro-batch size, checkpointing, T, sequence parallelism and E.
  std::map<std::tuple<int64_t, int, int64_t, bool, int64_t>, LayerTimes> layerTimes;
  std::map<std::tuple<int64_t, int64_t, int, int64_t, bool, int64_t>, std::vector<Stage>>
      partitions;
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, int, int64_t, int, int, bool, int64_t,
                      bool, int64_t, int64_t>,
           std::unique_ptr<ScheduleFacts>>
      schedules;
  /// quickBounds() by what it reads of the parallelism section: the shape, the micro-batches,
  /// checkpointing, sharding, rank order, placement, the split of backwards and whether the
  /// schedule may pair computes (not the schedule itself, its group size nor the FSDP window,
  /// which configurations differ in most).
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, bool, int64_t, int64_t, int, int,
                      int, int, bool, bool>,
           Bounds>
      quick;
};

} // namespace conduit

#endif // CONDUIT_TUNE_TUNEBOUNDS_H
