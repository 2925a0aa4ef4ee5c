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

#include "analysis/Simulation.h"

#include <algorithm>
#include <map>

using namespace conduit;
using namespace conduit::simulation;

SimulationResult Simulation::run() && {
  setUp();
  if (result.error)
    return std::move(result);
  for (int32_t r = 0; r < ranks(); ++r)
    for (int s = 0; s < kStreams; ++s)
      if (!state[r].streams[s].list.empty())
        enqueue(r, s);
  while (!work.empty() && !result.error) {
    auto [r, s] = work.front();
    work.pop_front();
    state[r].streams[s].queued = false;
    ++result.events;
    advance(r, s);
  }
  if (!result.error)
    finish();
  return std::move(result);
}

void Simulation::enqueue(int32_t r, int s) {
  Stream &stream = state[r].streams[s];
  if (!stream.queued) {
    stream.queued = true;
    work.push_back({r, s});
  }
}

void Simulation::setUp() {
  const int32_t P = ranks();
  state.resize(P);
  result.times.resize(P);
  result.matched.resize(P);
  result.allToAllS.assign(P, 0);
  // Transfers match per (sender, receiver) pair in program order.
  std::map<std::pair<int32_t, int32_t>, std::vector<int32_t>> sends, recvs, ties;
  // Collectives: the k-th collective of a group on every member is instance (group, k).
  std::vector<std::map<int32_t, std::vector<int32_t>>> byGroup(plan.groups.size());
  for (int32_t r = 0; r < P; ++r) {
    const runtime::RankProgram &program = plan.ranks[r];
    RankState &rs = state[r];
    const size_t n = program.instructions.size();
    rs.streams.resize(kStreams);
    rs.fired.assign(program.events, -1);
    rs.eventKnown.assign(program.events, emptyClock());
    rs.instance.assign(n, -1);
    // -1 until the stream reaches it (posted) and it completes (start, end).
    result.times[r].assign(n, {-1, -1, -1});
    result.matched[r].assign(n, -1);
    std::array<size_t, kStreams> perStream{};
    for (const Instruction &x : program.instructions)
      ++perStream[x.stream];
    for (int s = 0; s < kStreams; ++s)
      rs.streams[s].list.reserve(perStream[s]);
    for (size_t i = 0; i < n; ++i) {
      const Instruction &x = program.instructions[i];
      rs.streams[x.stream].list.push_back(static_cast<int32_t>(i));
      if (x.op == Op::Send)
        sends[{r, x.peer}].push_back(static_cast<int32_t>(i));
      else if (x.op == Op::Recv)
        recvs[{x.peer, r}].push_back(static_cast<int32_t>(i));
      else if (x.op == Op::TieGrads && x.peer != r)
        ties[{r, x.peer}].push_back(static_cast<int32_t>(i));
      else if (x.isCollective())
        byGroup[x.group][r].push_back(static_cast<int32_t>(i));
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
    const std::vector<int32_t> &other = recvs[pair];
    for (size_t k = 0; k < list.size() && k < other.size(); ++k) {
      result.matched[pair.first][list[k]] = other[k];
      result.matched[pair.second][other[k]] = list[k];
    }
  }
  // The k-th exchange of tied gradients of a pair of ranks meets the k-th on the other side.
  for (auto &[pair, list] : ties) {
    const std::vector<int32_t> &other = ties[{pair.second, pair.first}];
    for (size_t k = 0; k < list.size() && k < other.size(); ++k)
      result.matched[pair.first][list[k]] = other[k];
  }
  // Every member issues the same collectives on a group, in the same order.
  for (size_t g = 0; g < plan.groups.size(); ++g) {
    const std::vector<int32_t> &members = plan.groups[g].ranks;
    const std::vector<int32_t> &reference = byGroup[g][members[0]];
    for (int32_t member : members) {
      const std::vector<int32_t> &list = byGroup[g][member];
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
        state[member].instance[list[k]] = static_cast<int32_t>(instances.size() + k);
      }
    }
    instances.resize(instances.size() + reference.size());
    instanceMembers.insert(instanceMembers.end(), reference.size(),
                           static_cast<int64_t>(members.size()));
  }
}

void Simulation::complete(int32_t r, int s, int64_t i, double start, double end) {
  Stream &stream = state[r].streams[s];
  result.times[r][i].start = start;
  result.times[r][i].end = end;
  stream.time = end;
  stream.known[s] = static_cast<int32_t>(i);
  ++stream.next;
}

void Simulation::advance(int32_t r, int s) {
  RankState &rs = state[r];
  Stream &stream = rs.streams[s];
  while (stream.next < stream.list.size() && !result.error) {
    int64_t i = stream.list[stream.next];
    const Instruction &x = inst(r, i);
    InstructionTime &t = result.times[r][i];
    if (!x.isInnerCollective())
      checkAllToAllsDone(r, s, i);
    switch (x.op) {
    case Op::Signal:
      t.posted = stream.time;
      rs.fired[x.event] = stream.time;
      rs.eventKnown[x.event] = stream.known;
      complete(r, s, i, stream.time, stream.time);
      // The streams stopped at a wait for this event go on.
      for (int other = 0; other < kStreams; ++other) {
        const Stream &waiting = rs.streams[other];
        if (other != s && waiting.next < waiting.list.size() &&
            inst(r, waiting.list[waiting.next]).op == Op::Wait &&
            inst(r, waiting.list[waiting.next]).event == x.event)
          enqueue(r, other);
      }
      break;
    case Op::Wait:
      t.posted = stream.time;
      if (rs.fired[x.event] < 0)
        return; // until the signal (above)
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
    case Op::ExpertDispatch:
    case Op::ExpertCombine:
      // Issued inside the compute before it, by every rank of the expert group running this
      // program; it adds what its paired step does not hide (PlanCosts.h).
      t.posted = stream.time;
      checkAllToAll(r, s, i);
      result.allToAllS[r] += costs.expertAllToAllWhole(r, i);
      complete(r, s, i, stream.time, stream.time + costs.expertAllToAll(r, i));
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

std::pair<size_t, size_t> Simulation::batchAt(const Stream &stream, int32_t r) const {
  size_t first = stream.next, last = first + 1;
  int32_t batch = inst(r, stream.list[first]).batch;
  if (batch >= 0)
    while (last < stream.list.size() && inst(r, stream.list[last]).isTransfer() &&
           inst(r, stream.list[last]).batch == batch)
      ++last;
  return {first, last};
}

bool Simulation::transfer(int32_t r, int s, int64_t) {
  RankState &rs = state[r];
  Stream &stream = rs.streams[s];
  auto [first, last] = batchAt(stream, r);
  // Post every transfer of the batch once.
  for (size_t k = first; k < last; ++k) {
    int64_t i = stream.list[k];
    if (result.times[r][i].posted >= 0)
      continue;
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
    if (result.times[peer][j].posted >= 0) {
      double start = std::max(result.times[r][i].posted, result.times[peer][j].posted);
      double end = start + costs.of(plan, r, inst(r, i));
      result.times[r][i].start = result.times[peer][j].start = start;
      result.times[r][i].end = result.times[peer][j].end = end;
      enqueue(peer, inst(peer, j).stream);
    }
  }
  double end = stream.time;
  for (size_t k = first; k < last; ++k) {
    int64_t i = stream.list[k];
    if (result.times[r][i].end < 0)
      return false; // a peer has not reached its side yet
    end = std::max(end, result.times[r][i].end);
  }
  for (size_t k = first; k < last; ++k) {
    int64_t i = stream.list[k];
    if (inst(r, i).op == Op::Recv)
      receive(r, i);
    stream.known[s] = static_cast<int32_t>(i);
  }
  stream.time = end;
  stream.next = last;
  return true;
}

bool Simulation::tie(int32_t r, int s, int64_t i) {
  RankState &rs = state[r];
  Stream &stream = rs.streams[s];
  const Instruction &x = inst(r, i);
  InstructionTime &t = result.times[r][i];
  if (t.posted < 0) {
    t.posted = stream.time;
    checkTie(r, s, i);
    if (x.peer == r) {
      result.times[r][i].start = result.times[r][i].end = stream.time;
    } else {
      const int64_t j = result.matched[r][i];
      if (j < 0) {
        fail(r, i, "has no matching tie_grads on rank " + std::to_string(x.peer));
        return false;
      }
      if (result.times[x.peer][j].posted >= 0) {
        double start = std::max(t.posted, result.times[x.peer][j].posted);
        double end = start + costs.of(plan, r, x);
        result.times[r][i].start = result.times[x.peer][j].start = start;
        result.times[r][i].end = result.times[x.peer][j].end = end;
        enqueue(x.peer, inst(x.peer, j).stream);
      }
    }
  }
  if (t.end < 0)
    return false;
  stream.time = std::max(stream.time, t.end);
  stream.known[s] = static_cast<int32_t>(i);
  ++stream.next;
  return true;
}

bool Simulation::collective(int32_t r, int s, int64_t i) {
  RankState &rs = state[r];
  Stream &stream = rs.streams[s];
  Instance &instance = instances[rs.instance[i]];
  if (result.times[r][i].posted < 0) {
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

SimulationResult conduit::simulatePlan(const runtime::Plan &plan, const PlanCosts &costs) {
  return Simulation(plan, costs).run();
}
