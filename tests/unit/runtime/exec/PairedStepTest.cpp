//===- PairedStepTest.cpp - the executor and the halves of a paired step ---===//
//
// Where the backend overlaps pairs and the plan hides a paired forward's all-to-alls behind
// the compute after it, the executor starts that partner while the forward is in flight,
// once the partner's input has arrived, and still fires the forward's signals only when it
// ends; without an all-to-all to hide, or on a backend that does not overlap, the halves run
// in turn.
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/Executor.h"

#include "tests/unit/runtime/exec/ScriptedBackend.h"

#include <gtest/gtest.h>

#include <set>

using namespace conduit::runtime;
using namespace conduit::runtime::testing;

namespace {

/// Parks both halves of a paired step (Backend::startPaired) until polled `halfPolls` times;
/// everything else as ScriptedBackend.
class PairingBackend : public ScriptedBackend {
public:
  bool overlaps = true;
  int halfPolls = 8;
  std::set<Ticket> halves;

  bool overlapsPairs() const override { return overlaps; }
  absl::StatusOr<Ticket> startPaired(const std::vector<int64_t> &indices) override {
    started.push_back(indices);
    halves.insert(nextHalf);
    parked[nextHalf] = {indices, 0};
    return nextHalf++;
  }
  absl::StatusOr<bool> poll(Ticket ticket) override {
    if (!halves.count(ticket))
      return ScriptedBackend::poll(ticket);
    auto &[indices, polls] = parked.at(ticket);
    if (++polls < halfPolls)
      return false;
    completed.insert(completed.end(), indices.begin(), indices.end());
    return true;
  }

private:
  Ticket nextHalf = 1000;
  std::map<Ticket, std::pair<std::vector<int64_t>, int>> parked;
};

/// Stream 0: a paired forward (0) whose all-to-all (1) hides behind its partner, signal e0
/// (2), wait e1 (3), the partner (4) and its all-to-all (5). Stream 1: receive (6), signal e1
/// (7), wait e0 (8), send (9).
Plan pairedPlan(bool hides) {
  Instruction forward = compute(0, 1), dispatch = compute(0, 1), partner = compute(1, 0, false),
              combine = compute(1, 0);
  forward.flags = Instruction::kPaired;
  dispatch.op = Op::ExpertDispatch;
  combine.op = Op::ExpertCombine;
  if (hides) {
    dispatch.peerStage = 1;
    dispatch.peerMicrobatch = 0;
    combine.peerStage = 0;
    combine.peerMicrobatch = 1;
  }
  return planOf({forward, dispatch, event(Op::Signal, 0, kComputeStream),
                 event(Op::Wait, 1, kComputeStream), partner, combine, transfer(Op::Recv, 1),
                 event(Op::Signal, 1, kP2PStream), event(Op::Wait, 0, kP2PStream),
                 transfer(Op::Send, 1)},
                2);
}

// Where the backend overlaps pairs and the plan hides the forward's all-to-all, the partner
// starts while the forward is in flight, once its input has arrived; the forward's signal
// (and the send behind it) waits for the forward's end.
TEST(Executor, APairedForwardsPartnerStartsWhileItIsInFlight) {
  Plan plan = pairedPlan(true);
  PairingBackend backend;
  backend.plan = &plan;
  ExecutorOptions options;
  options.record = true;
  Executor executor(plan, 0, 0, backend, options);
  ASSERT_TRUE(executor.runStep(1).ok());
  std::vector<int64_t> startOrder;
  for (const auto &s : backend.started)
    startOrder.push_back(s[0]);
  EXPECT_EQ(backend.started[position(startOrder, 0)], (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(backend.started[position(startOrder, 4)], (std::vector<int64_t>{4, 5}));
  ASSERT_EQ(std::count(startOrder.begin(), startOrder.end(), 4), 1) << "the partner runs once";
  const std::vector<TraceEvent> &events = executor.events();
  auto at = [&](int64_t i) { return events[i].time; };
  EXPECT_LT(at(4).start, at(0).end) << "the partner starts before the forward ends";
  EXPECT_LE(at(6).end, at(4).start) << "but after its input arrived";
  EXPECT_LE(at(0).end, at(2).start) << "the forward's signal fires when it ends";
  EXPECT_LE(at(0).end, at(9).start) << "and the send behind it waits for that";
  EXPECT_EQ(executor.pairedSteps().hiding, 1);
  EXPECT_EQ(executor.pairedSteps().together, 1);
  for (const TraceEvent &e : events)
    EXPECT_LE(e.time.start, e.time.end);
}

// Without an all-to-all to hide (a plan compiled with --overlap-all-to-alls=false), or on a
// backend that does not overlap pairs, the halves run one after the other.
TEST(Executor, PairedHalvesRunInTurnWhenNothingHides) {
  for (bool hides : {false, true}) {
    Plan plan = pairedPlan(hides);
    PairingBackend backend;
    backend.plan = &plan;
    backend.overlaps = hides ? false : true;
    Executor executor(plan, 0, 0, backend, {});
    ASSERT_TRUE(executor.runStep(1).ok());
    EXPECT_TRUE(backend.halves.empty());
    EXPECT_EQ(executor.pairedSteps().hiding, hides ? 1 : 0) << "the plan's pairs are counted";
    EXPECT_EQ(executor.pairedSteps().together, 0);
    std::vector<int64_t> startOrder;
    for (const auto &s : backend.started)
      startOrder.push_back(s[0]);
    EXPECT_LT(position(backend.completed, 0), position(startOrder, 4));
  }
}

} // namespace
