//===- RoutingTest.cpp - a mixture of experts' router on the host ----------===//
//
// The router's choice (top-k, its tie-break, renormalisation, group-limited routing), a
// capacity's drops (per sample, behind the parts ahead of a tensor rank, by position and by
// weight), the router's scores and its z-loss against their formulas.
//
//===----------------------------------------------------------------------===//

#include "runtime/model/layers/Moe.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

using namespace conduit::model;

TEST(Routing, TopKTakesTheHighestScoresAndBreaksTiesByTheLowerExpert) {
  // Token 0: experts 1 and 3 tie at 0.4 above 2; token 1: all equal.
  const double scores[] = {0.1, 0.4, 0.1, 0.4, 0.25, 0.25, 0.25, 0.25};
  const Routing r = Routing::choose(scores, 2, 4, 2, {}, /*normalize=*/false);
  EXPECT_EQ(r.expert, (std::vector<int32_t>{1, 3, 0, 1}));
  EXPECT_EQ(r.weight, (std::vector<double>{0.4, 0.4, 0.25, 0.25}));
  // Dispatch order: expert 0 (token 1), expert 1 (tokens 0, 1), expert 3 (token 0).
  EXPECT_EQ(r.start, (std::vector<int64_t>{0, 1, 3, 3, 4}));
  EXPECT_EQ(r.token, (std::vector<int32_t>{1, 0, 1, 0}));
  EXPECT_EQ(r.position, (std::vector<int32_t>{1, 3, 0, 2}));
  // A bias steers the choice, not the weights.
  const Routing biased = Routing::choose(scores, 2, 4, 2, {0, 0, 1, 0}, false);
  EXPECT_EQ(biased.expert[0], 2);
  EXPECT_EQ(biased.weight[0], 0.1);
  // Renormalised weights sum to one.
  const Routing normal = Routing::choose(scores, 2, 4, 2, {}, /*normalize=*/true);
  EXPECT_DOUBLE_EQ(normal.weight[0], 0.5);
  EXPECT_DOUBLE_EQ(normal.weight[2], 0.5);
}

TEST(Routing, GroupLimitedRoutingChoosesFromTheBestGroups) {
  // 6 experts in 3 groups of 2, top 2 from the best group; a group's key is its best
  // max(1, 2 / 1) = 2 keys summed.
  // Token 0: expert 0 is the single best (0.9), but group 1 (0.5 + 0.45) beats group 0
  // (0.9 + 0.0) and group 2 (0.3 + 0.2): the choice is 2 and 3.
  // Token 1: group 2 (0.4 + 0.4) ties with group 0 (0.8 + 0.0): the lower group wins.
  const double scores[] = {0.9, 0.0, 0.5, 0.45, 0.3, 0.2, 0.8, 0.0, 0.1, 0.1, 0.4, 0.4};
  const Routing r = Routing::choose(scores, 2, 6, 2, {}, /*normalize=*/true, {3, 1});
  EXPECT_EQ(r.expert, (std::vector<int32_t>{2, 3, 0, 1}));
  EXPECT_DOUBLE_EQ(r.weight[0], 0.5 / 0.95);
  // Unlimited: the two best experts; a limit allowing every group changes nothing.
  const Routing all = Routing::choose(scores, 2, 6, 2, {}, true);
  EXPECT_EQ(all.expert, (std::vector<int32_t>{0, 2, 0, 4}));
  EXPECT_EQ(Routing::choose(scores, 2, 6, 2, {}, true, {3, 3}).expert, all.expert);
  // The bias steers the groups' keys as it steers the experts'.
  const Routing biased = Routing::choose(scores, 2, 6, 2, {0, 0, 0, 0, 1, 1}, true, {3, 1});
  EXPECT_EQ(biased.expert, (std::vector<int32_t>{4, 5, 4, 5}));
  // Two groups of three from the best two of three groups of two: each token's experts lie
  // in its two best groups (token 0: groups 0 and 1; both take expert 0 then 2).
  const Routing two = Routing::choose(scores, 2, 6, 2, {}, false, {3, 2});
  EXPECT_EQ(two.expert, (std::vector<int32_t>{0, 2, 0, 4}));
}

TEST(Routing, CapacityDropsTheLaterTokens) {
  // Three tokens all prefer expert 0; capacity 2 drops the third's assignment to it.
  const double scores[] = {0.9, 0.1, 0.8, 0.2, 0.7, 0.3};
  Routing r = Routing::choose(scores, 3, 2, 1, {}, false);
  EXPECT_EQ(r.position, (std::vector<int32_t>{0, 1, 2}));
  r.limit(/*capacity=*/2, /*sampleRows=*/3, {});
  EXPECT_EQ(r.expert, (std::vector<int32_t>{0, 0, 0}));
  EXPECT_EQ(r.position, (std::vector<int32_t>{0, 1, -1}));
  EXPECT_EQ(r.dispatched(), 2);
}

TEST(Routing, CapacityCountsPerSampleAndAheadOfTheRank) {
  // Two samples of three tokens, two choices of three experts each. Token by token the choices
  // are {0, 1}, {0, 2}, {0, 1} in sample 0 and {1, 2}, {1, 0}, {1, 0} in sample 1.
  const double scores[] = {0.5, 0.3, 0.2, 0.5, 0.2, 0.3, 0.6, 0.3, 0.1,
                           0.1, 0.5, 0.4, 0.4, 0.5, 0.1, 0.3, 0.6, 0.1};
  Routing r = Routing::choose(scores, 6, 3, 2, {}, false);
  EXPECT_EQ(r.chosenPerSample(3), (std::vector<int64_t>{3, 2, 1, 2, 3, 1}));
  // Capacity 2 per sample: sample 0's third token loses expert 0, sample 1's third expert 1;
  // sample 1 starts counting afresh, so its second token keeps expert 0.
  Routing alone = r;
  alone.limit(2, 3, {});
  EXPECT_EQ(alone.position, (std::vector<int32_t>{0, 4, 1, 8, -1, 5, 6, 9, 7, 2, -1, 3}));
  EXPECT_EQ(alone.start, (std::vector<int64_t>{0, 4, 8, 10}));
  EXPECT_EQ(alone.token, (std::vector<int32_t>{0, 1, 4, 5, 0, 2, 3, 4, 1, 3}));
  // As the second tensor rank of two, behind a part whose choices took expert 1 once in
  // sample 0 and expert 0 twice in sample 1: sample 0's expert 1 is full after its first
  // token, sample 1's expert 0 before its tokens.
  Routing second = r;
  second.limit(2, 3, {0, 1, 0, 2, 0, 0});
  EXPECT_EQ(second.position, (std::vector<int32_t>{0, 2, 1, 5, -1, -1, 3, 6, 4, -1, -1, -1}));
  EXPECT_EQ(second.dispatched(), 7);
}

TEST(Routing, CapacityByWeightKeepsTheHighestWeights) {
  // The scores of the test above: per sample, expert by expert, the two assignments of the
  // highest weight stay. Sample 0's expert 0 (weights 0.5, 0.5, 0.6) drops its second token's
  // (equal to the first's: the earlier token stays), sample 1's expert 1 (0.5, 0.5, 0.6) its
  // second token's, and its expert 0 (0.4, 0.3) keeps both.
  const double scores[] = {0.5, 0.3, 0.2, 0.5, 0.2, 0.3, 0.6, 0.3, 0.1,
                           0.1, 0.5, 0.4, 0.4, 0.5, 0.1, 0.3, 0.6, 0.1};
  const Routing r = Routing::choose(scores, 6, 3, 2, {}, false);
  std::vector<int32_t> experts(r.expert);
  std::vector<float> keys(r.weight.begin(), r.weight.end());
  Routing alone = r;
  alone.limitByWeight(2, 3, 3, 0, experts, keys);
  // Token by token, slot by slot: sample 0 {0, 1}, {0, 2}, {0, 1}; sample 1 {1, 2}, {1, 0},
  // {1, 0}. Dropped: sample 0 token 1's expert 0, sample 1 token 1's expert 1.
  std::vector<int32_t> dropped;
  for (size_t a = 0; a < alone.position.size(); ++a)
    if (alone.position[a] < 0)
      dropped.push_back(static_cast<int32_t>(a));
  EXPECT_EQ(dropped, (std::vector<int32_t>{2, 8}));
  EXPECT_EQ(alone.dispatched(), 10);
  // By position the third tokens lose them instead.
  Routing byPosition = r;
  byPosition.limit(2, 3, {});
  EXPECT_EQ(byPosition.position[2], 1);
  EXPECT_EQ(byPosition.position[4], -1);
  // As the second tensor rank of two: the first part's two tokens per sample come ahead in
  // the whole sample. In sample 0 they weigh more for expert 0 (0.7, 0.65), which then drops all
  // three of this rank's, and as much for expert 1 (0.3) as this rank's two: the earlier
  // token, the other part's, stays. In sample 1 this rank drops what it drops alone.
  std::vector<int32_t> wholeExperts;
  std::vector<float> wholeKeys;
  const int32_t aheadExperts[2][4] = {{0, 1, 0, 2}, {2, 1, 1, 0}};
  const float aheadKeys[2][4] = {{0.7f, 0.3f, 0.65f, 0.3f}, {0.9f, 0.05f, 0.04f, 0.1f}};
  for (int sample = 0; sample < 2; ++sample) {
    wholeExperts.insert(wholeExperts.end(), aheadExperts[sample], aheadExperts[sample] + 4);
    wholeKeys.insert(wholeKeys.end(), aheadKeys[sample], aheadKeys[sample] + 4);
    wholeExperts.insert(wholeExperts.end(), experts.begin() + sample * 6,
                        experts.begin() + (sample + 1) * 6);
    wholeKeys.insert(wholeKeys.end(), keys.begin() + sample * 6, keys.begin() + (sample + 1) * 6);
  }
  Routing second = r;
  second.limitByWeight(2, 3, 5, 2, wholeExperts, wholeKeys);
  dropped.clear();
  for (size_t a = 0; a < second.position.size(); ++a)
    if (second.position[a] < 0)
      dropped.push_back(static_cast<int32_t>(a));
  // Sample 0: expert 0's three (slots 0, 2, 4) behind 0.7 and 0.65; expert 1 (0.3 ahead, 0.3 and
  // 0.3 here) keeps the earlier two, dropping token 2's (slot 5); expert 2 (0.3 ahead and here)
  // keeps both. Sample 1: expert 1 (0.05 and 0.04 ahead, 0.5, 0.5, 0.6 here) drops token 1's;
  // expert 0 (0.1 ahead, 0.4 and 0.3 here) and expert 2 (0.9 ahead, 0.4 here) keep this rank's.
  EXPECT_EQ(dropped, (std::vector<int32_t>{0, 2, 4, 5, 8}));
}

TEST(Routing, RouterScores) {
  const double logits[] = {0.0, std::log(3.0), -1.0, 2.0};
  double softmax[4], sigmoid[4];
  routerScores(2, 2, false, logits, softmax);
  routerScores(2, 2, true, logits, sigmoid);
  EXPECT_DOUBLE_EQ(softmax[0], 0.25);
  EXPECT_DOUBLE_EQ(softmax[1], 0.75);
  EXPECT_DOUBLE_EQ(sigmoid[0], 0.5);
  EXPECT_DOUBLE_EQ(sigmoid[3], 1.0 / (1.0 + std::exp(-2.0)));
}

TEST(Routing, RouterZLoss) {
  // Rows {0, ln 3} and {1000, 1000}: log-sum-exps ln 4 and 1000 + ln 2 (no overflow).
  const double logits[] = {0.0, std::log(3.0), 1000.0, 1000.0};
  double gradient[4];
  const double lse0 = std::log(4.0), lse1 = 1000.0 + std::log(2.0);
  EXPECT_NEAR(routerZLoss(2, 2, logits, gradient), lse0 * lse0 + lse1 * lse1, 1e-9);
  // 2 · lse · softmax.
  EXPECT_NEAR(gradient[0], 2 * lse0 * 0.25, 1e-15);
  EXPECT_NEAR(gradient[1], 2 * lse0 * 0.75, 1e-15);
  EXPECT_NEAR(gradient[2], lse1, 1e-12);
  EXPECT_NEAR(gradient[3], lse1, 1e-12);
}
