//===- StepTimeEvaluator.h - step time of micro-batch cuts ------*- C++ -*-===//
//
// StepTimeEvaluator predicts the step time of per-stage partitions (UMPIPE's unequal
// micro-batches) for GPipe and 1F1B with one stage per rank. It builds what conduit-compile
// would build for them (the schedule, the transfers and their order and batches, the receive
// slots, the data-parallel collectives and optimizer steps) and runs it with the plan
// simulator's semantics, so its figure equals simulatePlan's on the compiled plan exactly (a
// test holds it to that). The searches of MicrobatchSearch.h call it thousands of times.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_SCHEDULING_STEPTIMEEVALUATOR_H
#define CONDUIT_SCHEDULING_STEPTIMEEVALUATOR_H

#include "scheduling/Transfers.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace conduit::sched {

/// Micro-batch sizes per stage.
using Partitions = std::vector<std::vector<int64_t>>;

/// Everything the step time of a one-stage-per-rank pipeline depends on besides the cuts.
struct PipelineCosts {
  /// forward[s][n], backward[s][n]: seconds of stage s for n samples, n = 0 .. batch.
  std::vector<std::vector<double>> forward, backward;
  /// Bytes per sample leaving stage s; its input gradient has the same size.
  std::vector<int64_t> outputBytes;
  TransferTime transfer;
  /// Per stage, seconds of: the all-gather before its first compute (sharded: full sharding's,
  /// or the gather of the parameters the previous step updated), the gradient reduction after
  /// its last backward (reduce-scatter or all-reduce) and the optimizer step. Zero where the
  /// plan has none.
  std::vector<double> startGather, reduce, optimizer;
  /// Whether the plan has data-parallel collectives at all (D > 1).
  bool dataParallel = false;
};

enum class PipelineSchedule { GPipe, OneFOneB };

class StepTimeEvaluator {
public:
  StepTimeEvaluator(int64_t numStages, int64_t batch, PipelineSchedule schedule,
                    PipelineCosts costs);

  int64_t numStages() const { return stages; }
  int64_t batchSamples() const { return batch; }

  /// The predicted step time, or +infinity for partitions that are malformed or that the
  /// schedule cannot run.
  double stepTime(const Partitions &sizes);
  /// Step times of many candidates (a population), split over the machine's cores.
  void stepTimes(const std::vector<Partitions> &candidates, std::vector<double> &out);
  /// Candidates evaluated so far.
  int64_t evaluations() const { return count; }

private:
  double simulate(const ScheduleProblem &problem, const Schedule &schedule,
                  const ActionTimes &times);

  int64_t stages, batch;
  PipelineSchedule kind;
  PipelineCosts costs;
  int64_t count = 0;
  /// Memory reused from one candidate to the next.
  struct Workspace;
  std::shared_ptr<Workspace> work;
};

} // namespace conduit::sched

#endif // CONDUIT_SCHEDULING_STEPTIMEEVALUATOR_H
