//===- TuneSchedule.cpp - the schedule tier's order and what it holds ----===//
//
// BoundCalculator::schedule: the order the compiler would build for a configuration (the same
// scheduling library calls, split backwards placed from the same compute times, combined 1F1B
// paired as the compiler pairs it), executed with compute only, and the activations and
// gradient buffers each rank holds along it (TuneBounds.h).
//
//===----------------------------------------------------------------------===//

#include "tune/TuneBounds.h"

#include "scheduling/Schedulers.h"

#include <algorithm>
#include <optional>

using namespace conduit;
using namespace conduit::detail;

llvm::Expected<const BoundCalculator::ScheduleFacts *> BoundCalculator::schedule(const Job &job) {
  const ParallelismSpec &par = job.parallelism;
  auto key = std::make_tuple(par.pipeline, par.stagesPerDevice, par.microbatches,
                             par.microbatchSize, static_cast<int>(par.schedule), par.groupSize,
                             checkpointingKey(par), static_cast<int>(par.placement),
                             par.splitBackward, par.tensor, par.sequenceParallel, par.expert,
                             par.maxDeferredWeightGradients.value_or(-1));
  if (auto it = schedules.find(key); it != schedules.end())
    return it->second.get();
  llvm::Expected<const CostModel *> cost = costModel(job);
  if (!cost)
    return cost.takeError();
  llvm::Expected<const std::vector<Stage> *> stageList = stages(job);
  if (!stageList)
    return stageList.takeError();
  const std::vector<Stage> &st = **stageList;
  const int64_t numStages = par.numStages(), b = par.microbatchSize;

  llvm::Expected<std::vector<int64_t>> rankOf = sched::placeStages(
      numStages, par.pipeline,
      par.placement == Placement::V ? sched::Placement::V : sched::Placement::Loop);
  if (!rankOf)
    return rankOf.takeError();
  std::vector<std::vector<int64_t>> boundaries(numStages,
                                               sched::equalBoundaries(par.microbatches, b));
  sched::ScheduleProblem problem(par.pipeline, *rankOf, std::move(boundaries));
  if (sched::Violation v = problem.check())
    return llvm::createStringError(*v);
  // Built as the compiler builds it (conduit-schedule), so that the shapes the compiler
  // refuses are refused here: split backwards are placed from the stages' compute times,
  // which are the same cost model's (every micro-batch has b samples).
  std::optional<sched::ActionTimes> computeTimes;
  if (par.splitBackward) {
    computeTimes.emplace();
    for (const Stage &stage : st) {
      computeTimes->forward.emplace_back(par.microbatches, stage.computeForwardS);
      computeTimes->backward.emplace_back(par.microbatches, stage.computeBackwardS);
      computeTimes->input.emplace_back(par.microbatches, stage.computeInputS);
      computeTimes->weight.emplace_back(par.microbatches, stage.computeWeightS);
    }
  }
  // The compiler's order: the tuner compiles with the experts' all-to-alls overlapped, which
  // also runs depth-first as combined 1F1B (passes/Schedule.cpp).
  const bool allToAlls = hasExperts(job) && par.expert > 1;
  llvm::Expected<sched::Schedule> order =
      sched::runScheduler(par.schedule, problem, par.groupSize, par.splitBackward,
                          computeTimes ? &*computeTimes : nullptr, par.maxDeferredWeightGradients,
                          allToAlls ? sched::Deferral::Cooldown : sched::Deferral::Throughout);
  if (!order)
    return order.takeError();
  const bool combined =
      allToAlls && par.schedule == runtime::Schedule::DepthFirst && problem.equalPartitions();
  // Combined 1F1B's pairs bound what the all-to-alls add (below), but the order is timed
  // unpaired: in the plan a pair's forward starts without waiting for its backward's input.
  std::optional<sched::Schedule> combinedOrder;
  if (combined) {
    combinedOrder = *order;
    sched::pairForwardsWithBackwards(problem, *combinedOrder);
  }
  const bool pairs = llvm::any_of(order->pairs, [](const auto &p) { return !p.empty(); });

  auto facts = std::make_unique<ScheduleFacts>();
  facts->rankOf = *rankOf;
  if (combined)
    facts->planPairs = combinedOrder->pairs;
  facts->computeEnd.assign(par.pipeline, 0);
  facts->lastBackwardEnd.assign(numStages, 0);
  facts->forwardHeld.assign(numStages, 0);
  facts->backwardHeld.assign(numStages, 0);
  facts->forwardHeldWithGradients.assign(numStages, 0);
  facts->backwardHeldWithGradients.assign(numStages, 0);
  facts->forwardHeldWithAllGradients.assign(numStages, 0);
  facts->backwardHeldWithAllGradients.assign(numStages, 0);
  // What the memory plan counts (StageActivations): a micro-batch's stored activations, what
  // a forward holds of its own while it runs, and what a backward holds beyond them (an input
  // gradient holds no less).
  auto stored = [&](const Stage &stage) { return stage.activations.stored * b; };
  auto forwardWorking = [&](const Stage &stage) {
    return (stage.activations.forwardKept + stage.activations.forwardWorking) * b;
  };
  auto working = [&](const Stage &stage) { return stage.activations.backwardWorking * b; };

  // The activations each rank holds along its order: a forward stores its micro-batch's, and
  // the first backward part of that micro-batch frees them, at the earliest. With sharded
  // gradients, a stage's full gradient buffer lives at least from its first to its last
  // backward (weight gradients, where split, may only extend that): the dense parameters',
  // and with them the routed experts' unless their expert-data group is one rank, which holds
  // them whole (static state) instead; the order does not know D, so both are kept.
  auto walkActivations = [&] {
    facts->activationsAt.assign(par.pipeline, {});
    std::vector<std::vector<uint8_t>> held(numStages, std::vector<uint8_t>(par.microbatches, 0));
    for (int64_t r = 0; r < par.pipeline; ++r) {
      const std::vector<sched::Action> &actions = order->ranks[r];
      std::vector<int64_t> firstBackward(numStages, -1), lastBackward(numStages, -1);
      for (size_t i = 0; i < actions.size(); ++i)
        if (sched::producesInputGradient(actions[i].kind)) {
          if (firstBackward[actions[i].stage] < 0)
            firstBackward[actions[i].stage] = static_cast<int64_t>(i);
          lastBackward[actions[i].stage] = static_cast<int64_t>(i);
        }
      // With split backwards, the weight gradient's inputs an input gradient keeps until its
      // weight gradient (what the memory plan counts at each compute but a weight gradient).
      // The full gradient buffers live: the dense parameters', and all of them.
      int64_t activations = 0, gradients = 0, allGradients = 0, weightInputs = 0;
      // The most a stage's compute holds: its level, with the dense gradient buffers, and with
      // all of them.
      auto hold = [&](std::vector<int64_t> &alone, std::vector<int64_t> &withGradients,
                      std::vector<int64_t> &withAll, int32_t s, int64_t level) {
        alone[s] = std::max(alone[s], level);
        withGradients[s] = std::max(withGradients[s], level + gradients);
        withAll[s] = std::max(withAll[s], level + allGradients);
      };
      std::vector<int64_t> &at = facts->activationsAt[r];
      at.reserve(actions.size());
      for (size_t i = 0; i < actions.size(); ++i) {
        const sched::Action &a = actions[i];
        const Stage &stage = st[a.stage];
        if (a.kind == sched::ActionKind::Forward) {
          const int64_t level = weightInputs + std::max(activations + forwardWorking(stage),
                                                        activations + stored(stage));
          at.push_back(level);
          hold(facts->forwardHeld, facts->forwardHeldWithGradients,
               facts->forwardHeldWithAllGradients, a.stage, level);
          activations += stored(stage);
          held[a.stage][a.mb] = 1;
          continue;
        }
        if (firstBackward[a.stage] == static_cast<int64_t>(i)) {
          gradients += stage.denseParams() * runtime::kGradientBytes;
          allGradients += stage.params * runtime::kGradientBytes;
        }
        const int64_t ownWeightInputs = stage.activations.weightGradient * b;
        int64_t level = activations;
        if (a.kind == sched::ActionKind::BackwardWeight)
          weightInputs -= ownWeightInputs;
        else
          level += weightInputs;
        if (held[a.stage][a.mb]) {
          level += working(stage);
          activations -= stored(stage);
          held[a.stage][a.mb] = 0;
        }
        if (a.kind == sched::ActionKind::BackwardInput)
          weightInputs += ownWeightInputs;
        at.push_back(level);
        hold(facts->backwardHeld, facts->backwardHeldWithGradients,
             facts->backwardHeldWithAllGradients, a.stage, level);
        if (lastBackward[a.stage] == static_cast<int64_t>(i)) {
          gradients -= stage.denseParams() * runtime::kGradientBytes;
          allGradients -= stage.params * runtime::kGradientBytes;
        }
      }
    }
  };

  if (!par.splitBackward || !pairs) {
    // A compute's expert all-to-alls run on the compute stream after it, or hide in its
    // paired step (PlanCosts.h).
    const sched::Schedule *pairedAs = !allToAlls ? nullptr : combined ? &*combinedOrder : &*order;
    sched::Timeline timeline =
        sched::simulateCompute(problem, *order, actionTimes(st, par.microbatches, pairedAs));
    for (int64_t r = 0; r < par.pipeline; ++r) {
      const std::vector<sched::Action> &actions = order->ranks[r];
      if (!actions.empty())
        facts->computeEnd[r] = timeline.finish[r].back();
      for (size_t i = 0; i < actions.size(); ++i)
        if (actions[i].kind != sched::ActionKind::Forward)
          facts->lastBackwardEnd[actions[i].stage] =
              std::max(facts->lastBackwardEnd[actions[i].stage], timeline.finish[r][i]);
    }
    walkActivations();
    // The compiler runs this very order; with overlapped pairs its timing is the pair's,
    // which streamsEnd() does not model.
    if (!pairs) {
      facts->schedule = std::move(*order);
      facts->earliestStart = std::move(timeline.start);
    } else {
      facts->activationsAt.clear();
    }
    return (schedules[key] = std::move(facts)).get();
  }

  // Split backwards in overlapped pairs: whatever the order, no rank starts before the first
  // micro-batch has gone forward through the stages below its lowest, and it computes all its work
  // one action at a time.
  std::vector<double> forward(numStages);
  for (int64_t s = 0; s < numStages; ++s)
    forward[s] = st[s].forwardS;
  std::vector<int64_t> lowest(par.pipeline, numStages);
  for (int64_t s = 0; s < numStages; ++s) {
    const int64_t r = (*rankOf)[s];
    lowest[r] = std::min(lowest[r], s);
    facts->computeEnd[r] += static_cast<double>(par.microbatches) * (forward[s] + st[s].backwardS);
  }
  // The tuner compiles this very order (it does not defer fewer to fit), pairs included: each
  // compute it runs alone carries its all-to-alls whole, and a pair lasts at least as long as
  // either its computes or its all-to-alls, which share one link (pairedStepTime()). A
  // micro-batch's first forward is its rank's first compute, alone, and its output leaves
  // after its combine.
  if (allToAlls) {
    const sched::ActionTimes bare = actionTimes(st, par.microbatches, nullptr);
    const sched::ActionTimes paired = actionTimes(st, par.microbatches, &*order);
    for (int64_t r = 0; r < par.pipeline; ++r)
      for (const sched::Action &a : order->ranks[r])
        facts->computeEnd[r] += paired.of(a) - bare.of(a);
    for (int64_t s = 0; s < numStages; ++s)
      forward[s] += st[s].allToAllTime(sched::ActionKind::Forward);
  }
  for (int64_t r = 0; r < par.pipeline; ++r)
    for (int64_t s = 0; s < lowest[r]; ++s)
      facts->computeEnd[r] += forward[s];
  // Splitting moves only the weight gradients: with the loop placement, forwards and input
  // gradients keep the order of the schedule built without durations. The list schedules of
  // the V placement order their forwards by durations too, the compute times above, which are
  // the compiler's (as for zbv, whose order the timed tier runs). Either way the order's
  // activations bound what the plan holds, paired or not (a pair's halves hold at least what
  // either holds alone).
  walkActivations();
  facts->activationsAt.clear();
  // The timed tier runs this order as the plan does, a pair's halves one after the other, each
  // waiting for its own inputs, with what the pair leaves of its all-to-alls after each
  // (streamsEnd).
  facts->planPairs = order->pairs;
  facts->schedule = std::move(*order);
  facts->schedule.pairs.clear();
  return (schedules[key] = std::move(facts)).get();
}
