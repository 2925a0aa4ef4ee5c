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
  if (recording) {
    result.times.resize(P);
    result.matched.resize(P);
  }
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
    rs.link.assign(n, -1);
    if (recording) {
      // -1 until the stream reaches it (posted) and it completes (start, end).
      result.times[r].assign(n, {-1, -1, -1});
      result.matched[r].assign(n, -1);
    }
    std::array<size_t, kStreams> perStream{};
    for (const Instruction &x : program.instructions)
      ++perStream[x.stream];
    for (int s = 0; s < kStreams; ++s) {
      rs.streams[s].list.reserve(perStream[s]);
      if (perStream[s] > 0)
        rs.clockWidth = s + 1;
    }
    rs.eventKnown.assign(static_cast<size_t>(program.events) * rs.clockWidth, -1);
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
    flow.reducedMicrobatches.assign(S, 0);
    flow.reductions.assign(S, {});
    for (size_t i = 0; i < n; ++i) {
      const Instruction &x = program.instructions[i];
      if ((x.op == Op::ReduceScatter || x.op == Op::AllReduce) && x.stage >= 0 &&
          static_cast<size_t>(x.stage) < S)
        flow.reductions[x.stage].push_back(static_cast<int64_t>(i));
    }
    flow.steppedBy.assign(S, -1);
    flow.paramsGathered.assign(S, -1);
    flow.tiedBy.assign(S, -1);
    flow.slots.resize(program.slots.size());
  }
  auto pairUp = [&](std::pair<int32_t, int32_t> ranks, const std::vector<int32_t> &first,
                    const std::vector<int32_t> &second) {
    for (size_t k = 0; k < first.size() && k < second.size(); ++k) {
      state[ranks.first].link[first[k]] = state[ranks.second].link[second[k]] =
          static_cast<int32_t>(exchanges.size());
      exchanges.push_back({-1, -1, -1, {first[k], second[k]}});
      if (recording) {
        result.matched[ranks.first][first[k]] = second[k];
        result.matched[ranks.second][second[k]] = first[k];
      }
    }
  };
  size_t pairs = 0; // at most: every send matched, and every tie_grads of the lower ranks
  for (auto &[pair, list] : sends)
    pairs += list.size();
  for (auto &[pair, list] : ties)
    pairs += pair.first < pair.second ? list.size() : 0;
  exchanges.reserve(pairs);
  for (auto &[pair, list] : sends)
    if (auto other = recvs.find(pair); other != recvs.end())
      pairUp(pair, list, other->second);
  // The k-th exchange of tied gradients of a pair of ranks meets the k-th on the other side.
  for (auto &[pair, list] : ties)
    if (auto other = ties.find({pair.second, pair.first});
        pair.first < pair.second && other != ties.end())
      pairUp(pair, list, other->second);
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
        state[member].link[list[k]] = static_cast<int32_t>(instances.size() + k);
      }
    }
    instances.resize(instances.size() + reference.size());
    instanceMembers.insert(instanceMembers.end(), reference.size(),
                           static_cast<int64_t>(members.size()));
  }
}

void Simulation::complete(int32_t r, int s, int64_t i, double start, double end) {
  Stream &stream = state[r].streams[s];
  if (recording) {
    result.times[r][i].start = start;
    result.times[r][i].end = end;
  }
  if (computed && inst(r, i).isCompute())
    (*computed)[r].push_back({start, end});
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
    if (!x.isInnerCollective())
      checkAllToAllsDone(r, s, i);
    switch (x.op) {
    case Op::Signal:
      post(r, i, stream.time);
      rs.fired[x.event] = stream.time;
      std::copy_n(stream.known.begin(), rs.clockWidth, &rs.eventKnown[x.event * rs.clockWidth]);
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
      post(r, i, stream.time);
      if (rs.fired[x.event] < 0)
        return; // until the signal (above)
      for (int k = 0; k < rs.clockWidth; ++k)
        stream.known[k] = std::max(stream.known[k], rs.eventKnown[x.event * rs.clockWidth + k]);
      complete(r, s, i, std::max(stream.time, rs.fired[x.event]),
               std::max(stream.time, rs.fired[x.event]));
      break;
    case Op::Send:
    case Op::Recv:
      if (!transfer(r, s))
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
      post(r, i, stream.time);
      complete(r, s, i, stream.time, stream.time + costs.tensorCollective(x, stream.lastCompute));
      break;
    case Op::ExpertDispatch:
    case Op::ExpertCombine:
      // Issued inside the compute before it, by every rank of the expert group running this
      // program; it adds what its paired step does not hide (PlanCosts.h).
      post(r, i, stream.time);
      checkAllToAll(r, s, i);
      result.allToAllS[r] += costs.expertAllToAllWhole(r, i);
      complete(r, s, i, stream.time, stream.time + costs.expertAllToAll(r, i));
      break;
    default:
      post(r, i, stream.time);
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

void Simulation::postExchange(int32_t r, int s, int64_t i) {
  const Instruction &x = inst(r, i);
  const int32_t e = state[r].link[i];
  if (e < 0) {
    const char *what = x.op == Op::TieGrads ? "tie_grads" : x.op == Op::Send ? "receive" : "send";
    return fail(r, i,
                "has no matching " + std::string(what) + " on rank " + std::to_string(x.peer));
  }
  Exchange &exchange = exchanges[e];
  const double time = state[r].streams[s].time;
  if (exchange.posted < 0) {
    exchange.posted = time; // the peer runs it when it comes
    return;
  }
  exchange.start = std::max(exchange.posted, time);
  exchange.end = exchange.start + costs.of(plan, r, x);
  // Where messages move only between computes, a send's data waits in the transport until
  // the receiving rank next calls it, after the compute it runs then; a tie_grads exchange
  // waits for both ranks.
  if (busy && x.op == Op::TieGrads)
    exchange.end = std::max(afterCompute(r, exchange.end), afterCompute(x.peer, exchange.end));
  else if (busy)
    exchange.end = afterCompute(x.op == Op::Recv ? r : x.peer, exchange.end);
  const int64_t j = exchange.instruction[1 - sideOf(x, r)];
  enqueue(x.peer, inst(x.peer, j).stream);
}

bool Simulation::transfer(int32_t r, int s) {
  Stream &stream = state[r].streams[s];
  auto [first, last] = batchAt(stream, r);
  // Post every transfer of the batch once.
  for (size_t k = std::max(first, stream.posted); k < last && !result.error; ++k) {
    int64_t i = stream.list[k];
    post(r, i, stream.time);
    checkTransfer(r, s, i);
    postExchange(r, s, i);
  }
  stream.posted = std::max(stream.posted, last);
  if (result.error)
    return false;
  double end = stream.time;
  for (size_t k = first; k < last; ++k) {
    const Exchange &exchange = exchanges[state[r].link[stream.list[k]]];
    if (exchange.end < 0)
      return false; // a peer has not reached its side yet
    end = std::max(end, exchange.end);
  }
  for (size_t k = first; k < last; ++k) {
    int64_t i = stream.list[k];
    if (inst(r, i).op == Op::Recv)
      receive(r, i);
    stream.known[s] = static_cast<int32_t>(i);
    if (recording) {
      const Exchange &exchange = exchanges[state[r].link[i]];
      result.times[r][i].start = exchange.start;
      result.times[r][i].end = exchange.end;
    }
  }
  stream.time = end;
  stream.next = last;
  return true;
}

bool Simulation::tie(int32_t r, int s, int64_t i) {
  Stream &stream = state[r].streams[s];
  const Instruction &x = inst(r, i);
  if (x.peer == r) { // in place
    post(r, i, stream.time);
    checkTie(r, s, i);
    complete(r, s, i, stream.time, stream.time);
    return !result.error;
  }
  if (stream.posted <= stream.next) {
    stream.posted = stream.next + 1;
    post(r, i, stream.time);
    checkTie(r, s, i);
    postExchange(r, s, i);
    if (result.error)
      return false;
  }
  const Exchange &exchange = exchanges[state[r].link[i]];
  if (exchange.end < 0)
    return false;
  complete(r, s, i, exchange.start, exchange.end);
  return true;
}

bool Simulation::collective(int32_t r, int s, int64_t i) {
  RankState &rs = state[r];
  Stream &stream = rs.streams[s];
  Instance &instance = instances[rs.link[i]];
  if (stream.posted <= stream.next) {
    stream.posted = stream.next + 1;
    post(r, i, stream.time);
    checkCollective(r, s, i);
    instance.latest = std::max(instance.latest, stream.time);
    instance.waiting.push_back({r, s});
    if (++instance.arrived == instanceMembers[rs.link[i]]) {
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

double Simulation::afterCompute(int32_t r, double t) const {
  const std::vector<std::pair<double, double>> &list = (*busy)[r];
  // The last compute that started before t.
  auto it = std::lower_bound(list.begin(), list.end(), std::pair{t, -1.0});
  if (it == list.begin())
    return t;
  --it;
  return it->first < t && t < it->second ? it->second : t;
}

SimulationResult conduit::simulatePlan(const runtime::Plan &plan, const PlanCosts &costs,
                                       SimulationOptions options) {
  if (!costs.progressBetweenComputes)
    return Simulation(plan, costs, options).run();
  // Where a transfer waits for its ranks' computes, which computes run when depends on the
  // transfers: each pass holds the transfers by the computes of the pass before, until the
  // step stops changing (two passes for the demo job, six for llama-tiny; at most kPasses).
  // An approximation of the rule, exact where the computes stop moving.
  constexpr int kPasses = 8;
  Simulation::Busy busy(plan.ranks.size()), computed(plan.ranks.size());
  SimulationResult result = Simulation(plan, costs, options, nullptr, &busy).run();
  for (int pass = 1; pass < kPasses && !result.error; ++pass) {
    for (auto &list : computed)
      list.clear();
    SimulationResult next = Simulation(plan, costs, options, &busy, &computed).run();
    const bool settled = next.makespan == result.makespan;
    result = std::move(next);
    if (settled)
      break;
    std::swap(busy, computed);
  }
  return result;
}
