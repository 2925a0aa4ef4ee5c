//===- PlanFileTest.cpp - the plan file as untrusted input ----------------===//
//
// Round trips, and refusal of damaged, foreign or inconsistent plan files with a message that
// says what is wrong. Links only the runtime's plan library: no MLIR.
//
//===----------------------------------------------------------------------===//

#include "runtime/plan/PlanFile.h"
#include "runtime/plan/PlanChecks.h"
#include "runtime/plan/PlanJson.h"
#include "runtime/plan/plan_generated.h"

#include <gtest/gtest.h>

#include <functional>
#include <sstream>

using namespace conduit::runtime;

namespace {

Instruction compute(Op op, int32_t stage, int32_t slot = -1) {
  Instruction i;
  i.op = op;
  i.stream = kComputeStream;
  i.stage = stage;
  i.microbatch = 0;
  i.slot = slot;
  return i;
}

Instruction event(Op op, int32_t e, uint8_t stream) {
  Instruction i;
  i.op = op;
  i.event = e;
  i.stream = stream;
  return i;
}

Instruction transfer(Op op, Transfer kind, int32_t stage, int32_t peer, int32_t peerStage,
                     int32_t slot = -1) {
  Instruction i;
  i.op = op;
  i.stream = kP2PStream;
  i.kind = kind;
  i.stage = stage;
  i.microbatch = 0;
  i.peer = peer;
  i.peerStage = peerStage;
  i.peerMicrobatch = 0;
  i.begin = 0;
  i.end = 2;
  i.bytes = 64;
  i.slot = slot;
  return i;
}

/// Two ranks, one stage each, one micro-batch of two samples.
Plan twoRankPlan() {
  Plan plan;
  plan.name = "tiny";
  plan.config.pipeline = 2;
  plan.config.microbatches = 1;
  plan.config.microbatchSize = 2;
  plan.layers = {{"a", LayerKind::Embedding, 10, 1, 2, 1, 4, 4, 32},
                 {"b", LayerKind::Head, 12, 1, 2, 1, 4, 4, 4}};
  plan.stages = {{0, 0, 0, 1, 10, {0, 2}}, {1, 1, 1, 2, 12, {0, 2}}};
  plan.groups = {{{0}}, {{1}}};
  RankProgram r0{0, 2, {64}, {}};
  r0.instructions = {compute(Op::Forward, 0),
                     event(Op::Signal, 0, kComputeStream),
                     event(Op::Wait, 0, kP2PStream),
                     transfer(Op::Send, Transfer::Activation, 0, 1, 1),
                     transfer(Op::Recv, Transfer::Gradient, 0, 1, 1, 0),
                     event(Op::Signal, 1, kP2PStream),
                     event(Op::Wait, 1, kComputeStream),
                     compute(Op::Backward, 0, 0),
                     compute(Op::OptimizerStep, 0)};
  RankProgram r1{1, 2, {64}, {}};
  r1.instructions = {transfer(Op::Recv, Transfer::Activation, 1, 0, 0, 0),
                     event(Op::Signal, 0, kP2PStream),
                     event(Op::Wait, 0, kComputeStream),
                     compute(Op::Forward, 1, 0),
                     compute(Op::Backward, 1),
                     event(Op::Signal, 1, kComputeStream),
                     event(Op::Wait, 1, kP2PStream),
                     transfer(Op::Send, Transfer::Gradient, 1, 0, 0),
                     compute(Op::OptimizerStep, 1)};
  plan.ranks = {r0, r1};
  return plan;
}

std::string dump(const Plan &plan) {
  std::ostringstream os;
  writePlanJson(plan, os);
  return os.str();
}

absl::Status readBack(const std::string &bytes) {
  return readPlan(bytes.data(), bytes.size()).status();
}

TEST(PlanFile, RoundTrip) {
  Plan plan = twoRankPlan();
  ASSERT_TRUE(checkPlanSemantics(plan).ok()) << checkPlanSemantics(plan);
  std::string bytes = writePlan(plan);
  absl::StatusOr<Plan> read = readPlan(bytes.data(), bytes.size());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(dump(*read), dump(plan));
  EXPECT_EQ(writePlan(*read), bytes);
}

TEST(PlanFile, TensorCommOverlapRoundTripsAndDefaultsToOn) {
  Plan plan = twoRankPlan();
  const std::string overlapped = writePlan(plan);
  plan.config.tensorCommOverlap = false;
  const std::string exposed = writePlan(plan);
  // Written only when off, so that the plans before the field are the same bytes.
  EXPECT_GT(exposed.size(), overlapped.size());
  absl::StatusOr<Plan> read = readPlan(exposed.data(), exposed.size());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_FALSE(read->config.tensorCommOverlap);
  EXPECT_NE(dump(*read).find("\"tensor_comm_overlap\": false"), std::string::npos);
  read = readPlan(overlapped.data(), overlapped.size());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(read->config.tensorCommOverlap);
  EXPECT_EQ(dump(*read).find("tensor_comm_overlap"), std::string::npos);
}

TEST(PlanFile, GradientReductionRoundTripsAndNeedsShardedGradients) {
  Plan plan = twoRankPlan();
  const std::string once = writePlan(plan);
  plan.config.sharding = Sharding::Full;
  plan.config.gradientReduction = GradientReduction::Run;
  const std::string eachRun = writePlan(plan);
  absl::StatusOr<Plan> read = readPlan(eachRun.data(), eachRun.size());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->config.gradientReduction, GradientReduction::Run);
  // A feature bit, so that a reader ignoring the field refuses the plan.
  EXPECT_EQ(read->features, kFeatureGradientReductionRun);
  EXPECT_NE(dump(*read).find("\"gradient_reduction\": \"run\""), std::string::npos);
  read = readPlan(once.data(), once.size());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->config.gradientReduction, GradientReduction::Step);
  EXPECT_EQ(read->features, 0u);
  EXPECT_EQ(dump(*read).find("gradient_reduction"), std::string::npos);
  for (Sharding sharding : {Sharding::None, Sharding::Optimizer}) {
    plan.config.sharding = sharding;
    EXPECT_EQ(std::string(checkPlanSemantics(plan).message()),
              "invalid plan: config.gradient_reduction \"run\" needs sharded gradients "
              "(config.sharding \"gradients\" or \"full\")");
  }
}

TEST(PlanFile, RecomputeModulesRoundTripWithAFeatureBit) {
  Plan plan = twoRankPlan();
  plan.config.checkpointing = Checkpointing::Selective;
  const std::string coreOnly = writePlan(plan);
  plan.config.recomputeModules = kRecomputeLayerNorm | kRecomputeMoeActivation;
  const std::string more = writePlan(plan);
  absl::StatusOr<Plan> read = readPlan(more.data(), more.size());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->config.recomputeModules, kRecomputeLayerNorm | kRecomputeMoeActivation);
  // A reader that ignored the field would keep activations the plan's memory does not count.
  EXPECT_EQ(read->features, kFeatureRecomputeModules);
  EXPECT_NE(dump(*read).find("\"recompute_modules\": [\"layernorm\", \"moe_act\"]"),
            std::string::npos);
  read = readPlan(coreOnly.data(), coreOnly.size());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->config.recomputeModules, kRecomputeCoreAttention);
  EXPECT_EQ(read->features, 0u);
  EXPECT_EQ(dump(*read).find("recompute_modules"), std::string::npos);
  plan.config.recomputeModules = 0;
  EXPECT_EQ(std::string(checkPlanSemantics(plan).message()),
            "invalid plan: config.recompute_modules names no module; selective checkpointing "
            "recomputes at least one (1: the attention core)");
}

TEST(PlanFile, Bf16AdamMomentsRoundTripWithAFeatureBit) {
  Plan plan = twoRankPlan();
  plan.config.adamMoments = AdamMoments::BF16;
  const std::string bytes = writePlan(plan);
  absl::StatusOr<Plan> read = readPlan(bytes.data(), bytes.size());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->config.adamMoments, AdamMoments::BF16);
  // A reader that ignored the field would keep twice the optimizer state, in fp32.
  EXPECT_EQ(read->features, kFeatureBf16Moments);
  EXPECT_NE(dump(*read).find("\"adam_moments\": \"bf16\""), std::string::npos);
  plan.config.optimizer = Optimizer::SGD;
  EXPECT_EQ(std::string(checkPlanSemantics(plan).message()),
            "invalid plan: config.adam_moments \"bf16\" needs the Adam optimizer "
            "(config.optimizer \"adam\"): SGD keeps no moments");
}

TEST(PlanFile, BlocksCheckpointingRoundTripsWithAFeatureBit) {
  Plan plan = twoRankPlan();
  plan.config.checkpointing = Checkpointing::Blocks;
  const std::string bytes = writePlan(plan);
  absl::StatusOr<Plan> read = readPlan(bytes.data(), bytes.size());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->config.checkpointing, Checkpointing::Blocks);
  // A reader without the mode would take it for a corrupt file, not say what it lacks.
  EXPECT_EQ(read->features, kFeatureBlocksCheckpointing);
  EXPECT_NE(dump(*read).find("\"checkpointing\": \"blocks\""), std::string::npos);
}

/// The model fields of format 5 on a plan of four layers: two blocks, the second with experts.
Plan moePlan() {
  Plan plan = twoRankPlan();
  plan.config.data = 2;
  plan.config.expert = 2;
  Transformer t;
  t.numLayers = 2;
  t.hiddenSize = 8;
  t.numHeads = 2;
  t.numKvHeads = 2;
  t.ffnHiddenSize = 16;
  t.seqLength = 4;
  t.vocabSize = 16;
  t.position = 1;
  t.headDim = 4;
  t.qkNorm = true;
  t.numExperts = 4;
  t.topK = 2;
  t.expertFfnHiddenSize = 8;
  t.router = 1;
  t.sharedExperts = 1;
  t.sharedFfnHiddenSize = 8;
  t.denseLayers = 1;
  t.capacityFactor = 1.5;
  t.imbalance = 1.25;
  t.routerGroups = 2;
  t.routerGroupTopK = 1;
  t.dispatch = 1;
  plan.transformer = t;
  plan.layers = {{"embedding", LayerKind::Embedding, 10, 1, 2, 1, 4, 4, 32},
                 {"block.0", LayerKind::Block, 100, 1, 2, 1, 4, 4, 32},
                 {"block.1", LayerKind::Block, 200, 1, 2, 1, 4, 4, 32, 150},
                 {"head", LayerKind::Head, 12, 1, 2, 1, 4, 4, 4}};
  return plan;
}

TEST(PlanFile, ModelFieldsRoundTrip) {
  // The format-5 fields are written and read back (at the FlatBuffers level: a plan whose
  // chain is not the transformer's would not pass the semantic check).
  Plan plan = moePlan();
  ASSERT_TRUE(checkModelFields(plan).ok()) << checkModelFields(plan);
  std::string bytes = writePlan(plan);
  const conduit::planfile::Plan *p = conduit::planfile::GetPlan(bytes.data());
  EXPECT_EQ(p->format_version(), 5u);
  EXPECT_EQ(p->config()->expert(), 2);
  const auto *t = p->transformer();
  EXPECT_EQ(t->head_dim(), 4);
  EXPECT_TRUE(t->qk_norm());
  EXPECT_EQ(t->num_experts(), 4);
  EXPECT_EQ(t->top_k(), 2);
  EXPECT_EQ(t->router(), 1);
  EXPECT_EQ(t->shared_ffn_hidden_size(), 8);
  EXPECT_EQ(t->dense_layers(), 1);
  EXPECT_EQ(t->capacity_factor(), 1.5);
  EXPECT_EQ(t->imbalance(), 1.25);
  EXPECT_EQ(t->router_groups(), 2);
  EXPECT_EQ(t->router_group_top_k(), 1);
  EXPECT_EQ(t->dispatch(), 1);
  EXPECT_FALSE(t->fp8_dispatch());
  // An older reader would route over both groups: the plan says it needs this one.
  EXPECT_EQ(p->features(), kFeatureGroupLimitedRouting);
  EXPECT_EQ(p->layers()->Get(2)->expert_params(), 150);
  EXPECT_EQ(t->bias_update_rate(), 0.0);
  // A bias moved by the load: a reader that ignored the field would keep the bias still.
  plan.transformer->biasUpdateRate = 1e-3;
  bytes = writePlan(plan);
  p = conduit::planfile::GetPlan(bytes.data());
  EXPECT_EQ(p->transformer()->bias_update_rate(), 1e-3);
  EXPECT_EQ(p->features(), kFeatureGroupLimitedRouting | kFeatureExpertBiasUpdate);
  // Multi-token prediction modules: a reader that ignored the field would take them for
  // blocks.
  EXPECT_EQ(p->transformer()->mtp_layers(), 0);
  plan.transformer->mtpLayers = 1;
  plan.transformer->mtpLossCoefficient = 0.3;
  bytes = writePlan(plan);
  p = conduit::planfile::GetPlan(bytes.data());
  EXPECT_EQ(p->transformer()->mtp_layers(), 1);
  EXPECT_EQ(p->transformer()->mtp_loss_coefficient(), 0.3);
  EXPECT_EQ(p->features(), kFeatureGroupLimitedRouting | kFeatureExpertBiasUpdate | kFeatureMtp);
  // Latent attention's weights in DeepSeek's interleaved layout: a reader that ignored the
  // field would read and write their rotary columns as halves.
  plan.transformer->mtpLayers = 0;
  plan.transformer->mtpLossCoefficient = 0;
  plan.transformer->headDim = 0;
  plan.transformer->qkNorm = false;
  plan.transformer->kvLoraRank = 8;
  plan.transformer->qkNopeHeadDim = plan.transformer->vHeadDim = 4;
  plan.transformer->qkRopeHeadDim = 2;
  plan.transformer->ropeInterleave = true;
  bytes = writePlan(plan);
  p = conduit::planfile::GetPlan(bytes.data());
  EXPECT_TRUE(p->transformer()->rope_interleave());
  EXPECT_EQ(p->features(),
            kFeatureGroupLimitedRouting | kFeatureExpertBiasUpdate | kFeatureRopeInterleave);
  // A rotary context extension and the routed experts' scaling: a reader that ignored them
  // would rotate by the base's frequencies and weigh the experts as the router gives them.
  EXPECT_EQ(p->transformer()->rope_type(), 0);
  EXPECT_EQ(p->transformer()->routed_scaling_factor(), 1.0);
  plan.transformer->ropeInterleave = false;
  plan.transformer->biasUpdateRate = 0;
  RopeScaling &rope = plan.transformer->ropeScaling;
  rope.type = RopeType::Yarn;
  rope.factor = 40;
  rope.originalPositions = 4096;
  rope.betaFast = 16;
  rope.betaSlow = 2;
  rope.truncate = false;
  rope.attentionFactor = 1.5;
  rope.mscaleAllDim = 0.7;
  plan.transformer->routedScalingFactor = 2.5;
  plan.transformer->sharedExpertGate = true; // a reader that ignored it would count short
  ASSERT_TRUE(checkModelFields(plan).ok()) << checkModelFields(plan);
  bytes = writePlan(plan);
  p = conduit::planfile::GetPlan(bytes.data());
  t = p->transformer();
  EXPECT_EQ(t->rope_type(), 3);
  EXPECT_EQ(t->rope_factor(), 40);
  EXPECT_EQ(t->rope_original_positions(), 4096);
  EXPECT_EQ(t->rope_beta_fast(), 16);
  EXPECT_EQ(t->rope_beta_slow(), 2);
  EXPECT_TRUE(t->rope_no_truncate());
  EXPECT_EQ(t->rope_attention_factor(), 1.5);
  EXPECT_EQ(t->rope_mscale_all_dim(), 0.7);
  EXPECT_EQ(t->routed_scaling_factor(), 2.5);
  EXPECT_TRUE(t->shared_expert_gate());
  EXPECT_EQ(p->features(), kFeatureGroupLimitedRouting | kFeatureRopeScaling |
                               kFeatureRoutedScaling | kFeatureSharedExpertGate);
  // Dynamic NTK scaling carries its threshold, and a bit of its own beside the extension's.
  rope = RopeScaling();
  rope.type = RopeType::Dynamic;
  rope.factor = 2;
  rope.originalPositions = 16;
  ASSERT_TRUE(checkModelFields(plan).ok()) << checkModelFields(plan);
  bytes = writePlan(plan);
  p = conduit::planfile::GetPlan(bytes.data());
  EXPECT_EQ(p->transformer()->rope_type(), 4);
  EXPECT_EQ(p->transformer()->rope_original_positions(), 16);
  EXPECT_EQ(p->features(), kFeatureGroupLimitedRouting | kFeatureRopeScaling |
                               kFeatureRoutedScaling | kFeatureSharedExpertGate |
                               kFeatureDynamicRope);
  // The router z-loss: a reader that ignored it would train without it.
  EXPECT_EQ(p->transformer()->z_loss_coefficient(), 0.0);
  plan.transformer->zLossCoefficient = 1e-3;
  ASSERT_TRUE(checkModelFields(plan).ok()) << checkModelFields(plan);
  bytes = writePlan(plan);
  p = conduit::planfile::GetPlan(bytes.data());
  EXPECT_EQ(p->transformer()->z_loss_coefficient(), 1e-3);
  EXPECT_EQ(p->features(), kFeatureGroupLimitedRouting | kFeatureRopeScaling |
                               kFeatureRoutedScaling | kFeatureSharedExpertGate |
                               kFeatureDynamicRope | kFeatureRouterZLoss);
  // Dropping by weight: a reader that ignored it would drop the last in token order.
  EXPECT_FALSE(p->transformer()->drop_by_weight());
  plan.transformer->capacityFactor = 1;
  plan.transformer->dropByWeight = true;
  ASSERT_TRUE(checkModelFields(plan).ok()) << checkModelFields(plan);
  bytes = writePlan(plan);
  p = conduit::planfile::GetPlan(bytes.data());
  EXPECT_TRUE(p->transformer()->drop_by_weight());
  EXPECT_EQ(p->features(), kFeatureGroupLimitedRouting | kFeatureRopeScaling |
                               kFeatureRoutedScaling | kFeatureSharedExpertGate |
                               kFeatureDynamicRope | kFeatureRouterZLoss | kFeatureDropByWeight);
  // A dense plan carries the defaults: no experts, expert 1, imbalance 1.
  Plan dense = twoRankPlan();
  std::string denseBytes = writePlan(dense);
  absl::StatusOr<Plan> read = readPlan(denseBytes.data(), denseBytes.size());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->config.expert, 1);
  EXPECT_EQ(read->layers[0].expertParams, 0);
}

TEST(PlanFile, ModelFieldsAreChecked) {
  // Each bad value is refused naming the field as plan.fbs does.
  const struct {
    std::function<void(Plan &)> edit;
    const char *says;
  } cases[] = {
      {[](Plan &p) { p.transformer->topK = 5; }, "transformer.top_k is 5"},
      {[](Plan &p) { p.transformer->topK = 0; }, "transformer.top_k is 0"},
      {[](Plan &p) { p.transformer->denseLayers = 3; }, "transformer.dense_layers is 3"},
      {[](Plan &p) { p.transformer->imbalance = 0.5; }, "transformer.imbalance is 0.5"},
      {[](Plan &p) { p.transformer->capacityFactor = -1; }, "transformer.capacity_factor is -1"},
      {[](Plan &p) { p.transformer->routerGroups = 3; },
       "transformer.router_groups 3 does not divide transformer.num_experts 4"},
      {[](Plan &p) { p.transformer->routerGroupTopK = 3; }, "transformer.router_group_top_k is 3"},
      {[](Plan &p) { p.transformer->topK = 3; }, "transformer.top_k 3 is more than the 2"},
      {[](Plan &p) { p.transformer->fp8Dispatch = true; },
       "transformer.fp8_dispatch needs config.dtype fp8"},
      {[](Plan &p) { p.transformer->biasUpdateRate = -1; }, "transformer.bias_update_rate is -1"},
      {[](Plan &p) { p.transformer->zLossCoefficient = -1; },
       "transformer.z_loss_coefficient is -1"},
      {[](Plan &p) { p.transformer->zLossCoefficient = NAN; },
       "transformer.z_loss_coefficient is nan"},
      {[](Plan &p) {
         p.transformer->capacityFactor = 0;
         p.transformer->dropByWeight = true;
       },
       "transformer.drop_by_weight says which assignments a capacity drops, and "
       "transformer.capacity_factor is 0 (dropless)"},
      {[](Plan &p) {
         p.transformer->router = 0;
         p.transformer->biasUpdateRate = 0.01;
       },
       "transformer.bias_update_rate is 0.01 and the router (softmax) has no bias"},
      {[](Plan &p) {
         p.transformer->numExperts = 0;
         p.transformer->topK = 0;
         p.transformer->expertFfnHiddenSize = 0;
         p.transformer->router = 0;
         p.transformer->sharedExperts = 0;
         p.transformer->sharedFfnHiddenSize = 0;
         p.transformer->denseLayers = 0;
         p.transformer->capacityFactor = 0;
         p.transformer->imbalance = 1;
         p.transformer->dispatch = 0;
         p.config.expert = 1;
         p.layers[2].expertParams = 0;
       },
       "transformer.router_groups is 2 without experts"},
      {[](Plan &p) { p.transformer->sharedFfnHiddenSize = 0; }, "transformer.shared_experts is 1"},
      {[](Plan &p) { p.transformer->expertFfnHiddenSize = 0; },
       "transformer.expert_ffn_hidden_size is 0"},
      {[](Plan &p) { p.transformer->headDim = 3; }, "transformer.head_dim is 3"},
      {[](Plan &p) { p.transformer->mtpLayers = -1; }, "transformer.mtp_layers is -1"},
      {[](Plan &p) { p.transformer->mtpLayers = 17; }, "transformer.mtp_layers is 17"},
      {[](Plan &p) { p.transformer->mtpLossCoefficient = 0.1; },
       "transformer.mtp_loss_coefficient is 0.1 without multi-token prediction"},
      {[](Plan &p) {
         p.transformer->mtpLayers = 1;
         p.transformer->mtpLossCoefficient = -1;
       },
       "transformer.mtp_loss_coefficient is -1"},
      {[](Plan &p) { p.transformer->mtpLayers = 1; }, "a plan from an older conduit-compile"},
      {[](Plan &p) { p.transformer->qkRopeHeadDim = 4; },
       "transformer.qk_rope_head_dim is 4 without latent attention"},
      {[](Plan &p) { p.transformer->ropeInterleave = true; },
       "transformer.rope_interleave is 1 without latent attention"},
      {[](Plan &p) { p.transformer->routedScalingFactor = 0; },
       "transformer.routed_scaling_factor is 0"},
      {[](Plan &p) {
         p.transformer->sharedExperts = p.transformer->sharedFfnHiddenSize = 0;
         p.transformer->sharedExpertGate = true;
       },
       "transformer.shared_expert_gate is true and there are no shared experts"},
      {[](Plan &p) {
         p.transformer->ropeScaling.type = RopeType::Linear;
         p.transformer->ropeScaling.factor = 0.5;
       },
       "transformer.rope_factor is 0.5"},
      {[](Plan &p) { p.transformer->ropeScaling.factor = 2; },
       "transformer.rope_factor is set and transformer.rope_type 0 does not read it"},
      {[](Plan &p) {
         p.transformer->ropeScaling.type = RopeType::Llama3;
         p.transformer->ropeScaling.factor = 8;
         p.transformer->ropeScaling.originalPositions = 8192;
         p.transformer->ropeScaling.attentionFactor = 1.5;
       },
       "transformer.rope_attention_factor is set and transformer.rope_type 2 does not read it"},
      {[](Plan &p) {
         p.transformer->ropeScaling.type = RopeType::Linear;
         p.transformer->ropeScaling.factor = 2;
         p.transformer->ropeScaling.mscaleAllDim = 1;
       },
       "transformer.rope_mscale_all_dim is set and transformer.rope_type 1 does not read it"},
      {[](Plan &p) {
         p.transformer->ropeScaling.type = RopeType::Linear;
         p.transformer->ropeScaling.factor = 2;
         p.transformer->position = 0;
       },
       "transformer.rope_type is set and the positions are learned"},
      {[](Plan &p) {
         p.transformer->ropeScaling.type = RopeType::Llama3;
         p.transformer->ropeScaling.factor = 8;
         p.transformer->ropeScaling.originalPositions = 8192;
         p.transformer->ropeScaling.lowFreqFactor = 4;
       },
       "transformer.rope_high_freq_factor is 4; it must exceed"},
      {[](Plan &p) {
         p.transformer->ropeScaling.type = RopeType::Yarn;
         p.transformer->ropeScaling.factor = 8;
       },
       "transformer.rope_original_positions is 0"},
      {[](Plan &p) {
         p.transformer->ropeScaling.type = RopeType::Dynamic;
         p.transformer->ropeScaling.factor = 2;
       },
       "transformer.rope_original_positions is 0"},
      {[](Plan &p) {
         p.transformer->ropeScaling.type = RopeType::Dynamic;
         p.transformer->ropeScaling.factor = 2;
         p.transformer->ropeScaling.originalPositions = 16;
         p.transformer->ropeScaling.betaFast = 8;
       },
       "transformer.rope_beta_fast is set and transformer.rope_type 4 does not read it"},
      {[](Plan &p) { p.config.expert = 3; }, "config.expert is 3; it must divide"},
      {[](Plan &p) { p.config.expert = 0; }, "config.expert is 0"},
      {[](Plan &p) { p.layers[1].expertParams = 5; }, "layer 'block.0' has expert_params 5"},
      {[](Plan &p) { p.layers[2].expertParams = 0; }, "block 1 has experts"},
      {[](Plan &p) { p.layers[2].expertParams = 201; }, "expert_params 201 of its 200 params"},
      {[](Plan &p) {
         p.transformer->numExperts = 0;
         p.config.expert = 1;
         p.layers[2].expertParams = 0;
       },
       "transformer.top_k is 2 without experts"},
      {[](Plan &p) {
         p.transformer.reset();
         p.layers[2].expertParams = 0;
       },
       "config.expert is 2; expert parallelism needs a mixture of experts"},
      {[](Plan &p) {
         p.transformer->headDim = 0;
         p.transformer->kvLoraRank = 8;
         p.transformer->qkNopeHeadDim = 4;
         p.transformer->qkRopeHeadDim = 3;
         p.transformer->vHeadDim = 4;
       },
       "transformer.qk_rope_head_dim is 3"},
      {[](Plan &p) {
         p.transformer->kvLoraRank = 8;
         p.transformer->vHeadDim = 4;
       },
       "transformer.head_dim is set with latent attention"},
  };
  for (const auto &c : cases) {
    Plan plan = moePlan();
    c.edit(plan);
    absl::Status status = checkModelFields(plan);
    EXPECT_FALSE(status.ok()) << c.says;
    EXPECT_NE(status.message().find(c.says), std::string::npos) << status;
  }
  // The reader applies the check: a file with a bad field is refused before anything else.
  Plan bad = twoRankPlan();
  bad.config.expert = 2;
  absl::Status status = readBack(writePlan(bad));
  EXPECT_NE(status.message().find("config.expert is 2"), std::string::npos) << status;
}

TEST(PlanFile, RefusesForeignAndDamagedFiles) {
  std::string bytes = writePlan(twoRankPlan());
  EXPECT_EQ(readBack("hello").message(),
            "not a Conduit plan file (the file identifier \"CDPL\" is missing)");
  for (size_t cut : {bytes.size() / 2, bytes.size() - 9, size_t(12)}) {
    absl::Status status = readBack(bytes.substr(0, cut));
    EXPECT_FALSE(status.ok()) << "cut at " << cut;
    EXPECT_NE(status.message().find("corrupt plan file"), std::string::npos) << status;
  }
  // Flipping bytes anywhere must never crash; it is refused or still consistent.
  for (size_t i = 8; i < bytes.size(); i += 7) {
    std::string damaged = bytes;
    damaged[i] = static_cast<char>(damaged[i] ^ 0x5a);
    (void)readBack(damaged);
  }
}

TEST(PlanFile, RefusesOtherVersionsAndFeatures) {
  Plan plan = twoRankPlan();
  // Version 5 added expert parallelism, the mixture of experts and the attention variants: a
  // plan of version 4 or 6 is refused in both directions.
  for (uint32_t version : {4u, 6u}) {
    plan.formatVersion = version;
    EXPECT_EQ(readBack(writePlan(plan)).message(),
              "plan file format version " + std::to_string(version) +
                  "; this runtime reads version 5. Recompile the job with a matching "
                  "conduit-compile.");
  }
  plan = twoRankPlan();
  plan.features = 0x4000;
  ASSERT_EQ(plan.features & kKnownFeatures, 0u);
  EXPECT_EQ(readBack(writePlan(plan)).message(),
            "the plan file uses features this runtime does not know (bits 0x4000). Recompile the "
            "job with a matching conduit-compile.");
}

TEST(PlanFile, SemanticRules) {
  auto error = [](Plan plan) { return std::string(checkPlanSemantics(plan).message()); };
  Plan plan = twoRankPlan();
  plan.ranks[1].instructions[7].bytes = 32;
  EXPECT_EQ(error(plan), "invalid plan: rank 0 instruction 4 (recv gradient s0 mb0 from rank 1 "
                         "(s1 mb0, samples [0, 2))): message 0 from rank 1 is sent as send "
                         "gradient s1 mb0 to rank 0 (s0 mb0, samples [0, 2)) (instruction 7)");
  plan = twoRankPlan();
  plan.ranks[0].instructions.erase(plan.ranks[0].instructions.begin() + 3); // the send
  PlanLocation where;
  EXPECT_EQ(std::string(checkPlanSemantics(plan, &where).message()),
            "invalid plan: rank 1 instruction 0 (recv activation s1 mb0 from rank 0 (s0 mb0, "
            "samples [0, 2))): message 0 from rank 0 has no matching send");
  EXPECT_EQ(where.rank, 1);
  EXPECT_EQ(where.instruction, 0);
  plan = twoRankPlan();
  plan.stages[1].rank = 5;
  EXPECT_EQ(error(plan), "invalid plan: stage 1 is placed on rank 5");
  plan = twoRankPlan();
  plan.ranks[0].instructions[1].event = 1; // signal e1 twice, e0 never
  EXPECT_EQ(error(plan), "invalid plan: rank 0 instruction 5 (signal event 1 on stream 1): the "
                         "event is signalled twice");
  plan = twoRankPlan();
  plan.ranks[0].instructions[0].stage = 1;
  EXPECT_EQ(error(plan), "invalid plan: rank 0 instruction 0 (F s1 mb0): the stage is not on "
                         "this rank or the micro-batch does not exist");
  plan = twoRankPlan();
  plan.ranks[1].instructions[0].slot = 3;
  EXPECT_EQ(error(plan), "invalid plan: rank 1 instruction 0 (recv activation s1 mb0 from rank "
                         "0 (s0 mb0, samples [0, 2))): the receive slot does not exist or is too "
                         "small");
  plan = twoRankPlan();
  plan.stages[0].samples = {0, 1};
  EXPECT_EQ(error(plan), "invalid plan: stage 0 does not cut the batch of 2 samples");
  plan = twoRankPlan();
  plan.ranks.pop_back();
  EXPECT_EQ(error(plan), "invalid plan: the plan has 1 rank programs for 2 pipeline ranks");
}

// A micro-batch's backward runs whole, or as one backward_input after its forward and one
// backward_weight after that, on the same rank; anything else is refused, pointing at the
// instruction.
TEST(PlanFile, SplitBackwardRules) {
  auto error = [](Plan plan) { return std::string(checkPlanSemantics(plan).message()); };
  // Rank 1 runs forward (3), backward_input (4), backward_weight (5).
  auto split = [](std::vector<Instruction> tail = {}) {
    Plan plan = twoRankPlan();
    std::vector<Instruction> &program = plan.ranks[1].instructions;
    program[4].op = Op::BackwardInput;
    program.insert(program.begin() + 5, compute(Op::BackwardWeight, 1));
    program.insert(program.begin() + 6, tail.begin(), tail.end());
    return plan;
  };
  Plan plan = split();
  ASSERT_TRUE(checkPlanSemantics(plan).ok()) << checkPlanSemantics(plan);
  std::string bytes = writePlan(plan);
  absl::StatusOr<Plan> read = readPlan(bytes.data(), bytes.size());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(dump(*read), dump(plan));
  EXPECT_NE(dump(plan).find("\"op\": \"backward_weight\""), std::string::npos) << dump(plan);

  const std::string at = "invalid plan: rank 1 instruction ";
  EXPECT_EQ(error(split({compute(Op::BackwardWeight, 1)})),
            at + "6 (W s1 mb0): a backward_weight of this micro-batch comes before it");
  EXPECT_EQ(error(split({compute(Op::BackwardInput, 1)})),
            at + "6 (I s1 mb0): a backward_input of this micro-batch comes before it");
  EXPECT_EQ(error(split({compute(Op::Backward, 1)})),
            at + "6 (B s1 mb0): an earlier backward_input splits this micro-batch's backward; it "
                 "cannot also run whole");
  plan = split();
  std::swap(plan.ranks[1].instructions[4], plan.ranks[1].instructions[5]);
  EXPECT_EQ(error(plan),
            at + "4 (W s1 mb0): no backward_input of this micro-batch comes before it");
  plan = split();
  std::swap(plan.ranks[1].instructions[3], plan.ranks[1].instructions[4]);
  EXPECT_EQ(error(plan), at + "3 (I s1 mb0): no forward of this micro-batch comes before it");
  plan = split();
  plan.ranks[1].instructions[4].op = Op::Backward;
  EXPECT_EQ(error(plan), at + "5 (W s1 mb0): a whole backward of this micro-batch comes before "
                              "it; it cannot also run split");
  plan = split();
  plan.ranks[1].instructions.erase(plan.ranks[1].instructions.begin() + 5);
  EXPECT_EQ(error(plan), at + "4 (I s1 mb0): no backward_weight of this micro-batch comes after "
                              "it; its weight gradient would never be computed");
}

TEST(PlanFile, WritesAtomically) {
  std::string path = ::testing::TempDir() + "/atomic.plan";
  ASSERT_TRUE(writePlanFile(twoRankPlan(), path).ok());
  absl::StatusOr<Plan> read = readPlanFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->name, "tiny");
  absl::Status missing = writePlanFile(twoRankPlan(), "/nonexistent-directory/x.plan");
  EXPECT_FALSE(missing.ok());
  EXPECT_EQ(readPlanFile("/nonexistent-directory/x.plan").status().message(),
            "cannot open plan file /nonexistent-directory/x.plan");
}

} // namespace
