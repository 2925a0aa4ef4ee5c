//===- TensorCollectivesTest.cpp - the tensor group's collectives per compute ---===//
//
// Checks tensorCollectives() against the table of runtime/plan/TensorCollectives.h: which
// collectives (and expert all-to-alls) each compute of a stage issues, in which order, with
// which bytes; the expert groups; and the plan checks that refuse a plan whose all-to-alls
// differ from that list or hide behind the wrong compute, naming the instruction.
//
//===----------------------------------------------------------------------===//

#include "runtime/plan/TensorCollectives.h"

#include "runtime/plan/PlanChecks.h"

#include <gtest/gtest.h>

#include <string>

using namespace conduit::runtime;

namespace {

constexpr int64_t kTokens = 8;
constexpr int64_t kHidden = 16;
constexpr int64_t kRow = kTokens * kHidden * 2; // one sample's activations in bf16

/// embedding, two blocks, head.
std::vector<Layer> chain() {
  std::vector<Layer> layers(4);
  layers[0].kind = LayerKind::Embedding;
  layers[1].kind = layers[2].kind = LayerKind::Block;
  layers[3].kind = LayerKind::Head;
  for (int i = 0; i < 3; ++i)
    layers[i].outputBytes = kRow;
  layers[3].outputBytes = 4;
  return layers;
}

Config config(int tensor, bool sequenceParallel,
              Checkpointing checkpointing = Checkpointing::None) {
  Config c;
  c.tensor = tensor;
  c.sequenceParallel = sequenceParallel;
  c.checkpointing = checkpointing;
  c.tokensPerSample = kTokens;
  return c;
}

/// "AR:1:512 AG:2:512 ...": kind, layer and bytes of each collective.
std::string render(const std::vector<TensorCollective> &calls) {
  std::string out;
  for (const TensorCollective &c : calls) {
    const char *kind = c.op == Op::TensorAllReduce       ? "AR"
                       : c.op == Op::TensorAllGather     ? "AG"
                       : c.op == Op::TensorReduceScatter ? "RS"
                       : c.op == Op::ExpertDispatch      ? "D"
                                                         : "C";
    out += (out.empty() ? "" : " ") + std::string(kind) + ":" + std::to_string(c.layer) + ":" +
           std::to_string(c.bytes);
  }
  return out;
}

std::string of(const Config &c, int32_t first, int32_t end, Op op, int64_t samples = 1,
               const Transformer *moe = nullptr) {
  return render(tensorCollectives(c, chain(), first, end, op, samples, moe));
}

/// The chain's transformer: two blocks of two heads.
Transformer dense() {
  Transformer t;
  t.numLayers = 2;
  t.hiddenSize = kHidden;
  t.numHeads = t.numKvHeads = 2;
  t.ffnHiddenSize = 32;
  t.seqLength = kTokens;
  t.vocabSize = 32;
  return t;
}

/// The chain's transformer with experts in its second block (the first stays dense): 4
/// experts, 2 per token, the busiest rank's routed tokens bounded at 1.5 x the mean.
Transformer moe(int64_t sharedExperts = 0) {
  Transformer t = dense();
  t.numExperts = 4;
  t.topK = 2;
  t.expertFfnHiddenSize = 8;
  t.denseLayers = 1;
  t.sharedExperts = sharedExperts;
  t.sharedFfnHiddenSize = sharedExperts * 8;
  t.imbalance = 1.5;
  return t;
}

Config expertConfig(int expert, int tensor = 1, bool sequenceParallel = false,
                    Checkpointing checkpointing = Checkpointing::None) {
  Config c = config(tensor, sequenceParallel, checkpointing);
  c.data = 4;
  c.expert = expert;
  return c;
}

TEST(TensorCollectives, NoneWithoutTensorParallelism) {
  for (Op op : {Op::Forward, Op::Backward, Op::BackwardInput, Op::BackwardWeight})
    EXPECT_EQ(of(config(1, false, Checkpointing::Full), 0, 4, op), "");
}

TEST(TensorCollectives, AllReducesWithoutSequenceParallelism) {
  const Config c = config(2, false);
  // The embedding's partial lookups, then two per block (attention, MLP), three per head (the
  // parallel cross-entropy's max, sum of exponentials and target logit, one float per token).
  EXPECT_EQ(of(c, 0, 4, Op::Forward), "AR:0:256 AR:1:256 AR:1:256 AR:2:256 AR:2:256 "
                                      "AR:3:32 AR:3:32 AR:3:32");
  // Backward from the last layer: the head's input gradient, two per block, none for the
  // embedding; the weight pass needs none.
  EXPECT_EQ(of(c, 0, 4, Op::Backward), "AR:3:256 AR:2:256 AR:2:256 AR:1:256 AR:1:256");
  EXPECT_EQ(of(c, 0, 4, Op::BackwardInput), of(c, 0, 4, Op::Backward));
  EXPECT_EQ(of(c, 0, 4, Op::BackwardWeight), "");
  // Bytes scale with the micro-batch.
  EXPECT_EQ(of(c, 1, 2, Op::Forward, 3), "AR:1:768 AR:1:768");
}

TEST(TensorCollectives, FullRecomputationRepeatsEachLayersForward) {
  const Config c = config(2, false, Checkpointing::Full);
  // Layer by layer from the last: its forward again, then its backward.
  EXPECT_EQ(of(c, 0, 2, Op::Backward), "AR:1:256 AR:1:256 AR:1:256 AR:1:256 AR:0:256");
  EXPECT_EQ(of(c, 0, 2, Op::BackwardInput), of(c, 0, 2, Op::Backward));
  EXPECT_EQ(of(c, 0, 2, Op::BackwardWeight), "");
  // Selective recomputation repeats the attention core only, which communicates nothing.
  const Config selective = config(2, false, Checkpointing::Selective);
  EXPECT_EQ(of(selective, 0, 2, Op::Backward), of(config(2, false), 0, 2, Op::Backward));
}

// `blocks` repeats the blocks' forwards as `full` does, not the embedding's or the head's.
TEST(TensorCollectives, BlocksRecomputationRepeatsTheBlocksForwards) {
  const Config c = config(2, false, Checkpointing::Blocks);
  EXPECT_EQ(of(c, 0, 4, Op::Backward),
            "AR:3:256 AR:2:256 AR:2:256 AR:2:256 AR:2:256 AR:1:256 AR:1:256 AR:1:256 AR:1:256");
  EXPECT_EQ(of(c, 1, 3, Op::BackwardInput),
            of(config(2, false, Checkpointing::Full), 1, 3, Op::BackwardInput));
  EXPECT_EQ(of(c, 3, 4, Op::Backward), of(config(2, false), 3, 4, Op::Backward));
}

TEST(TensorCollectives, SequenceParallelismGathersAndScatters) {
  const Config c = config(4, true);
  EXPECT_EQ(of(c, 0, 2, Op::Forward), "RS:0:256 AG:1:256 RS:1:256 AG:1:256 RS:1:256");
  // The head gathers its input, then reduces the cross-entropy's statistics.
  EXPECT_EQ(of(c, 3, 4, Op::Forward), "AG:3:256 AR:3:32 AR:3:32 AR:3:32");
  // Input gradients: per block the output gradient gathered and the input gradient scattered,
  // MLP then attention; the embedding gathers its output gradient.
  EXPECT_EQ(of(c, 0, 2, Op::BackwardInput), "AG:1:256 RS:1:256 AG:1:256 RS:1:256 AG:0:256");
  // Weight gradients: the norms' outputs gathered again and the norms' gradients summed
  // (2 norms x gain and bias x one token's 32 bytes).
  EXPECT_EQ(of(c, 1, 2, Op::BackwardWeight), "AG:1:256 AG:1:256 AR:1:128");
  EXPECT_EQ(of(c, 3, 4, Op::BackwardWeight), "AG:3:256 AR:3:64");
  // A whole backward is each layer's input pass then its weight pass, from the last layer.
  EXPECT_EQ(of(c, 1, 3, Op::Backward),
            "AG:2:256 RS:2:256 AG:2:256 RS:2:256 AG:2:256 AG:2:256 AR:2:128 "
            "AG:1:256 RS:1:256 AG:1:256 RS:1:256 AG:1:256 AG:1:256 AR:1:128");
}

// A recomputed dense MLP (selective `mlp`) under sequence parallelism gathers its normed input
// again before its input gradient; the other recompute modules, and `mlp` without sequence
// parallelism, add nothing.
TEST(TensorCollectives, ARecomputedMlpGathersItsInputAgainUnderSequenceParallelism) {
  Config c = config(4, true, Checkpointing::Selective);
  c.recomputeModules = kRecomputeLayerNorm | kRecomputeMlp;
  EXPECT_EQ(of(c, 1, 2, Op::BackwardInput), "AG:1:256 AG:1:256 RS:1:256 AG:1:256 RS:1:256");
  EXPECT_EQ(of(c, 1, 2, Op::Backward),
            "AG:1:256 AG:1:256 RS:1:256 AG:1:256 RS:1:256 AG:1:256 AG:1:256 AR:1:128");
  EXPECT_EQ(of(c, 1, 2, Op::BackwardWeight), of(config(4, true), 1, 2, Op::BackwardWeight));
  EXPECT_EQ(of(c, 0, 4, Op::Forward), of(config(4, true), 0, 4, Op::Forward));
  // Only blocks: the embedding and the head are unchanged.
  EXPECT_EQ(of(c, 3, 4, Op::BackwardInput), of(config(4, true), 3, 4, Op::BackwardInput));
  EXPECT_EQ(of(c, 0, 1, Op::BackwardInput), of(config(4, true), 0, 1, Op::BackwardInput));
  c.recomputeModules = kRecomputeCoreAttention | kRecomputeLayerNorm;
  EXPECT_EQ(of(c, 0, 4, Op::Backward), of(config(4, true), 0, 4, Op::Backward));
  // Without sequence parallelism the recomputation reads the rows each rank has whole.
  Config noSp = config(4, false, Checkpointing::Selective);
  noSp.recomputeModules = kRecomputeMlp;
  EXPECT_EQ(of(noSp, 0, 4, Op::Backward), of(config(4, false), 0, 4, Op::Backward));
  // Under full checkpointing the modules are not read.
  Config full = config(4, true, Checkpointing::Full);
  full.recomputeModules = kRecomputeMlp;
  Config fullPlain = config(4, true, Checkpointing::Full);
  EXPECT_EQ(of(full, 0, 4, Op::Backward), of(fullPlain, 0, 4, Op::Backward));
}

/// `t` with DeepSeek's latent attention: its 2 heads each 4 + 2 wide for queries and keys and
/// 3 for values, a query latent of rank 6 (0: queries projected directly) and a key/value
/// latent of rank 5.
Transformer latent(int64_t qLoraRank = 6, Transformer t = dense()) {
  t.qLoraRank = qLoraRank;
  t.kvLoraRank = 5;
  t.qkNopeHeadDim = 4;
  t.qkRopeHeadDim = 2;
  t.vHeadDim = 3;
  return t;
}

// Latent attention splits its heads as attention does; its down projections and the latents'
// gains are whole on every rank, and their gradients, partial by heads, are summed in each
// weight pass: 16 x (6 + 5 + 2) + 6 + 5 = 219 bf16 elements, 438 bytes, whatever the
// micro-batch.
TEST(TensorCollectives, LatentAttentionSumsItsReplicatedParametersGradients) {
  const Transformer t = latent(), direct = latent(0);
  const Config c = config(2, false), sp = config(2, true);
  EXPECT_EQ(of(c, 1, 2, Op::Forward, 1, &t), of(c, 1, 2, Op::Forward));
  EXPECT_EQ(of(c, 1, 2, Op::BackwardInput, 1, &t), "AR:1:256 AR:1:256");
  EXPECT_EQ(of(c, 1, 2, Op::BackwardWeight, 1, &t), "AR:1:438");
  EXPECT_EQ(of(c, 1, 2, Op::BackwardWeight, 3, &t), "AR:1:438");
  // Without a query latent the queries' projection is split by heads: 16 x (5 + 2) + 5 = 117
  // elements. With sequence parallelism such a block gathers its input as attention does.
  EXPECT_EQ(of(c, 1, 2, Op::BackwardWeight, 1, &direct), "AR:1:234");
  EXPECT_EQ(of(sp, 1, 2, Op::Forward, 1, &direct), of(sp, 1, 2, Op::Forward));
  EXPECT_EQ(of(sp, 1, 2, Op::BackwardInput, 1, &direct), of(sp, 1, 2, Op::BackwardInput));
  EXPECT_EQ(of(sp, 1, 2, Op::BackwardWeight, 1, &direct), "AG:1:256 AG:1:256 AR:1:234 AR:1:128");
  // The embedding and the head are unchanged; one rank issues nothing.
  EXPECT_EQ(of(c, 0, 1, Op::Backward, 1, &t), of(c, 0, 1, Op::Backward));
  EXPECT_EQ(of(c, 3, 4, Op::Backward, 1, &t), of(c, 3, 4, Op::Backward));
  EXPECT_EQ(of(config(1, false), 0, 4, Op::Backward, 1, &t), "");
  // In a block with experts, after the router's gradient.
  const Transformer experts = latent(6, moe());
  EXPECT_EQ(of(expertConfig(2, 2), 2, 3, Op::BackwardWeight, 1, &experts), "AR:2:128 AR:2:438");
}

// With sequence parallelism and a query latent each rank computes the latents of its own rows:
// the attention gathers the normalised latents and the rotary key (8 tokens x (6 + 5 + 2) bf16
// elements, 208 bytes) where it would gather its input, reduce-scatters their gradients where it
// would reduce-scatter its input's, and its weight pass gathers the normalised latents again
// (8 x (6 + 5), 176 bytes).
TEST(TensorCollectives, LatentAttentionOnEachRanksRowsGathersItsLatents) {
  const Transformer t = latent();
  const Config sp = config(2, true);
  EXPECT_EQ(of(sp, 1, 2, Op::Forward, 1, &t), "AG:1:208 RS:1:256 AG:1:256 RS:1:256");
  EXPECT_EQ(of(sp, 1, 2, Op::BackwardInput, 1, &t), "AG:1:256 RS:1:256 AG:1:256 RS:1:208");
  EXPECT_EQ(of(sp, 1, 2, Op::BackwardWeight, 1, &t), "AG:1:256 AG:1:176 AR:1:438 AR:1:128");
  EXPECT_EQ(of(sp, 1, 2, Op::Forward, 3, &t), "AG:1:624 RS:1:768 AG:1:768 RS:1:768");
  // In a block with experts, around the experts as the attention's pair.
  const Transformer experts = latent(6, moe());
  const Config expertSp = expertConfig(2, 2, true);
  EXPECT_EQ(of(expertSp, 2, 3, Op::Forward, 1, &experts), "AG:2:208 RS:2:256 D:2:384 C:2:384");
  EXPECT_EQ(of(expertSp, 2, 3, Op::BackwardInput, 1, &experts),
            "C:2:384 D:2:384 AG:2:256 RS:2:208");
  EXPECT_EQ(of(expertSp, 2, 3, Op::BackwardWeight, 1, &experts),
            "AR:2:128 AG:2:176 AR:2:438 AR:2:128");
}

// Recomputed heads (selective `mla_up_proj`) under sequence parallelism gather again what the
// forward gathered, between the MLP's pair and the attention's: without a query latent the
// normed input (the queries' projection reads the whole sequence's), with one the latents of
// every rank's rows. Without sequence parallelism every rank has them whole.
TEST(TensorCollectives, RecomputedLatentHeadsGatherAgainWhatTheForwardGathered) {
  const Transformer t = latent(), direct = latent(0);
  Config c = config(2, true, Checkpointing::Selective);
  c.recomputeModules = kRecomputeLatentUpProjection;
  EXPECT_EQ(of(c, 1, 2, Op::BackwardInput, 1, &direct),
            "AG:1:256 RS:1:256 AG:1:256 AG:1:256 RS:1:256");
  EXPECT_EQ(of(c, 1, 2, Op::BackwardInput, 1, &t), "AG:1:256 RS:1:256 AG:1:208 AG:1:256 RS:1:208");
  EXPECT_EQ(of(c, 1, 2, Op::Forward, 1, &direct), of(config(2, true), 1, 2, Op::Forward));
  Config noSp = config(2, false, Checkpointing::Selective);
  noSp.recomputeModules = kRecomputeLatentUpProjection;
  EXPECT_EQ(of(noSp, 1, 2, Op::BackwardInput, 1, &direct), "AR:1:256 AR:1:256");
  // In a block with experts, after the routed tokens' gradients.
  const Transformer experts = latent(0, moe());
  Config expertSp = expertConfig(2, 2, true, Checkpointing::Selective);
  expertSp.recomputeModules = kRecomputeLatentUpProjection;
  EXPECT_EQ(of(expertSp, 2, 3, Op::BackwardInput, 1, &experts),
            "C:2:384 D:2:384 AG:2:256 AG:2:256 RS:2:256");
}

TEST(ExpertAllToAlls, DispatchAndCombineAroundTheExperts) {
  const Transformer t = moe();
  // ceil(8 tokens x top-2 x 1.5) routed tokens of 16 bf16 elements: 24 x 32 bytes.
  EXPECT_EQ(expertAllToAllBytes(expertConfig(2), t, 1, true), 768);
  EXPECT_EQ(expertAllToAllBytes(expertConfig(2), t, 3, false), 3 * 768);
  // Only the block with experts (layer 2) issues them: dispatch then combine in the forward,
  // their gradients the other way in the backward, none in the weight pass.
  EXPECT_EQ(of(expertConfig(2), 0, 4, Op::Forward, 1, &t), "D:2:768 C:2:768");
  EXPECT_EQ(of(expertConfig(2), 0, 4, Op::Backward, 1, &t), "C:2:768 D:2:768");
  EXPECT_EQ(of(expertConfig(2), 0, 4, Op::BackwardInput, 1, &t), "C:2:768 D:2:768");
  EXPECT_EQ(of(expertConfig(2), 0, 4, Op::BackwardWeight, 1, &t), "");
  EXPECT_EQ(of(expertConfig(2), 0, 2, Op::Forward, 1, &t), "");
  // FP8 to the experts: 24 tokens of 16 bytes and one fp32 scale; back in bf16.
  Transformer fp8 = t;
  fp8.fp8Dispatch = true;
  EXPECT_EQ(of(expertConfig(2), 0, 4, Op::Forward, 1, &fp8), "D:2:480 C:2:768");
  EXPECT_EQ(of(expertConfig(2), 0, 4, Op::BackwardInput, 1, &fp8), "C:2:480 D:2:768");
  // Full checkpointing recomputes the forward, its all-to-alls first.
  const Config full = expertConfig(2, 1, false, Checkpointing::Full);
  EXPECT_EQ(of(full, 0, 4, Op::Backward, 1, &t), "D:2:768 C:2:768 C:2:768 D:2:768");
  // One expert rank holds every expert: nothing to exchange.
  EXPECT_EQ(of(expertConfig(1), 0, 4, Op::Forward, 1, &t), "");
  EXPECT_EQ(of(expertConfig(1), 0, 4, Op::Backward, 1, &t), "");
  // Without the transformer (a layer list) nothing has experts.
  EXPECT_EQ(of(expertConfig(2), 0, 4, Op::Forward), "");
}

TEST(ExpertAllToAlls, WithTensorParallelism) {
  const Transformer t = moe(), shared = moe(1);
  // Each tensor rank routes its half of the tokens: 12 routed x 32 bytes. Without sequence
  // parallelism the routed output is gathered over the tensor group; shared experts are split
  // as the dense MLP is, with its all-reduce, before the routed tokens go.
  EXPECT_EQ(of(expertConfig(2, 2), 2, 3, Op::Forward, 1, &t), "AR:2:256 D:2:384 C:2:384 AG:2:256");
  EXPECT_EQ(of(expertConfig(2, 2), 2, 3, Op::Forward, 1, &shared),
            "AR:2:256 AR:2:256 D:2:384 C:2:384 AG:2:256");
  EXPECT_EQ(of(expertConfig(2, 2), 2, 3, Op::BackwardInput, 1, &shared),
            "AR:2:256 C:2:384 D:2:384 AG:2:256 AR:2:256");
  // The router's gradient (4 experts x 16 bf16 elements), from each rank's tokens, is summed.
  EXPECT_EQ(of(expertConfig(2, 2), 2, 3, Op::BackwardWeight, 1, &t), "AR:2:128");
  // With sequence parallelism each rank already holds its part of the sequence.
  EXPECT_EQ(of(expertConfig(2, 2, true), 2, 3, Op::Forward, 1, &t),
            "AG:2:256 RS:2:256 D:2:384 C:2:384");
  EXPECT_EQ(of(expertConfig(2, 2, true), 2, 3, Op::BackwardWeight, 1, &t),
            "AR:2:128 AG:2:256 AR:2:128");
  EXPECT_EQ(of(expertConfig(2, 2, true), 2, 3, Op::BackwardWeight, 1, &shared),
            "AG:2:256 AR:2:128 AG:2:256 AR:2:128");
  // With an auxiliary loss each sample's routing statistics (2 x 4 floats) are summed before
  // the dispatch, in a recomputed forward again.
  Transformer aux = t;
  aux.auxLossCoefficient = 0.01;
  EXPECT_EQ(of(expertConfig(2, 2), 2, 3, Op::Forward, 3, &aux),
            "AR:2:768 AR:2:96 D:2:1152 C:2:1152 AG:2:768");
  EXPECT_EQ(of(expertConfig(2, 2, false, Checkpointing::Full), 2, 3, Op::Backward, 1, &aux),
            "AR:2:256 AR:2:32 D:2:384 C:2:384 AG:2:256 C:2:384 D:2:384 AG:2:256 AR:2:256 "
            "AR:2:128");
  EXPECT_EQ(of(expertConfig(2, 1), 2, 3, Op::Forward, 1, &aux), "D:2:768 C:2:768");
  // With a capacity each member's counts of its choices per sample (2 members x 4 experts
  // floats) are gathered before the dispatch; dropping by weight, every assignment's expert
  // and weight (2 x 8 tokens x 2 choices floats, the whole sample's).
  Transformer capacity = t;
  capacity.capacityFactor = 1;
  EXPECT_EQ(of(expertConfig(2, 2), 2, 3, Op::Forward, 1, &capacity),
            "AR:2:256 AG:2:32 D:2:384 C:2:384 AG:2:256");
  capacity.dropByWeight = true;
  EXPECT_EQ(of(expertConfig(2, 2), 2, 3, Op::Forward, 1, &capacity),
            "AR:2:256 AG:2:128 D:2:384 C:2:384 AG:2:256");
  EXPECT_EQ(of(expertConfig(2, 1), 2, 3, Op::Forward, 1, &capacity), "D:2:768 C:2:768");
  // With the bias moved by the load, each expert's count of choices rides on the router's
  // gradient: 4 x (16 + 1) bf16 elements.
  Transformer balanced = t;
  balanced.router = 1;
  balanced.biasUpdateRate = 0.001;
  EXPECT_EQ(of(expertConfig(2, 2), 2, 3, Op::BackwardWeight, 1, &balanced), "AR:2:136");
  // A gate on the shared experts: its gradient (16 bf16 elements) rides on the router's too.
  Transformer gated = shared;
  gated.sharedExpertGate = true;
  EXPECT_EQ(of(expertConfig(2, 2), 2, 3, Op::BackwardWeight, 1, &gated), "AR:2:160");
  EXPECT_EQ(of(expertConfig(2, 2), 2, 3, Op::Forward, 1, &gated),
            of(expertConfig(2, 2), 2, 3, Op::Forward, 1, &shared));
  // E = 1 with T = 2: the tensor ranks still split the tokens and gather the output.
  EXPECT_EQ(of(expertConfig(1, 2), 2, 3, Op::Forward, 1, &t), "AR:2:256 AG:2:256");
  // The dense block is unchanged.
  EXPECT_EQ(of(expertConfig(2, 2), 1, 2, Op::Forward, 1, &t), "AR:1:256 AR:1:256");
}

TEST(TensorCollectiveCache, GivesWhatTensorCollectivesGivesOncePerKey) {
  const std::vector<Layer> layers = chain();
  const Transformer t = moe();
  const Config c = expertConfig(2, 2, true, Checkpointing::Full);
  TensorCollectiveCache cache(c, layers, &t);
  const Op passes[] = {Op::Forward, Op::Backward, Op::BackwardInput, Op::BackwardWeight};
  for (int round = 0; round < 2; ++round)
    for (Op op : passes)
      for (int64_t samples : {1, 3})
        for (auto [first, end] : {std::pair{0, 4}, std::pair{1, 3}, std::pair{2, 4}}) {
          const std::vector<TensorCollective> &got = cache.of(first, end, op, samples);
          EXPECT_EQ(render(got), render(tensorCollectives(c, layers, first, end, op, samples, &t)))
              << opName(op) << " of layers " << first << ".." << end << ", " << samples;
          // The second round finds the first's list, not a new one.
          EXPECT_EQ(&got, &cache.of(first, end, op, samples));
        }
}

TEST(ExpertAllToAlls, ExpertGroupsFoldTheDataAndTensorRanks) {
  Config c;
  c.pipeline = 2;
  c.data = 4;
  c.tensor = 2;
  c.expert = 4;
  // Pipeline rank 1's ranks are 8..15, indexed replica x 2 + tensor rank; groups of 4.
  EXPECT_EQ(expertGroupRanks(c, 1, 1, 0), (std::vector<int64_t>{8, 9, 10, 11}));
  EXPECT_EQ(expertGroupRanks(c, 1, 3, 1), (std::vector<int64_t>{12, 13, 14, 15}));
  // Its expert-data group: the ranks holding the same experts (index 2 mod 4).
  EXPECT_EQ(expertDataGroupRanks(c, 1, 1, 0), (std::vector<int64_t>{10, 14}));
  c.pipelineInner = true; // pipeline rank innermost among (pipeline, replica)
  EXPECT_EQ(expertGroupRanks(c, 1, 0, 1), (std::vector<int64_t>{2, 3, 6, 7}));
}

//===----------------------------------------------------------------------===//
// The plan checks
//===----------------------------------------------------------------------===//

Instruction at(Op op, int32_t mb, int64_t bytes = 0) {
  Instruction i;
  i.op = op;
  i.stream = kComputeStream;
  i.stage = 0;
  i.microbatch = mb;
  i.bytes = bytes;
  if (op == Op::ExpertDispatch || op == Op::ExpertCombine)
    i.group = 0;
  return i;
}

/// One pipeline rank of D = 2 replicas that are one expert group (E = 2): an embedding, one
/// block with experts and a head, two micro-batches of one sample. The second forward is
/// paired with the first backward, and their all-to-alls hide behind each other.
Plan expertPlan() {
  Plan plan;
  plan.config.data = 2;
  plan.config.expert = 2;
  plan.config.microbatches = 2;
  plan.config.tokensPerSample = kTokens;
  Transformer t = moe();
  t.numLayers = 1;
  t.denseLayers = 0;
  t.imbalance = 1;
  plan.transformer = t;
  plan.layers = chain();
  plan.layers.erase(plan.layers.begin() + 1);
  plan.stages = {{0, 0, 0, 3, 0, {0, 1, 2}}};
  plan.groups = {{{0}}};
  constexpr int64_t a = 16 * kHidden * 2; // 8 tokens x top-2, bf16
  Instruction paired = at(Op::Forward, 1);
  paired.flags = Instruction::kPaired;
  auto hiding = [&](Op op, int32_t mb, int32_t behind) {
    Instruction i = at(op, mb, a);
    i.peerStage = 0;
    i.peerMicrobatch = behind;
    return i;
  };
  RankProgram r{0, 0, {}, {}};
  r.instructions = {at(Op::Forward, 0),
                    at(Op::ExpertDispatch, 0, a),
                    at(Op::ExpertCombine, 0, a),
                    paired,
                    hiding(Op::ExpertDispatch, 1, 0),
                    hiding(Op::ExpertCombine, 1, 0),
                    at(Op::Backward, 0),
                    hiding(Op::ExpertCombine, 0, 1),
                    hiding(Op::ExpertDispatch, 0, 1),
                    at(Op::Backward, 1),
                    at(Op::ExpertCombine, 1, a),
                    at(Op::ExpertDispatch, 1, a),
                    at(Op::OptimizerStep, 0)};
  plan.ranks = {r};
  return plan;
}

/// The message of the plan checks, and the instruction they name.
std::string refusal(const Plan &plan, int64_t *instruction = nullptr) {
  PlanLocation where;
  absl::Status status = checkPlanSemantics(plan, &where);
  if (instruction)
    *instruction = where.instruction;
  return status.ok() ? "ok" : std::string(status.message());
}

std::vector<Instruction> &program(Plan &plan) { return plan.ranks[0].instructions; }

TEST(ExpertAllToAllChecks, AcceptsTheListedAllToAlls) { EXPECT_EQ(refusal(expertPlan()), "ok"); }

TEST(ExpertAllToAllChecks, RefusesAMissingAllToAll) {
  Plan plan = expertPlan();
  program(plan).erase(program(plan).begin() + 2); // F mb0's combine
  int64_t where = -1;
  EXPECT_EQ(refusal(plan, &where),
            "invalid plan: rank 0 instruction 2 (F s0 mb1): F s0 mb0 (instruction 0) issues 2 "
            "collectives and only 1 follow it; the next is expert_combine of 512 bytes for "
            "layer 1");
  EXPECT_EQ(where, 2);
}

TEST(ExpertAllToAllChecks, RefusesAnExtraAllToAll) {
  Plan plan = expertPlan();
  program(plan).insert(program(plan).begin() + 3, at(Op::ExpertCombine, 0, 512));
  int64_t where = -1;
  EXPECT_EQ(refusal(plan, &where),
            "invalid plan: rank 0 instruction 3 (expert_combine s0 mb0 512 bytes): the compute "
            "at instruction 0 issues 2 collectives, and this one is extra");
  EXPECT_EQ(where, 3);
}

TEST(ExpertAllToAllChecks, RefusesAResizedAllToAll) {
  Plan plan = expertPlan();
  program(plan)[10].bytes = 256;
  EXPECT_EQ(refusal(plan),
            "invalid plan: rank 0 instruction 10 (expert_combine s0 mb1 256 bytes): collective 1 "
            "of 2 issued by B s0 mb1 (instruction 9) is expert_combine s0 mb1 512 bytes for "
            "layer 1 on stream 0");
}

TEST(ExpertAllToAllChecks, RefusesReorderedAllToAlls) {
  Plan plan = expertPlan();
  std::swap(program(plan)[1], program(plan)[2]);
  EXPECT_EQ(refusal(plan),
            "invalid plan: rank 0 instruction 1 (expert_combine s0 mb0 512 bytes): collective 1 "
            "of 2 issued by F s0 mb0 (instruction 0) is expert_dispatch s0 mb0 512 bytes for "
            "layer 1 on stream 0");
}

TEST(ExpertAllToAllChecks, RefusesTheWrongGroup) {
  Plan plan = expertPlan();
  program(plan)[1].group = 1;
  EXPECT_EQ(refusal(plan), "invalid plan: rank 0 instruction 1 (expert_dispatch s0 mb0 512 "
                           "bytes): names group 1; an expert all-to-all names a group of its "
                           "own pipeline rank 0");
}

TEST(ExpertAllToAllChecks, HidesOnlyBehindThePairedCompute) {
  // Behind its own compute, which reads what it receives.
  Plan plan = expertPlan();
  program(plan)[4].peerMicrobatch = 1;
  EXPECT_EQ(refusal(plan),
            "invalid plan: rank 0 instruction 4 (expert_dispatch s0 mb1 512 bytes): hides "
            "behind s0 mb1; only the compute paired with F s0 mb1 (instruction 3), s0 mb0, can "
            "run while it does (its own compute reads its result)");
  // Behind anything while its compute is not paired.
  plan = expertPlan();
  program(plan)[1].peerStage = 0;
  program(plan)[1].peerMicrobatch = 1;
  EXPECT_EQ(refusal(plan), "invalid plan: rank 0 instruction 1 (expert_dispatch s0 mb0 512 "
                           "bytes): hides behind s0 mb1, but F s0 mb0 (instruction 0) is not "
                           "paired: nothing computes while its all-to-alls run");
  // The paired backward's may hide behind its forward, and need not.
  plan = expertPlan();
  program(plan)[7].peerStage = program(plan)[7].peerMicrobatch = -1;
  EXPECT_EQ(refusal(plan), "ok");
}

TEST(ExpertAllToAllChecks, RefusesAllToAllsWithoutExpertParallelism) {
  Plan plan = expertPlan();
  plan.config.expert = 1;
  EXPECT_EQ(refusal(plan), "invalid plan: rank 0 instruction 1 (expert_dispatch s0 mb0 512 "
                           "bytes): an expert all-to-all, but the plan has no expert "
                           "parallelism (config.expert is 1 or the model has no experts)");
  plan = expertPlan();
  plan.config.expert = 3;
  EXPECT_EQ(refusal(plan), "invalid plan: config.expert 3 does not divide the 2 data-parallel "
                           "and tensor ranks of a pipeline rank");
}

TEST(TensorCollectives, MultiTokenPredictionModuleBorrowsTheEmbeddingsAndTheHeads) {
  // Embedding, two blocks, one module (layer 3) and the head: the module's block's collectives
  // between its lookup's (the embedding's) and its cross-entropy's (the head's).
  std::vector<Layer> layers = chain();
  layers.insert(layers.begin() + 3, layers[2]);
  Transformer t = dense();
  t.mtpLayers = 1;
  auto module = [&](const Config &c, Op op) {
    return render(tensorCollectives(c, layers, 3, 4, op, 1, &t));
  };
  const Config plain = config(2, false);
  EXPECT_EQ(module(plain, Op::Forward), "AR:3:256 AR:3:256 AR:3:256 AR:3:32 AR:3:32 AR:3:32");
  EXPECT_EQ(module(plain, Op::BackwardInput), "AR:3:256 AR:3:256 AR:3:256");
  EXPECT_EQ(module(plain, Op::BackwardWeight), "");
  // With sequence parallelism: the lookup reduce-scattered, the head's gathered rows; the
  // lookup's output gradient gathered last in the input pass; the weight pass gathers the
  // normed rows again and sums three norms (3 x 2 x 32 bytes) and M (2 x 16 x 16 bf16).
  const Config sp = config(2, true);
  EXPECT_EQ(module(sp, Op::Forward), "RS:3:256 AG:3:256 RS:3:256 AG:3:256 RS:3:256 AG:3:256 "
                                     "AR:3:32 AR:3:32 AR:3:32");
  EXPECT_EQ(module(sp, Op::BackwardInput), "RS:3:256 AG:3:256 RS:3:256 AG:3:256 RS:3:256 AG:3:256");
  EXPECT_EQ(module(sp, Op::BackwardWeight), "AG:3:256 AG:3:256 AG:3:256 AR:3:128 AR:3:1216");
  // A module before another passes two states on: its collectives still move one.
  layers[3].outputBytes = 2 * kRow;
  layers.insert(layers.begin() + 4, layers[2]);
  t.mtpLayers = 2;
  EXPECT_EQ(module(plain, Op::Forward), "AR:3:256 AR:3:256 AR:3:256 AR:3:32 AR:3:32 AR:3:32");
}

} // namespace
