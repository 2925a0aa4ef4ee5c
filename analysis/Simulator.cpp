//===- Simulator.cpp - discrete-event execution of a plan -----------------===//
//
// A worklist of streams: a stream runs until it must wait (for an event, a peer or a group),
// registers where it waits, and is queued again when that resolves. Every instruction's times
// depend only on its own dependencies, so the order in which streams are processed does not
// change the result: the simulation is deterministic.
//
// Verification tracks, per stream, the last position of every stream of the same rank that it
// knows to be complete (a vector clock advanced by stream order and by waits on events). A
// compute that uses a receive must know the receive complete; timing alone never counts.
//
//===----------------------------------------------------------------------===//

#include "analysis/Simulator.h"
#include "runtime/plan/TensorCollectives.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <array>
#include <deque>
#include <map>
#include <sstream>

using namespace conduit;
using runtime::Instruction;
using runtime::Op;

//===----------------------------------------------------------------------===//
// Costs
//===----------------------------------------------------------------------===//

namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

Collective collectiveOf(Op op) {
  switch (op) {
  case Op::AllGather:
  case Op::TensorAllGather:
    return Collective::AllGather;
  case Op::ReduceScatter:
  case Op::TensorReduceScatter:
    return Collective::ReduceScatter;
  default:
    return Collective::AllReduce;
  }
}

} // namespace

PlanCosts PlanCosts::fromCostModel(const runtime::Plan &plan, const CostModel &cost) {
  PlanCosts costs;
  costs.cost = &cost;
  const runtime::Config &c = plan.config;
  for (const runtime::Stage &stage : plan.stages) {
    std::vector<double> &f = costs.forward.emplace_back(), &b = costs.backward.emplace_back(),
                        &in = costs.input.emplace_back(), &w = costs.weight.emplace_back();
    const int64_t first = stage.firstLayer, end = stage.endLayer;
    for (int64_t m = 0; m < stage.numMicrobatches(); ++m) {
      int64_t samples = stage.samples[m + 1] - stage.samples[m];
      f.push_back(cost.stageForwardTime(first, end, samples));
      b.push_back(cost.stageBackwardTime(first, end, samples));
      in.push_back(cost.stageInputGradientTime(first, end, samples));
      w.push_back(cost.stageWeightGradientTime(first, end, samples));
    }
    bool sharded = c.data > 1 && c.sharding != runtime::Sharding::None;
    int64_t params = sharded ? ceilDiv(stage.params, c.data) : stage.params;
    costs.optimizer.push_back(
        cost.optimizerStepTime(c.optimizer == runtime::Optimizer::Adam, params));
  }
  if (c.tensor > 1 && c.sequenceParallel)
    for (const runtime::Stage &stage : plan.stages) {
      auto &fractions = costs.exposed.emplace_back();
      for (int64_t m = 0; m < stage.numMicrobatches(); ++m) {
        const int64_t samples = stage.samples[m + 1] - stage.samples[m];
        std::array<double, 4> &f = fractions.emplace_back();
        const Op passes[] = {Op::Forward, Op::Backward, Op::BackwardInput, Op::BackwardWeight};
        const double compute[] = {costs.forward[stage.index][m], costs.backward[stage.index][m],
                                  costs.input[stage.index][m], costs.weight[stage.index][m]};
        for (int p = 0; p < 4; ++p) {
          double comm = 0;
          for (const runtime::TensorCollective &x : runtime::tensorCollectives(
                   c, plan.layers, stage.firstLayer, stage.endLayer, passes[p], samples))
            comm += cost.tensorCollectiveTime(collectiveOf(x.op), x.bytes);
          f[p] = comm > 0 ? std::max(0.0, comm - compute[p]) / comm : 0;
        }
      }
    }
  for (const runtime::Group &group : plan.groups) {
    Link link = Link::IntraNode;
    for (int32_t r : group.ranks)
      if (cost.dataParallelLink(r) == Link::InterNode)
        link = Link::InterNode;
    for (size_t i = 1; i < group.ranks.size(); ++i)
      if (cost.pipelineLink(group.ranks[0], group.ranks[i]) == Link::InterNode)
        link = Link::InterNode;
    costs.dpLink.push_back(link);
    costs.groupMembers.push_back(static_cast<int64_t>(group.ranks.size()) * c.data);
  }
  costs.p2pLink.assign(c.pipeline, std::vector<Link>(c.pipeline, Link::IntraNode));
  for (int32_t a = 0; a < c.pipeline; ++a)
    for (int32_t b = 0; b < c.pipeline; ++b)
      costs.p2pLink[a][b] = cost.pipelineLink(a, b);
  return costs;
}

PlanCosts PlanCosts::unit(const runtime::Plan &plan) {
  PlanCosts costs;
  for (const runtime::Stage &stage : plan.stages) {
    std::vector<double> &f = costs.forward.emplace_back(), &b = costs.backward.emplace_back(),
                        &in = costs.input.emplace_back(), &w = costs.weight.emplace_back();
    for (int64_t m = 0; m < stage.numMicrobatches(); ++m) {
      double samples = static_cast<double>(stage.samples[m + 1] - stage.samples[m]);
      f.push_back(samples);
      b.push_back(2 * samples);
      in.push_back(samples);
      w.push_back(samples);
    }
    costs.optimizer.push_back(0);
  }
  return costs;
}

double PlanCosts::of(const runtime::Plan &plan, int32_t rank, const Instruction &inst) const {
  switch (inst.op) {
  case Op::Forward:
    return forward[inst.stage][inst.microbatch];
  case Op::Backward:
    return backward[inst.stage][inst.microbatch];
  case Op::BackwardInput:
    return input[inst.stage][inst.microbatch];
  case Op::BackwardWeight:
    return weight[inst.stage][inst.microbatch];
  case Op::OptimizerStep:
    return optimizer[inst.stage];
  case Op::Send:
  case Op::Recv:
    return cost ? cost->transferTime(inst.bytes, p2pLink[rank][inst.peer]) : 0;
  case Op::TieGrads: // both directions at once; an in-place sum is free next to compute
    return cost && inst.peer != rank ? cost->transferTime(inst.bytes, p2pLink[rank][inst.peer]) : 0;
  case Op::AllGather:
  case Op::ReduceScatter:
  case Op::AllReduce: {
    if (!cost)
      return 0;
    return cost->collectiveTime(collectiveOf(inst.op), inst.bytes, groupMembers[inst.group],
                                dpLink[inst.group]);
  }
  default:
    return 0;
  }
}

double PlanCosts::tensorCollective(const Instruction &inst, Op pass) const {
  if (!cost)
    return 0;
  const double whole = cost->tensorCollectiveTime(collectiveOf(inst.op), inst.bytes);
  if (exposed.empty())
    return whole;
  const int p = pass == Op::Forward         ? 0
                : pass == Op::Backward      ? 1
                : pass == Op::BackwardInput ? 2
                                            : 3;
  return whole * exposed[inst.stage][inst.microbatch][p];
}

//===----------------------------------------------------------------------===//
// Simulation
//===----------------------------------------------------------------------===//

namespace {

constexpr int kStreams = runtime::kMaxStreams;
using Clock = std::array<int64_t, kStreams>;

Clock emptyClock() {
  Clock c;
  c.fill(-1);
  return c;
}

struct Stream {
  std::vector<int64_t> list; // instruction indices in order
  size_t next = 0;
  double time = 0;
  Clock known = emptyClock();
  bool queued = false;
  Op lastCompute = Op::Forward; ///< the compute a following tensor collective belongs to
};

/// Per-rank verification state.
struct Dataflow {
  // (stage, micro-batch) -> instruction index of its forward, of what computed its input
  // gradient (backward or backward_input), and of what completed its weight gradients
  // (backward or backward_weight), or -1.
  std::vector<std::vector<int64_t>> forward, backward, gradients;
  std::vector<int64_t> backwardsDone, gatheredBy, reducedBy, steppedBy, paramsGathered;
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

struct Instance {
  int64_t arrived = 0;
  double latest = 0;
  double finish = -1;
  std::vector<std::pair<int32_t, int>> waiting; // (rank, stream)
};

class Simulation {
public:
  Simulation(const runtime::Plan &plan, const PlanCosts &costs) : plan(plan), costs(costs) {}

  SimulationResult run() {
    setUp();
    if (result.error)
      return result;
    for (int32_t r = 0; r < ranks(); ++r)
      for (int s = 0; s < kStreams; ++s)
        if (!state[r].streams[s].list.empty())
          enqueue(r, s);
    while (!work.empty() && !result.error) {
      auto [r, s] = work.front();
      work.pop_front();
      state[r].streams[s].queued = false;
      advance(r, s);
    }
    if (!result.error)
      finish();
    return result;
  }

private:
  struct RankState {
    std::vector<Stream> streams;
    std::vector<double> fired;     // per event, -1 until signalled
    std::vector<Clock> eventKnown; // what the signalling stream knew
    std::vector<std::vector<int>> waiters;
    std::vector<double> posted, done; // per instruction (transfers)
    std::vector<int64_t> instance;    // per collective instruction: its group instance
    Dataflow flow;
  };

  int32_t ranks() const { return static_cast<int32_t>(plan.ranks.size()); }
  const Instruction &inst(int32_t r, int64_t i) const { return plan.ranks[r].instructions[i]; }

  void fail(int32_t r, int64_t i, std::string message) {
    if (!result.error)
      result.error = SimulationError{r, i, std::move(message)};
  }

  void enqueue(int32_t r, int s) {
    Stream &stream = state[r].streams[s];
    if (!stream.queued) {
      stream.queued = true;
      work.push_back({r, s});
    }
  }

  void setUp() {
    const int32_t P = ranks();
    state.resize(P);
    result.times.resize(P);
    result.matched.resize(P);
    // Transfers match per (sender, receiver) pair in program order.
    std::map<std::pair<int32_t, int32_t>, std::vector<int64_t>> sends, recvs, ties;
    // Collectives: the k-th collective of a group on every member is instance (group, k).
    std::vector<std::map<int32_t, std::vector<int64_t>>> byGroup(plan.groups.size());
    for (int32_t r = 0; r < P; ++r) {
      const runtime::RankProgram &program = plan.ranks[r];
      RankState &rs = state[r];
      const size_t n = program.instructions.size();
      rs.streams.resize(kStreams);
      rs.fired.assign(program.events, -1);
      rs.eventKnown.assign(program.events, emptyClock());
      rs.waiters.assign(program.events, {});
      rs.posted.assign(n, -1);
      rs.done.assign(n, -1);
      rs.instance.assign(n, -1);
      result.times[r].assign(n, {});
      result.matched[r].assign(n, -1);
      for (size_t i = 0; i < n; ++i) {
        const Instruction &x = program.instructions[i];
        rs.streams[x.stream].list.push_back(static_cast<int64_t>(i));
        if (x.op == Op::Send)
          sends[{r, x.peer}].push_back(static_cast<int64_t>(i));
        else if (x.op == Op::Recv)
          recvs[{x.peer, r}].push_back(static_cast<int64_t>(i));
        else if (x.op == Op::TieGrads && x.peer != r)
          ties[{r, x.peer}].push_back(static_cast<int64_t>(i));
        else if (x.isCollective())
          byGroup[x.group][r].push_back(static_cast<int64_t>(i));
      }
      Dataflow &flow = rs.flow;
      const size_t S = plan.stages.size();
      flow.forward.resize(S);
      flow.backward.resize(S);
      flow.gradients.resize(S);
      for (size_t s = 0; s < S; ++s)
        if (plan.stages[s].rank == r) {
          flow.forward[s].assign(plan.stages[s].numMicrobatches(), -1);
          flow.backward[s].assign(plan.stages[s].numMicrobatches(), -1);
          flow.gradients[s].assign(plan.stages[s].numMicrobatches(), -1);
        }
      flow.backwardsDone.assign(S, 0);
      flow.gatheredBy.assign(S, -1);
      flow.reducedBy.assign(S, -1);
      flow.steppedBy.assign(S, -1);
      flow.paramsGathered.assign(S, -1);
      flow.tiedBy.assign(S, -1);
      flow.slots.resize(program.slots.size());
    }
    for (auto &[pair, list] : sends) {
      const std::vector<int64_t> &other = recvs[pair];
      for (size_t k = 0; k < list.size() && k < other.size(); ++k) {
        result.matched[pair.first][list[k]] = other[k];
        result.matched[pair.second][other[k]] = list[k];
      }
    }
    // The k-th exchange of tied gradients of a pair of ranks meets the k-th on the other side.
    for (auto &[pair, list] : ties) {
      const std::vector<int64_t> &other = ties[{pair.second, pair.first}];
      for (size_t k = 0; k < list.size() && k < other.size(); ++k)
        result.matched[pair.first][list[k]] = other[k];
    }
    // Every member issues the same collectives on a group, in the same order.
    for (size_t g = 0; g < plan.groups.size(); ++g) {
      const std::vector<int32_t> &members = plan.groups[g].ranks;
      const std::vector<int64_t> &reference = byGroup[g][members[0]];
      for (int32_t member : members) {
        const std::vector<int64_t> &list = byGroup[g][member];
        for (size_t k = 0; k < std::max(list.size(), reference.size()); ++k) {
          if (k >= list.size()) {
            fail(members[0], reference[k],
                 "is collective " + std::to_string(k) + " of group " + std::to_string(g) +
                     ", which rank " + std::to_string(member) + " never issues");
            return;
          }
          if (k >= reference.size()) {
            fail(member, list[k],
                 "is collective " + std::to_string(k) + " of group " + std::to_string(g) +
                     ", which rank " + std::to_string(members[0]) + " never issues");
            return;
          }
          const Instruction &a = inst(members[0], reference[k]), &b = inst(member, list[k]);
          if (a.op != b.op || a.bytes != b.bytes) {
            fail(member, list[k],
                 "is collective " + std::to_string(k) + " of group " + std::to_string(g) +
                     " but rank " + std::to_string(members[0]) + " issues " + describe(a) + " of " +
                     std::to_string(a.bytes) + " bytes there");
            return;
          }
          state[member].instance[list[k]] = static_cast<int64_t>(instances.size() + k);
        }
      }
      instances.resize(instances.size() + reference.size());
      instanceMembers.insert(instanceMembers.end(), reference.size(),
                             static_cast<int64_t>(members.size()));
    }
  }

  bool knows(int32_t r, int s, int64_t i) const {
    return i >= 0 && state[r].streams[s].known[inst(r, i).stream] >= i;
  }

  void complete(int32_t r, int s, int64_t i, double start, double end) {
    Stream &stream = state[r].streams[s];
    result.times[r][i].start = start;
    result.times[r][i].end = end;
    stream.time = end;
    stream.known[s] = i;
    ++stream.next;
  }

  /// Runs stream s of rank r until it must wait.
  void advance(int32_t r, int s) {
    RankState &rs = state[r];
    Stream &stream = rs.streams[s];
    while (stream.next < stream.list.size() && !result.error) {
      int64_t i = stream.list[stream.next];
      const Instruction &x = inst(r, i);
      InstructionTime &t = result.times[r][i];
      switch (x.op) {
      case Op::Signal:
        t.posted = stream.time;
        rs.fired[x.event] = stream.time;
        rs.eventKnown[x.event] = stream.known;
        complete(r, s, i, stream.time, stream.time);
        for (int waiter : rs.waiters[x.event])
          enqueue(r, waiter);
        rs.waiters[x.event].clear();
        break;
      case Op::Wait:
        t.posted = stream.time;
        if (rs.fired[x.event] < 0) {
          rs.waiters[x.event].push_back(s);
          return;
        }
        for (int k = 0; k < kStreams; ++k)
          stream.known[k] = std::max(stream.known[k], rs.eventKnown[x.event][k]);
        complete(r, s, i, std::max(stream.time, rs.fired[x.event]),
                 std::max(stream.time, rs.fired[x.event]));
        break;
      case Op::Send:
      case Op::Recv:
        if (!transfer(r, s, i))
          return;
        break;
      case Op::AllGather:
      case Op::ReduceScatter:
      case Op::AllReduce:
        if (!collective(r, s, i))
          return;
        break;
      case Op::TieGrads:
        if (!tie(r, s, i))
          return;
        break;
      case Op::TensorAllReduce:
      case Op::TensorAllGather:
      case Op::TensorReduceScatter:
        // Issued inside the compute before it (the plan reader checked which); every rank of
        // the tensor group runs this program, so they meet by construction.
        t.posted = stream.time;
        complete(r, s, i, stream.time, stream.time + costs.tensorCollective(x, stream.lastCompute));
        break;
      default:
        t.posted = stream.time;
        checkCompute(r, s, i);
        if (x.isCompute())
          stream.lastCompute = x.op;
        complete(r, s, i, stream.time, stream.time + costs.of(plan, r, x));
        break;
      }
    }
  }

  /// The batch of transfers starting at the stream's current position: [first, last) in the
  /// stream's order.
  std::pair<size_t, size_t> batchAt(const Stream &stream, int32_t r) const {
    size_t first = stream.next, last = first + 1;
    int32_t batch = inst(r, stream.list[first]).batch;
    if (batch >= 0)
      while (last < stream.list.size() && inst(r, stream.list[last]).isTransfer() &&
             inst(r, stream.list[last]).batch == batch)
        ++last;
    return {first, last};
  }

  bool transfer(int32_t r, int s, int64_t) {
    RankState &rs = state[r];
    Stream &stream = rs.streams[s];
    auto [first, last] = batchAt(stream, r);
    // Post every transfer of the batch once.
    for (size_t k = first; k < last; ++k) {
      int64_t i = stream.list[k];
      if (rs.posted[i] >= 0)
        continue;
      rs.posted[i] = stream.time;
      result.times[r][i].posted = stream.time;
      checkTransfer(r, s, i);
      const int32_t peer = inst(r, i).peer;
      const int64_t j = result.matched[r][i];
      if (j < 0) {
        fail(r, i,
             "has no matching " + std::string(inst(r, i).op == Op::Send ? "receive" : "send") +
                 " on rank " + std::to_string(inst(r, i).peer));
        return false;
      }
      if (state[peer].posted[j] >= 0) {
        double start = std::max(rs.posted[i], state[peer].posted[j]);
        double end = start + costs.of(plan, r, inst(r, i));
        rs.done[i] = state[peer].done[j] = end;
        result.times[r][i].start = result.times[peer][j].start = start;
        result.times[r][i].end = result.times[peer][j].end = end;
        enqueue(peer, inst(peer, j).stream);
      }
    }
    double end = stream.time;
    for (size_t k = first; k < last; ++k) {
      int64_t i = stream.list[k];
      if (rs.done[i] < 0)
        return false; // a peer has not reached its side yet
      end = std::max(end, rs.done[i]);
    }
    for (size_t k = first; k < last; ++k) {
      int64_t i = stream.list[k];
      if (inst(r, i).op == Op::Recv)
        receive(r, i);
      stream.known[s] = i;
    }
    stream.time = end;
    stream.next = last;
    return true;
  }

  /// A tie_grads: in place, or once both ranks of the pair reached theirs.
  bool tie(int32_t r, int s, int64_t i) {
    RankState &rs = state[r];
    Stream &stream = rs.streams[s];
    const Instruction &x = inst(r, i);
    if (rs.posted[i] < 0) {
      rs.posted[i] = stream.time;
      result.times[r][i].posted = stream.time;
      checkTie(r, s, i);
      if (x.peer == r) {
        rs.done[i] = stream.time;
        result.times[r][i].start = result.times[r][i].end = stream.time;
      } else {
        const int64_t j = result.matched[r][i];
        if (j < 0) {
          fail(r, i, "has no matching tie_grads on rank " + std::to_string(x.peer));
          return false;
        }
        if (state[x.peer].posted[j] >= 0) {
          double start = std::max(rs.posted[i], state[x.peer].posted[j]);
          double end = start + costs.of(plan, r, x);
          rs.done[i] = state[x.peer].done[j] = end;
          result.times[r][i].start = result.times[x.peer][j].start = start;
          result.times[r][i].end = result.times[x.peer][j].end = end;
          enqueue(x.peer, inst(x.peer, j).stream);
        }
      }
    }
    if (rs.done[i] < 0)
      return false;
    stream.time = std::max(stream.time, rs.done[i]);
    stream.known[s] = i;
    ++stream.next;
    return true;
  }

  bool collective(int32_t r, int s, int64_t i) {
    RankState &rs = state[r];
    Stream &stream = rs.streams[s];
    Instance &instance = instances[rs.instance[i]];
    if (rs.posted[i] < 0) {
      rs.posted[i] = stream.time;
      result.times[r][i].posted = stream.time;
      checkCollective(r, s, i);
      instance.latest = std::max(instance.latest, stream.time);
      instance.waiting.push_back({r, s});
      if (++instance.arrived == instanceMembers[rs.instance[i]]) {
        instance.finish = instance.latest + costs.of(plan, r, inst(r, i));
        for (auto [member, memberStream] : instance.waiting)
          enqueue(member, memberStream);
      }
    }
    if (instance.finish < 0)
      return false;
    completeCollective(r, i);
    complete(r, s, i, instance.latest, instance.finish);
    return true;
  }

  //===--------------------------------------------------------------------===//
  // Verification
  //===--------------------------------------------------------------------===//

  std::string at(int32_t r, int64_t i) const {
    return std::to_string(i) + " (" + describe(inst(r, i)) + ")";
  }

  /// The stage's parameters are gathered and this stream knows it (full sharding only).
  void checkParameters(int32_t r, int s, int64_t i, int32_t stage) {
    if (plan.config.sharding != runtime::Sharding::Full || plan.config.data == 1)
      return;
    int64_t by = state[r].flow.gatheredBy[stage];
    if (by < 0) {
      fail(r, i,
           "computes on stage " + std::to_string(stage) + " while its parameters are not gathered");
      return;
    }
    if (!knows(r, s, by))
      fail(r, i,
           "may run before the all-gather of stage " + std::to_string(stage) + " (instruction " +
               at(r, by) + ") completes; no event orders them");
  }

  /// The input of (stage, mb) in direction `kind` is complete and ordered before instruction i.
  void checkInput(int32_t r, int s, int64_t i, runtime::Transfer kind) {
    const Instruction &x = inst(r, i);
    Dataflow &flow = state[r].flow;
    const bool forward = kind == runtime::Transfer::Activation;
    const int32_t from = forward ? x.stage - 1 : x.stage + 1;
    if (from < 0 || from >= static_cast<int32_t>(plan.stages.size()))
      return; // data or loss: no input from another stage
    const runtime::Stage &self = plan.stages[x.stage];
    const int64_t begin = self.samples[x.microbatch], end = self.samples[x.microbatch + 1];
    const runtime::Stage &producer = plan.stages[from];
    if (producer.rank == r) {
      const std::vector<int64_t> &done = forward ? flow.forward[from] : flow.backward[from];
      for (int64_t m = 0; m < producer.numMicrobatches(); ++m) {
        if (producer.samples[m + 1] <= begin || producer.samples[m] >= end)
          continue;
        if (done[m] < 0 || !knows(r, s, done[m])) {
          fail(r, i,
               std::string("may run before its input from ") + (forward ? "F s" : "B s") +
                   std::to_string(from) + " mb" + std::to_string(m) + " is computed");
          return;
        }
      }
      return;
    }
    if (x.slot < 0) {
      fail(r, i,
           "needs input from rank " + std::to_string(producer.rank) + " but names no receive slot");
      return;
    }
    Dataflow::Slot &slot = flow.slots[x.slot];
    if (slot.stage != x.stage || slot.microbatch != x.microbatch || slot.kind != kind) {
      fail(r, i, "reads slot " + std::to_string(x.slot) + ", which does not hold its input");
      return;
    }
    std::vector<std::pair<int64_t, int64_t>> pieces = slot.pieces;
    std::sort(pieces.begin(), pieces.end());
    int64_t covered = begin;
    for (auto [b, e] : pieces)
      if (b <= covered)
        covered = std::max(covered, e);
    if (covered < end) {
      fail(r, i,
           "may run before samples [" + std::to_string(covered) + ", " + std::to_string(end) +
               ") of its input are received");
      return;
    }
    for (int64_t receive : slot.receives)
      if (!knows(r, s, receive)) {
        fail(r, i,
             "may run before the receive of its input (instruction " + at(r, receive) +
                 ") completes; no event orders them");
        return;
      }
    slot.consumedBy = i;
  }

  void checkCompute(int32_t r, int s, int64_t i) {
    const Instruction &x = inst(r, i);
    Dataflow &flow = state[r].flow;
    switch (x.op) {
    case Op::Forward:
      if (flow.forward[x.stage][x.microbatch] >= 0)
        return fail(r, i, "runs the forward of this micro-batch a second time");
      checkParameters(r, s, i, x.stage);
      checkInput(r, s, i, runtime::Transfer::Activation);
      flow.forward[x.stage][x.microbatch] = i;
      break;
    case Op::Backward:
    case Op::BackwardInput: {
      int64_t own = flow.forward[x.stage][x.microbatch];
      if (flow.backward[x.stage][x.microbatch] >= 0)
        return fail(r, i, "runs the backward of this micro-batch a second time");
      if (own < 0 || !knows(r, s, own))
        return fail(r, i, "may run before the forward of the same micro-batch");
      checkParameters(r, s, i, x.stage);
      checkInput(r, s, i, runtime::Transfer::Gradient);
      flow.backward[x.stage][x.microbatch] = i;
      if (x.op == Op::Backward) {
        flow.gradients[x.stage][x.microbatch] = i;
        ++flow.backwardsDone[x.stage];
      }
      break;
    }
    case Op::BackwardWeight: {
      // It reads what its input gradient kept, inside a residency of its stage as PyTorch's
      // FSDP runs it.
      int64_t input = flow.backward[x.stage][x.microbatch];
      if (flow.gradients[x.stage][x.microbatch] >= 0)
        return fail(r, i, "runs the weight gradient of this micro-batch a second time");
      if (input < 0 || inst(r, input).op != Op::BackwardInput || !knows(r, s, input))
        return fail(r, i, "may run before the input gradient of the same micro-batch");
      checkParameters(r, s, i, x.stage);
      flow.gradients[x.stage][x.microbatch] = i;
      ++flow.backwardsDone[x.stage];
      break;
    }
    case Op::Free:
      if (flow.gatheredBy[x.stage] < 0)
        return fail(r, i,
                    "frees parameters of stage " + std::to_string(x.stage) +
                        " that are not gathered");
      flow.gatheredBy[x.stage] = -1;
      --flow.gatheredCount;
      break;
    case Op::OptimizerStep: {
      if (flow.steppedBy[x.stage] >= 0)
        return fail(r, i, "updates stage " + std::to_string(x.stage) + " a second time");
      int64_t needed = plan.config.data > 1 ? flow.reducedBy[x.stage] : -1;
      if (plan.config.data > 1 && (needed < 0 || !knows(r, s, needed)))
        return fail(r, i,
                    "may update stage " + std::to_string(x.stage) +
                        " before its gradients are reduced");
      if (plan.config.data == 1 &&
          flow.backwardsDone[x.stage] != plan.stages[x.stage].numMicrobatches())
        return fail(r, i,
                    "updates stage " + std::to_string(x.stage) + " before all its backwards ran");
      for (int64_t b : flow.gradients[x.stage])
        if (plan.config.data == 1 && !knows(r, s, b))
          return fail(r, i,
                      "may update stage " + std::to_string(x.stage) +
                          " before its backwards complete");
      if (plan.config.data == 1)
        checkTied(r, s, i, "update");
      flow.steppedBy[x.stage] = i;
      break;
    }
    default:
      break;
    }
  }

  /// Both tied copies this rank sums have all their gradients, and this stream knows it.
  void checkTie(int32_t r, int s, int64_t i) {
    const Instruction &x = inst(r, i);
    Dataflow &flow = state[r].flow;
    for (int32_t stage : {x.stage, x.peerStage}) {
      if (stage != x.stage && x.peer != r)
        continue; // the other copy is the peer's to check
      for (size_t m = 0; m < flow.gradients[stage].size(); ++m)
        if (flow.gradients[stage][m] < 0 || !knows(r, s, flow.gradients[stage][m]))
          return fail(r, i,
                      "may sum the tied gradients before the backward of stage " +
                          std::to_string(stage) + " micro-batch " + std::to_string(m) +
                          " completes");
      flow.tiedBy[stage] = i;
    }
  }

  /// A reduction or optimizer step of a tied stage comes after its copies were summed.
  void checkTied(int32_t r, int s, int64_t i, const char *what) {
    const Instruction &x = inst(r, i);
    if (!plan.transformer || !plan.transformer->tieEmbeddings)
      return;
    const int32_t last = static_cast<int32_t>(plan.stages.size()) - 1;
    if (x.stage != 0 && x.stage != last)
      return;
    const int64_t by = state[r].flow.tiedBy[x.stage];
    if (by < 0 || !knows(r, s, by))
      fail(r, i,
           std::string("may ") + what + " stage " + std::to_string(x.stage) +
               " before its tied copies' gradients are summed (tie_grads)");
  }

  void checkTransfer(int32_t r, int s, int64_t i) {
    const Instruction &x = inst(r, i);
    Dataflow &flow = state[r].flow;
    if (x.op == Op::Send) {
      int64_t producer = x.kind == runtime::Transfer::Activation
                             ? flow.forward[x.stage][x.microbatch]
                             : flow.backward[x.stage][x.microbatch];
      if (producer < 0 || !knows(r, s, producer))
        fail(r, i, "may send before the compute that produces its data; no event orders them");
      return;
    }
    // A receive may overwrite its slot only once the slot's previous content was consumed.
    Dataflow::Slot &slot = flow.slots[x.slot];
    bool same = slot.stage == x.stage && slot.microbatch == x.microbatch && slot.kind == x.kind;
    if (same)
      return;
    if (slot.stage >= 0) {
      if (slot.consumedBy < 0) {
        fail(r, i,
             "overwrites slot " + std::to_string(x.slot) + ", which still holds the " +
                 (slot.kind == runtime::Transfer::Activation ? "activation" : "gradient") +
                 " of s" + std::to_string(slot.stage) + " mb" + std::to_string(slot.microbatch) +
                 " that no compute has read");
        return;
      }
      if (!knows(r, s, slot.consumedBy)) {
        fail(r, i,
             "may overwrite slot " + std::to_string(x.slot) + " before instruction " +
                 at(r, slot.consumedBy) + " has read it; no event orders them");
        return;
      }
    }
    slot = Dataflow::Slot();
    slot.stage = x.stage;
    slot.microbatch = x.microbatch;
    slot.kind = x.kind;
  }

  void receive(int32_t r, int64_t i) {
    const Instruction &x = inst(r, i);
    Dataflow::Slot &slot = state[r].flow.slots[x.slot];
    slot.pieces.push_back({x.begin, x.end});
    slot.receives.push_back(i);
  }

  void checkCollective(int32_t r, int s, int64_t i) {
    const Instruction &x = inst(r, i);
    Dataflow &flow = state[r].flow;
    const runtime::Config &c = plan.config;
    switch (x.op) {
    case Op::AllGather:
      if (c.sharding == runtime::Sharding::Full) {
        if (flow.gatheredBy[x.stage] >= 0)
          return fail(r, i,
                      "gathers stage " + std::to_string(x.stage) +
                          ", whose parameters are already gathered");
        if (flow.gatheredCount >= c.fsdpWindow)
          return fail(r, i,
                      "gathers a stage while " + std::to_string(flow.gatheredCount) +
                          " are gathered, the most the fsdp window of " +
                          std::to_string(c.fsdpWindow) + " allows");
        ++flow.gatheredCount;
      } else {
        int64_t step = flow.steppedBy[x.stage];
        if (step < 0 || !knows(r, s, step))
          return fail(r, i,
                      "may gather the parameters of stage " + std::to_string(x.stage) +
                          " before the optimizer updated them");
        flow.paramsGathered[x.stage] = i;
      }
      break;
    case Op::ReduceScatter:
    case Op::AllReduce: {
      if (flow.reducedBy[x.stage] >= 0)
        return fail(r, i,
                    "reduces the gradients of stage " + std::to_string(x.stage) + " a second time");
      const std::vector<int64_t> &backwards = flow.gradients[x.stage];
      for (size_t m = 0; m < backwards.size(); ++m)
        if (backwards[m] < 0 || !knows(r, s, backwards[m]))
          return fail(r, i,
                      "may reduce the gradients of stage " + std::to_string(x.stage) +
                          " before its backward of micro-batch " + std::to_string(m) +
                          " completes");
      checkTied(r, s, i, "reduce the gradients of");
      flow.reducedBy[x.stage] = i;
      break;
    }
    default:
      break;
    }
  }

  void completeCollective(int32_t r, int64_t i) {
    const Instruction &x = inst(r, i);
    if (x.op == Op::AllGather && plan.config.sharding == runtime::Sharding::Full)
      state[r].flow.gatheredBy[x.stage] = i;
  }

  //===--------------------------------------------------------------------===//
  // The end of the step
  //===--------------------------------------------------------------------===//

  std::string waitReason(int32_t r, int s) const {
    const RankState &rs = state[r];
    int64_t i = rs.streams[s].list[rs.streams[s].next];
    const Instruction &x = inst(r, i);
    switch (x.op) {
    case Op::Wait: {
      const std::vector<Instruction> &list = plan.ranks[r].instructions;
      for (size_t k = 0; k < list.size(); ++k)
        if (list[k].op == Op::Signal && list[k].event == x.event)
          return "waits for event " + std::to_string(x.event) + ", which stream " +
                 std::to_string(list[k].stream) + " signals at instruction " + std::to_string(k);
      return "waits for event " + std::to_string(x.event) + ", which nothing signals";
    }
    case Op::Send:
    case Op::Recv:
    case Op::TieGrads: {
      const int32_t peer = inst(r, i).peer;
      const int64_t j = result.matched[r][i];
      if (j < 0)
        return "has no peer";
      const Stream &other = state[peer].streams[inst(peer, j).stream];
      int64_t there = other.next < other.list.size() ? other.list[other.next] : -1;
      return "waits for rank " + std::to_string(peer) + " to reach instruction " +
             std::to_string(j) + "; that stream is at instruction " +
             (there >= 0 ? at(peer, there) : std::string("its end"));
    }
    default:
      return "waits for the other members of group " + std::to_string(x.group);
    }
  }

  void finish() {
    // Deadlock: some stream never reached its end.
    std::vector<std::string> blocked;
    int32_t firstRank = -1;
    int64_t firstInstruction = -1;
    for (int32_t r = 0; r < ranks(); ++r)
      for (int s = 0; s < kStreams; ++s) {
        const Stream &stream = state[r].streams[s];
        if (stream.next >= stream.list.size())
          continue;
        int64_t i = stream.list[stream.next];
        if (firstRank < 0)
          firstRank = r, firstInstruction = i;
        if (blocked.size() < 16)
          blocked.push_back("rank " + std::to_string(r) + " stream " + std::to_string(s) +
                            " at instruction " + at(r, i) + " " + waitReason(r, s));
      }
    if (firstRank >= 0) {
      std::string message = "the plan deadlocks: ";
      for (size_t k = 0; k < blocked.size(); ++k)
        message += (k ? "; " : "") + blocked[k];
      fail(firstRank, firstInstruction, message);
      return;
    }
    for (int32_t r = 0; r < ranks(); ++r) {
      const Dataflow &flow = state[r].flow;
      const int64_t last = static_cast<int64_t>(plan.ranks[r].instructions.size()) - 1;
      for (size_t s = 0; s < plan.stages.size(); ++s) {
        if (plan.stages[s].rank != r)
          continue;
        std::string stage = "stage " + std::to_string(s);
        for (size_t m = 0; m < flow.forward[s].size(); ++m) {
          if (flow.forward[s][m] < 0)
            return fail(r, last,
                        "rank " + std::to_string(r) + " never runs the forward of " + stage +
                            " micro-batch " + std::to_string(m));
          if (flow.backward[s][m] < 0)
            return fail(r, last,
                        "rank " + std::to_string(r) + " never runs the backward of " + stage +
                            " micro-batch " + std::to_string(m));
          if (flow.gradients[s][m] < 0)
            return fail(r, last,
                        "rank " + std::to_string(r) + " never runs the weight gradient of " +
                            stage + " micro-batch " + std::to_string(m));
        }
        if (plan.config.data > 1 && flow.reducedBy[s] < 0)
          return fail(r, last,
                      "rank " + std::to_string(r) + " never reduces the gradients of " + stage);
        if (flow.steppedBy[s] < 0)
          return fail(r, last, "rank " + std::to_string(r) + " never updates " + stage);
        const bool tiedStage = plan.transformer && plan.transformer->tieEmbeddings &&
                               (s == 0 || s + 1 == plan.stages.size());
        if (tiedStage && flow.tiedBy[s] < 0)
          return fail(r, last,
                      "rank " + std::to_string(r) + " never sums the tied gradients of " + stage);
        if (flow.gatheredBy[s] >= 0)
          return fail(r, last,
                      "rank " + std::to_string(r) + " ends the step with " + stage +
                          " still gathered");
        bool zero12 = plan.config.sharding == runtime::Sharding::Optimizer ||
                      plan.config.sharding == runtime::Sharding::Gradients;
        if (plan.config.data > 1 && zero12 && flow.paramsGathered[s] < 0)
          return fail(r, last,
                      "rank " + std::to_string(r) + " never gathers the updated parameters of " +
                          stage);
      }
    }
    for (const std::vector<InstructionTime> &rank : result.times)
      for (const InstructionTime &t : rank)
        result.makespan = std::max(result.makespan, t.end);
  }

  const runtime::Plan &plan;
  const PlanCosts &costs;
  std::vector<RankState> state;
  std::vector<Instance> instances;
  std::vector<int64_t> instanceMembers;
  std::deque<std::pair<int32_t, int>> work;
  SimulationResult result;
};

} // namespace

SimulationResult conduit::simulatePlan(const runtime::Plan &plan, const PlanCosts &costs) {
  return Simulation(plan, costs).run();
}
