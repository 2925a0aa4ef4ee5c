//===- Schedulers.h - partitioning, placement and the schedules -*- C++ -*-===//
//
// Free functions that solve the problems of Problems.h. Each states its objective and how it
// fails; a failure is an llvm::Error whose message says what would work instead. The formal
// definitions are in ARCHITECTURE.md §4 and the reference on schedules; the tests compare each
// schedule with the worked examples there.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_SCHEDULING_SCHEDULERS_H
#define CONDUIT_SCHEDULING_SCHEDULERS_H

#include "scheduling/Problems.h"

namespace conduit::sched {

//===----------------------------------------------------------------------===//
// Partitioning and placement
//===----------------------------------------------------------------------===//

/// Cuts the chain into `numStages` contiguous stages minimising the cost of the slowest stage
/// (exactly: the result's maximum equals the optimum of the problem). Among optimal
/// partitions it prefers stages close to an even share of the remaining cost. Fails only if
/// `problem.check()` does.
llvm::Expected<Partition> partitionMinMax(const PartitionProblem &problem);

enum class Placement { Loop, V };

/// The pipeline rank of every stage. Loop: stage s on rank s mod P (V stages per rank). V:
/// rank r holds stages r and 2P-1-r (exactly two stages per rank). Fails if V placement is
/// asked for with a stage count other than 2P.
llvm::Expected<std::vector<int64_t>> placeStages(int64_t numStages, int64_t numRanks,
                                                 Placement placement);

/// Equal micro-batches: `count` micro-batches of `size` samples, as boundaries.
std::vector<int64_t> equalBoundaries(int64_t count, int64_t size);
/// Boundaries from explicit sizes.
std::vector<int64_t> boundariesFromSizes(const std::vector<int64_t> &sizes);

//===----------------------------------------------------------------------===//
// Schedules
//===----------------------------------------------------------------------===//

/// GPipe: every rank runs all forwards of its stage (micro-batches in order), then all
/// backwards in reverse order. One stage per rank; fails otherwise (breadth-first is GPipe's
/// order on a looped placement).
llvm::Expected<Schedule> scheduleGPipe(const ScheduleProblem &problem);

/// 1F1B (PipeDream-Flush): the stage at pipeline position s keeps at most `cap` micro-batches
/// in flight, forwarding while it holds fewer and otherwise running its next backward, both in
/// micro-batch order. With equal partitions cap = P - s, which is the textbook order: min(P -
/// s - 1, M) warm-up forwards, alternating forward and backward, then cool-down backwards.
/// With unequal partitions the cap also covers every forward that a backward transitively
/// needs from downstream stages, so that the order cannot deadlock. One stage per rank;
/// fails otherwise.
llvm::Expected<Schedule> scheduleOneFOneB(const ScheduleProblem &problem);

/// Depth-first's rules on grouping M micro-batches by N on P ranks, which Megatron-LM enforces
/// too: M >= P, P <= N <= M, and a last group of at least P micro-batches when N does not
/// divide M. The violation says which quantity to change and what would work.
struct GroupingViolation {
  enum Rule { TooFewMicrobatches, GroupSize } rule;
  std::string message;
};
std::optional<GroupingViolation> checkDepthFirstGrouping(int64_t microbatches, int64_t ranks,
                                                         int64_t groupSize);

/// Depth-first (Megatron-LM interleaved 1F1B) with group size N (0 = P): micro-batches go in
/// groups of N through local stage 0, then local stage 1, ...; rank r runs W_r = min(2(P-r-1)
/// + (V-1)N, M·V) warm-up forwards, then one forward and one backward at a time, then the
/// remaining backwards (backward k is the forward table's k-th entry on the mirrored local
/// stage). Needs the looped placement with V >= 2, the same number of micro-batches M on every
/// stage, P <= N <= M, and a last group of at least P micro-batches when N does not divide M
/// (Megatron rejects these cases too).
llvm::Expected<Schedule> scheduleDepthFirst(const ScheduleProblem &problem, int64_t groupSize);

/// Breadth-first (looped BFS): every rank runs the forwards of all micro-batches of its first
/// local stage, then of its second, ..., then the backwards in reverse stage order and reverse
/// micro-batch order. Any placement, any M, any partitions; it never fails on a valid problem.
/// With M < P each loop wrap stalls (the caller warns).
llvm::Expected<Schedule> scheduleBreadthFirst(const ScheduleProblem &problem);

//===----------------------------------------------------------------------===//
// Evaluation
//===----------------------------------------------------------------------===//

/// Durations of every forward and backward, by (stage, micro-batch).
struct ActionTimes {
  std::vector<std::vector<double>> forward;
  std::vector<std::vector<double>> backward;

  /// The same per-sample cost for every stage: forward = tf·samples, backward = tb·samples.
  static ActionTimes perSample(const ScheduleProblem &problem, double tf, double tb);
};

/// A compute-only execution of a schedule: every action starts when its rank is free and its
/// dependencies have finished (communication is free).
struct Timeline {
  double makespan = 0;
  std::vector<double> busy;                       // per rank
  std::vector<std::vector<double>> start, finish; // per rank, per action
  /// Per rank, per action: its position in one global order of the actions that respects
  /// every dependency (a topological order), for breaking ties between equal times.
  std::vector<std::vector<int64_t>> sequence;
};

/// Executes `schedule` under `times`. The schedule must verify.
Timeline simulateCompute(const ScheduleProblem &problem, const Schedule &schedule,
                         const ActionTimes &times);

/// The largest number of (stage, micro-batch) pairs rank r holds between forward and backward
/// along its order: the activations it must keep.
int64_t peakInFlight(const Schedule &schedule, int64_t rank);

} // namespace conduit::sched

#endif // CONDUIT_SCHEDULING_SCHEDULERS_H
