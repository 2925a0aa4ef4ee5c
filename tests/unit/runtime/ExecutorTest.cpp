//===- ExecutorTest.cpp - the interpreter of instruction streams ----------===//
//
// The executor against a scripted backend: streams are ordered only by events, a batch is
// issued at once, a stream never has two pieces of work in flight, a silent peer becomes an
// error that names it, backend errors come back as Status, and the instruction hook (fault
// injection) sees every instruction once per step and can end the step.
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/Executor.h"

#include <gtest/gtest.h>

#include <map>

using namespace conduit::runtime;

namespace {

Instruction compute(int32_t stage, int32_t mb, bool forward = true) {
  Instruction i;
  i.op = forward ? Op::Forward : Op::Backward;
  i.stream = kComputeStream;
  i.stage = stage;
  i.microbatch = mb;
  return i;
}
Instruction event(Op op, int32_t id, uint8_t stream) {
  Instruction i;
  i.op = op;
  i.event = id;
  i.stream = stream;
  return i;
}
Instruction transfer(Op op, int32_t peer, int32_t batch = -1) {
  Instruction i;
  i.op = op;
  i.stream = kP2PStream;
  i.stage = 0;
  i.microbatch = 0;
  i.peer = peer;
  i.batch = batch;
  return i;
}

Plan planOf(std::vector<Instruction> program, int32_t events) {
  Plan plan;
  plan.config.pipeline = 2;
  plan.config.data = 2;
  RankProgram rank;
  rank.events = events;
  rank.instructions = std::move(program);
  plan.ranks.push_back(rank);
  plan.ranks.push_back(RankProgram{1, 0, {}, {}});
  return plan;
}

/// Completes compute at once (or, without `computeInStart`, like communication) and
/// communication after `pollsToComplete` polls; records the order of starts and completions.
class ScriptedBackend : public Backend {
public:
  const Plan *plan = nullptr;
  int pollsToComplete = 2;
  bool computeInStart = true;
  bool neverComplete = false;
  std::vector<std::vector<int64_t>> started;
  std::vector<int64_t> completed;
  std::map<Ticket, std::pair<std::vector<int64_t>, int>> inFlight;
  std::map<int, int> busyStreams;
  std::string failure;

  std::string name() const override { return "scripted"; }
  absl::Status validate(const Plan &) override { return absl::OkStatus(); }
  absl::Status initialise(const Plan &) override { return absl::OkStatus(); }
  absl::Status beginStep(int64_t) override { return absl::OkStatus(); }
  absl::StatusOr<Ticket> start(const std::vector<int64_t> &indices) override {
    started.push_back(indices);
    const Instruction &first = plan->ranks[0].instructions[indices[0]];
    if (!failure.empty())
      return absl::InternalError(failure);
    if (first.isCompute() && computeInStart) {
      completed.insert(completed.end(), indices.begin(), indices.end());
      return kCompleted;
    }
    EXPECT_EQ(busyStreams[first.stream]++, 0) << "two pieces of work in flight on a stream";
    inFlight[next] = {indices, 0};
    return next++;
  }
  absl::StatusOr<bool> poll(Ticket ticket) override {
    auto &[indices, polls] = inFlight.at(ticket);
    if (neverComplete || ++polls < pollsToComplete)
      return false;
    --busyStreams[plan->ranks[0].instructions[indices[0]].stream];
    completed.insert(completed.end(), indices.begin(), indices.end());
    inFlight.erase(ticket);
    return true;
  }
  absl::StatusOr<StepOutcome> endStep(int64_t) override { return StepOutcome{1.5}; }
  absl::StatusOr<std::vector<StageState>> snapshot() override { return std::vector<StageState>(); }
  absl::Status restore(const std::vector<StageState> &) override { return absl::OkStatus(); }
  absl::StatusOr<std::vector<std::vector<float>>> stageParameters() override {
    return std::vector<std::vector<float>>();
  }

private:
  Ticket next = 0;
};

size_t position(const std::vector<int64_t> &order, int64_t index) {
  return static_cast<size_t>(std::find(order.begin(), order.end(), index) - order.begin());
}

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

} // namespace
