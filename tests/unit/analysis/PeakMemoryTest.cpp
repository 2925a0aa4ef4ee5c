//===- PeakMemoryTest.cpp - the memory plan on plain problems -------------===//
//
// What activation checkpointing holds, by hand for a small stage (stageActivations), and
// every rank's peak on small problems computed by hand: the static state of each sharding
// mode, stored and working activations, gathered parameters and full gradient buffers,
// receive slots and outputs waiting to be sent, a tie's incoming buffer, a smaller
// micro-batch; then one malformed problem per check and one wrong result per verification.
// Nothing here links MLIR.
//
//===----------------------------------------------------------------------===//

#include "analysis/PeakMemory.h"

#include <gtest/gtest.h>

using namespace conduit;
using runtime::Checkpointing;
using runtime::Sharding;
using Kind = MemoryEvent::Kind;

namespace {

//===----------------------------------------------------------------------===//
// Activations per checkpointing mode
//===----------------------------------------------------------------------===//

// An embedding, three blocks and a head, in bytes per sample.
std::vector<LayerBytes> smallStage() {
  const LayerBytes embedding{4, 4, 10, 0}, block{100, 10, 50, 30}, head{60, 10, 40, 0};
  return {embedding, block, block, block, head};
}

TEST(StageActivations, WithoutCheckpointingEverythingIsStored) {
  StageActivations a = stageActivations(smallStage(), Checkpointing::None);
  EXPECT_EQ(a.stored, 4 + 3 * 100 + 60);
  EXPECT_EQ(a.weightGradient, 10 + 3 * 50 + 40);
  EXPECT_EQ(a.forwardKept + a.forwardWorking + a.backwardWorking + a.inputWorking, 0);
}

TEST(StageActivations, FullCheckpointingRecomputesOneLayerAtATime) {
  StageActivations a = stageActivations(smallStage(), Checkpointing::Full);
  EXPECT_EQ(a.stored, 4 + 3 * 10 + 10); // every layer's input
  // The forward of the last block: the inputs of layers 0 to 3 and its output (the head's
  // input) kept, and its own activations.
  EXPECT_EQ(a.forwardKept, 44);
  EXPECT_EQ(a.forwardWorking, 100);
  // The backward of the last block: its activations, the head's input released already.
  EXPECT_EQ(a.backwardWorking, 100 - 10);
  // The input gradient of the first block: its activations, three inputs released and what
  // the weight gradients of two blocks and the head need held.
  EXPECT_EQ(a.inputWorking, 100 - 30 + 2 * 50 + 40);
  EXPECT_EQ(a.weightGradient, 10 + 3 * 50 + 40);
}

// `blocks`: the blocks as under full checkpointing; the embedding and the head keep their
// activations, as without checkpointing.
TEST(StageActivations, BlocksCheckpointingKeepsTheEmbeddingAndTheHead) {
  std::vector<LayerBytes> layers = smallStage();
  layers.front().kind = runtime::LayerKind::Embedding;
  for (size_t i = 1; i + 1 < layers.size(); ++i)
    layers[i].kind = runtime::LayerKind::Block;
  layers.back().kind = runtime::LayerKind::Head;
  StageActivations a = stageActivations(layers, Checkpointing::Blocks);
  EXPECT_EQ(a.stored, 4 + 3 * 10 + 60); // the embedding's and head's activations, the inputs
  // The forward of the last block: the embedding's activations, two blocks' inputs, its own
  // and its output kept; its activations working.
  EXPECT_EQ(a.forwardKept, 4 + 3 * 10 + 10);
  EXPECT_EQ(a.forwardWorking, 100);
  // The backward of the last block: its activations, the head's released already.
  EXPECT_EQ(a.backwardWorking, 100 - 60);
  // The input gradient of the first block: two blocks' inputs and the head's activations
  // released, what two blocks' and the head's weight gradients need held.
  EXPECT_EQ(a.inputWorking, 100 - 20 - 60 + 2 * 50 + 40);
  EXPECT_EQ(a.weightGradient, 10 + 3 * 50 + 40);
  // Full checkpointing recomputes every kind alike.
  const StageActivations full = stageActivations(layers, Checkpointing::Full),
                         custom = stageActivations(smallStage(), Checkpointing::Full);
  EXPECT_EQ(full.stored, custom.stored);
  EXPECT_EQ(full.forwardKept + full.forwardWorking, custom.forwardKept + custom.forwardWorking);
  EXPECT_EQ(full.backwardWorking, custom.backwardWorking);
  EXPECT_EQ(full.inputWorking, custom.inputWorking);
}

TEST(StageActivations, SelectiveCheckpointingRecomputesTheAttentionCores) {
  StageActivations a = stageActivations(smallStage(), Checkpointing::Selective);
  EXPECT_EQ(a.stored, 4 + 3 * (100 - 30) + 60);
  EXPECT_EQ(a.forwardKept, 0);
  EXPECT_EQ(a.forwardWorking, 30);
  EXPECT_EQ(a.backwardWorking, 30);
  EXPECT_EQ(a.inputWorking, 30);
}

//===----------------------------------------------------------------------===//
// Peaks by hand
//===----------------------------------------------------------------------===//

MemoryStage stage(int64_t rank, int64_t params, int64_t stored, std::vector<int64_t> samples) {
  MemoryStage s;
  s.rank = rank;
  s.params = params;
  s.activations.stored = stored;
  s.samples = std::move(samples);
  return s;
}

MemoryEvent compute(Kind kind, int32_t s, int32_t mb) { return {kind, s, mb}; }

/// Stage 0 gathered, one micro-batch forward and backward, resharded, its gradients reduced.
std::vector<MemoryEvent> oneResidency() {
  return {{Kind::Gather, 0},
          compute(Kind::Forward, 0, 0),
          compute(Kind::Backward, 0, 0),
          {Kind::Reshard, 0},
          {Kind::Reduce, 0}};
}

std::vector<MemoryPeak> peaksOf(const MemoryProblem &problem) {
  llvm::Expected<std::vector<MemoryPeak>> peaks = peakMemory(problem);
  EXPECT_TRUE(static_cast<bool>(peaks)) << llvm::toString(peaks.takeError());
  sched::Violation v = verifyPeakMemory(problem, *peaks);
  EXPECT_FALSE(v.has_value()) << *v;
  return *peaks;
}

int64_t at(const MemoryPeak &m, MemoryKind kind) { return m.atPeak[static_cast<int>(kind)]; }

/// One rank, one stage of 100 bf16 parameters under Adam storing 10 bytes per sample, two
/// micro-batches of two samples, run F0 F1 B1 B0.
MemoryProblem oneStage() {
  MemoryProblem p;
  p.stages = {stage(0, 100, 10, {0, 2, 4})};
  p.receiveSlots = {{}};
  p.orders = {{compute(Kind::Forward, 0, 0), compute(Kind::Forward, 0, 1),
               compute(Kind::Backward, 0, 1), compute(Kind::Backward, 0, 0)}};
  return p;
}

TEST(PeakMemory, StoredActivationsOnTopOfTheStaticState) {
  MemoryPeak m = peaksOf(oneStage()).front();
  // Parameters 2 bytes each; Adam's moments and the fp32 master 12; fp32 gradients 4.
  EXPECT_EQ(at(m, MemoryKind::Parameters), 200);
  EXPECT_EQ(at(m, MemoryKind::OptimizerState), 1200);
  EXPECT_EQ(at(m, MemoryKind::Gradients), 400);
  // Both micro-batches stored after the second forward: the first moment of the highest total.
  EXPECT_EQ(at(m, MemoryKind::Activations), 40);
  EXPECT_EQ(m.peak, 1840);
  EXPECT_EQ(m.event, 1);
  EXPECT_EQ(m.activationsInFlight, 2);
}

TEST(PeakMemory, StaticStateOfEveryShardingMode) {
  // 101 fp32 parameters under SGD on D = 2 replicas (shards of 51), no compute.
  MemoryProblem p;
  p.stages = {stage(0, 101, 0, {0, 1})};
  p.receiveSlots = {{}};
  p.orders = {{}};
  p.elementBytes = 4;
  p.adam = false;
  p.replicas = 2;
  struct Expected {
    Sharding sharding;
    int64_t params, state, gradients;
  };
  for (const Expected &e : {
           // fp32 parameters are their own master; the whole gradient buffer.
           Expected{Sharding::None, 404, 0, 404},
           // ZeRO-1: the master of the shard; the whole buffer, reduced in place.
           Expected{Sharding::Optimizer, 404, 51 * 4, 404},
           // ZeRO-2: the gradient shard only (the whole buffer lives from backward to
           // reduction).
           Expected{Sharding::Gradients, 404, 51 * 4, 51 * 4},
           // ZeRO-3: the parameter shard is the optimizer's own.
           Expected{Sharding::Full, 51 * 4, 0, 51 * 4},
       }) {
    p.sharding = e.sharding;
    MemoryPeak m = peaksOf(p).front();
    EXPECT_EQ(at(m, MemoryKind::Parameters), e.params) << int(e.sharding);
    EXPECT_EQ(at(m, MemoryKind::OptimizerState), e.state) << int(e.sharding);
    EXPECT_EQ(at(m, MemoryKind::Gradients), e.gradients) << int(e.sharding);
    EXPECT_EQ(m.peak, e.params + e.state + e.gradients);
    EXPECT_EQ(m.event, -1);
  }
  // With one replica nothing is sharded, whatever the mode says.
  p.replicas = 1;
  EXPECT_EQ(peaksOf(p).front().peak, 808);
}

TEST(PeakMemory, RoutedExpertsAreShardedOverTheirExpertDataGroup) {
  // 100 fp32 parameters under SGD on D = 4 replicas, 60 of them the rank's routed experts,
  // shared with 1 other rank (E = 2: D x T / E = 2).
  MemoryProblem p;
  p.stages = {stage(0, 100, 0, {0, 1})};
  p.stages[0].expertParams = 60;
  p.receiveSlots = {{}};
  p.orders = {{}};
  p.elementBytes = 4;
  p.adam = false;
  p.replicas = 4;
  p.expertReplicas = 2;
  p.sharding = Sharding::Full;
  // Dense shards of 40 / 4, expert shards of 60 / 2, for parameters and gradients alike.
  MemoryPeak m = peaksOf(p).front();
  EXPECT_EQ(at(m, MemoryKind::Parameters), (10 + 30) * 4);
  EXPECT_EQ(at(m, MemoryKind::Gradients), (10 + 30) * 4);
  // ZeRO-1: whole parameters and buffer (reduced in place); the masters split the same way.
  p.sharding = Sharding::Optimizer;
  m = peaksOf(p).front();
  EXPECT_EQ(at(m, MemoryKind::Parameters), 400);
  EXPECT_EQ(at(m, MemoryKind::OptimizerState), (10 + 30) * 4);
  EXPECT_EQ(at(m, MemoryKind::Gradients), 400);
  // An expert-data group of one rank: ZeRO-1 updates its experts in place, with no fp32 master
  // of fp32 parameters.
  p.expertReplicas = 1;
  m = peaksOf(p).front();
  EXPECT_EQ(at(m, MemoryKind::OptimizerState), 10 * 4);
  EXPECT_EQ(at(m, MemoryKind::Gradients), 400);
  // Under full sharding its one-rank shard is the whole, kept all step; the gathered copy and
  // the whole gradients leave it out (conduit-run keeps such experts apart, once).
  p.sharding = Sharding::Full;
  EXPECT_EQ(at(peaksOf(p).front(), MemoryKind::Parameters), (10 + 60) * 4);
  p.orders = {oneResidency()};
  m = peaksOf(p).front();
  EXPECT_EQ(at(m, MemoryKind::GatheredParameters), 40 * 4);
  EXPECT_EQ(at(m, MemoryKind::Gradients), (10 + 60) * 4 + 40 * 4);
  // ZeRO-2 alike for the gradients, and no master beside its fp32 experts either.
  p.sharding = Sharding::Gradients;
  m = peaksOf(p).front();
  EXPECT_EQ(at(m, MemoryKind::Gradients), (10 + 60) * 4 + 40 * 4);
  EXPECT_EQ(at(m, MemoryKind::OptimizerState), 10 * 4);
  p.orders = {{}};
  p.sharding = Sharding::Optimizer;
  // Unset: the replicas, as without expert parallelism.
  p.expertReplicas = 0;
  EXPECT_EQ(at(peaksOf(p).front(), MemoryKind::OptimizerState), 25 * 4);
}

TEST(PeakMemory, GatheredParametersAndTheFullGradientBuffer) {
  // Full sharding, D = 2: 100 bf16 parameters, shards of 50; gather, F, B, reshard, reduce.
  MemoryProblem p;
  p.stages = {stage(0, 100, 10, {0, 1})};
  p.receiveSlots = {{}};
  p.replicas = 2;
  p.sharding = Sharding::Full;
  p.orders = {oneResidency()};
  MemoryPeak m = peaksOf(p).front();
  // Static: the shard (100 bytes), its moments and master (600), its gradient shard (200).
  // At the backward: the gathered stage, the micro-batch's activations and the whole fp32
  // gradient buffer.
  EXPECT_EQ(at(m, MemoryKind::GatheredParameters), 200);
  EXPECT_EQ(at(m, MemoryKind::Gradients), 200 + 400);
  EXPECT_EQ(at(m, MemoryKind::Activations), 10);
  EXPECT_EQ(m.peak, 900 + 200 + 10 + 400);
  EXPECT_EQ(m.event, 2);
}

// PyTorch FSDP's mixed precision (parametersAreMaster): the fp32 shard is the optimizer's
// master, so a bf16 run keeps 4 bytes of parameter and Adam's 8 per shard element where it
// kept 2 and 12; the gathered copy stays bf16. An expert-data group of one keeps its experts
// whole in fp32, and casts them for each residency like the rest.
TEST(PeakMemory, ParametersThatAreTheirOwnMaster) {
  MemoryProblem p;
  p.stages = {stage(0, 100, 10, {0, 1})};
  p.receiveSlots = {{}};
  p.replicas = 2;
  p.sharding = Sharding::Full;
  p.parametersAreMaster = true;
  p.orders = {oneResidency()};
  MemoryPeak m = peaksOf(p).front();
  EXPECT_EQ(at(m, MemoryKind::Parameters), 50 * 4);
  EXPECT_EQ(at(m, MemoryKind::OptimizerState), 50 * 8);
  EXPECT_EQ(at(m, MemoryKind::GatheredParameters), 100 * 2);
  EXPECT_EQ(at(m, MemoryKind::Gradients), 50 * 4 + 100 * 4);
  // 900 bytes of static state either way for Adam (2 + 12 against 4 + 8 per shard element);
  // under SGD the master was all the state.
  EXPECT_EQ(m.peak, 50 * (4 + 8 + 4) + 200 + 10 + 400);
  p.adam = false;
  EXPECT_EQ(at(peaksOf(p).front(), MemoryKind::OptimizerState), 0);
  p.adam = true;
  // 60 of the 100 are routed experts on an expert-data group of one: kept whole, in fp32,
  // with no master; gathered (cast) with the dense part; out of the whole gradient buffer.
  p.stages[0].expertParams = 60;
  p.expertReplicas = 1;
  m = peaksOf(p).front();
  EXPECT_EQ(at(m, MemoryKind::Parameters), (20 + 60) * 4);
  EXPECT_EQ(at(m, MemoryKind::OptimizerState), (20 + 60) * 8);
  EXPECT_EQ(at(m, MemoryKind::GatheredParameters), 100 * 2);
  EXPECT_EQ(at(m, MemoryKind::Gradients), (20 + 60) * 4 + 40 * 4);
  // The same stage with a separate master: 2 + 12 bytes a parameter, the experts not gathered.
  p.parametersAreMaster = false;
  m = peaksOf(p).front();
  EXPECT_EQ(at(m, MemoryKind::Parameters), (20 + 60) * 2);
  EXPECT_EQ(at(m, MemoryKind::OptimizerState), (20 + 60) * 12);
  EXPECT_EQ(at(m, MemoryKind::GatheredParameters), 40 * 2);
}

TEST(PeakMemory, Bf16AdamMomentsHalveTheMoments) {
  // ZeRO-1 over 2: each shard element keeps an fp32 master and Adam's two moments, 4 + 8 bytes
  // in fp32 moments and 4 + 4 in bf16; nothing else moves.
  MemoryProblem p;
  p.stages = {stage(0, 100, 10, {0, 1})};
  p.receiveSlots = {{}};
  p.replicas = 2;
  p.sharding = Sharding::Optimizer;
  p.orders = {oneResidency()};
  const MemoryPeak fp32 = peaksOf(p).front();
  p.momentBytes = 2;
  const MemoryPeak bf16 = peaksOf(p).front();
  EXPECT_EQ(at(fp32, MemoryKind::OptimizerState), 50 * 12);
  EXPECT_EQ(at(bf16, MemoryKind::OptimizerState), 50 * 8);
  EXPECT_EQ(fp32.peak - bf16.peak, 50 * 4);
}

TEST(PeakMemory, ReceiveSlotsAndOutputsWaitingToBeSent) {
  // Two ranks, one stage each, one micro-batch of two samples; stage 0 sends 5 bytes per
  // sample forward and receives the gradient of the same size back.
  MemoryProblem p;
  p.stages = {stage(0, 0, 10, {0, 2}), stage(1, 0, 10, {0, 2})};
  p.stages[0].outputBytes = 5;
  p.receiveSlots = {{10}, {10}};
  p.orders = {
      {compute(Kind::Forward, 0, 0), {Kind::Send, 0, 0, false}, compute(Kind::Backward, 0, 0)},
      {compute(Kind::Forward, 1, 0), compute(Kind::Backward, 1, 0), {Kind::Send, 1, 0, true}}};
  std::vector<MemoryPeak> peaks = peaksOf(p);
  // Rank 0: after its forward, the stored activations and the output waiting for its send,
  // which leaves beside the backward.
  EXPECT_EQ(at(peaks[0], MemoryKind::Activations), 20);
  EXPECT_EQ(at(peaks[0], MemoryKind::SendBuffers), 10);
  EXPECT_EQ(peaks[0].peak, 10 + 20 + 10);
  EXPECT_EQ(peaks[0].event, 0);
  // Rank 1: during its backward, the input gradient it writes beside the activations it reads.
  EXPECT_EQ(at(peaks[1], MemoryKind::SendBuffers), 10);
  EXPECT_EQ(at(peaks[1], MemoryKind::ReceiveBuffers), 10);
  EXPECT_EQ(peaks[1].peak, 10 + 20 + 10);
  EXPECT_EQ(peaks[1].event, 1);

  // Half the micro-batch: everything proportional to samples halves.
  p.sampleScale = 0.5;
  peaks = peaksOf(p);
  EXPECT_EQ(peaks[0].peak, 20);
  EXPECT_EQ(peaks[1].peak, 20);
}

TEST(PeakMemory, WorkingActivationsOfACheckpointedStage) {
  MemoryProblem p;
  p.stages = {stage(0, 0, 0, {0, 1})};
  p.stages[0].activations = stageActivations(smallStage(), Checkpointing::Full);
  p.receiveSlots = {{}};
  // A whole backward: the forward's peak, one block beside the inputs kept and its output.
  p.orders = {{compute(Kind::Forward, 0, 0), compute(Kind::Backward, 0, 0)}};
  MemoryPeak m = peaksOf(p).front();
  EXPECT_EQ(at(m, MemoryKind::Working), 100);
  EXPECT_EQ(at(m, MemoryKind::Activations), 44);
  EXPECT_EQ(m.event, 0);
  EXPECT_EQ(m.activationsInFlight, 1);
  // Split: the input gradient holds the first block's activations beside the stored inputs and
  // what the later layers' weight gradients need; after it, what W needs until W.
  p.orders = {{compute(Kind::Forward, 0, 0), compute(Kind::BackwardInput, 0, 0),
               compute(Kind::BackwardWeight, 0, 0)}};
  m = peaksOf(p).front();
  EXPECT_EQ(at(m, MemoryKind::Working), 100 - 30 + 2 * 50 + 40);
  EXPECT_EQ(at(m, MemoryKind::Activations), 44);
  EXPECT_EQ(m.peak, 44 + 210);
  EXPECT_EQ(m.event, 1);
}

TEST(PeakMemory, ATiesIncomingGradient) {
  MemoryProblem p = oneStage();
  p.orders[0].push_back({Kind::Tie, 0, 0, false, 100});
  MemoryPeak m = peaksOf(p).front();
  EXPECT_EQ(at(m, MemoryKind::ReceiveBuffers), 100);
  EXPECT_EQ(m.peak, 1900);
  EXPECT_EQ(m.event, 4);
  // One rank holding both copies adds them in place.
  p.orders[0].back().bytes = 0;
  EXPECT_EQ(peaksOf(p).front().peak, 1840);
}

//===----------------------------------------------------------------------===//
// check() and verify()
//===----------------------------------------------------------------------===//

TEST(PeakMemory, CheckRefusesMalformedProblems) {
  const MemoryProblem good = oneStage();
  ASSERT_FALSE(good.check().has_value());
  auto refuses = [](const MemoryProblem &bad, const std::string &text) {
    sched::Violation v = bad.check();
    ASSERT_TRUE(v.has_value()) << text;
    EXPECT_NE(v->find(text), std::string::npos) << *v;
    EXPECT_FALSE(static_cast<bool>(peakMemory(bad))) << text;
  };
  MemoryProblem bad = good;
  bad.stages.clear();
  refuses(bad, "no stages");
  bad = good;
  bad.receiveSlots.clear();
  refuses(bad, "0 lists of receive slots for 1 ranks");
  bad = good;
  bad.stages[0].rank = 1;
  refuses(bad, "stage 0 is placed on rank 1 but there are 1 ranks");
  bad = good;
  bad.stages[0].samples = {1, 2, 4};
  refuses(bad, "must start at 0");
  bad = good;
  bad.stages[0].samples = {0, 2, 2};
  refuses(bad, "must increase strictly");
  bad = good;
  bad.stages[0].activations.stored = -1;
  refuses(bad, "stage 0 has a negative size");
  bad = good;
  bad.sampleScale = 0;
  refuses(bad, "sample scale must be positive");
  bad = good;
  bad.replicas = 0;
  refuses(bad, "replicas must be positive");
  bad = good;
  bad.expertReplicas = -1;
  refuses(bad, "expert replicas must not be negative");
  bad = good;
  bad.stages[0].expertParams = 101;
  refuses(bad, "stage 0 has 101 routed experts' parameters of 100");
  bad = good;
  bad.orders[0][1].mb = 2;
  refuses(bad, "event 1 of rank 0 is on micro-batch 2 but stage 0 has 2");
  bad = good;
  bad.orders[0][1].stage = 3;
  refuses(bad, "event 1 of rank 0 is on stage 3, which does not exist");
  bad = good;
  bad.orders[0].push_back({Kind::Send, 0, 0, true});
  refuses(bad, "sends an input gradient from stage 0");
  bad = good;
  bad.orders[0].push_back({Kind::Tie, 0, 0, false, -5});
  refuses(bad, "event 4 of rank 0 has a negative size");
}

TEST(PeakMemory, VerifyRefusesWrongPeaks) {
  const MemoryProblem problem = oneStage();
  const std::vector<MemoryPeak> good = peaksOf(problem);
  auto refused = [&](const std::vector<MemoryPeak> &bad, const std::string &text) {
    sched::Violation v = verifyPeakMemory(problem, bad);
    ASSERT_TRUE(v.has_value()) << text;
    EXPECT_NE(v->find(text), std::string::npos) << *v;
  };
  refused({}, "0 peaks for 1 ranks");
  std::vector<MemoryPeak> bad = good;
  bad[0].peak += 1;
  refused(bad, "rank 0's parts add up to 1840 bytes, not its peak of 1841");
  bad = good;
  bad[0].event = 4;
  refused(bad, "rank 0's peak is at event 4 of 4");
  bad = good;
  bad[0].atPeak[static_cast<int>(MemoryKind::Parameters)] -= 100;
  bad[0].peak -= 100;
  refused(bad, "rank 0 holds 100 bytes of parameters at its peak, not 200");
  bad = good;
  bad[0].atPeak[static_cast<int>(MemoryKind::Activations)] = 0;
  bad[0].peak = 1800;
  refused(bad, "rank 0's peak of 1800 bytes is below the 1820 it holds after its largest forward");
  bad = good;
  bad[0].atPeak[static_cast<int>(MemoryKind::Working)] = -40;
  bad[0].peak -= 40;
  refused(bad, "rank 0 holds a negative amount of working activations");
  bad = good;
  bad[0].activationsInFlight = 3;
  refused(bad, "rank 0 has 3 micro-batches in flight at its peak");
}

} // namespace
