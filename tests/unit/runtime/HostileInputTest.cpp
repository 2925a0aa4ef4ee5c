//===- HostileInputTest.cpp - plans and checkpoints written to be wrong ---===//
//
// The runtime's readers against files a hostile user would write: a runnable GPT plan built
// here, one field made absurd or its compute put out of order, written with writePlan and read
// back with readPlan, which must refuse it naming the field or instruction; the derived sizes the
// runtime allocates with, refused before anything is allocated; and checkpoints written by
// writeCheckpoint, then altered, which the checkpoint reader must refuse naming the file and the
// difference. Built from the project's own plans and checkpoints, not fixed bytes, so that they
// follow the formats as they change.
//
//===----------------------------------------------------------------------===//

#include "GptPlan.h"

#include "runtime/backend/cpu/CpuBackend.h"
#include "runtime/exec/StageWork.h"
#include "runtime/plan/Limits.h"
#include "runtime/plan/PlanFile.h"
#include "runtime/session/RankGroup.h"
#include "runtime/session/Reference.h"
#include "runtime/weights/Checkpoint.h"
#include "tests/unit/runtime/exec/PlanRuns.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <unistd.h>

#include "absl/strings/str_format.h"

using namespace conduit;
using namespace conduit::runtime;
using conduit::runtime::testing::pipelineShape;
namespace fs = std::filesystem;

namespace {

Instruction onStage(Op op, int32_t microbatch = -1) {
  Instruction i;
  i.op = op;
  i.stage = 0;
  i.microbatch = microbatch;
  return i;
}

/// One rank, one stage holding the whole model, two micro-batches of one sample, as the
/// compiler would lower a GPipe plan without parallelism.
Plan runnablePlan(Optimizer optimizer = Optimizer::Adam) {
  Plan plan = model::planFor(pipelineShape());
  plan.name = "tiny";
  plan.config.microbatches = 2;
  plan.config.microbatchSize = 1;
  plan.config.tokensPerSample = pipelineShape().seq;
  plan.config.optimizer = optimizer;
  Stage stage{0, 0, 0, static_cast<int32_t>(plan.layers.size()), 0, {0, 1, 2}};
  for (const Layer &layer : plan.layers)
    stage.params += layer.params;
  plan.stages = {stage};
  plan.groups = {{{0}}};
  RankProgram program;
  program.instructions = {onStage(Op::Forward, 0), onStage(Op::Backward, 0),
                          onStage(Op::Forward, 1), onStage(Op::Backward, 1),
                          onStage(Op::OptimizerStep)};
  plan.ranks = {program};
  return plan;
}

/// The stage parameters again after a test changed the layers.
void recount(Plan &plan) {
  for (Stage &stage : plan.stages) {
    stage.params = 0;
    for (int32_t l = stage.firstLayer; l < stage.endLayer; ++l)
      stage.params += plan.layers[l].params;
  }
}

/// readPlan's verdict on `plan` after a round trip through the file format.
absl::Status readBack(const Plan &plan) {
  const std::string bytes = writePlan(plan);
  return readPlan(bytes.data(), bytes.size()).status();
}

void expectRefused(const Plan &plan, const std::string &field) {
  absl::Status status = readBack(plan);
  EXPECT_FALSE(status.ok()) << "accepted a plan with an absurd " << field;
  EXPECT_NE(status.message().find(field), std::string::npos) << status.message();
}

TEST(HostilePlan, TheBuiltPlanIsAccepted) {
  EXPECT_TRUE(readBack(runnablePlan()).ok()) << readBack(runnablePlan()).message();
  Plan plan = runnablePlan();
  EXPECT_TRUE(validateModel(plan, "CPU").ok());
}

// A plan whose selective checkpointing drops what the runtime does not recompute is read, and
// refused before training, naming the job key: the runtime would keep what the plan's memory
// counts as dropped. A recomputed MLP is trained with and without sequence parallelism (the
// plan lists the all-gather its recomputation repeats).
TEST(HostilePlan, RecomputeModulesTheRuntimeDoesNotRecomputeAreRefused) {
  Plan plan = runnablePlan();
  plan.config.checkpointing = Checkpointing::Selective;
  EXPECT_TRUE(validateModel(plan, "CPU").ok());
  plan.config.recomputeModules = kRecomputeCoreAttention | kRecomputeLayerNorm | kRecomputeMlp;
  EXPECT_TRUE(validateModel(plan, "CPU").ok());
  plan.config.recomputeModules = kRecomputeLayerNorm | kRecomputeOp;
  EXPECT_TRUE(readBack(plan).ok()) << readBack(plan).message();
  absl::Status status = validateModel(plan, "CPU");
  EXPECT_EQ(std::string(status.message()),
            "parallelism.recompute_modules is [\"layernorm\", \"op\"]: the plan drops "
            "activations that the CPU backend keeps (it recomputes \"core_attn\", "
            "\"layernorm\", \"mlp\", \"moe_act\", \"mla_up_proj\" only); compile the job "
            "with those to train it");
  plan = runnablePlan();
  plan.config.checkpointing = Checkpointing::Selective;
  plan.config.recomputeModules = kRecomputeMlp;
  plan.config.tensor = 2;
  plan.config.sequenceParallel = true;
  ASSERT_TRUE(model::GptShape::fromPlan(plan).ok()) << model::GptShape::fromPlan(plan).status();
  EXPECT_EQ(validateModel(plan, "CPU").message().find("recompute_modules"), std::string::npos)
      << validateModel(plan, "CPU");
  plan.config.sequenceParallel = false;
  EXPECT_EQ(validateModel(plan, "CPU").message().find("recompute_modules"), std::string::npos)
      << validateModel(plan, "CPU");
}

// The runnable plan with split backwards, W in another order than I, is accepted; compute
// out of order (a backward before its forward, a W before its I) is refused naming the
// instruction.
TEST(HostilePlan, ComputeOutOfOrderIsRefused) {
  Plan plan = runnablePlan();
  plan.ranks[0].instructions = {onStage(Op::Forward, 0),        onStage(Op::BackwardInput, 0),
                                onStage(Op::Forward, 1),        onStage(Op::BackwardInput, 1),
                                onStage(Op::BackwardWeight, 1), onStage(Op::BackwardWeight, 0),
                                onStage(Op::OptimizerStep)};
  EXPECT_TRUE(readBack(plan).ok()) << readBack(plan).message();
  std::swap(plan.ranks[0].instructions[3], plan.ranks[0].instructions[4]);
  expectRefused(plan, "instruction 3 (W s0 mb1): no backward_input of this micro-batch");
  plan = runnablePlan();
  std::swap(plan.ranks[0].instructions[0], plan.ranks[0].instructions[1]);
  expectRefused(plan, "instruction 0 (B s0 mb0): no forward of this micro-batch");
}

// A vocabulary of 2^36 with every parameter count adjusted to match: the reader refuses it
// before SyntheticData or the embedding would allocate 2^36 floats.
TEST(HostilePlan, HugeVocabularyWithMatchingCountsIsRefused) {
  for (int64_t vocab : {int64_t(1) << 36, int64_t(128) + (int64_t(1) << 58)}) {
    Plan plan = runnablePlan();
    plan.transformer->vocabSize = vocab;
    const model::GptShape s = pipelineShape();
    plan.layers.front().params = (vocab + s.seq) * s.hidden;     // wraps for 128 + 2^58, as a
    plan.layers.back().params = 2 * s.hidden + s.hidden * vocab; // hostile writer would
    recount(plan);
    absl::Status status = readBack(plan);
    EXPECT_FALSE(status.ok());
  }
  Plan plan = runnablePlan();
  plan.transformer->vocabSize = int64_t(1) << 36;
  expectRefused(plan, "transformer.vocab_size");
}

TEST(HostilePlan, AbsurdShapeFieldsAreRefusedByName) {
  const std::pair<const char *, std::function<void(Transformer &)>> cases[] = {
      {"transformer.num_layers", [](Transformer &t) { t.numLayers = int64_t(1) << 62; }},
      {"transformer.num_layers", [](Transformer &t) { t.numLayers = -1; }},
      {"transformer.hidden_size", [](Transformer &t) { t.hiddenSize = 4611686018427388064; }},
      {"transformer.ffn_hidden_size", [](Transformer &t) { t.ffnHiddenSize = INT64_MAX; }},
      {"transformer.seq_length", [](Transformer &t) { t.seqLength = 0; }},
      {"transformer.num_heads", [](Transformer &t) { t.numHeads = int64_t(1) << 40; }},
      {"transformer.num_kv_heads", [](Transformer &t) { t.numKvHeads = 3; }},
      {"transformer.hidden_size", [](Transformer &t) { t.numHeads = t.numKvHeads = 3; }},
  };
  for (const auto &[field, change] : cases) {
    Plan plan = runnablePlan();
    change(*plan.transformer);
    expectRefused(plan, field);
  }
}

// num_layers is not used by the runtime, which builds the layer list; it must still agree.
TEST(HostilePlan, NumLayersMustAgreeWithTheChain) {
  Plan plan = runnablePlan();
  plan.transformer->numLayers = 3;
  expectRefused(plan, "transformer.num_layers");
}

TEST(HostilePlan, AbsurdConfigurationFieldsAreRefusedByName) {
  const std::pair<const char *, std::function<void(Config &)>> cases[] = {
      {"config.data", [](Config &c) { c.data = limits::kMaxData + 1; }},
      {"config.microbatch_size", [](Config &c) { c.microbatchSize = int64_t(1) << 40; }},
      {"config.microbatches", [](Config &c) { c.microbatches = -5; }},
      {"config.tokens_per_sample", [](Config &c) { c.tokensPerSample = 4569063951553953530; }},
      {"config.seed", [](Config &c) { c.seed = -1; }},
      {"config.learning_rate", [](Config &c) { c.learningRate = 0; }},
      {"config.efficiency", [](Config &c) { c.efficiency = std::nan(""); }},
  };
  for (const auto &[field, change] : cases) {
    Plan plan = runnablePlan();
    change(plan.config);
    expectRefused(plan, field);
  }
}

TEST(HostilePlan, CountsAndBytesAreBounded) {
  Plan plan = runnablePlan();
  plan.layers[1].params = int64_t(1) << 60;
  expectRefused(plan, "layers[1] (block.0).params");

  plan = runnablePlan();
  plan.stages[0].params += 1;
  expectRefused(plan, "stages[0].params");

  plan = runnablePlan();
  plan.ranks[0].events = 1 << 20; // more events than instructions that could signal them
  expectRefused(plan, "ranks[0].events");

  plan = runnablePlan();
  plan.ranks[0].slots = {int64_t(1) << 62};
  expectRefused(plan, "ranks[0].slots[0]");

  plan = runnablePlan();
  plan.ranks[0].peakMemoryBytes = -1;
  expectRefused(plan, "ranks[0].peak_memory");
}

// A plan held in memory (not read from a file) goes through the same bounds in the model.
TEST(HostilePlan, TheModelRefusesShapesBeyondTheLimits) {
  Plan plan = runnablePlan();
  plan.transformer->ffnHiddenSize = INT64_MAX;
  absl::StatusOr<model::GptShape> shape = model::GptShape::fromPlan(plan);
  ASSERT_FALSE(shape.ok());
  EXPECT_NE(shape.status().message().find("ffn_hidden_size"), std::string::npos);

  plan = runnablePlan();
  plan.transformer->hiddenSize = 9;
  shape = model::GptShape::fromPlan(plan);
  ASSERT_FALSE(shape.ok());
  EXPECT_NE(shape.status().message().find("not a multiple of the head count"), std::string::npos);
  EXPECT_NE(shape.status().message().find("model.num_heads"), std::string::npos);
}

// The largest shape the limits allow still has countable activations for one sample, and the
// CPU backend refuses it for want of memory instead of failing to allocate.
TEST(HostilePlan, MemoryIsCheckedBeforeAllocation) {
  Plan plan = runnablePlan();
  Transformer &t = *plan.transformer;
  t.hiddenSize = limits::kMaxHidden;
  t.vocabSize = limits::kMaxVocab;
  t.seqLength = plan.config.tokensPerSample = 1024;
  model::GptShape s = *model::GptShape::fromPlan(plan);
  for (Layer &layer : plan.layers)
    layer.params = model::makeLayer<float>(layer.kind, s)->numParams();
  recount(plan);
  ASSERT_TRUE(readBack(plan).ok()) << readBack(plan).message();
  absl::StatusOr<int64_t> bytes = rankMemoryBytes(plan, s, 0, sizeof(double));
  ASSERT_TRUE(bytes.ok());
  EXPECT_GT(*bytes, int64_t(1) << 40);

  CpuBackend backend(0, 1, false, [](const Plan &) -> absl::StatusOr<std::unique_ptr<Transport>> {
    return absl::InternalError("not connected in this test");
  });
  absl::Status status = backend.validate(plan);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("needs at least"), std::string::npos) << status.message();

  // A seq_length whose attention scores overflow for a big micro-batch: not countable.
  s.seq = limits::kMaxSeqLength;
  s.heads = limits::kMaxHeads;
  EXPECT_FALSE(s.activationElements(limits::kMaxMicrobatchSize, 1, true).has_value());
}

// --reference trains every replica's samples in one process: what that costs is known
// before it starts (conduit-run refuses or announces it).
TEST(HostilePlan, ReferenceWorkIsEstimatedFromTheShape) {
  Plan plan = runnablePlan();
  plan.config.data = 65536;
  ASSERT_TRUE(readBack(plan).ok());
  absl::StatusOr<ReferenceWork> work = Reference::estimate(plan);
  ASSERT_TRUE(work.ok());
  EXPECT_EQ(work->samplesPerStep, 65536 * 2);
  EXPECT_GT(work->flopsPerStep, 65536.0 * 2 * 6 * plan.stages[0].params * pipelineShape().seq - 1);
}

//===----------------------------------------------------------------------===//
// Checkpoints
//===----------------------------------------------------------------------===//

class HostileCheckpoint : public ::testing::Test {
protected:
  void SetUp() override {
    dir = (fs::temp_directory_path() /
           ("conduit-hostile-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name()))
              .string();
    fs::remove_all(dir);
  }
  void TearDown() override { fs::remove_all(dir); }

  /// The state the one rank of `plan` keeps, with made-up values.
  static std::vector<StageState> stateOf(const Plan &plan, int64_t optimizerSteps) {
    StageState s;
    s.stage = 0;
    s.optimizerSteps = optimizerSteps;
    s.params.assign(plan.stages[0].params, 0.5f);
    s.optimizer.assign(
        model::OptimizerConfig::fromPlan(plan.config).stateWidth() * plan.stages[0].params, 0.25f);
    return {s};
  }

  absl::Status write(const Plan &plan, int64_t step, const std::vector<StageState> &states) {
    LocalRankHub hub(1);
    std::unique_ptr<RankGroup> group = hub.member(0);
    return writeCheckpoint(dir, step, plan, *group, states);
  }
  absl::StatusOr<LoadedCheckpoint> read(const Plan &plan) {
    LocalRankHub hub(1);
    std::unique_ptr<RankGroup> group = hub.member(0);
    return readCheckpoint(dir, plan, *group);
  }
  std::string manifest() {
    std::ifstream in(fs::path(dir) / "manifest");
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  std::string rankBytes(int64_t step) {
    std::ifstream in(fs::path(dir) / absl::StrFormat("step-%08d", step) / "rank-0.ckpt",
                     std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    return bytes.str();
  }

  std::string dir;
};

// SGD keeps no optimizer state: its checkpoints hold empty arrays, which the reader must copy
// without touching a null pointer (UBSan) and accept.
TEST_F(HostileCheckpoint, SgdCheckpointsResume) {
  const Plan plan = runnablePlan(Optimizer::SGD);
  ASSERT_TRUE(write(plan, 2, stateOf(plan, 2)).ok());
  absl::StatusOr<LoadedCheckpoint> loaded = read(plan);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  ASSERT_EQ(loaded->states.size(), 1u);
  EXPECT_TRUE(loaded->states[0].optimizer.empty());
  EXPECT_EQ(loaded->step, 2);
}

// A step count the optimizer would overflow on: written by a hostile writer with a correct
// checksum, refused by the reader naming the file.
TEST_F(HostileCheckpoint, OptimizerStepsBeyondTheTrainingStepAreRefused) {
  const Plan plan = runnablePlan();
  ASSERT_TRUE(write(plan, 2, stateOf(plan, INT64_MAX)).ok());
  absl::StatusOr<LoadedCheckpoint> loaded = read(plan);
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find("rank-0.ckpt"), std::string::npos);
  EXPECT_NE(loaded.status().message().find("9223372036854775807 optimizer steps"),
            std::string::npos)
      << loaded.status().message();
}

// The state of another optimizer: the message names the file and both counts of each kind.
TEST_F(HostileCheckpoint, AStateOfTheWrongSizeNamesTheDifference) {
  const Plan adam = runnablePlan();
  std::vector<StageState> states = stateOf(adam, 2);
  states[0].optimizer.clear(); // what SGD would keep
  ASSERT_TRUE(write(adam, 2, states).ok());
  absl::StatusOr<LoadedCheckpoint> loaded = read(adam);
  ASSERT_FALSE(loaded.ok());
  const std::string message(loaded.status().message());
  EXPECT_NE(message.find("rank-0.ckpt"), std::string::npos) << message;
  EXPECT_NE(message.find("0 optimizer values"), std::string::npos) << message;
  EXPECT_NE(message.find(std::to_string(2 * adam.stages[0].params) + " optimizer values"),
            std::string::npos)
      << message;
}

TEST_F(HostileCheckpoint, AStateForAStageOfAnotherRankIsRefused) {
  const Plan plan = runnablePlan();
  std::vector<StageState> states = stateOf(plan, 2);
  states[0].stage = 1;
  ASSERT_TRUE(write(plan, 2, states).ok());
  absl::StatusOr<LoadedCheckpoint> loaded = read(plan);
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find("stage 1"), std::string::npos);
}

TEST_F(HostileCheckpoint, TheManifestsNumbersAreBounded) {
  const Plan plan = runnablePlan();
  ASSERT_TRUE(write(plan, 2, stateOf(plan, 2)).ok());
  const std::string text = manifest();
  ASSERT_TRUE(parseCheckpointManifest(text, "m").ok());
  auto replaced = [&](const std::string &from, const std::string &to) {
    std::string t = text;
    t.replace(t.find(from), from.size(), to);
    return t;
  };
  for (const std::string &bad :
       {replaced("step 2", "step 4611686018427387904"), replaced("step 2", "step -1"),
        replaced("world_size 1", "world_size 0"), replaced("world_size 1", "world_size 2"),
        replaced("directory step-00000002", "directory ..")}) {
    absl::StatusOr<CheckpointManifest> m = parseCheckpointManifest(bad, "m");
    EXPECT_FALSE(m.ok()) << bad;
  }
  // The rank file on its own: accepted as written, refused once cut short.
  absl::StatusOr<CheckpointManifest> m = parseCheckpointManifest(text, "m");
  const std::string bytes = rankBytes(2);
  EXPECT_TRUE(parseRankState(bytes, *m, plan, 0, "r").ok());
  EXPECT_FALSE(parseRankState(bytes.substr(0, bytes.size() - 1), *m, plan, 0, "r").ok());
  EXPECT_FALSE(parseRankState(bytes + "x", *m, plan, 0, "r").ok());
}

} // namespace
