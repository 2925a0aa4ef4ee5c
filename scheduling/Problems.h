//===- Problems.h - scheduling problems, independent of any IR --*- C++ -*-===//
//
// The inputs and outputs of Conduit's scheduling decisions, in the manner of CIRCT's scheduling
// library: a problem class holds the inputs, `check()` says whether they are well-formed, and
// `verify()` says whether a solution satisfies every constraint. Each constraint has its own
// helper so that tests can break exactly one. Nothing here knows MLIR; passes build problems
// from IR and write solutions back.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_SCHEDULING_PROBLEMS_H
#define CONDUIT_SCHEDULING_PROBLEMS_H

#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace conduit::sched {

/// A problem's or solution's first violated constraint, as a sentence; nullopt if none.
using Violation = std::optional<std::string>;

//===----------------------------------------------------------------------===//
// Partitioning: layer chain -> contiguous stages
//===----------------------------------------------------------------------===//

/// Cut a chain of layers with the given costs into `numStages` contiguous, non-empty stages.
struct PartitionProblem {
  std::vector<double> layerCosts;
  int64_t numStages = 0;
  /// The chain's last `tailLayers` layers stay together on the last stage (0 or 1: no
  /// constraint): multi-token prediction modules with the head whose tables they share.
  int64_t tailLayers = 0;

  /// The layers the stages cut between: the chain with its tail as one.
  int64_t cuttableLayers() const {
    const int64_t layers = static_cast<int64_t>(layerCosts.size());
    return tailLayers > 1 ? layers - tailLayers + 1 : layers;
  }
  /// At least one stage, no more stages than cuttable layers, a tail within the chain, costs
  /// finite and non-negative.
  Violation check() const;
};

/// Stage s holds layers [bounds[s], bounds[s+1]).
struct Partition {
  std::vector<int64_t> bounds;

  int64_t numStages() const { return static_cast<int64_t>(bounds.size()) - 1; }
};

/// Constraints of a partition, one helper each.
Violation verifyPartitionShape(const PartitionProblem &problem, const Partition &partition);
/// All constraints.
Violation verifyPartition(const PartitionProblem &problem, const Partition &partition);
/// Cost of stage s.
double stageCost(const PartitionProblem &problem, const Partition &partition, int64_t s);
/// Cost of the slowest stage.
double maxStageCost(const PartitionProblem &problem, const Partition &partition);

//===----------------------------------------------------------------------===//
// Scheduling: stages x micro-batches -> per-rank ordered compute lists
//===----------------------------------------------------------------------===//

/// A backward runs whole (B) or split (Zero Bubble, Qi et al. 2024) into the input gradient
/// (I), which the previous stage waits for, and the weight gradient (W), which only the stage's
/// gradient reduction waits for and may therefore fill idle time.
enum class ActionKind : uint8_t { Forward, Backward, BackwardInput, BackwardWeight };

/// B and I produce the gradient the previous stage waits for.
inline bool producesInputGradient(ActionKind kind) {
  return kind == ActionKind::Backward || kind == ActionKind::BackwardInput;
}

/// One compute action: the forward, backward, input gradient or weight gradient of micro-batch
/// `mb` (in the stage's own partition) on stage `stage`.
struct Action {
  ActionKind kind;
  int32_t stage;
  int32_t mb;

  bool operator==(const Action &other) const {
    return kind == other.kind && stage == other.stage && mb == other.mb;
  }
};

/// A schedule: the ordered actions of every pipeline rank.
struct Schedule {
  std::vector<std::vector<Action>> ranks;
  /// Per rank (empty: none), increasing positions i whose actions i and i+1 run as one
  /// overlapped pair (PyTorch's OVERLAP_F_B, DualPipe's overlapped chunks): a forward and then
  /// the backward or input gradient of another micro-batch, computed back to back with the
  /// transfers of both issued together, so that each one's communication hides behind the
  /// other's computation. What the pair sends leaves when both have finished.
  std::vector<std::vector<int32_t>> pairs;

  /// Whether position i of rank r starts a pair.
  bool startsPair(int64_t r, size_t i) const;
};

/// The stage graph of a step: S stages placed on P ranks, each cutting the replica's batch of
/// B samples into its own micro-batches. With unequal partitions, micro-batch m of stage s
/// depends on every micro-batch of stage s-1 whose samples overlap its own (forward) and on
/// every overlapping micro-batch of stage s+1 (backward).
class ScheduleProblem {
public:
  ScheduleProblem(int64_t numRanks, std::vector<int64_t> stageRank,
                  std::vector<std::vector<int64_t>> boundaries);

  /// Placement in range, every rank used, boundaries start at 0, increase strictly and end
  /// at the same batch size on every stage.
  Violation check() const;

  int64_t numRanks() const { return ranks; }
  int64_t numStages() const { return static_cast<int64_t>(rankOf.size()); }
  int64_t rankOfStage(int64_t s) const { return rankOf[s]; }
  int64_t numMicrobatches(int64_t s) const { return static_cast<int64_t>(bounds[s].size()) - 1; }
  /// Samples [begin, end) of micro-batch m of stage s.
  int64_t begin(int64_t s, int64_t m) const { return bounds[s][m]; }
  int64_t end(int64_t s, int64_t m) const { return bounds[s][m + 1]; }
  int64_t batchSamples() const { return bounds.front().back(); }
  const std::vector<int64_t> &boundaries(int64_t s) const { return bounds[s]; }
  /// The stages of rank r in increasing order (its "local stages").
  const std::vector<int64_t> &localStages(int64_t r) const { return stagesOf[r]; }
  /// Whether every stage cuts the batch the same way.
  bool equalPartitions() const;
  /// Micro-batches of stage `other` (= s-1 or s+1) overlapping micro-batch m of stage s, as
  /// the index range [first, last).
  std::pair<int64_t, int64_t> overlapping(int64_t s, int64_t m, int64_t other) const;

private:
  int64_t ranks;
  std::vector<int64_t> rankOf;
  std::vector<std::vector<int64_t>> bounds;
  std::vector<std::vector<int64_t>> stagesOf;
  /// overlapping() with the stage before and after, per stage and micro-batch.
  std::vector<std::vector<std::pair<int64_t, int64_t>>> below, above;
};

/// Every (stage, micro-batch) has exactly one forward and either one backward or one input
/// gradient and one weight gradient, on its stage's rank.
Violation verifyCompleteness(const ScheduleProblem &problem, const Schedule &schedule);
/// On each rank, every action comes after the actions of that rank it depends on (the
/// stage's own forward before its backward or input gradient, the input gradient before the
/// weight gradient, same-rank neighbour stages); a pair is a forward followed by a backward or
/// input gradient, and pairs do not overlap.
Violation verifyLocalOrder(const ScheduleProblem &problem, const Schedule &schedule);
/// The ranks can execute their lists: following every dependency across ranks, no rank waits
/// forever (a pair waits for the inputs of both its actions and delivers both outputs at its
/// end). The message names each blocked rank's next action.
Violation verifyExecutable(const ScheduleProblem &problem, const Schedule &schedule);
/// All constraints.
Violation verifySchedule(const ScheduleProblem &problem, const Schedule &schedule);

/// Pairs every forward that the backward or input gradient of another micro-batch follows on
/// its rank, replacing the schedule's pairs: Megatron-Core's "combined 1F1B", which merges the
/// steady state's forward of one micro-batch with the backward of another so that a mixture
/// of experts' all-to-alls of each hide behind the other's computation. (A backward of the
/// forward's own micro-batch depends on it and cannot overlap it.) A pair whose backward
/// waits, through other ranks, on the forward's output, which the pair sends only at its end,
/// stays unpaired, so that a schedule `problem` can execute stays executable.
void pairForwardsWithBackwards(const ScheduleProblem &problem, Schedule &schedule);

/// "F s3 mb5", "B s3 mb5", "I s3 mb5", "W s3 mb5".
std::string describe(const Action &action);

} // namespace conduit::sched

#endif // CONDUIT_SCHEDULING_PROBLEMS_H
