//===- Simulation.h - the simulator's state, shared by its two halves -*- C++ -*-===//
//
// The discrete-event run of a plan (Simulator.h says what it does) is one class in two files:
// Simulator.cpp moves the streams forward in time (events, transfers, collectives), and
// SimulatorChecks.cpp verifies the dataflow as it goes and, at the end, that the step is
// complete and free of deadlock. This internal header declares what both halves share; nothing
// outside analysis/Simulator*.cpp includes it.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_ANALYSIS_SIMULATION_H
#define CONDUIT_ANALYSIS_SIMULATION_H

#include "analysis/Simulator.h"
#include "runtime/plan/TensorCollectives.h"

#include <array>
#include <deque>
#include <string>
#include <utility>
#include <vector>

namespace conduit::simulation {

using runtime::Instruction;
using runtime::Op;

constexpr int kStreams = runtime::kMaxStreams;
/// Per stream of a rank, the last instruction known complete. Instruction indices fit 32 bits:
/// a plan file holds at most 2 GiB (FlatBuffers' limit), 64 bytes per instruction.
using Clock = std::array<int32_t, kStreams>;

inline Clock emptyClock() {
  Clock c;
  c.fill(-1);
  return c;
}

struct Stream {
  std::vector<int32_t> list; // instruction indices in order
  size_t next = 0;
  /// Positions [0, posted) of the list have been reached: a stream stopped at a transfer
  /// batch, a collective or a tie_grads posted it once and only waits when it comes back.
  size_t posted = 0;
  double time = 0;
  Clock known = emptyClock();
  bool queued = false;
  Op lastCompute = Op::Forward; ///< the compute a following tensor collective belongs to
  /// Expert parallelism: the last compute (and the one before it), the all-to-alls it issues
  /// and how many of them came so far.
  int64_t owner = -1, previousCompute = -1;
  std::vector<runtime::TensorCollective> allToAlls;
  size_t allToAllsSeen = 0;
};

/// Per-rank verification state.
struct Dataflow {
  // (stage, micro-batch) -> instruction index of its forward, of what computed its input
  // gradient (backward or backward_input), and of what completed its weight gradients
  // (backward or backward_weight), or -1.
  std::vector<std::vector<int64_t>> forward, backward, gradients;
  std::vector<int64_t> backwardsDone, gatheredBy, reducedBy, steppedBy, paramsGathered;
  /// Per stage, the micro-batches whose weight gradients its reductions so far covered, and
  /// its reductions in the rank's order.
  std::vector<int64_t> reducedMicrobatches;
  std::vector<std::vector<int64_t>> reductions;
  std::vector<int64_t> tiedBy; ///< tied embeddings: the tie_grads that summed the copies
  int64_t gatheredCount = 0;
  struct Slot {
    int32_t stage = -1, microbatch = -1;
    runtime::Transfer kind = runtime::Transfer::Activation;
    std::vector<std::pair<int64_t, int64_t>> pieces; // [begin, end) received
    std::vector<int64_t> receives;                   // their instruction indices
    int64_t consumedBy = -1;
  };
  std::vector<Slot> slots;
};

/// A send and its receive, or the two tie_grads of a pair of ranks: the first side's posted
/// time until the second comes, then when the exchange runs.
struct Exchange {
  double posted = -1, start = -1, end = -1;
  /// The two sides' instructions: sender and receiver, or the lower rank's and the higher's.
  std::array<int32_t, 2> instruction{-1, -1};
};

/// Which side of its exchange a send, receive or tie_grads of rank r is.
inline int sideOf(const Instruction &x, int32_t r) {
  return x.op == Op::TieGrads ? (r < x.peer ? 0 : 1) : (x.op == Op::Send ? 0 : 1);
}

struct Instance {
  int64_t arrived = 0;
  double latest = 0;
  double finish = -1;
  std::vector<std::pair<int32_t, int>> waiting; // (rank, stream)
};

class Simulation {
public:
  /// Per rank, the [start, end) of each compute in time order.
  using Busy = std::vector<std::vector<std::pair<double, double>>>;

  /// `busy`: where transfers wait for computes (PlanCosts::progressBetweenComputes), the
  /// computes of the previous pass; `computed` receives this pass's.
  Simulation(const runtime::Plan &plan, const PlanCosts &costs, SimulationOptions options,
             const Busy *busy = nullptr, Busy *computed = nullptr)
      : plan(plan), costs(costs), recording(options.times), busy(busy), computed(computed) {}

  /// Runs the plan once; the result moves out, so a Simulation runs only once.
  SimulationResult run() &&;

private:
  struct RankState {
    std::vector<Stream> streams;
    std::vector<double> fired; // per event, -1 until signalled
    /// Per event, what the signalling stream knew: `clockWidth` entries of its clock.
    std::vector<int32_t> eventKnown;
    int clockWidth = 0; ///< 1 + the highest stream the rank uses
    /// Per instruction: for a send, receive or tie_grads with a peer, its exchange; for a
    /// collective, its group instance; -1 for the rest.
    std::vector<int32_t> link;
    Dataflow flow;
  };

  int32_t ranks() const { return static_cast<int32_t>(plan.ranks.size()); }
  const Instruction &inst(int32_t r, int64_t i) const { return plan.ranks[r].instructions[i]; }

  /// Records when instruction i of rank r was reached (with SimulationOptions::times).
  void post(int32_t r, int64_t i, double time) {
    if (recording)
      result.times[r][i].posted = time;
  }

  /// The peer's side of the exchange of send, receive or tie_grads i, or -1.
  int64_t peerOf(int32_t r, int64_t i) const {
    const int32_t e = state[r].link[i];
    return e < 0 ? -1 : exchanges[e].instruction[1 - sideOf(inst(r, i), r)];
  }

  void fail(int32_t r, int64_t i, std::string message) {
    if (!result.error)
      result.error = SimulationError{r, i, std::move(message)};
  }

  void enqueue(int32_t r, int s);

  void setUp();

  bool knows(int32_t r, int s, int64_t i) const {
    return i >= 0 && state[r].streams[s].known[inst(r, i).stream] >= i;
  }

  void complete(int32_t r, int s, int64_t i, double start, double end);

  /// Runs stream s of rank r until it must wait.
  void advance(int32_t r, int s);

  /// The batch of transfers starting at the stream's current position: [first, last) in the
  /// stream's order.
  std::pair<size_t, size_t> batchAt(const Stream &stream, int32_t r) const;

  bool transfer(int32_t r, int s);

  /// Posts side i of an exchange; the second side to come prices it and wakes the first.
  void postExchange(int32_t r, int s, int64_t i);

  /// A tie_grads: in place, or once both ranks of the pair reached theirs.
  bool tie(int32_t r, int s, int64_t i);

  bool collective(int32_t r, int s, int64_t i);

  //===--------------------------------------------------------------------===//
  // Verification
  //===--------------------------------------------------------------------===//

  std::string at(int32_t r, int64_t i) const;

  /// The stage's parameters are gathered and this stream knows it (full sharding only).
  void checkParameters(int32_t r, int s, int64_t i, int32_t stage);

  /// The input of (stage, mb) in direction `kind` is complete and ordered before instruction i.
  void checkInput(int32_t r, int s, int64_t i, runtime::Transfer kind);

  void checkCompute(int32_t r, int s, int64_t i);

  /// A gradient of `stage` at instruction i comes after the reduction before it in the rank's
  /// order completed, and this stream knows it: that reduction reads the whole gradients.
  void checkGradientsFree(int32_t r, int s, int64_t i, int32_t stage);

  /// Both tied copies this rank sums have all their gradients, and this stream knows it.
  void checkTie(int32_t r, int s, int64_t i);

  /// A reduction or optimizer step of a tied stage comes after its copies were summed.
  void checkTied(int32_t r, int s, int64_t i, const char *what);

  void checkTransfer(int32_t r, int s, int64_t i);

  void receive(int32_t r, int64_t i);

  void checkCollective(int32_t r, int s, int64_t i);

  /// Expert parallelism: instruction i of stream s is no all-to-all; the last compute's must
  /// all have come (`end`: the stream ended, i is its last instruction). At a compute, takes
  /// its list.
  void checkAllToAllsDone(int32_t r, int s, int64_t i, bool end = false);
  /// All-to-all i is the next its compute issues and hides, if at all, behind the other half
  /// of a paired step.
  void checkAllToAll(int32_t r, int s, int64_t i);

  void completeCollective(int32_t r, int64_t i) {
    const Instruction &x = inst(r, i);
    if (x.op == Op::AllGather && plan.config.sharding == runtime::Sharding::Full)
      state[r].flow.gatheredBy[x.stage] = i;
  }

  //===--------------------------------------------------------------------===//
  // The end of the step
  //===--------------------------------------------------------------------===//

  std::string waitReason(int32_t r, int s) const;

  void finish();

  /// The end of the compute rank r runs at time t in the previous pass, or t.
  double afterCompute(int32_t r, double t) const;

  const runtime::Plan &plan;
  const PlanCosts &costs;
  const bool recording;
  const Busy *busy;
  Busy *computed;
  std::vector<RankState> state;
  std::vector<Exchange> exchanges;
  std::vector<Instance> instances;
  std::vector<int64_t> instanceMembers;
  std::deque<std::pair<int32_t, int>> work;
  /// What each compute issues (checkAllToAllsDone), per stage, pass and micro-batch size.
  runtime::TensorCollectiveCache issued{plan.config, plan.layers,
                                        plan.transformer ? &*plan.transformer : nullptr};
  SimulationResult result;
};

} // namespace conduit::simulation

#endif // CONDUIT_ANALYSIS_SIMULATION_H
