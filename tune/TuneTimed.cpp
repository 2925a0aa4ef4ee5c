//===- TuneTimed.cpp - the schedule tier's order, timed -------------------===//
//
// BoundCalculator::streamsEnd: a schedule's order run as the compiler's simulator times it, as
// far as that is known before compiling (TuneBounds.h), and the memory its full sharding's
// gathers hold at each compute.
//
//===----------------------------------------------------------------------===//

#include "tune/TuneBounds.h"

#include "analysis/PlanCosts.h"
#include "scheduling/Collectives.h"
#include "scheduling/Schedulers.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <tuple>

using namespace conduit;
using namespace conduit::detail;

double BoundCalculator::streamsEnd(const Job &job, const CostModel &cost,
                                   const std::vector<Stage> &st, const DataParallelWork &work,
                                   const ScheduleFacts &facts,
                                   std::vector<int64_t> &heldAtComputes) const {
  heldAtComputes.clear();
  const ParallelismSpec &par = job.parallelism;
  const bool dataParallel = par.data > 1, delayed = par.pipeline > 1;
  const bool reduceEachRun = par.gradientReduction == runtime::GradientReduction::Run;
  if (facts.schedule.ranks.empty() || !(dataParallel || delayed || !facts.planPairs.empty()))
    return 0;
  const size_t ranks = facts.schedule.ranks.size();
  // The collectives the compiler places for this order (conduit-place-collectives' call).
  std::optional<sched::CollectivePlacement> placement;
  if (dataParallel) {
    sched::CollectiveProblem problem;
    problem.orders = facts.schedule.ranks;
    problem.stageRank = facts.rankOf;
    problem.replicas = par.data;
    problem.sharding = static_cast<sched::Sharding>(par.sharding);
    problem.window = par.fsdpWindow;
    problem.reduceEachRun = reduceEachRun;
    problem.tiedEmbeddings = job.model.transformer && job.model.transformer->sharesTokenTable();
    llvm::Expected<sched::CollectivePlacement> placed = sched::placeCollectives(problem);
    if (!placed) {
      llvm::consumeError(placed.takeError());
      return 0;
    }
    placement = std::move(*placed);
  }
  const runtime::Sharding sharding = effectiveSharding(par);
  const int64_t e = job.training.elementBytes();
  const size_t numStages = st.size();
  // Each rank's compute stream and collective stream run its instructions in program order,
  // each as soon as its stream is free and what it waits for has finished (LowerToPlan.cpp's
  // dependencies): a compute waits for its stage's all-gather (reducing each run, a backward,
  // input or weight gradient also for its stage's previous reduction and for the reduction
  // issued before the previous one of them), an all-gather for the reshard before it, a reduction
  // for its stage's last backward (and a tied stage's for the tie), and an optimizer step for its
  // reduction; the all-gathers of updated parameters open the step. Every compute
  // starts no earlier than the compute-only execution starts it, which times the transfers too
  // (below); the rest of their timing is left out, which only delays the plan.
  auto reductionTime = [&](const sched::Collective &c, int64_t rank) {
    return work.reduction(c.stage, rank,
                          c.kind == sched::Collective::Kind::AllReduce ? Collective::AllReduce
                                                                       : Collective::ReduceScatter);
  };
  // The order timed as the compiler's simulator times it, as far as that can be known before
  // compiling (what is left out only delays the plan): what each compute and optimizer step
  // loses to the collectives beside it (PlanCosts, collectiveOverlapSurcharges), from the same
  // items in the same order, the plan's, where conduit-place-collectives writes each list as
  // this walks it (per rank, in item order, and per action); and each result reaching another
  // rank's stage no sooner than its transfer, alone on its link, takes.
  const bool slowed = placement && cost.slowsBesideCollectives();
  // Per item of the rank's program, and per action of its order (empty where nothing slows).
  std::vector<std::vector<double>> surcharges(ranks), actionSurcharge(slowed ? ranks : 0);
  std::vector<OverlapItem> items;
  for (size_t r = 0; slowed && r < ranks; ++r) {
    const sched::RankCollectives &placed = placement->ranks[r];
    const std::vector<sched::Action> &order = facts.schedule.ranks[r];
    std::vector<size_t> actionItem;
    items.clear();
    auto add = [&](const std::vector<sched::Collective> &list) {
      for (const sched::Collective &c : list)
        switch (c.kind) {
        case sched::Collective::Kind::Unshard:
        case sched::Collective::Kind::GatherParams:
          items.push_back({OverlapItem::Kind::Gather, c.stage, work.gather(c.stage, r)});
          break;
        case sched::Collective::Kind::ReduceScatter:
        case sched::Collective::Kind::AllReduce:
          items.push_back({OverlapItem::Kind::Reduction, c.stage, reductionTime(c, r)});
          break;
        case sched::Collective::Kind::OptimizerStep:
          items.push_back({OverlapItem::Kind::OptimizerStep, c.stage, work.optimizerStep(c.stage)});
          break;
        default:
          break;
        }
    };
    add(placed.atStart);
    for (size_t i = 0; i < order.size(); ++i) {
      actionItem.push_back(items.size());
      items.push_back({OverlapItem::Kind::Compute, static_cast<int32_t>(order[i].stage),
                       st[order[i].stage].computeTime(order[i].kind)});
      add(placed.after[i]);
    }
    add(placed.atEnd);
    surcharges[r] = collectiveOverlapSurcharges(items, numStages, kCollectiveOverlapSlowdown);
    for (size_t i = 0; i < order.size(); ++i)
      actionSurcharge[r].push_back(surcharges[r][actionItem[i]]);
  }
  const bool allToAlls = hasExperts(job) && par.expert > 1;
  const std::vector<std::vector<double>> allToAllAfter =
      allToAllsAfter(job, cost, st, work, facts, actionSurcharge);
  const std::vector<std::vector<double>> *earliest = &facts.earliestStart;
  sched::Timeline timedRun;
  // The order's earliest starts with pairs come from this run too: combined 1F1B's
  // facts.earliestStart charges a pair's all-to-alls to its second half, which would delay what
  // waits for it, and DualPipeV's order has none.
  if (slowed || delayed || !facts.planPairs.empty()) {
    sched::ActionTimes times = actionTimes(st, par.microbatches);
    for (size_t r = 0; r < ranks; ++r)
      for (size_t i = 0; i < facts.schedule.ranks[r].size(); ++i)
        times.at(facts.schedule.ranks[r][i]) +=
            (allToAlls ? allToAllAfter[r][i] : 0) + (slowed ? actionSurcharge[r][i] : 0);
    // The plan sends a stage's output (its last layer's, as one rank of the tensor group holds
    // it) to the next stage's rank after the forward, and the input gradient back.
    sched::TransferDelays delays;
    if (delayed) {
      delays.forward.assign(numStages, 0);
      delays.backward.assign(numStages, 0);
      for (size_t s = 0; s + 1 < numStages; ++s) {
        const int64_t from = facts.rankOf[s], to = facts.rankOf[s + 1];
        if (from == to)
          continue;
        const int64_t bytes =
            shareOf(job.model.layers[st[s].end - 1], par).outputBytes * par.microbatchSize;
        delays.forward[s] = cost.transferTime(bytes, cost.pipelineLink(from, to));
        delays.backward[s + 1] = cost.transferTime(bytes, cost.pipelineLink(to, from));
      }
    }
    // In the plan the computes, with these durations (the simulator's), start no earlier than
    // a compute-only execution of them, with these delays, starts them.
    // The problem the order was built for (not kept with it: the schedule cache holds
    // thousands of orders).
    const sched::ScheduleProblem problem(
        par.pipeline, facts.rankOf,
        std::vector<std::vector<int64_t>>(
            numStages, sched::equalBoundaries(par.microbatches, par.microbatchSize)));
    timedRun = sched::simulateCompute(problem, facts.schedule, times, delays);
    earliest = &timedRun.start;
  }
  if (!placement) {
    // One replica: each rank's optimizer steps follow its last compute.
    std::vector<double> rankEnd(ranks, 0);
    for (size_t r = 0; r < ranks; ++r)
      if (!timedRun.finish[r].empty())
        rankEnd[r] = timedRun.finish[r].back();
    for (size_t s = 0; s < numStages; ++s)
      rankEnd[facts.rankOf[s]] += work.optimizerStep(static_cast<int64_t>(s));
    return *std::max_element(rankEnd.begin(), rankEnd.end());
  }
  double end = 0;
  std::vector<double> gathered(numStages), reduced(numStages), lastBackward(numStages),
      tied(numStages);
  const bool residency = sharding == runtime::Sharding::Full && !facts.activationsAt.empty();
  if (residency)
    heldAtComputes.assign(ranks, 0);
  for (size_t r = 0; r < ranks; ++r) {
    std::fill(gathered.begin(), gathered.end(), 0);
    std::fill(reduced.begin(), reduced.end(), 0);
    std::fill(lastBackward.begin(), lastBackward.end(), 0);
    std::fill(tied.begin(), tied.end(), 0);
    const sched::RankCollectives &placed = placement->ranks[r];
    const std::vector<sched::Action> &order = facts.schedule.ranks[r];
    const std::vector<double> &surcharge = surcharges[r];
    size_t item = 0; // the walk's position among them
    // The surcharge of the next item, which is a compute or an optimizer step.
    auto surchargeOf = [&] { return surcharge.empty() ? 0.0 : surcharge[item++]; };
    auto skipItem = [&] {
      if (!surcharge.empty())
        ++item;
    };
    double compute = 0, comm = 0, reshard = 0;
    // The gathered parameters' bytes resident (full sharding), from each all-gather's issue to
    // its reshard, as the memory plan counts them.
    int64_t resident = 0;
    // Reducing each run: when the last reduction issued ends, and the one issued before the
    // previous backward, input or weight gradient (which the next of them waits for).
    double lastReduction = 0, reductionBeforeGradient = 0;
    auto issue = [&](const sched::Collective &c) {
      switch (c.kind) {
      case sched::Collective::Kind::Unshard:
      case sched::Collective::Kind::GatherParams: {
        // A parameter all-gather after the reshard before it; the gather of the updated
        // shards (the previous step's) opens the step.
        const double ready = c.kind == sched::Collective::Kind::Unshard ? reshard : 0.0;
        comm = std::max(comm, ready) + work.gather(c.stage, r);
        gathered[c.stage] = comm;
        if (c.kind == sched::Collective::Kind::Unshard)
          resident += work.allocated(c.stage) * e;
        skipItem();
        return;
      }
      case sched::Collective::Kind::Reshard:
        reshard = compute;
        resident -= work.allocated(c.stage) * e;
        return;
      case sched::Collective::Kind::ReduceScatter:
      case sched::Collective::Kind::AllReduce:
        comm = std::max({comm, lastBackward[c.stage], tied[c.stage]}) + reductionTime(c, r);
        reduced[c.stage] = comm;
        skipItem();
        lastReduction = comm;
        return;
      case sched::Collective::Kind::OptimizerStep:
        compute = std::max(compute, reduced[c.stage]) + work.optimizerStep(c.stage) + surchargeOf();
        return;
      case sched::Collective::Kind::TieGradients: {
        // After the backwards of both copies this rank holds (its transfer and the other
        // rank's backwards left out); the tied stages' reductions wait for it.
        const bool both = c.peerRank == static_cast<int32_t>(r) && c.peerStage >= 0;
        const double at = std::max(lastBackward[c.stage], both ? lastBackward[c.peerStage] : 0.0);
        tied[c.stage] = at;
        if (both)
          tied[c.peerStage] = at;
        return;
      }
      }
    };
    for (const sched::Collective &c : placed.atStart)
      issue(c);
    for (size_t i = 0; i < order.size(); ++i) {
      const sched::Action &a = order[i];
      const Stage &stage = st[a.stage];
      if (residency)
        heldAtComputes[r] = std::max(heldAtComputes[r], facts.activationsAt[r][i] + resident);
      const double duration = stage.time(a.kind);
      double start = std::max({compute, (*earliest)[r][i], gathered[a.stage]});
      if (reduceEachRun && a.kind != sched::ActionKind::Forward) {
        start = std::max({start, reduced[a.stage], reductionBeforeGradient});
        reductionBeforeGradient = lastReduction;
      }
      compute = start + duration + surchargeOf();
      // Its all-to-alls follow it on the compute stream, before what is issued after it. A
      // whole backward or a weight gradient completes the stage's gradients (the last one its
      // reduction waits for).
      if (allToAlls)
        compute += allToAllAfter[r][i];
      if (a.kind == sched::ActionKind::Backward || a.kind == sched::ActionKind::BackwardWeight)
        lastBackward[a.stage] = compute;
      for (const sched::Collective &c : placed.after[i])
        issue(c);
    }
    for (const sched::Collective &c : placed.atEnd)
      issue(c);
    end = std::max({end, compute, comm});
  }
  return end;
}

std::vector<std::vector<double>>
BoundCalculator::allToAllsAfter(const Job &job, const CostModel &cost, const std::vector<Stage> &st,
                                const DataParallelWork &work, const ScheduleFacts &facts,
                                const std::vector<std::vector<double>> &surcharge) const {
  const int64_t expert = job.parallelism.expert;
  const size_t ranks = facts.schedule.ranks.size();
  std::vector<std::vector<double>> after(ranks);
  if (!hasExperts(job) || expert <= 1)
    return after;
  // Priced with the peers of each rank's busiest expert-group member (the schedule tier's
  // order, cached across placements, took the fastest any placement allows): after an unpaired
  // compute, its own all-to-alls; in a pair of the plan (combined 1F1B), each half's share of
  // what the pair leaves exposed, timed from the same segments, all-to-alls and rate as the
  // plan's (PlanCosts). Either way what waits for the compute waits for them.
  const runtime::Transformer routing = collectiveShape(job);
  const double sharedRate = pairedComputeRate(cost, routing);
  // One rank's all-to-alls' times, by their bytes (a few sizes).
  std::vector<std::pair<int64_t, double>> priced;
  std::vector<double> comms[2];
  // One rank's pairs' exposed all-to-all time, by their passes and their halves' durations:
  // the steady state repeats a few pairs of passes.
  using PairKey =
      std::tuple<int32_t, sched::ActionKind, int32_t, sched::ActionKind, double, double>;
  std::vector<std::pair<PairKey, std::optional<double>>> exposures;
  for (size_t r = 0; r < ranks; ++r) {
    const std::vector<sched::Action> &order = facts.schedule.ranks[r];
    const std::pair<int64_t, int64_t> peers = work.expertGroups().allToAllPeers[r];
    priced.clear();
    exposures.clear();
    auto price = [&](const sched::Action &a, std::vector<double> &out) {
      out.clear();
      for (int64_t bytes : st[a.stage].allToAllBytes(a.kind)) {
        auto it = llvm::find_if(priced, [&](const auto &p) { return p.first == bytes; });
        if (it == priced.end()) {
          priced.push_back({bytes, expertAllToAllTime(cost, bytes, expert, peers, routing)});
          it = std::prev(priced.end());
        }
        out.push_back(it->second);
      }
      return std::accumulate(out.begin(), out.end(), 0.0);
    };
    // Each half of a pair as slowed beside the collectives, as the plan times a pair.
    auto own = [&](size_t i) {
      const sched::Action &a = order[i];
      return st[a.stage].computeTime(a.kind) + (surcharge.empty() ? 0 : surcharge[r][i]);
    };
    static const std::vector<int32_t> kNone;
    const std::vector<int32_t> &pairs = r < facts.planPairs.size() ? facts.planPairs[r] : kNone;
    after[r].assign(order.size(), 0);
    auto next = pairs.begin();
    for (size_t i = 0; i < order.size(); ++i) {
      const sched::Action &a = order[i];
      if (next == pairs.end() || *next != static_cast<int32_t>(i)) {
        after[r][i] = price(a, comms[0]);
        continue;
      }
      const sched::Action &b = order[i + 1];
      const double whole[2] = {price(a, comms[0]), price(b, comms[1])};
      const double halves[2] = {own(i), own(i + 1)};
      const PairKey key{a.stage, a.kind, b.stage, b.kind, halves[0], halves[1]};
      auto known = llvm::find_if(exposures, [&](const auto &p) { return p.first == key; });
      if (known == exposures.end()) {
        const std::vector<double> *cuts[2] = {&st[a.stage].cuts(a.kind), &st[b.stage].cuts(b.kind)};
        const std::vector<double> *commOf[2] = {&comms[0], &comms[1]};
        exposures.push_back({key, pairExposedAllToAll(cuts, halves, commOf, sharedRate)});
        known = std::prev(exposures.end());
      }
      const std::optional<double> &exposed = known->second;
      for (int h = 0; h < 2; ++h)
        after[r][i + h] = exposed ? *exposed * whole[h] / (whole[0] + whole[1]) : whole[h];
      ++next;
      ++i;
    }
  }
  return after;
}
