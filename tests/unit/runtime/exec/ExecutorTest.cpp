//===- ExecutorTest.cpp - the interpreter of instruction streams ----------===//
//
// The executor against a scripted backend: streams are ordered only by events, a batch is
// issued at once, a compute takes the tensor collectives after it, a stream never has two
// pieces of work in flight, a silent peer becomes an error that names it, backend errors come
// back as Status, and the instruction hook (fault injection) sees every instruction once per
// step and can end the step.
//
// Then plans on the CPU backend, every rank a thread meeting in a loopback hub
// (exec/PlanRuns.h): a mixture of experts trains as the reference does; a plan with split
// backwards is profiled and traced by half; I and W out of order are refused with a message,
// not a crash or a hang; gradients reduced after each run of backwards add up to one reduction
// per step. SplitBackwardPlanTest.cpp runs the split plans on each backend under test.
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/Executor.h"

#include "runtime/plan/PlanChecks.h"
#include "runtime/session/Profile.h"
#include "runtime/session/Reference.h"
#include "tests/unit/runtime/exec/PlanRuns.h"
#include "tests/unit/runtime/exec/ScriptedBackend.h"

#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <thread>

using namespace conduit;
using namespace conduit::runtime;
using namespace conduit::runtime::testing;

namespace {

TEST(Executor, StreamsAreOrderedOnlyByEvents) {
  // Stream 1: recv (0), signal e0 (1), send (6) after waiting e1 (5).
  // Stream 0: wait e0 (2), F (3), signal e1 (4), B (7).
  Plan plan = planOf({transfer(Op::Recv, 1), event(Op::Signal, 0, kP2PStream),
                      event(Op::Wait, 0, kComputeStream), compute(0, 0),
                      event(Op::Signal, 1, kComputeStream), event(Op::Wait, 1, kP2PStream),
                      transfer(Op::Send, 1), compute(0, 0, false)},
                     2);
  ScriptedBackend backend;
  backend.plan = &plan;
  ExecutorOptions options;
  options.record = true;
  Executor executor(plan, 0, 0, backend, options);
  absl::StatusOr<StepOutcome> outcome = executor.runStep(1);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->loss, 1.5);
  // The forward waits for the receive; the send waits for the forward; the backward does not
  // wait for the send (nothing orders them).
  EXPECT_LT(position(backend.completed, 0), position(backend.completed, 3));
  std::vector<int64_t> startOrder;
  for (const auto &s : backend.started)
    startOrder.push_back(s[0]);
  EXPECT_LT(position(startOrder, 3), position(startOrder, 6));
  // (Compute completes inside start() here, so the backward has run before the send ends.)
  EXPECT_LT(position(backend.completed, 7), position(backend.completed, 6));
  ASSERT_EQ(executor.events().size(), plan.ranks[0].instructions.size());
  for (const TraceEvent &e : executor.events()) {
    EXPECT_LE(e.time.posted, e.time.start);
    EXPECT_LE(e.time.start, e.time.end);
  }
}

// A transfer that waits for a compute is posted before the compute after it starts, whether
// compute runs inside start() or in the background: the peer must not wait for both.
class ComputeThenTransfer : public ::testing::TestWithParam<bool> {};

TEST_P(ComputeThenTransfer, TheTransferIsPostedBeforeTheNextCompute) {
  // Stream 0: F (0), signal e0 (1), F (2). Stream 1: wait e0 (3), send (4).
  Plan plan = planOf({compute(0, 0), event(Op::Signal, 0, kComputeStream), compute(0, 1),
                      event(Op::Wait, 0, kP2PStream), transfer(Op::Send, 1)},
                     1);
  ScriptedBackend backend;
  backend.plan = &plan;
  backend.computeInStart = GetParam();
  Executor executor(plan, 0, 0, backend, {});
  ASSERT_TRUE(executor.runStep(1).ok());
  std::vector<int64_t> startOrder;
  for (const auto &s : backend.started)
    startOrder.push_back(s[0]);
  EXPECT_EQ(startOrder, (std::vector<int64_t>{0, 4, 2}));
}

INSTANTIATE_TEST_SUITE_P(Executor, ComputeThenTransfer, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool> &info) {
                           return info.param ? "ComputeInStart" : "ComputeInBackground";
                         });

TEST(Executor, ABatchIsIssuedAtOnce) {
  Plan plan =
      planOf({transfer(Op::Send, 1, 7), transfer(Op::Recv, 1, 7), transfer(Op::Recv, 1)}, 0);
  ScriptedBackend backend;
  backend.plan = &plan;
  Executor executor(plan, 0, 0, backend, {});
  ASSERT_TRUE(executor.runStep(1).ok());
  ASSERT_EQ(backend.started.size(), 2u);
  EXPECT_EQ(backend.started[0], (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(backend.started[1], (std::vector<int64_t>{2}));
}

TEST(Executor, AComputeTakesTheTensorCollectivesThatFollowIt) {
  auto tensor = [](Op op) {
    Instruction i = compute(0, 0);
    i.op = op;
    return i;
  };
  Plan plan = planOf({compute(0, 0), tensor(Op::TensorAllReduce), tensor(Op::TensorAllGather),
                      compute(0, 0, false), tensor(Op::TensorReduceScatter)},
                     0);
  ScriptedBackend backend;
  backend.plan = &plan;
  Executor executor(plan, 0, 0, backend, {});
  ASSERT_TRUE(executor.runStep(1).ok());
  ASSERT_EQ(backend.started.size(), 2u);
  EXPECT_EQ(backend.started[0], (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(backend.started[1], (std::vector<int64_t>{3, 4}));
}

TEST(Executor, EveryStepRunsTheWholeProgram) {
  Plan plan = planOf({compute(0, 0), transfer(Op::Send, 1)}, 0);
  ScriptedBackend backend;
  backend.plan = &plan;
  Executor executor(plan, 0, 0, backend, {});
  for (int step = 1; step <= 3; ++step)
    ASSERT_TRUE(executor.runStep(step).ok());
  EXPECT_EQ(backend.completed.size(), 6u);
}

TEST(Executor, ASilentPeerIsNamed) {
  Plan plan = planOf({compute(0, 0), transfer(Op::Recv, 1)}, 0);
  ScriptedBackend backend;
  backend.plan = &plan;
  backend.neverComplete = true;
  ExecutorOptions options;
  options.peerTimeoutS = 0.2;
  Executor executor(plan, 0, 1, backend, options);
  absl::StatusOr<StepOutcome> outcome = executor.runStep(2);
  ASSERT_FALSE(outcome.ok());
  EXPECT_EQ(outcome.status().code(), absl::StatusCode::kDeadlineExceeded);
  const std::string message(outcome.status().message());
  // Pipeline rank 0, replica 1 is global rank 1 (data-inner); its peer, pipeline rank 1 of the
  // same replica, is global rank 3.
  EXPECT_NE(message.find("rank 1 (pipeline rank 0, replica 1) made no progress"), std::string::npos)
      << message;
  EXPECT_NE(message.find("at step 2"), std::string::npos) << message;
  EXPECT_NE(message.find("stream 1 waits at instruction 1 (recv activation"), std::string::npos)
      << message;
  EXPECT_NE(message.find("for rank 3 (pipeline rank 1)"), std::string::npos) << message;
}

TEST(Executor, BackendErrorsComeBackAsStatus) {
  Plan plan = planOf({compute(0, 0)}, 0);
  ScriptedBackend backend;
  backend.plan = &plan;
  backend.failure = "out of memory";
  Executor executor(plan, 0, 0, backend, {});
  absl::StatusOr<StepOutcome> outcome = executor.runStep(1);
  ASSERT_FALSE(outcome.ok());
  EXPECT_EQ(outcome.status().message(), "out of memory");
}

TEST(Executor, TheInstructionHookSeesEveryInstructionOncePerStep) {
  Plan plan = planOf({compute(0, 0), event(Op::Signal, 0, kComputeStream),
                      event(Op::Wait, 0, kP2PStream), transfer(Op::Send, 1)},
                     1);
  ScriptedBackend backend;
  backend.plan = &plan;
  std::vector<std::pair<int64_t, int64_t>> seen;
  ExecutorOptions options;
  options.onInstruction = [&](int64_t step, int64_t index) {
    seen.push_back({step, index});
    return absl::OkStatus();
  };
  Executor executor(plan, 0, 0, backend, options);
  ASSERT_TRUE(executor.runStep(1).ok());
  ASSERT_TRUE(executor.runStep(2).ok());
  std::sort(seen.begin(), seen.end());
  const std::vector<std::pair<int64_t, int64_t>> expected = {{1, 0}, {1, 1}, {1, 2}, {1, 3},
                                                             {2, 0}, {2, 1}, {2, 2}, {2, 3}};
  EXPECT_EQ(seen, expected);
}

TEST(Executor, AnInstructionHookErrorEndsTheStepBeforeThatInstruction) {
  Plan plan = planOf({compute(0, 0), compute(0, 1), compute(0, 2)}, 0);
  ScriptedBackend backend;
  backend.plan = &plan;
  ExecutorOptions options;
  options.onInstruction = [](int64_t step, int64_t index) {
    return step == 2 && index == 1 ? absl::AbortedError("injected failure") : absl::OkStatus();
  };
  Executor executor(plan, 0, 0, backend, options);
  ASSERT_TRUE(executor.runStep(1).ok());
  backend.completed.clear();
  absl::StatusOr<StepOutcome> outcome = executor.runStep(2);
  ASSERT_FALSE(outcome.ok());
  EXPECT_EQ(outcome.status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(outcome.status().message(), "injected failure");
  EXPECT_EQ(backend.completed, std::vector<int64_t>({0})); // instruction 1 never started
}

// A mixture of experts trains on the CPU backend, whole or split backward, with the reference's
// bits: its losses (the cross-entropy), its auxiliary loss and its parameters.
TEST(MixtureOfExpertsOnTheCpu, TrainsAsTheReferenceDoes) {
  const BackendKind cpu = cpuBackend();
  for (bool split : {false, true}) {
    SCOPED_TRACE(split ? "split backward" : "whole backward");
    const Plan plan = moePlan(split);
    ASSERT_TRUE(checkPlanSemantics(plan).ok()) << checkPlanSemantics(plan);
    ASSERT_GT(plan.layers[2].params, plan.layers[1].params) << "the second block has experts";
    std::vector<RankRun> got = train(cpu, plan, 1, 3);
    absl::StatusOr<Reference> reference = Reference::create(plan);
    ASSERT_TRUE(reference.ok()) << reference.status();
    std::vector<double> losses, auxLosses, zLosses;
    for (int64_t step = 1; step <= 3; ++step) {
      const StepOutcome outcome = reference->step(step);
      losses.push_back(outcome.loss);
      auxLosses.push_back(outcome.auxLoss.value_or(0));
      zLosses.push_back(outcome.zLoss.value_or(0));
    }
    for (size_t r = 0; r < got.size(); ++r) {
      SCOPED_TRACE("rank " + std::to_string(r));
      ASSERT_TRUE(got[r].status.ok()) << got[r].status;
      EXPECT_EQ(got[r].losses, losses);
      ASSERT_EQ(got[r].auxLosses.size(), 3u);
      ASSERT_EQ(got[r].zLosses.size(), 3u);
      for (size_t k = 0; k < 3; ++k) {
        ASSERT_TRUE(got[r].auxLosses[k].has_value());
        EXPECT_EQ(*got[r].auxLosses[k], auxLosses[k]);
        EXPECT_GT(auxLosses[k], 0);
        ASSERT_TRUE(got[r].zLosses[k].has_value());
        EXPECT_EQ(*got[r].zLosses[k], zLosses[k]);
        EXPECT_GT(zLosses[k], 0);
      }
      const Stage &stage = plan.stages[r];
      int64_t at = 0;
      for (int32_t l = 0; l < stage.firstLayer; ++l)
        at += plan.layers[l].params;
      const std::vector<float> &mine = got[r].params[0];
      EXPECT_EQ(mine, std::vector<float>(reference->parameters().begin() + at,
                                         reference->parameters().begin() + at + stage.params));
    }
    EXPECT_LT(losses.back(), losses.front()) << "the model trains";
  }
}

// A dense plan's steps have no auxiliary loss.
TEST(MixtureOfExpertsOnTheCpu, DenseStepsHaveNoAuxiliaryLoss) {
  std::vector<RankRun> got = train(cpuBackend(), pipelinePlan(false), 1, 1);
  ASSERT_TRUE(got[0].status.ok()) << got[0].status;
  EXPECT_FALSE(got[0].auxLosses[0].has_value());
  EXPECT_FALSE(got[0].zLosses[0].has_value());
}

// On every backend a mixture of experts trains with split backwards (the experts' input and
// weight gradients apart) as with whole ones, bit for bit. On CUDA this is the suite's test of
// the expert layers inside a plan (tests/gpu/run.sh runs it).

// --profile times I and W per layer apart (and the profile says so), a whole backward as
// before; the trace names the halves.
TEST(SplitBackwardPlanOnTheCpu, IsProfiledAndTracedByHalf) {
  const BackendKind cpu = cpuBackend();
  auto profileOf = [&](const Plan &plan, std::vector<RankRun> &runs) {
    runs = train(cpu, plan, 1, 1, nullptr, /*measure=*/true);
    std::vector<LayerTiming> timings;
    for (const RankRun &run : runs) {
      EXPECT_TRUE(run.status.ok()) << run.status;
      timings.insert(timings.end(), run.timings.begin(), run.timings.end());
    }
    std::ostringstream os;
    EXPECT_TRUE(writeProfile(plan, "cpu", timings, {}, os).ok());
    return os.str();
  };
  auto count = [](const std::string &text, const std::string &what) {
    int64_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
      ++n;
    return n;
  };
  std::vector<RankRun> runs;
  const Plan split = pipelinePlan(true);
  const std::string profile = profileOf(split, runs);
  for (const char *key :
       {"\"backward_s\": [", "\"backward_input_s\": [", "\"backward_weight_s\": ["})
    EXPECT_EQ(count(profile, key), 4) << key << " in\n" << profile;
  // Each instruction kind's time beyond its layers' is there beside them.
  EXPECT_NE(profile.find("\"instruction_overhead_s\": {\"forward\": "), std::string::npos);
  EXPECT_NE(profile.find(", \"backward_input\": "), std::string::npos) << profile;
  EXPECT_NE(profile.find(", \"backward_weight\": "), std::string::npos) << profile;
  for (const RankRun &run : runs)
    for (const LayerTiming &t : run.timings) {
      if (t.layer == kOptimizerTiming || t.layer == kOverheadTiming)
        continue;
      EXPECT_EQ(t.backwardCount, 0);
      EXPECT_EQ(t.inputCount, 3);
      EXPECT_EQ(t.weightCount, 3);
    }

  std::vector<std::vector<TraceEvent>> events;
  for (const RankRun &run : runs)
    events.push_back(run.events);
  std::ostringstream trace;
  writeChromeTrace(split, events, "split", 1, trace);
  EXPECT_NE(trace.str().find("\"name\":\"I s0 mb2\",\"cat\":\"backward-input\""),
            std::string::npos);
  EXPECT_NE(trace.str().find("\"name\":\"W s1 mb0\",\"cat\":\"backward-weight\""),
            std::string::npos);

  const std::string whole = profileOf(pipelinePlan(false), runs);
  EXPECT_EQ(count(whole, "\"backward_s\": ["), 4);
  EXPECT_EQ(count(whole, "backward_input_s"), 0) << whole;
}

/// One rank running the whole model, two micro-batches: `program` on stage 0.
Plan oneRankPlan(std::vector<Instruction> program) {
  Plan plan = tinyPlan({{0, 4}}, 2);
  plan.ranks[0].instructions = std::move(program);
  return plan;
}

// A W without its I, an I without its forward, a second I or W, whole and split backwards of
// one micro-batch mixed, an I whose W never comes: the plan check refuses them (all but the
// optimizer step before a W, which it does not order), and so does a backend given such a
// plan in memory, before any harm: a message, not a crash or a hang.
TEST(SplitBackwardPlanOnTheCpu, ComputeOutOfOrderIsRefused) {
  const Instruction F = onStage(Op::Forward, 0, 0), B = onStage(Op::Backward, 0, 0),
                    I = onStage(Op::BackwardInput, 0, 0), W = onStage(Op::BackwardWeight, 0, 0),
                    step = onStage(Op::OptimizerStep, 0);
  struct Case {
    std::vector<Instruction> program;
    std::string message;
    bool checked = true; ///< refused by checkPlanSemantics too
  };
  const Case cases[] = {
      {{F, W}, "W s0 mb0: no backward_input of this micro-batch comes before it"},
      {{I, W}, "I s0 mb0: no forward of this micro-batch comes before it"},
      {{F, I, I, W}, "I s0 mb0: a backward_input of this micro-batch comes before it"},
      {{F, I, W, W}, "W s0 mb0: a backward_weight of this micro-batch comes before it"},
      {{F, I, B, W}, "B s0 mb0: an earlier backward_input splits this micro-batch's backward"},
      {{F, B, W}, "W s0 mb0: a whole backward of this micro-batch comes before it"},
      {{F, I}, "stage 0 micro-batch 0 ran its backward_input but not its backward_weight"},
      {{F, I, step, W},
       "optimizer_step s0: micro-batch 0 ran its backward_input but not yet its "
       "backward_weight",
       false},
  };
  const BackendKind cpu = cpuBackend();
  for (const Case &c : cases) {
    const Plan plan = oneRankPlan(c.program);
    SCOPED_TRACE(c.message);
    EXPECT_EQ(checkPlanSemantics(plan).ok(), !c.checked) << checkPlanSemantics(plan);
    std::vector<RankRun> runs = train(cpu, plan, 1, 1);
    ASSERT_FALSE(runs[0].status.ok());
    EXPECT_EQ(runs[0].status.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(runs[0].status.message().find(c.message), std::string::npos) << runs[0].status;
  }
}

// gradient_reduction "run": a reduce-scatter after each backward, added into the shard,
// trains the model one reduction at the end trains; a backward after the last reduction is
// refused at the optimizer step instead of being dropped.
TEST(GradientReductionOnTheCpu, EachRunsReductionAddsUpToOnePerStep) {
  Instruction reduce = onStage(Op::ReduceScatter, 0);
  reduce.group = 0;
  const Instruction F0 = onStage(Op::Forward, 0, 0), B0 = onStage(Op::Backward, 0, 0),
                    F1 = onStage(Op::Forward, 0, 1), B1 = onStage(Op::Backward, 0, 1),
                    step = onStage(Op::OptimizerStep, 0);
  auto replicated = [](std::vector<Instruction> program, GradientReduction reduction) {
    Plan plan = oneRankPlan(std::move(program));
    plan.config.data = 2;
    plan.config.sharding = Sharding::Gradients;
    plan.config.gradientReduction = reduction;
    return plan;
  };
  const BackendKind cpu = cpuBackend();
  std::vector<RankRun> once =
      train(cpu, replicated({F0, B0, F1, B1, reduce, step}, GradientReduction::Step), 1, 2);
  std::vector<RankRun> eachRun =
      train(cpu, replicated({F0, B0, reduce, F1, B1, reduce, step}, GradientReduction::Run), 1, 2);
  for (size_t r = 0; r < 2; ++r) {
    ASSERT_TRUE(once[r].status.ok()) << once[r].status;
    ASSERT_TRUE(eachRun[r].status.ok()) << eachRun[r].status;
    EXPECT_EQ(eachRun[r].losses, once[r].losses);
    ASSERT_EQ(eachRun[r].params.size(), once[r].params.size());
    for (size_t s = 0; s < once[r].params.size(); ++s)
      for (size_t k = 0; k < once[r].params[s].size(); ++k)
        ASSERT_NEAR(eachRun[r].params[s][k], once[r].params[s][k], 1e-6) << "parameter " << k;
  }
  std::vector<RankRun> lost =
      train(cpu, replicated({F0, B0, reduce, F1, B1, step}, GradientReduction::Run), 1, 1);
  // Both replicas refuse it; whichever does first stops the other (ABORTED).
  ASSERT_FALSE(lost[0].status.ok() || lost[1].status.ok());
  const RankRun &first =
      lost[0].status.code() == absl::StatusCode::kFailedPrecondition ? lost[0] : lost[1];
  EXPECT_EQ(first.status.code(), absl::StatusCode::kFailedPrecondition) << first.status;
  EXPECT_NE(first.status.message().find(
                "optimizer_step s0: the stage has gradients that no reduction covered"),
            std::string::npos)
      << first.status;
}

} // namespace
