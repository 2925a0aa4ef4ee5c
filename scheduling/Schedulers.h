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

#include "runtime/plan/Plan.h"
#include "runtime/plan/ScheduleRules.h"
#include "scheduling/Problems.h"

#include <optional>

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

/// Depth-first's rules on grouping micro-batches, shared with the job-file reader.
using runtime::checkDepthFirstGrouping;
using runtime::GroupingViolation;

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

/// Durations of every forward, backward, input gradient and weight gradient, by (stage,
/// micro-batch). A whole backward takes backward = input + weight.
struct ActionTimes {
  std::vector<std::vector<double>> forward;
  std::vector<std::vector<double>> backward;
  std::vector<std::vector<double>> input;
  std::vector<std::vector<double>> weight;
  /// The same per-sample cost for every stage: forward = tf·samples, input gradient =
  /// ti·samples, weight gradient = tw·samples, backward = (ti + tw)·samples.
  static ActionTimes perSample(const ScheduleProblem &problem, double tf, double ti, double tw);
  double of(const Action &a) const;
  /// The same, to change.
  double &at(const Action &a) { return const_cast<double &>(slot(a)); }

private:
  const double &slot(const Action &a) const;
};

/// A compute-only execution of a schedule: every action starts when its rank is free and its
/// dependencies have finished (communication is free).
struct Timeline {
  double makespan = 0;
  std::vector<double> busy;                       // per rank
  std::vector<std::vector<double>> start, finish; // per rank, per action
  /// Per rank, per action: when other ranks can have its result (its finish, or the end of
  /// its overlapped pair).
  std::vector<std::vector<double>> available;
  /// Per rank, per action: its position in one global order of the actions that respects
  /// every dependency (a topological order), for breaking ties between equal times.
  std::vector<std::vector<int64_t>> sequence;
};

/// How long a result takes to reach its neighbour's rank, per stage: `forward[s]` carries stage
/// s's activations to stage s + 1, `backward[s]` its input gradient to stage s - 1 (zero where
/// the two stages share a rank). Empty: communication is free.
struct TransferDelays {
  std::vector<double> forward, backward;
};

/// Executes `schedule` under `times`, each result reaching another rank `delays` after it is
/// available. The schedule must verify.
Timeline simulateCompute(const ScheduleProblem &problem, const Schedule &schedule,
                         const ActionTimes &times, const TransferDelays &delays = {});

/// The largest number of (stage, micro-batch) pairs rank r holds between forward and backward
/// (or input gradient) along its order: the activations it must keep whole.
int64_t peakInFlight(const Schedule &schedule, int64_t rank);
/// The largest number of (stage, micro-batch) pairs rank r holds between forward and the end
/// of their backward (B, or W when split): in flight plus those whose weight gradient is
/// deferred, which keep what W needs.
int64_t peakHeld(const Schedule &schedule, int64_t rank);

//===----------------------------------------------------------------------===//
// Split backward: the zero-bubble family
//===----------------------------------------------------------------------===//

/// Splits every backward of `whole` (a schedule of forwards and whole backwards) into its
/// input gradient I, at the backward's place, and its weight gradient W, which runs where the
/// rank would otherwise wait for an input, oldest first, as a simulation under `times` finds
/// them; the rest run at the end. No rank holds more (stage, micro-batch) pairs between F and
/// W than the fullest rank of `whole` holds between F and B, nor defers more than `deferLimit`
/// weight gradients (by default P, enough to fill a fill or drain of P-1 steps; 0 runs each W
/// right after its I), so what deferred Ws keep stays bounded whatever M. Fails if `whole` is
/// incomplete or cannot run.
llvm::Expected<Schedule> splitBackward(const ScheduleProblem &problem, const Schedule &whole,
                                       const ActionTimes &times,
                                       std::optional<int64_t> deferLimit = std::nullopt);
/// ZB-H1 (Qi et al. 2024): 1F1B with split backwards; the same in-flight bound as 1F1B and,
/// on uniform stages with M >= P, a bubble of (P-1)(T_F + T_I - T_W) per rank. One stage per
/// rank.
llvm::Expected<Schedule> scheduleZeroBubbleH1(const ScheduleProblem &problem,
                                              const ActionTimes &times,
                                              std::optional<int64_t> deferLimit = std::nullopt);
/// Interleaved zero bubble (PyTorch's ScheduleInterleavedZeroBubble): depth-first with split
/// backwards; depth-first's rules on placement and grouping apply.
llvm::Expected<Schedule>
scheduleInterleavedZeroBubble(const ScheduleProblem &problem, int64_t groupSize,
                              const ActionTimes &times,
                              std::optional<int64_t> deferLimit = std::nullopt);
/// ZB-V: two stages per rank in a V (rank r holds r and 2P-1-r, so the loss is computed on
/// rank 0 next to the first stage); a free rank runs the ready I of its oldest micro-batch,
/// else a ready forward of its later stage first while it holds fewer than
/// zeroBubbleVBound(P) (stage, micro-batch) pairs, else its oldest deferred W. That is 1F1B's
/// activation memory (P micro-batches of two half-size stages). With `deferLimit`, a rank
/// that defers that many Ws runs the oldest before another I (without one, only the held
/// bound limits them).
llvm::Expected<Schedule> scheduleZeroBubbleV(const ScheduleProblem &problem,
                                             const ActionTimes &times,
                                             std::optional<int64_t> deferLimit = std::nullopt);
/// When DualPipeV's ranks defer weight gradients.
enum class Deferral {
  /// Wherever the rank would otherwise wait, up to the limit (Zero Bubble's rule).
  Throughout,
  /// Only after the rank's last forward: until then each W runs right after its I, so the
  /// steady state's pairs carry whole backwards, as DeepSeek's dualpipev.py runs them (its
  /// steps 6 to 8 defer). Where every stage cuts the batch alike into M >= 2P micro-batches
  /// the order is DualPipe's own eight steps, a fixed pattern that does not depend on the
  /// times (the one PyTorch's ScheduleDualPipeV writes); elsewhere the list rule with this
  /// deferral. The compiler's choice where the pairs hide experts' all-to-alls;
  /// docs/passes.md has the measurements behind it.
  Cooldown,
};
/// DualPipeV (DeepSeek's DualPipe folded onto the V): ZB-V's order where a ready forward and
/// a ready I run as one overlapped pair (Schedule::pairs), so that each one's transfers (and a
/// mixture of experts' all-to-alls) hide behind the other's computation, under
/// dualPipeVBound(P) (DualPipe's P+1 micro-batches). Where only the memory held for deferred
/// weight gradients stops the forward, the oldest W runs first so that the pair can follow;
/// a rank that defers `deferLimit` Ws (by default P) runs the oldest before another I, and
/// defers none before its last forward with Deferral::Cooldown.
llvm::Expected<Schedule> scheduleDualPipeV(const ScheduleProblem &problem, const ActionTimes &times,
                                           std::optional<int64_t> deferLimit = std::nullopt,
                                           Deferral deferral = Deferral::Throughout);
/// The bounds on (stage, micro-batch) pairs held per rank of ZB-V and DualPipeV.
int64_t zeroBubbleVBound(int64_t ranks);
int64_t dualPipeVBound(int64_t ranks);
/// Why DualPipeV cannot run DualPipe's own order on `problem` (Deferral::Cooldown then runs the
/// list rule), a sentence naming the job key to change; nullopt where it can: every stage cuts
/// the batch alike into at least 2P micro-batches.
std::optional<std::string> withoutDualPipeOrder(const ScheduleProblem &problem);
/// The most weight gradients a rank of a split `schedule` on `ranks` pipeline ranks defers by
/// the schedule's own rule, where the caller gives no limit: P (enough to fill a fill or
/// drain of P-1 steps), ZB-V as many as its held bound allows.
int64_t ownDeferLimit(runtime::Schedule schedule, int64_t ranks);

//===----------------------------------------------------------------------===//
// Schedules by name
//===----------------------------------------------------------------------===//

/// The scheduler of `schedule` (the plan's list of schedules) on `problem` (`groupSize`:
/// depth-first's and interleaved zero bubble's), with backwards split into input and weight
/// gradients when `splitBackward` (always for the zero-bubble schedules). Where weight
/// gradients go is found by simulating `times` (null: the same per-sample cost for forward,
/// input and weight gradient); `deferLimit`, the most weight gradients a rank defers (each
/// scheduler's own rule without one); `deferral`, when DualPipeV defers them. The compiler's
/// schedule pass and the tuner's bounds build their schedules here, so that both refuse the
/// same shapes and hold the same order.
llvm::Expected<Schedule> runScheduler(runtime::Schedule schedule, const ScheduleProblem &problem,
                                      int64_t groupSize, bool splitBackward = false,
                                      const ActionTimes *times = nullptr,
                                      std::optional<int64_t> deferLimit = std::nullopt,
                                      Deferral deferral = Deferral::Throughout);

} // namespace conduit::sched

#endif // CONDUIT_SCHEDULING_SCHEDULERS_H
