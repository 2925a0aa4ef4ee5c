//===- Collectives.h - where data-parallel collectives go -------*- C++ -*-===//
//
// FSDP collective placement, the breadth-first paper's own algorithm, independent of any IR:
// given each pipeline rank's compute order, it decides where the rank's parameter all-gathers
// and reshards, gradient reductions, optimizer steps, all-gathers of updated parameters and
// the tied embeddings' gradient exchange go. The problem class says whether its inputs are
// well-formed (check), the placer is a free function stating its objective, and each
// constraint of a placement has its own verifier, as in Problems.h. conduit-place-collectives
// builds the problem from pipe IR and writes the placement back as ops.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_SCHEDULING_COLLECTIVES_H
#define CONDUIT_SCHEDULING_COLLECTIVES_H

#include "scheduling/Problems.h"

namespace conduit::sched {

/// How the D replicas share a stage's state (the job's parallelism.sharding, ZeRO's stages):
/// nothing (DDP), the optimizer state (ZeRO-1), that and the reduced gradients (ZeRO-2), or
/// that and the parameters (ZeRO-3, FSDP).
enum class Sharding : uint8_t { None, Optimizer, Gradients, Full };

/// The compute of every pipeline rank, in order, and how its stages are replicated.
struct CollectiveProblem {
  /// Per pipeline rank, its compute in order (an action's micro-batch does not matter here).
  std::vector<std::vector<Action>> orders;
  /// The pipeline rank of every stage.
  std::vector<int64_t> stageRank;
  /// D, the data-parallel replicas; with one there are no collectives.
  int64_t replicas = 1;
  Sharding sharding = Sharding::None;
  /// Full sharding: the most stages whose parameters are gathered at once (fsdp_window).
  int64_t window = 2;
  /// Gradient or full sharding: reduce-scatter a stage's gradients after each run of its
  /// gradients (parallelism.gradient_reduction "run": a stretch of the rank's backwards,
  /// input and weight gradients on the stage, forwards of other stages aside), so that whole
  /// gradients exist only within a run, instead of once after its last backward ("step").
  bool reduceEachRun = false;
  /// The first and the last stage hold one weight twice (tied embeddings, or the token table's
  /// copy of multi-token prediction modules), whose gradients are added before either is
  /// reduced or updated.
  bool tiedEmbeddings = false;

  /// At least one stage, stages on ranks in range, replicas and window positive, every action
  /// on a stage its rank holds, and every stage with a backward or weight gradient on its rank
  /// (the moment its gradients are complete).
  Violation check() const;
};

/// One collective, optimizer step or tie of a rank.
struct Collective {
  enum class Kind : uint8_t {
    Unshard,       ///< all-gather the stage's parameters for a residency (full sharding)
    Reshard,       ///< free them after the residency's last use
    ReduceScatter, ///< the stage's gradients, once complete (sharded state)
    AllReduce,     ///< the same without sharding
    OptimizerStep, ///< on the shard, or on the whole stage without sharding
    GatherParams,  ///< all-gather the parameters the previous step updated (optimizer and
                   ///< gradient sharding)
    TieGradients,  ///< add the other tied copy's gradient to this one's
  };
  Kind kind;
  int32_t stage;
  /// TieGradients: the rank and the stage of the other copy (this rank when it holds both).
  int32_t peerRank = -1, peerStage = -1;

  bool operator==(const Collective &other) const {
    return kind == other.kind && stage == other.stage && peerRank == other.peerRank &&
           peerStage == other.peerStage;
  }
};

/// Where a rank's collectives go, each list in issue order: before the rank's first
/// instruction, right after its compute i (before the transfers that follow that compute), and
/// after its last instruction.
struct RankCollectives {
  std::vector<Collective> atStart;
  std::vector<std::vector<Collective>> after; ///< one list per compute of the rank's order
  std::vector<Collective> atEnd;

  /// How many of `kind` the rank issues.
  int64_t count(Collective::Kind kind) const;
};

struct CollectivePlacement {
  std::vector<RankCollectives> ranks;
};

/// Places every rank's collectives, each rank on its own:
///
/// * full sharding (D > 1): a stage's parameters are gathered for a residency, a stretch of
///   the rank's order in which they stay resident. Residencies follow the runs of compute on
///   one stage; at most `window` stages are resident at once, and when a run needs a stage
///   that is not resident, the resident stage used furthest in the future is evicted (Belady's
///   rule, which minimises the number of all-gathers; among equals the highest stage). The
///   evicted stage is resharded right after its last use, and the new stage's all-gather
///   issued right then: as early as the window allows, so that it overlaps the compute in
///   between. Until the window is full, all-gathers go before the rank's first instruction.
///   With breadth-first and a window of 2 this is exactly 2V-2 all-gathers per rank per step.
/// * every sharded mode (D > 1): a reduce-scatter per stage right after its last backward or
///   weight gradient, after the reshard and all-gather placed there (a prefetch is more
///   urgent): V per rank per step, independent of M. `none`: an all-reduce there instead.
///   With `reduceEachRun` (gradient and full sharding), one after the last backward or weight
///   gradient of each run of the stage's gradients instead, accumulated into the shard: every
///   run's gradients leave before another stage's backward, input or weight gradient (the
///   tied stages, whose copies are added at the end, keep one reduction).
/// * the optimizer steps after the rank's last instruction, in the order the reductions
///   finish.
/// * optimizer or gradient sharding (D > 1): the all-gather of each stage's parameters, as
///   the previous step's optimizer step left its shards, before the rank's first instruction,
///   in the order of the stages' first computes: each overlaps the computes before its stage's
///   first, where gathered after the optimizer steps they would all follow the rank's last
///   compute (Megatron-LM's `--overlap-param-gather` gathers them during the next forward too).
///   The first step gathers the shards of the initial parameters.
/// * tied embeddings: each rank holding the first or the last stage ends its instructions
///   with one tie (with the other copy's rank, or in place when it holds both), and those
///   stages' reductions move after it, before the optimizer steps.
///
/// A weight gradient counts as a use of the stage's parameters (PyTorch's FSDP computes it on
/// the unsharded parameters), so that placements run there too. Fails only if
/// `problem.check()` does.
llvm::Expected<CollectivePlacement> placeCollectives(const CollectiveProblem &problem);

/// Constraints of a placement, one helper each (a placement of the wrong shape fails each):
/// one list per rank and per compute, every collective on a stage of its rank.
Violation verifyCollectiveShape(const CollectiveProblem &problem,
                                const CollectivePlacement &placement);
/// Full sharding with D > 1: every compute finds its stage gathered, an all-gather never
/// exceeds the window nor gathers a resident stage, a reshard frees a resident stage, and
/// nothing stays gathered after the step. Otherwise no all-gathers or reshards at all.
Violation verifyResidencies(const CollectiveProblem &problem, const CollectivePlacement &placement);
/// With D > 1, one reduction per stage of the right kind (reduce-scatter when sharded,
/// all-reduce otherwise) after its last backward or weight gradient; none with D = 1. With
/// `reduceEachRun`, a reduction needs a backward or weight gradient of its stage since the
/// stage's previous one, and none of a stage's gradients waits for its reduction across another
/// stage's backward, input or weight gradient (the tied stages excepted) or past the end of the
/// rank's compute.
Violation verifyReductions(const CollectiveProblem &problem, const CollectivePlacement &placement);
/// One optimizer step per stage, after the rank's last compute and after the stage's
/// reduction; with optimizer or gradient sharding and D > 1 one all-gather of the stage's
/// parameters before its first compute, and none otherwise.
Violation verifyOptimizerSteps(const CollectiveProblem &problem,
                               const CollectivePlacement &placement);
/// With tied embeddings, one tie on each rank holding the first or last stage, after its last
/// compute, naming the other copy's stage and rank, before the reductions and optimizer steps
/// of the stages it ties; no tie anywhere else.
Violation verifyTies(const CollectiveProblem &problem, const CollectivePlacement &placement);
/// All constraints.
Violation verifyCollectives(const CollectiveProblem &problem, const CollectivePlacement &placement);

/// "unshard s3", "reduce_scatter s3", "tie s0 with rank 3 s15", ...
std::string describe(const Collective &collective);

} // namespace conduit::sched

#endif // CONDUIT_SCHEDULING_COLLECTIVES_H
