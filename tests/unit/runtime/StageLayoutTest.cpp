//===- StageLayoutTest.cpp - where a rank keeps its parameters of a stage ---===//
//
// Without expert parallelism a rank's array is the stage's slice of the model's parameters.
// With it, each rank of an expert group holds its own routed experts after every layer's other
// parameters, from a multiple of the alignment; the members' arrays together give back the whole
// model, a chain places and initialises its layers as the layout says, and the two segments
// split over their groups as ShardLayout says.
//
//===----------------------------------------------------------------------===//

#include "runtime/model/StageLayout.h"
#include "runtime/exec/StageWork.h"
#include "runtime/model/layers/Block.h"
#include "tests/unit/runtime/GptPlan.h"

#include <gtest/gtest.h>

#include <numeric>

using namespace conduit;
using namespace conduit::model;

namespace {

/// A Llama-style tiny model whose blocks after the first have 4 experts of width 6.
GptShape expertShape(int64_t expertSize, int64_t expertRank) {
  GptShape s = tinyShape(false, false);
  s.blocks = 3;
  s.gated = s.rmsNorm = s.rotary = true;
  s.experts = 4;
  s.topK = 2;
  s.expertFfn = 6;
  s.denseBlocks = 1;
  s.expertSize = expertSize;
  s.expertRank = expertRank;
  return s;
}

/// The whole model's parameters: 0, 1, 2, ... so that every element says where it came from.
std::vector<float> numbered(const runtime::Plan &plan) {
  int64_t n = 0;
  for (const runtime::Layer &l : plan.layers)
    n += l.params;
  std::vector<float> whole(n);
  std::iota(whole.begin(), whole.end(), 0.0f);
  return whole;
}

} // namespace

TEST(StageLayout, WithoutExpertParallelismItIsTheStagesSlice) {
  const GptShape s = expertShape(1, 0);
  const runtime::Plan plan = planFor(s);
  const StageLayout layout = StageLayout::of(plan, s, 1, 4, /*align=*/4);
  const std::vector<float> whole = numbered(plan);
  const int64_t first = plan.layers[0].params;
  EXPECT_EQ(layout.experts, 0);
  EXPECT_EQ(layout.size(), layout.whole);
  EXPECT_EQ(layout.expertsAt, layout.dense);
  const std::vector<float> part = layout.part(whole.data() + first);
  EXPECT_TRUE(std::equal(part.begin(), part.end(), whole.begin() + first));
}

TEST(StageLayout, EachExpertRankKeepsItsOwnExpertsApartAndTheMembersMakeTheWhole) {
  // Layers 1 to 3: a dense block, then two blocks with experts; E = 2, aligned to 4.
  const GptShape whole = expertShape(1, 0);
  const runtime::Plan plan = planFor(whole);
  const std::vector<float> params = numbered(plan);
  const float *stage = params.data() + plan.layers[0].params;
  std::vector<float> parts;
  int64_t size = 0;
  for (int64_t q = 0; q < 2; ++q) {
    SCOPED_TRACE(q);
    const GptShape s = expertShape(2, q);
    const StageLayout layout = StageLayout::of(plan, s, 1, 4, 4);
    // Every layer's other parameters first; each block with experts holds 2 of its 4.
    const Block<float> block(whole, 0, true);
    const int64_t perExpert = block.expertParams() / 4;
    EXPECT_EQ(layout.experts, 2 * 2 * perExpert);
    EXPECT_EQ(layout.dense, layout.whole - 2 * 4 * perExpert);
    EXPECT_EQ(layout.expertsAt % 4, 0);
    EXPECT_GE(layout.expertsAt, layout.dense);
    EXPECT_LT(layout.expertsAt, layout.dense + 4);
    const std::vector<float> part = layout.part(stage);
    // The gap is zero; the expert segment is expert 2q and 2q + 1 of block 2 (layer 2), then
    // of block 3, each as the whole layer lays them out (they are its last parameters).
    for (int64_t i = layout.dense; i < layout.expertsAt; ++i)
      EXPECT_EQ(part[i], 0.0f);
    const int64_t layer2End = plan.layers[1].params + plan.layers[2].params;
    const int64_t firstExpert2 = layer2End - 4 * perExpert + 2 * q * perExpert;
    EXPECT_EQ(part[layout.expertsAt], stage[firstExpert2]);
    EXPECT_EQ(part[layout.expertsAt + 2 * perExpert - 1], stage[firstExpert2 + 2 * perExpert - 1]);
    EXPECT_EQ(layout.layerExpertsAt, (std::vector<int64_t>{layout.expertsAt, layout.expertsAt,
                                                           layout.expertsAt + 2 * perExpert}));
    size = layout.size();
    parts.insert(parts.end(), part.begin(), part.end());
  }
  // The members' arrays give back the whole stage, bit for bit.
  const std::vector<float> back =
      wholeFromParts(plan, expertShape(2, 0), 1, 4, 4, parts.data(), {{0, 0}, {0, 1}});
  ASSERT_EQ(static_cast<int64_t>(back.size()),
            plan.layers[1].params + plan.layers[2].params + plan.layers[3].params);
  EXPECT_TRUE(std::equal(back.begin(), back.end(), stage));
  EXPECT_EQ(static_cast<int64_t>(parts.size()), 2 * size);
}

TEST(StageLayout, AChainPlacesAndInitialisesItsLayersByIt) {
  const GptShape whole = expertShape(1, 0);
  const runtime::Plan plan = planFor(whole);
  CpuOps<float> ops;
  // The whole model's initialisation, then member 1's part of layers 1 to 4.
  LayerChain<float> all = *LayerChain<float>::build(plan, whole, 0, 5, ops);
  std::vector<float> wholeParams(all.numParams());
  all.initialise(wholeParams.data(), 7);
  const GptShape s = expertShape(2, 1);
  LayerChain<float> chain = *LayerChain<float>::build(plan, s, 1, 5, ops, Checkpointing::None, 8);
  const StageLayout &layout = chain.parameterLayout();
  EXPECT_EQ(chain.numParams(), layout.size());
  std::vector<float> mine(chain.numParams());
  chain.initialise(mine.data(), 7);
  EXPECT_EQ(mine, layout.part(wholeParams.data() + plan.layers[0].params));
  for (size_t i = 0; i < chain.size(); ++i)
    EXPECT_EQ(chain.offset(i), layout.layerAt[i]);
}

TEST(StageLayout, TheSegmentsShardOverTheirOwnGroups) {
  // D = 4, E = 2: the dense segment over 4 replicas, the experts over the 2 holding the same.
  model::StageLayout layout;
  layout.dense = 10;
  layout.expertsAt = 12;
  layout.experts = 6;
  runtime::Config c;
  c.data = 4;
  c.expert = 2;
  runtime::RankPosition where;
  where.replica = 3; // expert rank 1, position 1 of its expert-data group {1, 3}
  const runtime::ShardLayout s = runtime::ShardLayout::of(layout, c, /*sharded=*/true, where);
  EXPECT_EQ(s.dense.padded, 12);
  EXPECT_EQ(s.dense.shardLen, 3);
  EXPECT_EQ(s.dense.shardOffset, 9);
  EXPECT_EQ(s.experts.at, 12);
  EXPECT_EQ(s.experts.padded, 6);
  EXPECT_EQ(s.experts.shardLen, 3);
  EXPECT_EQ(s.experts.shardOffset, 3);
  EXPECT_EQ(s.experts.shardAt, 3);
  EXPECT_EQ(s.padded, 18);
  EXPECT_EQ(s.shardLen, 6);
  // The shards kept: dense elements 9 (10 and 11 are padding) and experts 3 to 5.
  std::vector<float> array(18);
  std::iota(array.begin(), array.end(), 0.0f);
  array.resize(s.n);
  EXPECT_EQ(s.shardsOf(array), (std::vector<float>{9, 0, 0, 15, 16, 17}));
  // ZeRO-1 with E = D: the expert segment is one rank's, updated where it lies.
  c.expert = 4;
  c.sharding = runtime::Sharding::Optimizer;
  const runtime::ShardLayout inPlace = runtime::ShardLayout::of(layout, c, true, where);
  EXPECT_FALSE(inPlace.dense.inPlace);
  EXPECT_TRUE(inPlace.experts.inPlace);
  EXPECT_EQ(inPlace.shardLen, 3);
  EXPECT_EQ(inPlace.updatedLen, 3 + 6);
  EXPECT_EQ(inPlace.experts.shardAt, 3);
  EXPECT_EQ(inPlace.shardsOf(array), (std::vector<float>{9, 0, 0, 12, 13, 14, 15, 16, 17}));
  EXPECT_FALSE(inPlace.experts.apart);
  EXPECT_EQ(inPlace.allocatedLen(), 18);
  // ZeRO-2 and full sharding update it in place too, and keep it apart from the arrays a step
  // allocates and frees (the whole gradients, the gathered parameters).
  for (runtime::Sharding mode : {runtime::Sharding::Gradients, runtime::Sharding::Full}) {
    c.sharding = mode;
    const runtime::ShardLayout apart = runtime::ShardLayout::of(layout, c, true, where);
    EXPECT_TRUE(apart.experts.inPlace && apart.experts.apart);
    EXPECT_FALSE(apart.dense.apart);
    EXPECT_EQ(apart.shardLen, 3);
    EXPECT_EQ(apart.updatedLen, 3 + 6);
    EXPECT_EQ(apart.allocatedLen(), 12);
  }
  // Without expert parallelism the expert segment is empty: nothing is kept apart.
  model::StageLayout dense = layout;
  dense.expertsAt = dense.dense = 12;
  dense.experts = 0;
  EXPECT_FALSE(runtime::ShardLayout::of(dense, c, true, where).experts.apart);
  c.sharding = runtime::Sharding::Optimizer;
  c.expert = 2;
  // Not sharded: the array itself, its gap zero.
  const runtime::ShardLayout whole = runtime::ShardLayout::of(layout, c, false, where);
  EXPECT_EQ(whole.shardLen, 18);
  array[10] = array[11] = 0;
  EXPECT_EQ(whole.shardsOf(array), array);
}
