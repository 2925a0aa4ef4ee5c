//===- SimulatorChecks.cpp - what the simulator verifies as it runs -------===//
//
// The verifying half of the simulation (analysis/Simulation.h): through events and stream order
// only, every compute finds its inputs received and its parameters gathered, no receive
// overwrites a slot still in use, tied copies are summed before their reduction, collectives
// match across their group, each compute issues the expert all-to-alls of its list (and one
// hides only behind the other half of a paired step, so that nothing reads what an
// all-to-all receives before it arrived); at the end, every (stage, micro-batch) ran forward and
// backward, gradients were reduced and stepped once, and no stream is left blocked (a deadlock
// names every blocked stream and what it waits for).
//
//===----------------------------------------------------------------------===//

#include "analysis/Simulation.h"

#include <algorithm>

using namespace conduit;
using namespace conduit::simulation;

std::string Simulation::at(int32_t r, int64_t i) const {
  return std::to_string(i) + " (" + describe(inst(r, i)) + ")";
}

void Simulation::checkParameters(int32_t r, int s, int64_t i, int32_t stage) {
  if (plan.config.sharding == runtime::Sharding::None || plan.config.data == 1)
    return;
  const Dataflow &flow = state[r].flow;
  const bool full = plan.config.sharding == runtime::Sharding::Full;
  // Full sharding: the residency's all-gather. Optimizer and gradient sharding: the step's
  // all-gather of the shards the previous step updated, where it opens the step; where the
  // plan gathers after the optimizer step instead (the step before's), the all-gather checks.
  int64_t by = full ? flow.gatheredBy[stage] : flow.paramsGathered[stage];
  if (!full && by < 0)
    return;
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

void Simulation::checkInput(int32_t r, int s, int64_t i, runtime::Transfer kind) {
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

void Simulation::checkGradientsFree(int32_t r, int s, int64_t i, int32_t stage) {
  const std::vector<int64_t> &reductions = state[r].flow.reductions[stage];
  auto after = std::lower_bound(reductions.begin(), reductions.end(), i);
  if (after == reductions.begin() || knows(r, s, *std::prev(after)))
    return;
  fail(r, i,
       "may add to the gradients of stage " + std::to_string(stage) + " while its reduction " +
           at(r, *std::prev(after)) + " reads them; no event orders them");
}

void Simulation::checkCompute(int32_t r, int s, int64_t i) {
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
    checkGradientsFree(r, s, i, x.stage);
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
    checkGradientsFree(r, s, i, x.stage);
    flow.gradients[x.stage][x.microbatch] = i;
    ++flow.backwardsDone[x.stage];
    break;
  }
  case Op::Free:
    if (flow.gatheredBy[x.stage] < 0)
      return fail(
          r, i, "frees parameters of stage " + std::to_string(x.stage) + " that are not gathered");
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
    if (plan.config.data > 1 &&
        flow.reducedMicrobatches[x.stage] != plan.stages[x.stage].numMicrobatches())
      return fail(r, i,
                  "updates stage " + std::to_string(x.stage) +
                      " before the weight gradients of all its micro-batches are reduced");
    if (plan.config.data == 1 &&
        flow.backwardsDone[x.stage] != plan.stages[x.stage].numMicrobatches())
      return fail(r, i,
                  "updates stage " + std::to_string(x.stage) + " before all its backwards ran");
    for (int64_t b : flow.gradients[x.stage])
      if (plan.config.data == 1 && !knows(r, s, b))
        return fail(
            r, i, "may update stage " + std::to_string(x.stage) + " before its backwards complete");
    if (plan.config.data == 1)
      checkTied(r, s, i, "update");
    flow.steppedBy[x.stage] = i;
    break;
  }
  default:
    break;
  }
}

void Simulation::checkTie(int32_t r, int s, int64_t i) {
  const Instruction &x = inst(r, i);
  Dataflow &flow = state[r].flow;
  for (int32_t stage : {x.stage, x.peerStage}) {
    if (stage != x.stage && x.peer != r)
      continue; // the other copy is the peer's to check
    for (size_t m = 0; m < flow.gradients[stage].size(); ++m)
      if (flow.gradients[stage][m] < 0 || !knows(r, s, flow.gradients[stage][m]))
        return fail(r, i,
                    "may sum the tied gradients before the backward of stage " +
                        std::to_string(stage) + " micro-batch " + std::to_string(m) + " completes");
    flow.tiedBy[stage] = i;
  }
}

void Simulation::checkTied(int32_t r, int s, int64_t i, const char *what) {
  const Instruction &x = inst(r, i);
  if (!plan.transformer || !plan.transformer->sharesTokenTable())
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

void Simulation::checkTransfer(int32_t r, int s, int64_t i) {
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
               (slot.kind == runtime::Transfer::Activation ? "activation" : "gradient") + " of s" +
               std::to_string(slot.stage) + " mb" + std::to_string(slot.microbatch) +
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

void Simulation::receive(int32_t r, int64_t i) {
  const Instruction &x = inst(r, i);
  Dataflow::Slot &slot = state[r].flow.slots[x.slot];
  slot.pieces.push_back({x.begin, x.end});
  slot.receives.push_back(i);
}

void Simulation::checkCollective(int32_t r, int s, int64_t i) {
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
      // The updated shards: before the stage's first compute (the previous step's update,
      // as the compiler places it), or after its optimizer step (this step's, for the next).
      if (flow.paramsGathered[x.stage] >= 0)
        return fail(
            r, i, "gathers the parameters of stage " + std::to_string(x.stage) + " a second time");
      const std::vector<int64_t> &forwards = flow.forward[x.stage];
      const int64_t step = flow.steppedBy[x.stage];
      if (std::any_of(forwards.begin(), forwards.end(), [](int64_t f) { return f >= 0; }) &&
          (step < 0 || !knows(r, s, step)))
        return fail(r, i,
                    "gathers the parameters of stage " + std::to_string(x.stage) +
                        " after it computed with them and before the optimizer updated them");
      flow.paramsGathered[x.stage] = i;
    }
    break;
  case Op::ReduceScatter:
  case Op::AllReduce: {
    // It reduces the weight gradients computed before it in the rank's order, all of them
    // once per step, or (gradient_reduction "run") those since the stage's previous reduction.
    const bool eachRun = c.gradientReduction == runtime::GradientReduction::Run;
    if (!eachRun && flow.reducedBy[x.stage] >= 0)
      return fail(r, i,
                  "reduces the gradients of stage " + std::to_string(x.stage) + " a second time");
    const std::vector<int64_t> &backwards = flow.gradients[x.stage];
    int64_t covered = 0;
    for (size_t m = 0; m < backwards.size(); ++m) {
      const bool before = backwards[m] >= 0 && backwards[m] < i;
      if ((before && !knows(r, s, backwards[m])) || (!before && !eachRun))
        return fail(r, i,
                    "may reduce the gradients of stage " + std::to_string(x.stage) +
                        " before its backward of micro-batch " + std::to_string(m) + " completes");
      covered += before;
    }
    if (covered == flow.reducedMicrobatches[x.stage])
      return fail(r, i,
                  "reduces the gradients of stage " + std::to_string(x.stage) +
                      " with no backward or weight gradient since its previous reduction");
    flow.reducedMicrobatches[x.stage] = covered;
    checkTied(r, s, i, "reduce the gradients of");
    flow.reducedBy[x.stage] = i;
    break;
  }
  default:
    break;
  }
}

void Simulation::checkAllToAllsDone(int32_t r, int s, int64_t i, bool end) {
  Stream &stream = state[r].streams[s];
  const runtime::Config &c = plan.config;
  if (c.expert <= 1 || !plan.transformer || !plan.transformer->isMoe())
    return;
  if (stream.owner >= 0 && (end || stream.owner != i) &&
      stream.allToAllsSeen < stream.allToAlls.size()) {
    const runtime::TensorCollective &want = stream.allToAlls[stream.allToAllsSeen];
    return fail(r, i,
                std::string(end ? "ends its stream" : "comes") + " where " + at(r, stream.owner) +
                    " issues all-to-all " + std::to_string(stream.allToAllsSeen + 1) + " of " +
                    std::to_string(stream.allToAlls.size()) + ", " + runtime::opName(want.op) +
                    " of " + std::to_string(want.bytes) + " bytes for layer " +
                    std::to_string(want.layer) + "; the plan lacks it");
  }
  const Instruction &x = inst(r, i);
  if (end || !x.isCompute() || stream.owner == i)
    return;
  stream.previousCompute = stream.owner;
  stream.owner = i;
  stream.allToAllsSeen = 0;
  stream.allToAlls.clear();
  const runtime::Stage &stage = plan.stages[x.stage];
  for (const runtime::TensorCollective &call :
       issued.of(stage.firstLayer, stage.endLayer, x.op,
                 stage.samples[x.microbatch + 1] - stage.samples[x.microbatch]))
    if (call.isExpertAllToAll())
      stream.allToAlls.push_back(call);
}

void Simulation::checkAllToAll(int32_t r, int s, int64_t i) {
  Stream &stream = state[r].streams[s];
  const Instruction &x = inst(r, i);
  if (stream.owner < 0 || stream.allToAllsSeen >= stream.allToAlls.size())
    return fail(r, i,
                stream.owner < 0
                    ? std::string("is an all-to-all that no compute before it issues")
                    : "is an all-to-all that " + at(r, stream.owner) +
                          " does not issue: it issues " + std::to_string(stream.allToAlls.size()));
  const Instruction &owner = inst(r, stream.owner);
  const runtime::TensorCollective &want = stream.allToAlls[stream.allToAllsSeen];
  if (x.op != want.op || x.bytes != want.bytes || x.stage != owner.stage ||
      x.microbatch != owner.microbatch)
    return fail(r, i,
                "is all-to-all " + std::to_string(stream.allToAllsSeen + 1) + " of " +
                    std::to_string(stream.allToAlls.size()) + " of " + at(r, stream.owner) +
                    ", which issues " + runtime::opName(want.op) + " of " +
                    std::to_string(want.bytes) + " bytes for layer " + std::to_string(want.layer) +
                    " there");
  ++stream.allToAllsSeen;
  if (x.peerStage < 0)
    return;
  // It hides behind the other half of its compute's paired step: the compute after a paired
  // forward, or the paired forward before its backward. Anything else computes nothing beside
  // it, or reads what it receives.
  int64_t partner = -1;
  if (owner.flags == Instruction::kPaired) {
    for (size_t k = stream.next + 1; k < stream.list.size() && partner < 0; ++k)
      if (inst(r, stream.list[k]).isCompute())
        partner = stream.list[k];
  } else if (stream.previousCompute >= 0 &&
             inst(r, stream.previousCompute).flags == Instruction::kPaired) {
    partner = stream.previousCompute;
  }
  if (partner < 0 || inst(r, partner).stage != x.peerStage ||
      inst(r, partner).microbatch != x.peerMicrobatch)
    fail(r, i,
         "hides behind s" + std::to_string(x.peerStage) + " mb" + std::to_string(x.peerMicrobatch) +
             ", which is not the other half of a paired step "
             "with " +
             at(r, stream.owner) + ": what it receives could be read before it arrives");
}

std::string Simulation::waitReason(int32_t r, int s) const {
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
    const int64_t j = peerOf(r, i);
    if (j < 0)
      return "has no peer";
    const Stream &other = state[peer].streams[inst(peer, j).stream];
    int64_t there = other.next < other.list.size() ? other.list[other.next] : -1;
    return "waits for rank " + std::to_string(peer) + " to reach instruction " + std::to_string(j) +
           "; that stream is at instruction " +
           (there >= 0 ? at(peer, there) : std::string("its end"));
  }
  default:
    return "waits for the other members of group " + std::to_string(x.group);
  }
}

void Simulation::finish() {
  for (int32_t r = 0; r < ranks() && !result.error; ++r)
    for (int s = 0; s < kStreams && !result.error; ++s)
      if (!state[r].streams[s].list.empty())
        checkAllToAllsDone(r, s, state[r].streams[s].list.back(), true);
  if (result.error)
    return;
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
                      "rank " + std::to_string(r) + " never runs the weight gradient of " + stage +
                          " micro-batch " + std::to_string(m));
      }
      if (plan.config.data > 1 && flow.reducedBy[s] < 0)
        return fail(r, last,
                    "rank " + std::to_string(r) + " never reduces the gradients of " + stage);
      if (flow.steppedBy[s] < 0)
        return fail(r, last, "rank " + std::to_string(r) + " never updates " + stage);
      const bool tiedStage = plan.transformer && plan.transformer->sharesTokenTable() &&
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
  // Every stream ends at the end of its last instruction, which ends last among its own.
  for (const RankState &rs : state)
    for (const Stream &stream : rs.streams)
      result.makespan = std::max(result.makespan, stream.time);
}
