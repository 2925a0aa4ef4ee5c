//===- CollectivesTest.cpp - FSDP collective placement --------------------===//
//
// The breadth-first paper's counts (2V-2 all-gathers and V reduce-scatters per rank per step
// with a window of 2, whatever M), depth-first's re-gathers, the window's bound on resident
// stages, PyTorch's own example placed by hand, every sharding mode and tied embeddings, and
// one malformed problem per check and one broken placement per constraint.
//
//===----------------------------------------------------------------------===//

#include "scheduling/Collectives.h"
#include "scheduling/Schedulers.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace conduit::sched;

namespace {

using Kind = Collective::Kind;

ScheduleProblem equalProblem(int64_t p, int64_t v, int64_t m) {
  std::vector<int64_t> ranks = llvm::cantFail(placeStages(p * v, p, Placement::Loop));
  return ScheduleProblem(p, ranks, std::vector<std::vector<int64_t>>(p * v, equalBoundaries(m, 1)));
}

CollectiveProblem collectiveProblem(const ScheduleProblem &stages, const Schedule &schedule,
                                    Sharding sharding, int64_t window = 2, int64_t replicas = 2) {
  CollectiveProblem problem;
  problem.orders = schedule.ranks;
  for (int64_t s = 0; s < stages.numStages(); ++s)
    problem.stageRank.push_back(stages.rankOfStage(s));
  problem.replicas = replicas;
  problem.sharding = sharding;
  problem.window = window;
  return problem;
}

CollectivePlacement place(const CollectiveProblem &problem) {
  llvm::Expected<CollectivePlacement> placement = placeCollectives(problem);
  EXPECT_TRUE(static_cast<bool>(placement)) << llvm::toString(placement.takeError());
  Violation v = verifyCollectives(problem, *placement);
  EXPECT_FALSE(v.has_value()) << *v;
  return *placement;
}

/// The most stages rank r holds gathered at once, walking its placed order.
int64_t mostResident(const CollectivePlacement &placement, int64_t r) {
  int64_t resident = 0, most = 0;
  auto apply = [&](const std::vector<Collective> &list) {
    for (const Collective &c : list) {
      resident += c.kind == Kind::Unshard ? 1 : c.kind == Kind::Reshard ? -1 : 0;
      most = std::max(most, resident);
    }
  };
  apply(placement.ranks[r].atStart);
  for (const std::vector<Collective> &list : placement.ranks[r].after)
    apply(list);
  apply(placement.ranks[r].atEnd);
  return most;
}

//===----------------------------------------------------------------------===//
// The paper's counts
//===----------------------------------------------------------------------===//

TEST(Collectives, BreadthFirstGathersTwiceVMinusTwoWhateverM) {
  for (int64_t v : {2, 3, 4, 8})
    for (int64_t m : {1, 4, 8, 32}) {
      ScheduleProblem stages = equalProblem(4, v, m);
      CollectivePlacement placement = place(
          collectiveProblem(stages, llvm::cantFail(scheduleBreadthFirst(stages)), Sharding::Full));
      for (int64_t r = 0; r < 4; ++r) {
        const RankCollectives &rank = placement.ranks[r];
        EXPECT_EQ(rank.count(Kind::Unshard), 2 * v - 2) << "V " << v << " M " << m;
        EXPECT_EQ(rank.count(Kind::Reshard), 2 * v - 2) << "V " << v << " M " << m;
        EXPECT_EQ(rank.count(Kind::ReduceScatter), v) << "V " << v << " M " << m;
        EXPECT_EQ(rank.count(Kind::OptimizerStep), v);
        EXPECT_EQ(rank.count(Kind::AllReduce) + rank.count(Kind::GatherParams), 0);
      }
    }
}

TEST(Collectives, DepthFirstRegathersEveryGroup) {
  const int64_t p = 4, v = 4;
  std::vector<int64_t> fewer(p, 2 * v - 2);
  for (int64_t m : {8, 16, 32}) {
    ScheduleProblem stages = equalProblem(p, v, m);
    CollectivePlacement depth = place(
        collectiveProblem(stages, llvm::cantFail(scheduleDepthFirst(stages, p)), Sharding::Full));
    CollectivePlacement breadth = place(
        collectiveProblem(stages, llvm::cantFail(scheduleBreadthFirst(stages)), Sharding::Full));
    for (int64_t r = 0; r < p; ++r) {
      // Each group of P micro-batches passes through every local stage forward and backward:
      // more groups, more all-gathers.
      const int64_t gathers = depth.ranks[r].count(Kind::Unshard);
      EXPECT_GT(gathers, fewer[r]) << "M " << m << " rank " << r;
      fewer[r] = gathers;
      EXPECT_EQ(depth.ranks[r].count(Kind::ReduceScatter), v);
      EXPECT_EQ(breadth.ranks[r].count(Kind::Unshard), 2 * v - 2);
    }
  }
}

TEST(Collectives, TheWindowBoundsResidentStages) {
  const int64_t p = 2, v = 4, m = 4;
  ScheduleProblem stages = equalProblem(p, v, m);
  for (const Schedule &schedule : {llvm::cantFail(scheduleBreadthFirst(stages)),
                                   llvm::cantFail(scheduleDepthFirst(stages, p))})
    for (int64_t window = 1; window <= v + 1; ++window) {
      CollectivePlacement placement =
          place(collectiveProblem(stages, schedule, Sharding::Full, window));
      for (int64_t r = 0; r < p; ++r) {
        EXPECT_LE(mostResident(placement, r), std::min(window, v)) << "window " << window;
        // A window holding every local stage gathers each once, before the first instruction.
        if (window >= v) {
          EXPECT_EQ(placement.ranks[r].count(Kind::Unshard), v);
          EXPECT_EQ(placement.ranks[r].atStart.size(), static_cast<size_t>(v));
        }
      }
    }
}

TEST(Collectives, SplitBackwardsGatherForTheWeightGradient) {
  ScheduleProblem stages = equalProblem(4, 1, 8);
  Schedule schedule =
      llvm::cantFail(scheduleZeroBubbleH1(stages, ActionTimes::perSample(stages, 1, 1, 1)));
  CollectiveProblem problem = collectiveProblem(stages, schedule, Sharding::Full, 1);
  CollectivePlacement placement = place(problem);
  for (int64_t r = 0; r < 4; ++r) {
    // One stage per rank: gathered once, kept through its last weight gradient.
    EXPECT_EQ(placement.ranks[r].count(Kind::Unshard), 1);
    const std::vector<Action> &order = problem.orders[r];
    size_t lastWeight = 0;
    for (size_t i = 0; i < order.size(); ++i)
      if (order[i].kind == ActionKind::BackwardWeight)
        lastWeight = i;
    EXPECT_EQ(
        placement.ranks[r].after[lastWeight],
        (std::vector<Collective>{{Kind::Reshard, int32_t(r)}, {Kind::ReduceScatter, int32_t(r)}}));
  }
}

//===----------------------------------------------------------------------===//
// Worked example and every mode
//===----------------------------------------------------------------------===//

// PyTorch's _add_unshard_reshard on breadth-first, P = 2, V = 4, M = 2, window 3 (the
// schedule reference, §4.3): rank 0 runs F0 F0 F2 F2 F4 F4 F6 F6 B6 B6 B4 B4 B2 B2 B0 B0.
TEST(Collectives, PyTorchsExampleByHand) {
  ScheduleProblem stages = equalProblem(2, 4, 2);
  CollectivePlacement placement = place(
      collectiveProblem(stages, llvm::cantFail(scheduleBreadthFirst(stages)), Sharding::Full, 3));
  const RankCollectives &rank = placement.ranks[0];
  using C = std::vector<Collective>;
  EXPECT_EQ(rank.atStart, (C{{Kind::Unshard, 0}, {Kind::Unshard, 2}, {Kind::Unshard, 4}}));
  std::vector<C> after(16);
  after[1] = {{Kind::Reshard, 0}, {Kind::Unshard, 6}}; // stage 0 is used again last
  // Every stage is resident until its last use: the first to leave makes room for stage 0.
  after[9] = {{Kind::Reshard, 6}, {Kind::Unshard, 0}, {Kind::ReduceScatter, 6}};
  after[11] = {{Kind::Reshard, 4}, {Kind::ReduceScatter, 4}};
  after[13] = {{Kind::Reshard, 2}, {Kind::ReduceScatter, 2}};
  after[15] = {{Kind::Reshard, 0}, {Kind::ReduceScatter, 0}};
  EXPECT_EQ(rank.after, after);
  EXPECT_EQ(rank.atEnd, (C{{Kind::OptimizerStep, 6},
                           {Kind::OptimizerStep, 4},
                           {Kind::OptimizerStep, 2},
                           {Kind::OptimizerStep, 0}}));
}

TEST(Collectives, EveryShardingMode) {
  ScheduleProblem stages = equalProblem(2, 2, 4);
  Schedule schedule = llvm::cantFail(scheduleBreadthFirst(stages));
  for (Sharding sharding :
       {Sharding::None, Sharding::Optimizer, Sharding::Gradients, Sharding::Full}) {
    for (int64_t replicas : {1, 2}) {
      CollectivePlacement placement =
          place(collectiveProblem(stages, schedule, sharding, 2, replicas));
      const RankCollectives &rank = placement.ranks[1];
      const bool dp = replicas > 1;
      EXPECT_EQ(rank.count(Kind::OptimizerStep), 2);
      EXPECT_EQ(rank.count(Kind::AllReduce), dp && sharding == Sharding::None ? 2 : 0);
      EXPECT_EQ(rank.count(Kind::ReduceScatter), dp && sharding != Sharding::None ? 2 : 0);
      EXPECT_EQ(rank.count(Kind::GatherParams),
                dp && (sharding == Sharding::Optimizer || sharding == Sharding::Gradients) ? 2 : 0);
      EXPECT_EQ(rank.count(Kind::Unshard), dp && sharding == Sharding::Full ? 2 : 0);
      if (dp && sharding == Sharding::Gradients) {
        // The previous step's update, gathered before the rank's first compute in the order of
        // the stages' first computes (rank 1 holds stages 1 and 3).
        EXPECT_EQ(rank.atStart,
                  (std::vector<Collective>{{Kind::GatherParams, 1}, {Kind::GatherParams, 3}}));
        EXPECT_EQ(rank.atEnd,
                  (std::vector<Collective>{{Kind::OptimizerStep, 3}, {Kind::OptimizerStep, 1}}));
      }
    }
  }
}

TEST(Collectives, TiedCopiesAreAddedBeforeTheirReductions) {
  // Two ranks, one stage each: rank 0 ties stage 0 with rank 1's stage 1 and back.
  ScheduleProblem stages = equalProblem(2, 1, 4);
  CollectiveProblem problem =
      collectiveProblem(stages, llvm::cantFail(scheduleOneFOneB(stages)), Sharding::None, 2, 2);
  problem.tiedEmbeddings = true;
  CollectivePlacement placement = place(problem);
  using C = std::vector<Collective>;
  EXPECT_EQ(placement.ranks[0].atEnd,
            (C{{Kind::TieGradients, 0, 1, 1}, {Kind::AllReduce, 0}, {Kind::OptimizerStep, 0}}));
  EXPECT_EQ(placement.ranks[1].atEnd,
            (C{{Kind::TieGradients, 1, 0, 0}, {Kind::AllReduce, 1}, {Kind::OptimizerStep, 1}}));

  // One rank holding both copies sums them in place; its other stages reduce as usual.
  ScheduleProblem one = equalProblem(1, 3, 2);
  CollectiveProblem inPlace =
      collectiveProblem(one, llvm::cantFail(scheduleBreadthFirst(one)), Sharding::Gradients, 2, 2);
  inPlace.tiedEmbeddings = true;
  placement = place(inPlace);
  const RankCollectives &rank = placement.ranks[0];
  EXPECT_EQ(rank.count(Kind::TieGradients), 1);
  EXPECT_EQ(rank.atEnd.front(), (Collective{Kind::TieGradients, 0, 0, 2}));
  EXPECT_EQ(rank.atEnd[1], (Collective{Kind::ReduceScatter, 2}));
  EXPECT_EQ(rank.atEnd[2], (Collective{Kind::ReduceScatter, 0}));
  EXPECT_EQ(rank.count(Kind::ReduceScatter), 3);
}

TEST(Collectives, ReducingEachRunLeavesNoStagesGradientsWhole) {
  // One pipeline rank, 4 stages, 3 micro-batches in groups of one (as PyTorch's FSDP
  // accumulates gradients): every backward is a run of its own.
  ScheduleProblem stages = equalProblem(1, 4, 3);
  Schedule schedule = llvm::cantFail(scheduleDepthFirst(stages, 1));
  for (Sharding sharding : {Sharding::Gradients, Sharding::Full}) {
    CollectiveProblem problem = collectiveProblem(stages, schedule, sharding);
    EXPECT_EQ(place(problem).ranks[0].count(Kind::ReduceScatter), 4);
    problem.reduceEachRun = true;
    CollectivePlacement placement = place(problem);
    const RankCollectives &rank = placement.ranks[0];
    EXPECT_EQ(rank.count(Kind::ReduceScatter), 4 * 3);
    // Right after each backward, after the residencies placed there.
    for (size_t i = 0; i < schedule.ranks[0].size(); ++i) {
      const Action &a = schedule.ranks[0][i];
      const std::vector<Collective> &after = rank.after[i];
      if (a.kind == ActionKind::Backward)
        EXPECT_EQ(after.back(), (Collective{Kind::ReduceScatter, a.stage})) << describe(a);
      else
        EXPECT_EQ(std::count_if(after.begin(), after.end(),
                                [](const Collective &c) { return c.kind == Kind::ReduceScatter; }),
                  0)
            << describe(a);
    }
    EXPECT_EQ(rank.count(Kind::OptimizerStep), 4);
  }
  // Breadth-first runs each stage's backwards together: the same single reduction per stage.
  ScheduleProblem looped = equalProblem(2, 3, 4);
  CollectiveProblem breadth =
      collectiveProblem(looped, llvm::cantFail(scheduleBreadthFirst(looped)), Sharding::Full);
  const CollectivePlacement once = place(breadth);
  breadth.reduceEachRun = true;
  const CollectivePlacement eachRun = place(breadth);
  for (int64_t r = 0; r < 2; ++r) {
    EXPECT_EQ(eachRun.ranks[r].atStart, once.ranks[r].atStart);
    EXPECT_EQ(eachRun.ranks[r].after, once.ranks[r].after);
    EXPECT_EQ(eachRun.ranks[r].atEnd, once.ranks[r].atEnd);
  }
  // Without sharded gradients the whole gradients stay all step whatever the option says.
  for (Sharding sharding : {Sharding::None, Sharding::Optimizer}) {
    CollectiveProblem problem = collectiveProblem(stages, schedule, sharding);
    problem.reduceEachRun = true;
    EXPECT_EQ(place(problem).ranks[0].count(sharding == Sharding::None ? Kind::AllReduce
                                                                       : Kind::ReduceScatter),
              4);
  }
}

TEST(Collectives, ReducingEachRunKeepsOneReductionOfTheTiedCopies) {
  ScheduleProblem stages = equalProblem(1, 4, 2);
  CollectiveProblem problem =
      collectiveProblem(stages, llvm::cantFail(scheduleDepthFirst(stages, 1)), Sharding::Full);
  problem.tiedEmbeddings = true;
  problem.reduceEachRun = true;
  CollectivePlacement placement = place(problem);
  const RankCollectives &rank = placement.ranks[0];
  // Stages 1 and 2 once per micro-batch; stages 0 and 3 once, after the tie.
  EXPECT_EQ(rank.count(Kind::ReduceScatter), 2 * 2 + 2);
  using C = std::vector<Collective>;
  EXPECT_EQ(C(rank.atEnd.begin(), rank.atEnd.begin() + 3),
            (C{{Kind::TieGradients, 0, 0, 3}, {Kind::ReduceScatter, 3}, {Kind::ReduceScatter, 0}}));
}

//===----------------------------------------------------------------------===//
// check() and verify()
//===----------------------------------------------------------------------===//

TEST(Collectives, CheckRefusesMalformedProblems) {
  ScheduleProblem stages = equalProblem(2, 2, 2);
  const CollectiveProblem good =
      collectiveProblem(stages, llvm::cantFail(scheduleBreadthFirst(stages)), Sharding::Full);
  ASSERT_FALSE(good.check().has_value());
  auto refuses = [](const CollectiveProblem &bad, const std::string &text) {
    Violation v = bad.check();
    ASSERT_TRUE(v.has_value()) << text;
    EXPECT_NE(v->find(text), std::string::npos) << *v;
    EXPECT_FALSE(static_cast<bool>(placeCollectives(bad))) << text;
  };
  CollectiveProblem bad = good;
  bad.stageRank.clear();
  refuses(bad, "no stages");
  bad = good;
  bad.stageRank[3] = 2;
  refuses(bad, "stage 3 is placed on rank 2 but there are 2 ranks");
  bad = good;
  bad.replicas = 0;
  refuses(bad, "replicas must be positive");
  bad = good;
  bad.window = 0;
  refuses(bad, "window of resident stages must be positive");
  bad = good;
  bad.orders[0][0].stage = 1;
  refuses(bad, "rank 0 runs F s1 mb0 but stage 1 is on rank 1");
  bad = good;
  bad.orders[1][0].stage = 7;
  refuses(bad, "stage 7, which does not exist");
  bad = good;
  for (Action &a : bad.orders[1])
    if (a.stage == 3)
      a.kind = ActionKind::Forward;
  refuses(bad, "stage 3 has no backward or weight gradient on rank 1");
}

TEST(Collectives, VerifyRefusesWrongPlacements) {
  ScheduleProblem stages = equalProblem(2, 3, 2);
  CollectiveProblem problem =
      collectiveProblem(stages, llvm::cantFail(scheduleBreadthFirst(stages)), Sharding::Full);
  problem.tiedEmbeddings = true;
  const CollectivePlacement good = place(problem);
  auto refused = [&](const CollectivePlacement &bad, const std::string &text) {
    Violation v = verifyCollectives(problem, bad);
    ASSERT_TRUE(v.has_value()) << text;
    EXPECT_NE(v->find(text), std::string::npos) << *v;
  };
  // Rank 0 holds stages 0, 2, 4 and runs F0 F0 F2 F2 F4 F4 B4 B4 B2 B2 B0 B0.
  CollectivePlacement bad = good;
  bad.ranks[0].atStart.erase(bad.ranks[0].atStart.begin());
  refused(bad, "rank 0 runs F s0 mb0 without its stage's parameters gathered");
  bad = good;
  bad.ranks[0].atStart.push_back({Kind::Unshard, 4});
  refused(bad, "rank 0 gathers stage 4 while 2 stages are gathered, the window's limit");
  bad = good;
  bad.ranks[0].after[11].erase(bad.ranks[0].after[11].begin());
  refused(bad, "rank 0 keeps stage 0 gathered after the step");
  bad = good;
  bad.ranks[0].after.pop_back();
  refused(bad, "rank 0 has 11 places after compute, expected 12");
  bad = good;
  bad.ranks[1].atStart.push_back({Kind::Reshard, 0});
  refused(bad, "rank 1 issues reshard s0 for a stage it does not hold");

  // Stage 2's reduce-scatter follows its last backward (compute 9 of rank 0).
  auto isReduction = [](const Collective &c) { return c.kind == Kind::ReduceScatter; };
  bad = good;
  std::vector<Collective> &at9 = bad.ranks[0].after[9];
  at9.erase(std::find_if(at9.begin(), at9.end(), isReduction));
  bad.ranks[0].after[8].push_back({Kind::ReduceScatter, 2});
  refused(bad, "rank 0 issues reduce_scatter s2 before the stage's last backward");
  bad = good;
  bad.ranks[0].after[9].push_back({Kind::AllReduce, 2});
  refused(bad, "but the sharding calls for reduce_scatter s2");
  bad = good;
  std::vector<Collective> &again = bad.ranks[0].after[9];
  again.erase(std::find_if(again.begin(), again.end(), isReduction));
  refused(bad, "rank 0 never reduces the gradients of stage 2");

  bad = good;
  std::vector<Collective> &end = bad.ranks[0].atEnd;
  end.erase(std::find(end.begin(), end.end(), Collective{Kind::OptimizerStep, 2}));
  refused(bad, "rank 0 never steps the optimizer of stage 2");
  bad = good;
  bad.ranks[0].after[0].push_back({Kind::OptimizerStep, 2});
  refused(bad, "rank 0 steps the optimizer of stage 2 before its last compute");
  bad = good;
  bad.ranks[0].atEnd.push_back({Kind::GatherParams, 2});
  refused(bad, "but the sharding keeps no shard");

  // Rank 0 holds the first stage, rank 1 the last (5).
  bad = good;
  bad.ranks[1].atEnd.clear();
  Violation v = verifyTies(problem, bad);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(*v, "rank 1 holds a tied copy but never issues tie_grads s5 with rank 0 s0");
  bad = good;
  bad.ranks[1].atEnd.erase(bad.ranks[1].atEnd.begin());
  refused(bad, "rank 1 issues reduce_scatter s5 before the tied gradients are added");
  bad = good;
  bad.ranks[0].atEnd.front().peerStage = 4;
  refused(bad, "rank 0 issues tie_grads s0 with rank 1 s4, expected tie_grads s0 with rank 1 s5");
  bad = good;
  std::rotate(bad.ranks[0].atEnd.begin(), bad.ranks[0].atEnd.begin() + 1,
              bad.ranks[0].atEnd.begin() + 2);
  refused(bad, "rank 0 issues reduce_scatter s0 before the tied gradients are added");
}

TEST(Collectives, VerifyRefusesUpdatedParametersGatheredAfterTheirUse) {
  ScheduleProblem stages = equalProblem(2, 3, 2);
  CollectiveProblem problem =
      collectiveProblem(stages, llvm::cantFail(scheduleBreadthFirst(stages)), Sharding::Optimizer);
  const CollectivePlacement good = place(problem);
  // Rank 0 holds stages 0, 2, 4 and runs F0 F0 F2 F2 F4 F4 B4 B4 B2 B2 B0 B0.
  EXPECT_EQ(good.ranks[0].atStart,
            (std::vector<Collective>{
                {Kind::GatherParams, 0}, {Kind::GatherParams, 2}, {Kind::GatherParams, 4}}));
  auto refused = [&](const CollectivePlacement &bad, const std::string &text) {
    Violation v = verifyCollectives(problem, bad);
    ASSERT_TRUE(v.has_value()) << text;
    EXPECT_NE(v->find(text), std::string::npos) << *v;
  };
  CollectivePlacement bad = good;
  bad.ranks[0].atStart.pop_back();
  bad.ranks[0].after[4].push_back({Kind::GatherParams, 4});
  refused(bad, "rank 0 issues gather_params s4 after F s4 mb0, which computes with the "
               "parameters it gathers");
  bad = good;
  bad.ranks[0].atStart.pop_back();
  bad.ranks[0].atEnd.push_back({Kind::GatherParams, 4});
  refused(bad, "rank 0 issues gather_params s4 after F s4 mb0");
  bad = good;
  bad.ranks[0].atStart.push_back({Kind::GatherParams, 2});
  refused(bad, "rank 0 gathers the updated parameters of stage 2 twice");
  bad = good;
  bad.ranks[0].atStart.erase(bad.ranks[0].atStart.begin());
  refused(bad, "rank 0 never gathers the updated parameters of stage 0");
}

TEST(Collectives, VerifyRefusesReductionsThatMissARun) {
  // Rank 0 runs F s0 mb0, F s1 mb0, F s2 mb0, B s2 mb0, F s0 mb1, B s1 mb0, F s1 mb1,
  // B s0 mb0, F s2 mb1, B s2 mb1, B s1 mb1, B s0 mb1.
  ScheduleProblem stages = equalProblem(1, 3, 2);
  CollectiveProblem problem =
      collectiveProblem(stages, llvm::cantFail(scheduleDepthFirst(stages, 1)), Sharding::Gradients);
  problem.reduceEachRun = true;
  const CollectivePlacement good = place(problem);
  auto refused = [&](const CollectivePlacement &bad, const std::string &text) {
    Violation v = verifyReductions(problem, bad);
    ASSERT_TRUE(v.has_value()) << text;
    EXPECT_EQ(*v, text);
  };
  CollectivePlacement bad = good;
  bad.ranks[0].after[3].clear();
  refused(bad, "rank 0 runs B s1 mb0 while the gradients of stage 2 wait for their reduction");
  bad = good;
  bad.ranks[0].after[4].push_back({Kind::ReduceScatter, 1});
  refused(bad, "rank 0 issues reduce_scatter s1 without a backward or weight gradient of the "
               "stage since its last reduction");
  bad = good;
  bad.ranks[0].after[11].clear();
  refused(bad, "rank 0 never reduces the gradients of stage 0 that B s0 mb1 added");
}

} // namespace
