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
#include <optional>

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
  if (facts.schedule.ranks.empty() || !(dataParallel || delayed))
    return 0;
  const size_t ranks = facts.schedule.ranks.size();
  // The compute stream's time after each action for its expert all-to-alls, priced as the
  // plan prices them, with the peers of its rank's busiest expert-group member (the schedule
  // tier's order, cached across placements, took the fastest any placement allows). After an
  // unpaired compute, its own: what waits for the compute waits for them
  // (`delaysDependents`). In a pair of the plan (combined 1F1B), what they take beyond the two
  // halves (as actionTimes() charges a pair, less the halves' surcharges beside collectives,
  // which the plan's pair counts in its halves; below), between the halves: it delays the
  // second half's end, and neither half's dependents beyond what the plan's pair does (the
  // plan charges each half's share after it).
  const bool allToAlls = hasExperts(job) && par.expert > 1;
  std::vector<std::vector<double>> allToAllAfter(ranks);
  std::vector<std::vector<uint8_t>> delaysDependents(ranks);
  const runtime::Transformer routing = allToAlls ? collectiveShape(job) : runtime::Transformer();
  // One rank's all-to-alls' times, by their bytes (a few sizes).
  std::vector<std::pair<int64_t, double>> priced;
  for (size_t r = 0; allToAlls && r < ranks; ++r) {
    const std::vector<sched::Action> &order = facts.schedule.ranks[r];
    const std::pair<int64_t, int64_t> peers = work.expertGroups().allToAllPeers[r];
    priced.clear();
    auto allToAllTime = [&](const sched::Action &a) {
      double total = 0;
      for (auto [bytes, count] : st[a.stage].allToAllBytes(a.kind)) {
        auto it = llvm::find_if(priced, [&](const auto &p) { return p.first == bytes; });
        if (it == priced.end()) {
          priced.push_back({bytes, expertAllToAllTime(cost, bytes, par.expert, peers, routing)});
          it = std::prev(priced.end());
        }
        total += static_cast<double>(count) * it->second;
      }
      return total;
    };
    static const std::vector<int32_t> kNone;
    const std::vector<int32_t> &pairs = r < facts.planPairs.size() ? facts.planPairs[r] : kNone;
    allToAllAfter[r].assign(order.size(), 0);
    delaysDependents[r].assign(order.size(), 1);
    auto next = pairs.begin();
    for (size_t i = 0; i < order.size(); ++i) {
      const sched::Action &a = order[i];
      if (next == pairs.end() || *next != static_cast<int32_t>(i)) {
        allToAllAfter[r][i] = allToAllTime(a);
        continue;
      }
      const sched::Action &b = order[i + 1];
      allToAllAfter[r][i] =
          allToAllTime(a) + allToAllTime(b) - st[a.stage].time(a.kind) - st[b.stage].time(b.kind);
      delaysDependents[r][i] = delaysDependents[r][i + 1] = 0;
      ++next;
      ++i;
    }
  }
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
    problem.tiedEmbeddings = job.model.transformer && job.model.transformer->tieEmbeddings;
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
  // for its stage's last backward (and a tied stage's for the tie), an optimizer step for its
  // reduction, and an all-gather of updated parameters for its optimizer step. Every compute
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
  std::vector<std::vector<double>> surcharges(ranks);
  const std::vector<std::vector<double>> *earliest = &facts.earliestStart;
  sched::Timeline timedRun;
  const bool slowed = placement && cost.slowsBesideCollectives();
  // The order's earliest starts with pairs (facts.earliestStart charges a pair's all-to-alls
  // to its second half, which would delay what waits for it) come from this run too.
  if (slowed || delayed || !facts.planPairs.empty()) {
    std::vector<OverlapItem> items;
    sched::ActionTimes times = actionTimes(st, par.microbatches);
    for (size_t r = 0; allToAlls && r < ranks; ++r)
      for (size_t i = 0; i < facts.schedule.ranks[r].size(); ++i)
        if (delaysDependents[r][i])
          times.at(facts.schedule.ranks[r][i]) += allToAllAfter[r][i];
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
            items.push_back(
                {OverlapItem::Kind::OptimizerStep, c.stage, work.optimizerStep(c.stage)});
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
      for (size_t i = 0; i < order.size(); ++i) {
        times.at(order[i]) += surcharges[r][actionItem[i]];
        // A pair's all-to-alls hide behind its halves slowed.
        if (allToAlls && !delaysDependents[r][i] && i + 1 < order.size())
          allToAllAfter[r][i] -= surcharges[r][actionItem[i]] + surcharges[r][actionItem[i + 1]];
      }
    }
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
  std::vector<double> gathered(numStages), reduced(numStages), optimized(numStages),
      lastBackward(numStages), tied(numStages);
  const bool residency = sharding == runtime::Sharding::Full && !facts.activationsAt.empty();
  if (residency)
    heldAtComputes.assign(ranks, 0);
  for (size_t r = 0; r < ranks; ++r) {
    std::fill(gathered.begin(), gathered.end(), 0);
    std::fill(reduced.begin(), reduced.end(), 0);
    std::fill(optimized.begin(), optimized.end(), 0);
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
    // What a pair's all-to-alls add on the compute stream before its second half.
    double pairGap = 0;
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
        const double ready =
            c.kind == sched::Collective::Kind::Unshard ? reshard : optimized[c.stage];
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
        optimized[c.stage] = compute;
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
      double start = std::max({compute + pairGap, (*earliest)[r][i], gathered[a.stage]});
      pairGap = 0;
      if (reduceEachRun && a.kind != sched::ActionKind::Forward) {
        start = std::max({start, reduced[a.stage], reductionBeforeGradient});
        reductionBeforeGradient = lastReduction;
      }
      compute = start + duration + surchargeOf();
      // Its all-to-alls follow it on the compute stream, before what is issued after it; a
      // pair's delay only its second half (above). A whole backward or a weight gradient
      // completes the stage's gradients (the last one its reduction waits for).
      if (allToAlls && delaysDependents[r][i])
        compute += allToAllAfter[r][i];
      else if (allToAlls)
        pairGap = std::max(0.0, allToAllAfter[r][i]);
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
