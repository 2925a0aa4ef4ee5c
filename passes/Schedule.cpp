//===- Schedule.cpp - conduit-schedule ------------------------------------===//
//
// Builds the stage graph, runs the chosen scheduler from the scheduling library, verifies the
// result (completeness, local order, executability), and writes one pipe.rank per rank.
//
//===----------------------------------------------------------------------===//

#include "passes/PassUtils.h"
#include "passes/Passes.h"
#include "runtime/plan/ScheduleRules.h"
#include "scheduling/Schedulers.h"

#include "mlir/IR/Builders.h"

namespace conduit {
#define GEN_PASS_DEF_CONDUITSCHEDULE
#include "passes/Passes.h.inc"
} // namespace conduit

using namespace conduit;
using namespace mlir;

namespace {

struct Schedule : conduit::impl::ConduitScheduleBase<Schedule> {
  using Base::Base;

  void runOnOperation() override {
    for (pipe::ModelOp model : getOperation().getOps<pipe::ModelOp>())
      if (failed(scheduleModel(model)))
        return signalPassFailure();
  }

  LogicalResult scheduleModel(pipe::ModelOp model) {
    if (failed(requirePhase(model, pipe::Phase::Split, "conduit-schedule")))
      return failure();
    pipe::ParallelismAttr par = model.getParallelism();
    pipe::ScheduleKind chosen = par.getSchedule();
    if (!kind.empty()) {
      std::optional<pipe::ScheduleKind> parsed = pipe::symbolizeScheduleKind(kind);
      if (!parsed)
        return model.emitOpError() << "conduit-schedule: unknown schedule '" << kind
                                   << "'; expected gpipe, 1f1b, depth-first, breadth-first, "
                                      "zb-h1, interleaved-zb, zbv or dualpipev";
      chosen = *parsed;
    }
    int64_t group = groupSize > 0 ? static_cast<int64_t>(groupSize) : par.getGroupSize();

    sched::ScheduleProblem problem = buildScheduleProblem(model);
    if (sched::Violation v = problem.check())
      return model.emitOpError() << "cannot schedule: " << *v;
    // Split schedules place weight gradients by simulating the predicted durations.
    // The plan numbers schedules as the dialect does (passes/PlanExport.cpp asserts it).
    const bool split =
        par.getSplitBackward() || runtime::isZeroBubble(static_cast<runtime::Schedule>(chosen));
    std::optional<sched::ActionTimes> times;
    if (split) {
      llvm::Expected<CostModel> cost = buildCostModel(model);
      if (!cost)
        return model.emitOpError() << llvm::toString(cost.takeError());
      times = actionTimes(*cost, model, problem);
    }
    // A mixture of experts whose all-to-alls cross ranks and hide in paired steps: DualPipeV
    // runs its steady state's backwards whole, as DualPipe does (Passes.td says why), and the
    // interleaved order runs its steady state as Megatron-Core's combined 1F1B.
    pipe::TransformerAttr architecture = model.getArchitectureAttr();
    const bool hideAllToAlls =
        overlapAllToAlls && architecture && architecture.getMoe() && par.getExpert() > 1;
    llvm::Expected<sched::Schedule> schedule =
        runScheduler(chosen, problem, group, split, times ? &*times : nullptr, par.getDeferLimit(),
                     hideAllToAlls ? sched::Deferral::Cooldown : sched::Deferral::Throughout);
    if (!schedule)
      return model.emitOpError() << llvm::toString(schedule.takeError());
    // Combined 1F1B only where every stage cuts the batch alike: with unequal partitions, a
    // backward of another micro-batch may still depend on the forward. (Passes.td says why
    // not plain 1F1B; its pairs there: Mixtral-8x7B on 64 GPUs took 4.38 s a step instead of
    // 2.60 s.)
    if (hideAllToAlls && chosen == pipe::ScheduleKind::DepthFirst && problem.equalPartitions())
      sched::pairForwardsWithBackwards(problem, *schedule);
    if (sched::Violation v = sched::verifySchedule(problem, *schedule))
      return model.emitOpError() << "internal error: the " << pipe::stringifyScheduleKind(chosen)
                                 << " schedule does not verify: " << *v;

    // DualPipe's own order needs every stage to cut the batch alike into 2P micro-batches or
    // more (DeepSeek's dualpipev.py refuses fewer); elsewhere the list rule stands in.
    if (hideAllToAlls && chosen == pipe::ScheduleKind::DualPipeV)
      if (std::optional<std::string> why = sched::withoutDualPipeOrder(problem))
        model.emitWarning() << *why;

    if (chosen == pipe::ScheduleKind::BreadthFirst) {
      int64_t fewest = problem.numMicrobatches(0);
      for (int64_t s = 1; s < problem.numStages(); ++s)
        fewest = std::min(fewest, problem.numMicrobatches(s));
      if (fewest < par.getPipeline() && problem.numStages() > par.getPipeline())
        model.emitWarning() << "breadth-first with " << fewest << " micro-batches on "
                            << par.getPipeline()
                            << " pipeline ranks stalls at every loop wrap; use at least "
                            << par.getPipeline() << " micro-batches";
    }

    // Record what ran, so the IR says which schedule it holds.
    if (chosen != par.getSchedule() || group != par.getGroupSize() ||
        split != par.getSplitBackward())
      model.setParallelismAttr(withSchedule(par, chosen, group, par.getPlacement(), split));
    writeSchedule(model, *schedule);
    model.setPhase(pipe::Phase::Scheduled);
    return success();
  }
};

} // namespace
