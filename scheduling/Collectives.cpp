//===- Collectives.cpp - where data-parallel collectives go ---------------===//
//
// The placer walks each rank's compute once: runs of one stage, the last backward of each
// stage, Belady's evictions over the runs, then the tie, the reductions and the optimizer
// steps. The verifiers walk the placed order as the runtime would issue it.
//
//===----------------------------------------------------------------------===//

#include "scheduling/Collectives.h"

#include <algorithm>
#include <map>
#include <utility>

using namespace conduit::sched;

namespace {

using Kind = Collective::Kind;

/// The compute after which a stage's gradients are complete: a whole backward or a weight
/// gradient (an input gradient leaves the weight gradient to come).
bool completesGradients(ActionKind kind) {
  return kind == ActionKind::Backward || kind == ActionKind::BackwardWeight;
}

bool isReduction(Kind kind) { return kind == Kind::ReduceScatter || kind == Kind::AllReduce; }

/// Whether the reduced gradients are sharded, so that a reduction may add to a shard.
bool gradientsSharded(Sharding sharding) {
  return sharding == Sharding::Gradients || sharding == Sharding::Full;
}

/// Whether the parameters stay whole on every replica while the optimizer updates a shard of
/// them, so that the updated shards are gathered once a step.
bool gathersUpdated(Sharding sharding) {
  return sharding == Sharding::Optimizer || sharding == Sharding::Gradients;
}

std::string str(int64_t value) { return std::to_string(value); }

/// Calls `visit(collective, done)` for every collective of `rank` in issue order, `done` being
/// the number of the rank's computes issued before it; stops at the first violation.
template <typename Visit> Violation forEachCollective(const RankCollectives &rank, Visit visit) {
  for (const Collective &c : rank.atStart)
    if (Violation v = visit(c, size_t(0)))
      return v;
  for (size_t i = 0; i < rank.after.size(); ++i)
    for (const Collective &c : rank.after[i])
      if (Violation v = visit(c, i + 1))
        return v;
  for (const Collective &c : rank.atEnd)
    if (Violation v = visit(c, rank.after.size()))
      return v;
  return std::nullopt;
}

/// A stretch of a rank's compute on one stage: computes [first, last] of its order.
struct Run {
  int32_t stage;
  size_t first, last;
};

/// Whether the compute writes its stage's whole gradients (a backward, an input or a weight
/// gradient: the runtime holds them from the first of these).
bool writesGradients(ActionKind kind) { return kind != ActionKind::Forward; }

/// Belady residencies over the runs, with a reshard after a stage's last use before it is
/// evicted and the all-gather that takes its place right after it.
void placeResidencies(const std::vector<Run> &runs, size_t window, RankCollectives &out) {
  // The next run of the same stage after each run. A resident stage has not run since the
  // last run of its residency, so its next use is the next run after that one.
  std::vector<size_t> nextSame(runs.size());
  std::map<int32_t, size_t> later;
  for (size_t k = runs.size(); k-- > 0;) {
    auto it = later.find(runs[k].stage);
    nextSame[k] = it == later.end() ? runs.size() : it->second;
    later[runs[k].stage] = k;
  }
  // Stage -> index of the last run of its current residency.
  std::map<int32_t, size_t> resident;
  for (size_t k = 0; k < runs.size(); ++k) {
    const Run &run = runs[k];
    if (auto it = resident.find(run.stage); it != resident.end()) {
      it->second = k;
      continue;
    }
    // Room from the start: gather before the rank's first instruction.
    std::vector<Collective> *at = &out.atStart;
    if (resident.size() >= window) {
      // Evict the resident stage used furthest in the future (the highest among equals).
      auto victim = resident.begin();
      size_t furthest = 0;
      for (auto it = resident.begin(); it != resident.end(); ++it)
        if (nextSame[it->second] >= furthest) {
          furthest = nextSame[it->second];
          victim = it;
        }
      at = &out.after[runs[victim->second].last];
      at->push_back({Kind::Reshard, victim->first});
      resident.erase(victim);
    }
    at->push_back({Kind::Unshard, run.stage});
    resident[run.stage] = k;
  }
  // Release what is still resident after its last use.
  for (auto &[stage, lastRun] : resident)
    out.after[runs[lastRun].last].push_back({Kind::Reshard, stage});
}

/// Appends rank r's tie, if it holds a tied copy; returns the stages it ties.
std::vector<int32_t> placeTie(const CollectiveProblem &problem, int32_t r, RankCollectives &out) {
  if (!problem.tiedEmbeddings)
    return {};
  const int32_t first = 0, last = static_cast<int32_t>(problem.stageRank.size()) - 1;
  const bool holdsFirst = problem.stageRank[first] == r, holdsLast = problem.stageRank[last] == r;
  if (!holdsFirst && !holdsLast)
    return {};
  if (holdsFirst && holdsLast) {
    out.atEnd.push_back({Kind::TieGradients, first, r, last});
    return first == last ? std::vector<int32_t>{first} : std::vector<int32_t>{first, last};
  }
  const int32_t mine = holdsFirst ? first : last, theirs = holdsFirst ? last : first;
  out.atEnd.push_back(
      {Kind::TieGradients, mine, static_cast<int32_t>(problem.stageRank[theirs]), theirs});
  return {mine};
}

RankCollectives placeRank(const CollectiveProblem &problem, int32_t r) {
  const std::vector<Action> &order = problem.orders[r];
  RankCollectives out;
  out.after.resize(order.size());
  std::vector<Run> runs;
  // Per stage, the compute after which its gradients are complete (-1: not this rank's).
  std::vector<int64_t> lastBackward(problem.stageRank.size(), -1);
  for (size_t i = 0; i < order.size(); ++i) {
    const int32_t stage = order[i].stage;
    if (completesGradients(order[i].kind))
      lastBackward[stage] = static_cast<int64_t>(i);
    if (!runs.empty() && runs.back().stage == stage)
      runs.back().last = i;
    else
      runs.push_back({stage, i, i});
  }
  // Reducing each run: after the last backward or weight gradient of each stretch of the
  // rank's gradient computes on one stage (forwards of other stages may come between them,
  // as in 1F1B's steady state; they hold no gradients).
  std::vector<std::pair<int32_t, int64_t>> gradientRuns; // (stage, its last B or W; -1: none)
  for (size_t i = 0; i < order.size(); ++i) {
    if (!writesGradients(order[i].kind))
      continue;
    if (gradientRuns.empty() || gradientRuns.back().first != order[i].stage)
      gradientRuns.push_back({order[i].stage, -1});
    if (completesGradients(order[i].kind))
      gradientRuns.back().second = static_cast<int64_t>(i);
  }
  // The stages in the order their gradients complete.
  std::vector<std::pair<int64_t, int32_t>> completion;
  for (size_t s = 0; s < lastBackward.size(); ++s)
    if (lastBackward[s] >= 0)
      completion.push_back({lastBackward[s], static_cast<int32_t>(s)});
  std::sort(completion.begin(), completion.end());
  std::vector<int32_t> reductionOrder;
  for (auto &[i, stage] : completion)
    reductionOrder.push_back(stage);

  const bool dataParallel = problem.replicas > 1;
  if (dataParallel && problem.sharding == Sharding::Full)
    placeResidencies(runs, static_cast<size_t>(problem.window), out);

  // The tied copies' gradients meet at the end of the rank's compute; their reductions and
  // optimizer steps come after.
  std::vector<int32_t> tied = placeTie(problem, r, out);
  auto isTied = [&](int32_t stage) {
    return std::find(tied.begin(), tied.end(), stage) != tied.end();
  };
  std::stable_partition(reductionOrder.begin(), reductionOrder.end(),
                        [&](int32_t stage) { return !isTied(stage); });

  // Reductions right after each stage's last backward (after a prefetch placed there), or
  // after the last of each run of its gradients.
  if (dataParallel) {
    const Kind reduction =
        problem.sharding == Sharding::None ? Kind::AllReduce : Kind::ReduceScatter;
    const bool eachRun = problem.reduceEachRun && gradientsSharded(problem.sharding);
    if (eachRun)
      for (auto [stage, last] : gradientRuns)
        if (last >= 0 && !isTied(stage))
          out.after[last].push_back({reduction, stage});
    for (int32_t stage : reductionOrder)
      if (isTied(stage))
        out.atEnd.push_back({reduction, stage});
      else if (!eachRun)
        out.after[lastBackward[stage]].push_back({reduction, stage});
  }

  // Optimizer steps at the end, in the order the reductions finish.
  for (int32_t stage : reductionOrder)
    out.atEnd.push_back({Kind::OptimizerStep, stage});

  // Optimizer and gradient sharding: the parameters the previous step updated are gathered
  // before the rank's first instruction, in the order of their stages' first computes, so that
  // each overlaps the computes before its stage's first.
  if (dataParallel && gathersUpdated(problem.sharding)) {
    std::vector<uint8_t> gathered(problem.stageRank.size(), 0);
    for (const Run &run : runs)
      if (!std::exchange(gathered[run.stage], 1))
        out.atStart.push_back({Kind::GatherParams, run.stage});
  }
  return out;
}

/// Whether rank r holds stage s.
bool onRank(const CollectiveProblem &problem, int64_t r, int32_t s) {
  return s >= 0 && s < static_cast<int32_t>(problem.stageRank.size()) && problem.stageRank[s] == r;
}

} // namespace

Violation CollectiveProblem::check() const {
  if (stageRank.empty())
    return std::string("the problem has no stages");
  const int64_t numRanks = static_cast<int64_t>(orders.size());
  const int64_t numStages = static_cast<int64_t>(stageRank.size());
  for (int64_t s = 0; s < numStages; ++s)
    if (stageRank[s] < 0 || stageRank[s] >= numRanks)
      return "stage " + str(s) + " is placed on rank " + str(stageRank[s]) + " but there are " +
             str(numRanks) + " ranks";
  if (replicas < 1)
    return "the number of replicas must be positive, got " + str(replicas);
  if (window < 1)
    return "the window of resident stages must be positive, got " + str(window);
  std::vector<uint8_t> complete(numStages, 0);
  for (int64_t r = 0; r < numRanks; ++r)
    for (size_t i = 0; i < orders[r].size(); ++i) {
      const Action &a = orders[r][i];
      if (a.stage < 0 || a.stage >= numStages)
        return "compute " + str(static_cast<int64_t>(i)) + " of rank " + str(r) + " is on stage " +
               str(a.stage) + ", which does not exist";
      if (stageRank[a.stage] != r)
        return "rank " + str(r) + " runs " + describe(a) + " but stage " + str(a.stage) +
               " is on rank " + str(stageRank[a.stage]);
      if (completesGradients(a.kind))
        complete[a.stage] = 1;
    }
  for (int64_t s = 0; s < numStages; ++s)
    if (!complete[s])
      return "stage " + str(s) + " has no backward or weight gradient on rank " + str(stageRank[s]);
  return std::nullopt;
}

int64_t RankCollectives::count(Collective::Kind kind) const {
  int64_t n = 0;
  forEachCollective(*this, [&](const Collective &c, size_t) -> Violation {
    n += c.kind == kind;
    return std::nullopt;
  });
  return n;
}

llvm::Expected<CollectivePlacement>
conduit::sched::placeCollectives(const CollectiveProblem &problem) {
  if (Violation v = problem.check())
    return llvm::createStringError(*v);
  CollectivePlacement placement;
  for (size_t r = 0; r < problem.orders.size(); ++r)
    placement.ranks.push_back(placeRank(problem, static_cast<int32_t>(r)));
  return placement;
}

//===----------------------------------------------------------------------===//
// Verification
//===----------------------------------------------------------------------===//

Violation conduit::sched::verifyCollectiveShape(const CollectiveProblem &problem,
                                                const CollectivePlacement &placement) {
  if (placement.ranks.size() != problem.orders.size())
    return "the placement has " + str(static_cast<int64_t>(placement.ranks.size())) +
           " ranks, expected " + str(static_cast<int64_t>(problem.orders.size()));
  for (size_t r = 0; r < problem.orders.size(); ++r) {
    const RankCollectives &rank = placement.ranks[r];
    if (rank.after.size() != problem.orders[r].size())
      return "rank " + str(static_cast<int64_t>(r)) + " has " +
             str(static_cast<int64_t>(rank.after.size())) + " places after compute, expected " +
             str(static_cast<int64_t>(problem.orders[r].size()));
    if (Violation v = forEachCollective(rank, [&](const Collective &c, size_t) -> Violation {
          if (!onRank(problem, static_cast<int64_t>(r), c.stage))
            return "rank " + str(static_cast<int64_t>(r)) + " issues " + describe(c) +
                   " for a stage it does not hold";
          return std::nullopt;
        }))
      return v;
  }
  return std::nullopt;
}

/// verifyResidencies on a placement of the right shape.
static Violation residencies(const CollectiveProblem &problem,
                             const CollectivePlacement &placement) {
  const bool fsdp = problem.replicas > 1 && problem.sharding == Sharding::Full;
  for (size_t r = 0; r < problem.orders.size(); ++r) {
    const std::string rank = "rank " + str(static_cast<int64_t>(r));
    const RankCollectives &placed = placement.ranks[r];
    if (!fsdp) {
      if (Violation v = forEachCollective(placed, [&](const Collective &c, size_t) -> Violation {
            if (c.kind == Kind::Unshard || c.kind == Kind::Reshard)
              return rank + " issues " + describe(c) + " but its parameters are not sharded";
            return std::nullopt;
          }))
        return v;
      continue;
    }
    std::vector<uint8_t> resident(problem.stageRank.size(), 0);
    int64_t gathered = 0;
    auto apply = [&](const std::vector<Collective> &list) -> Violation {
      for (const Collective &c : list) {
        if (c.kind == Kind::Unshard) {
          if (resident[c.stage])
            return rank + " gathers stage " + str(c.stage) + ", which is gathered already";
          if (gathered >= problem.window)
            return rank + " gathers stage " + str(c.stage) + " while " + str(gathered) +
                   " stages are gathered, the window's limit";
          resident[c.stage] = 1;
          ++gathered;
        } else if (c.kind == Kind::Reshard) {
          if (!resident[c.stage])
            return rank + " reshards stage " + str(c.stage) + ", which is not gathered";
          resident[c.stage] = 0;
          --gathered;
        }
      }
      return std::nullopt;
    };
    if (Violation v = apply(placed.atStart))
      return v;
    for (size_t i = 0; i < problem.orders[r].size(); ++i) {
      const Action &a = problem.orders[r][i];
      if (!resident[a.stage])
        return rank + " runs " + describe(a) + " without its stage's parameters gathered";
      if (Violation v = apply(placed.after[i]))
        return v;
    }
    if (Violation v = apply(placed.atEnd))
      return v;
    for (size_t s = 0; s < resident.size(); ++s)
      if (resident[s])
        return rank + " keeps stage " + str(static_cast<int64_t>(s)) + " gathered after the step";
  }
  return std::nullopt;
}

/// Whether stage s holds one of the tied copies, whose reduction waits for the tie.
static bool tiedStage(const CollectiveProblem &problem, int32_t s) {
  return problem.tiedEmbeddings &&
         (s == 0 || s == static_cast<int32_t>(problem.stageRank.size()) - 1);
}

/// verifyReductions on a placement of the right shape.
static Violation reductions(const CollectiveProblem &problem,
                            const CollectivePlacement &placement) {
  const int64_t numStages = static_cast<int64_t>(problem.stageRank.size());
  const Kind expected = problem.sharding == Sharding::None ? Kind::AllReduce : Kind::ReduceScatter;
  const bool eachRun = problem.reduceEachRun && gradientsSharded(problem.sharding);
  for (size_t r = 0; r < problem.orders.size(); ++r) {
    const std::string rank = "rank " + str(static_cast<int64_t>(r));
    const std::vector<Action> &order = problem.orders[r];
    // Per stage, the number of computes up to its gradients' completion.
    std::vector<size_t> complete(numStages, 0);
    for (size_t i = 0; i < order.size(); ++i)
      if (completesGradients(order[i].kind))
        complete[order[i].stage] = i + 1;
    // Reducing each run: the stage (not tied) whose gradients wait for their reduction, and
    // the last compute that added to them.
    int32_t holding = -1;
    size_t added = 0, walked = 0;
    auto walkTo = [&](size_t done) -> Violation {
      for (; walked < done; ++walked) {
        const Action &a = order[walked];
        if (!eachRun || !writesGradients(a.kind))
          continue;
        if (holding >= 0 && holding != a.stage)
          return rank + " runs " + describe(a) + " while the gradients of stage " + str(holding) +
                 " wait for their reduction";
        if (completesGradients(a.kind) && !tiedStage(problem, a.stage)) {
          holding = a.stage;
          added = walked;
        }
      }
      return std::nullopt;
    };
    std::vector<int64_t> reduced(numStages, 0);
    if (Violation v = forEachCollective(
            placement.ranks[r], [&](const Collective &c, size_t done) -> Violation {
              if (Violation v = walkTo(done))
                return v;
              if (!isReduction(c.kind))
                return std::nullopt;
              if (problem.replicas == 1)
                return rank + " issues " + describe(c) + " with one replica";
              if (c.kind != expected)
                return rank + " issues " + describe(c) + " but the sharding calls for " +
                       describe(Collective{expected, c.stage});
              ++reduced[c.stage];
              if (eachRun && !tiedStage(problem, c.stage)) {
                if (holding != c.stage)
                  return rank + " issues " + describe(c) +
                         " without a backward or weight gradient of the stage since its last "
                         "reduction";
                holding = -1;
                return std::nullopt;
              }
              if (done < complete[c.stage])
                return rank + " issues " + describe(c) + " before the stage's last backward";
              if (reduced[c.stage] > 1)
                return rank + " reduces stage " + str(c.stage) + " twice";
              return std::nullopt;
            }))
      return v;
    if (Violation v = walkTo(order.size()))
      return v;
    if (holding >= 0)
      return rank + " never reduces the gradients of stage " + str(holding) + " that " +
             describe(order[added]) + " added";
    if (problem.replicas > 1)
      for (int64_t s = 0; s < numStages; ++s)
        if (problem.stageRank[s] == static_cast<int64_t>(r) && !reduced[s])
          return rank + " never reduces the gradients of stage " + str(s);
  }
  return std::nullopt;
}

/// verifyOptimizerSteps on a placement of the right shape.
static Violation optimizerSteps(const CollectiveProblem &problem,
                                const CollectivePlacement &placement) {
  const int64_t numStages = static_cast<int64_t>(problem.stageRank.size());
  const bool gatherUpdated = problem.replicas > 1 && gathersUpdated(problem.sharding);
  for (size_t r = 0; r < problem.orders.size(); ++r) {
    const std::string rank = "rank " + str(static_cast<int64_t>(r));
    const std::vector<Action> &order = problem.orders[r];
    const size_t computes = order.size();
    // Per stage, the number of the rank's computes before its first.
    std::vector<size_t> firstCompute(numStages, computes);
    for (size_t i = computes; i-- > 0;)
      firstCompute[order[i].stage] = i;
    std::vector<int64_t> reduced(numStages, 0), stepped(numStages, 0), gathered(numStages, 0);
    if (Violation v = forEachCollective(
            placement.ranks[r], [&](const Collective &c, size_t done) -> Violation {
              if (isReduction(c.kind)) {
                reduced[c.stage] = 1;
              } else if (c.kind == Kind::OptimizerStep) {
                if (done < computes)
                  return rank + " steps the optimizer of stage " + str(c.stage) +
                         " before its last compute";
                if (problem.replicas > 1 && !reduced[c.stage])
                  return rank + " steps the optimizer of stage " + str(c.stage) +
                         " before its gradients are reduced";
                if (++stepped[c.stage] > 1)
                  return rank + " steps the optimizer of stage " + str(c.stage) + " twice";
              } else if (c.kind == Kind::GatherParams) {
                if (!gatherUpdated)
                  return rank + " issues " + describe(c) + " but the sharding keeps no shard";
                if (done > firstCompute[c.stage])
                  return rank + " issues " + describe(c) + " after " +
                         describe(order[firstCompute[c.stage]]) +
                         ", which computes with the parameters it gathers";
                if (++gathered[c.stage] > 1)
                  return rank + " gathers the updated parameters of stage " + str(c.stage) +
                         " twice";
              }
              return std::nullopt;
            }))
      return v;
    for (int64_t s = 0; s < numStages; ++s) {
      if (problem.stageRank[s] != static_cast<int64_t>(r))
        continue;
      if (!stepped[s])
        return rank + " never steps the optimizer of stage " + str(s);
      if (gatherUpdated && !gathered[s])
        return rank + " never gathers the updated parameters of stage " + str(s);
    }
  }
  return std::nullopt;
}

/// verifyTies on a placement of the right shape.
static Violation ties(const CollectiveProblem &problem, const CollectivePlacement &placement) {
  const int32_t first = 0, last = static_cast<int32_t>(problem.stageRank.size()) - 1;
  for (size_t r = 0; r < problem.orders.size(); ++r) {
    const std::string rank = "rank " + str(static_cast<int64_t>(r));
    const bool holdsFirst = problem.stageRank[first] == static_cast<int64_t>(r);
    const bool holdsLast = problem.stageRank[last] == static_cast<int64_t>(r);
    const bool expected = problem.tiedEmbeddings && (holdsFirst || holdsLast);
    // The tie this rank must issue, and the stages whose gradients it completes.
    Collective want{Kind::TieGradients, holdsFirst ? first : last};
    want.peerRank = static_cast<int32_t>(problem.stageRank[holdsFirst ? last : first]);
    want.peerStage = holdsFirst ? last : first;
    auto tiedStage = [&](int32_t s) {
      return expected &&
             (s == want.stage || (want.peerRank == static_cast<int32_t>(r) && s == want.peerStage));
    };
    int64_t ties = 0;
    if (Violation v = forEachCollective(
            placement.ranks[r], [&](const Collective &c, size_t done) -> Violation {
              if (c.kind == Kind::TieGradients) {
                if (!expected)
                  return rank + " issues " + describe(c) + " but holds no tied copy";
                if (!(c == want))
                  return rank + " issues " + describe(c) + ", expected " + describe(want);
                if (done < problem.orders[r].size())
                  return rank + " issues " + describe(c) + " before its last compute";
                if (++ties > 1)
                  return rank + " issues " + describe(c) + " twice";
              } else if ((isReduction(c.kind) || c.kind == Kind::OptimizerStep) &&
                         tiedStage(c.stage) && !ties) {
                return rank + " issues " + describe(c) + " before the tied gradients are added";
              }
              return std::nullopt;
            }))
      return v;
    if (expected && !ties)
      return rank + " holds a tied copy but never issues " + describe(want);
  }
  return std::nullopt;
}

Violation conduit::sched::verifyResidencies(const CollectiveProblem &problem,
                                            const CollectivePlacement &placement) {
  if (Violation v = verifyCollectiveShape(problem, placement))
    return v;
  return residencies(problem, placement);
}

Violation conduit::sched::verifyReductions(const CollectiveProblem &problem,
                                           const CollectivePlacement &placement) {
  if (Violation v = verifyCollectiveShape(problem, placement))
    return v;
  return reductions(problem, placement);
}

Violation conduit::sched::verifyOptimizerSteps(const CollectiveProblem &problem,
                                               const CollectivePlacement &placement) {
  if (Violation v = verifyCollectiveShape(problem, placement))
    return v;
  return optimizerSteps(problem, placement);
}

Violation conduit::sched::verifyTies(const CollectiveProblem &problem,
                                     const CollectivePlacement &placement) {
  if (Violation v = verifyCollectiveShape(problem, placement))
    return v;
  return ties(problem, placement);
}

Violation conduit::sched::verifyCollectives(const CollectiveProblem &problem,
                                            const CollectivePlacement &placement) {
  if (Violation v = problem.check())
    return v;
  if (Violation v = verifyCollectiveShape(problem, placement))
    return v;
  for (auto verify : {residencies, reductions, optimizerSteps, ties})
    if (Violation v = verify(problem, placement))
      return v;
  return std::nullopt;
}

std::string conduit::sched::describe(const Collective &collective) {
  static const char *const kNames[] = {"unshard",    "reshard",        "reduce_scatter",
                                       "all_reduce", "optimizer_step", "gather_params",
                                       "tie_grads"};
  std::string text =
      std::string(kNames[static_cast<int>(collective.kind)]) + " s" + str(collective.stage);
  if (collective.kind == Kind::TieGradients)
    text += " with rank " + str(collective.peerRank) + " s" + str(collective.peerStage);
  return text;
}
