//===- ScriptedBackend.h - a backend that follows a script ------*- C++ -*-===//
//
// For the executor's tests: instructions built by hand, a one-rank plan of them, and a backend
// that completes compute at once (or like communication) and communication after a number of
// polls, recording the order of starts and completions.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_TESTS_UNIT_RUNTIME_EXEC_SCRIPTEDBACKEND_H
#define CONDUIT_TESTS_UNIT_RUNTIME_EXEC_SCRIPTEDBACKEND_H

#include "runtime/exec/Backend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace conduit::runtime::testing {

inline Instruction compute(int32_t stage, int32_t mb, bool forward = true) {
  Instruction i;
  i.op = forward ? Op::Forward : Op::Backward;
  i.stream = kComputeStream;
  i.stage = stage;
  i.microbatch = mb;
  return i;
}
inline Instruction event(Op op, int32_t id, uint8_t stream) {
  Instruction i;
  i.op = op;
  i.event = id;
  i.stream = stream;
  return i;
}
inline Instruction transfer(Op op, int32_t peer, int32_t batch = -1) {
  Instruction i;
  i.op = op;
  i.stream = kP2PStream;
  i.stage = 0;
  i.microbatch = 0;
  i.peer = peer;
  i.batch = batch;
  return i;
}

inline Plan planOf(std::vector<Instruction> program, int32_t events) {
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
  absl::StatusOr<StepOutcome> endStep(int64_t) override { return StepOutcome{1.5, {}}; }
  absl::StatusOr<std::vector<StageState>> snapshot() override { return std::vector<StageState>(); }
  absl::Status restore(const std::vector<StageState> &) override { return absl::OkStatus(); }
  absl::StatusOr<std::vector<std::vector<float>>> stageParameters() override {
    return std::vector<std::vector<float>>();
  }

private:
  Ticket next = 0;
};

inline size_t position(const std::vector<int64_t> &order, int64_t index) {
  return static_cast<size_t>(std::find(order.begin(), order.end(), index) - order.begin());
}

} // namespace conduit::runtime::testing

#endif // CONDUIT_TESTS_UNIT_RUNTIME_EXEC_SCRIPTEDBACKEND_H
