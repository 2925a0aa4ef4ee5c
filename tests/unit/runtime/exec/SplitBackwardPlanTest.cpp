//===- SplitBackwardPlanTest.cpp - split backwards on each backend under test ---===//
//
// On every backend the binary tests (backendsUnderTest: the CPU in runtime_tests, CUDA in
// runtime_cuda_tests, where it skips itself without a usable GPU), every rank a thread meeting
// in a loopback hub: a two-stage plan whose backwards run as input gradients (I) and deferred
// weight gradients (W) trains exactly as the same plan with whole backwards, dense or with a
// mixture of experts, also across a snapshot and restore.
//
//===----------------------------------------------------------------------===//

#include "runtime/plan/PlanChecks.h"
#include "tests/unit/runtime/exec/PlanRuns.h"

#include <gtest/gtest.h>

using namespace conduit::runtime;
using namespace conduit::runtime::testing;

namespace {

class SplitBackwardPlan : public ::testing::TestWithParam<BackendKind> {
protected:
  void SetUp() override {
    if (std::string why = GetParam().unavailable(); !why.empty())
      GTEST_SKIP() << GetParam().name << ": " << why;
  }
};

TEST_P(SplitBackwardPlan, TrainsAsWholeBackwardsDo) {
  const Plan whole = pipelinePlan(false), split = pipelinePlan(true, lastWeights(GetParam()));
  ASSERT_TRUE(checkPlanSemantics(whole).ok()) << checkPlanSemantics(whole);
  ASSERT_TRUE(checkPlanSemantics(split).ok()) << checkPlanSemantics(split);
  std::vector<RankRun> expected = train(GetParam(), whole, 1, 3);
  std::vector<RankRun> got = train(GetParam(), split, 1, 3);
  for (size_t r = 0; r < got.size(); ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    ASSERT_TRUE(expected[r].status.ok()) << expected[r].status;
    ASSERT_TRUE(got[r].status.ok()) << got[r].status;
    ASSERT_EQ(got[r].losses.size(), 3u);
    EXPECT_EQ(got[r].losses, expected[r].losses);
    EXPECT_EQ(got[r].params, expected[r].params);
    EXPECT_EQ(got[r].state[0].optimizer, expected[r].state[0].optimizer);
  }
  EXPECT_LT(got[0].losses.back(), got[0].losses.front()) << "the plan trains";
}

TEST_P(SplitBackwardPlan, MixtureOfExpertsTrainsAsWholeBackwardsDo) {
  std::vector<RankRun> expected = train(GetParam(), moePlan(false), 1, 3);
  std::vector<RankRun> got = train(GetParam(), moePlan(true, lastWeights(GetParam())), 1, 3);
  for (size_t r = 0; r < got.size(); ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    ASSERT_TRUE(expected[r].status.ok()) << expected[r].status;
    ASSERT_TRUE(got[r].status.ok()) << got[r].status;
    EXPECT_EQ(got[r].losses, expected[r].losses);
    EXPECT_EQ(got[r].auxLosses, expected[r].auxLosses);
    EXPECT_EQ(got[r].zLosses, expected[r].zLosses);
    EXPECT_EQ(got[r].params, expected[r].params);
  }
  EXPECT_LT(got[0].losses.back(), got[0].losses.front()) << "the plan trains";
}

TEST_P(SplitBackwardPlan, ResumesFromASnapshot) {
  const Plan plan = pipelinePlan(true, lastWeights(GetParam()));
  std::vector<RankRun> uninterrupted = train(GetParam(), plan, 1, 3);
  std::vector<RankRun> firstTwo = train(GetParam(), plan, 1, 2);
  std::vector<std::vector<StageState>> states;
  for (const RankRun &run : firstTwo) {
    ASSERT_TRUE(run.status.ok()) << run.status;
    states.push_back(run.state);
  }
  std::vector<RankRun> resumed = train(GetParam(), plan, 3, 1, &states);
  for (size_t r = 0; r < resumed.size(); ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    ASSERT_TRUE(uninterrupted[r].status.ok()) << uninterrupted[r].status;
    ASSERT_TRUE(resumed[r].status.ok()) << resumed[r].status;
    EXPECT_EQ(resumed[r].losses, std::vector<double>{uninterrupted[r].losses[2]});
    EXPECT_EQ(resumed[r].params, uninterrupted[r].params);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, SplitBackwardPlan, ::testing::ValuesIn(backendsUnderTest()),
                         [](const ::testing::TestParamInfo<BackendKind> &info) {
                           return info.param.name;
                         });

} // namespace
