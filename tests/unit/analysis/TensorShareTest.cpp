//===- TensorShareTest.cpp - a layer on one rank, and the memory bound ---===//
//
// What one rank holds of a mixture-of-experts layer (routed experts divided over the expert
// group, never by T) and the static state the memory bound charges for it (expert parameters
// sharded over their expert-data group). Links no MLIR.
//
//===----------------------------------------------------------------------===//

#include "analysis/TensorShare.h"
#include "analysis/MemoryBound.h"
#include "job/TransformerCosts.h"

#include <gtest/gtest.h>

using namespace conduit;

namespace {

/// An MoE block of 960 parameters: 576 in routed experts, 48 kept whole by tensor parallelism.
SplitLayer moeBlock() {
  SplitLayer layer;
  layer.params = 960;
  layer.expertParams = 576;
  layer.replicatedParams = 48;
  layer.activationBytes = 100;
  return layer;
}

TEST(TensorShare, ExpertsAreDividedOverTheExpertGroup) {
  // T 1, E 1: the whole layer.
  TensorShare share = tensorShare(moeBlock(), 1, false, 1);
  EXPECT_EQ(share.params, 960);
  EXPECT_EQ(share.expertParams, 576);
  // T 2: the dense part split (48 whole + 336 / 2), the experts not; E 2 halves them.
  share = tensorShare(moeBlock(), 2, false, 1);
  EXPECT_EQ(share.params, 48 + 168 + 576);
  share = tensorShare(moeBlock(), 2, false, 2);
  EXPECT_EQ(share.params, 48 + 168 + 288);
  EXPECT_EQ(share.expertParams, 288);
  // E 4 with T 1: a quarter of the experts, the dense part whole.
  share = tensorShare(moeBlock(), 1, false, 4);
  EXPECT_EQ(share.params, 384 + 144);
  // A dense layer is the same whatever E.
  SplitLayer dense = moeBlock();
  dense.expertParams = 0;
  EXPECT_EQ(tensorShare(dense, 2, false, 4).params, tensorShare(dense, 2, false, 1).params);
}

TEST(MemoryBound, ExpertStateIsShardedOverTheExpertDataGroup) {
  Job job;
  job.training.dtype = runtime::DType::BF16;
  job.training.optimizer = runtime::Optimizer::Adam;
  ParallelismSpec par;
  par.data = 4;
  par.expert = 2;
  par.sharding = runtime::Sharding::Optimizer;
  // bf16 parameters (2 bytes), fp32 gradients (4) and Adam's state (12, sharded). Dense: 1000
  // over the 4 replicas; experts: 400 over the D x T / E = 2 ranks holding the same experts.
  EXPECT_EQ(staticStateBytes(job, par, 1400, 400),
            (1000 * 2 + 250 * 12 + 1000 * 4) + (400 * 2 + 200 * 12 + 400 * 4));
  // Without experts, the dense rule alone.
  EXPECT_EQ(staticStateBytes(job, par, 1000), 1000 * 2 + 250 * 12 + 1000 * 4);
  // E = D x T: every expert on one rank of a group, nothing to shard them over.
  par.expert = 4;
  EXPECT_EQ(staticStateBytes(job, par, 1400, 400),
            (1000 * 2 + 250 * 12 + 1000 * 4) + 400 * (2 + 12 + 4));
  // Full sharding with the fp32 shards as the master (PyTorch FSDP): 4 + 8 + 4 per shard
  // element, for the experts whole.
  par.sharding = runtime::Sharding::Full;
  job.training.masterWeights = MasterWeights::Parameters;
  EXPECT_EQ(staticStateBytes(job, par, 1400, 400), 250 * (4 + 8 + 4) + 400 * (4 + 8 + 4));
}

TEST(MemoryBound, ExpertParallelismLowersTheBound) {
  Job job;
  job.training.dtype = runtime::DType::BF16;
  TransformerSpec t;
  t.numLayers = 4;
  t.hiddenSize = 256;
  t.numHeads = 4;
  t.numKvHeads = 4;
  t.ffnHiddenSize = 512;
  t.seqLength = 64;
  t.vocabSize = 512;
  t.mlp = MlpKind::SwiGLU;
  t.moe = MoeSpec{};
  t.moe->numExperts = 8;
  t.moe->topK = 2;
  t.moe->expertFfnHiddenSize = 256;
  absl::StatusOr<std::vector<LayerSpec>> layers = expandTransformer(t, 2);
  ASSERT_TRUE(layers.ok()) << layers.status();
  job.model.layers = *layers;
  job.model.transformer = t;
  ParallelismSpec par;
  par.data = 8;
  par.microbatches = 1;
  int64_t previous = memoryLowerBound(job, par).staticBytes;
  for (int64_t e : {2, 4, 8}) {
    par.expert = e;
    const int64_t bound = memoryLowerBound(job, par).staticBytes;
    EXPECT_LT(bound, previous) << "E " << e;
    previous = bound;
  }
}

} // namespace
