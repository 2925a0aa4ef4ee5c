//===- Executor.cpp - one interpreter of a rank's instruction streams -----===//

#include "runtime/exec/Executor.h"

#include "runtime/plan/TensorCollectives.h"

#include "absl/strings/str_cat.h"

#include <thread>

namespace conduit::runtime {

Executor::Executor(const Plan &plan, int32_t pipelineRank, int32_t replica, Backend &backend,
                   ExecutorOptions options)
    : plan(plan), rank(pipelineRank), replica(replica), backend(backend),
      options(std::move(options)), streams(kMaxStreams) {
  const std::vector<Instruction> &program = plan.ranks[rank].instructions;
  for (size_t i = 0; i < program.size(); ++i)
    streams[program[i].stream].list.push_back(static_cast<int64_t>(i));
  backend.setPeerTimeout(this->options.peerTimeoutS);
}

void idleWait(int round) {
  // Nothing to do until a peer answers. Give the core away: on an oversubscribed machine the
  // peer may be waiting for it.
  if (round < 64)
    std::this_thread::yield();
  else
    std::this_thread::sleep_for(std::chrono::microseconds(20));
}

absl::StatusOr<bool> waitFor(Work &work, double timeoutS) {
  const auto start = std::chrono::steady_clock::now();
  for (int round = 0;; ++round) {
    CONDUIT_ASSIGN_OR_RETURN(bool done, work.test());
    if (done)
      return true;
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > timeoutS)
      return false;
    idleWait(round);
  }
}

std::string otherRanks(const std::vector<int64_t> &group, int64_t self) {
  std::string out;
  for (int64_t r : group)
    if (r != self)
      absl::StrAppend(&out, out.empty() ? "" : ", ", r);
  return out;
}

double Executor::now() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - options.origin).count();
}

absl::StatusOr<StepOutcome> Executor::runStep(int64_t step) {
  currentStep = step;
  const RankProgram &program = plan.ranks[rank];
  CONDUIT_RETURN_IF_ERROR(backend.beginStep(step));
  fired.assign(program.events, 0);
  times.assign(program.instructions.size(), {-1, -1, -1});
  for (Stream &s : streams) {
    s.next = 0;
    s.busy = false;
    s.partner = Partner();
  }
  double lastProgress = now();
  int idleRounds = 0;
  while (true) {
    bool progress = false, remaining = false;
    for (int s = 0; s < kMaxStreams; ++s) {
      Stream &stream = streams[s];
      if (!stream.busy)
        continue;
      CONDUIT_ASSIGN_OR_RETURN(bool done, backend.poll(stream.inFlight));
      if (done) {
        finish(stream, now());
        progress = true;
      }
    }
    for (Stream &stream : streams) {
      Partner &partner = stream.partner;
      if (!partner.started || partner.done)
        continue;
      CONDUIT_ASSIGN_OR_RETURN(partner.done, backend.poll(partner.ticket));
      if (partner.done) {
        partner.endTime = now();
        progress = true;
      }
    }
    // Communication first: a transfer that a finished compute just enabled is posted before
    // the next compute starts and takes the core.
    for (bool compute : {false, true})
      for (int s = 0; s < kMaxStreams; ++s)
        CONDUIT_RETURN_IF_ERROR(advance(streams[s], s, step, compute, progress));
    for (const Stream &stream : streams)
      remaining = remaining || stream.busy || stream.next < stream.list.size();
    if (!remaining)
      break;
    if (progress) {
      lastProgress = now();
      idleRounds = 0;
      continue;
    }
    const double waited = now() - lastProgress;
    if (waited > options.peerTimeoutS)
      return stalled(waited);
    idleWait(++idleRounds);
  }
  CONDUIT_ASSIGN_OR_RETURN(StepOutcome outcome, backend.endStep(step));
  if (options.record)
    for (size_t i = 0; i < times.size(); ++i)
      recorded.push_back({step, static_cast<int64_t>(i), times[i]});
  return outcome;
}

absl::Status Executor::advance(Stream &stream, int s, int64_t step, bool startCompute,
                               bool &progress) {
  const std::vector<Instruction> &program = plan.ranks[rank].instructions;
  // Work that completes inside start() (compute on the CPU; on a device, its enqueue) ends
  // this stream's turn once the signals behind it are passed: a transfer the plan orders right
  // after a compute must not wait behind the rest of the stream's compute. On a device this
  // costs one more round (a poll of each busy stream) per compute.
  if (stream.busy && stream.partner.looking && startCompute)
    return startPartner(stream, s, step, progress);
  bool ranWork = false;
  while (!stream.busy && stream.next < stream.list.size()) {
    const int64_t i = stream.list[stream.next];
    const Instruction &x = program[i];
    if (ranWork && x.op != Op::Signal)
      return absl::OkStatus();
    if (!startCompute && x.op != Op::Wait && x.op != Op::Signal && !x.communicates())
      return absl::OkStatus();
    if (times[i].posted < 0) {
      times[i].posted = now();
      if (options.onInstruction)
        CONDUIT_RETURN_IF_ERROR(options.onInstruction(step, i));
    }
    if (x.op == Op::Wait || x.op == Op::Signal) {
      if (x.op == Op::Wait) {
        if (!fired[x.event])
          return absl::OkStatus(); // blocked until another stream signals
        CONDUIT_RETURN_IF_ERROR(backend.wait(s, x.event));
      } else {
        fired[x.event] = 1;
        CONDUIT_RETURN_IF_ERROR(backend.signal(s, x.event));
      }
      times[i].start = times[i].end = now();
      ++stream.next;
      progress = true;
      continue;
    }
    Partner &partner = stream.partner;
    if (partner.started && stream.next == partner.begin) {
      // Started ahead, beside the forward it is paired with.
      partner.started = false;
      progress = true;
      stream.inFlight = partner.ticket;
      stream.inFlightEnd = partner.end;
      stream.busy = true;
      if (partner.done) {
        finish(stream, partner.endTime);
        ranWork = true;
      }
      continue;
    }
    // One instruction, or every transfer of its batch: they are posted together. A compute
    // takes the tensor collectives that follow it: its layers issue them as it runs.
    const size_t end = workEnd(stream, stream.next);
    std::vector<int64_t> indices(stream.list.begin() + stream.next, stream.list.begin() + end);
    begin(stream, stream.next, end, now());
    const bool hiding = x.flags == Instruction::kPaired && hidesAllToAlls(stream, stream.next, end);
    pairs.hiding += hiding;
    const bool paired = hiding && backend.overlapsPairs();
    CONDUIT_ASSIGN_OR_RETURN(Ticket ticket,
                             paired ? backend.startPaired(indices) : backend.start(indices));
    progress = true;
    stream.inFlight = ticket;
    stream.inFlightEnd = end;
    stream.busy = true;
    if (ticket == kCompleted) {
      finish(stream, now());
      ranWork = true;
    } else if (paired) {
      partner = Partner();
      partner.looking = true;
      partner.at = end;
    }
  }
  return absl::OkStatus();
}

size_t Executor::workEnd(const Stream &stream, size_t at) const {
  const std::vector<Instruction> &program = plan.ranks[rank].instructions;
  const Instruction &x = program[stream.list[at]];
  size_t end = at + 1;
  if (x.isTransfer() && x.batch >= 0)
    while (end < stream.list.size() && program[stream.list[end]].isTransfer() &&
           program[stream.list[end]].batch == x.batch)
      ++end;
  if (x.isCompute())
    while (end < stream.list.size() && program[stream.list[end]].isInnerCollective())
      ++end;
  return end;
}

bool Executor::hidesAllToAlls(const Stream &stream, size_t at, size_t end) const {
  const std::vector<Instruction> &program = plan.ranks[rank].instructions;
  for (size_t k = at + 1; k < end; ++k) {
    const Instruction &x = program[stream.list[k]];
    if (x.isExpertAllToAll() && x.peerStage >= 0)
      return true;
  }
  return false;
}

void Executor::begin(const Stream &stream, size_t from, size_t end, double t) {
  for (size_t k = from; k < end; ++k) {
    InstructionTime &time = times[stream.list[k]];
    if (time.posted < 0)
      time.posted = t;
    time.start = t;
  }
}

absl::Status Executor::startPartner(Stream &stream, int s, int64_t step, bool &progress) {
  const std::vector<Instruction> &program = plan.ranks[rank].instructions;
  Partner &partner = stream.partner;
  for (; partner.at < stream.list.size(); ++partner.at) {
    const Instruction &x = program[stream.list[partner.at]];
    if (x.op == Op::Signal)
      continue; // fired once the forward ends
    if (x.op != Op::Wait)
      break;
    if (!fired[x.event])
      return absl::OkStatus(); // the partner's input has not arrived
    CONDUIT_RETURN_IF_ERROR(backend.wait(s, x.event));
  }
  partner.looking = false;
  if (partner.at == stream.list.size())
    return absl::OkStatus();
  // The plan pairs a forward with the rank's next compute, a backward or input gradient.
  const int64_t i = stream.list[partner.at];
  if (program[i].op != Op::Backward && program[i].op != Op::BackwardInput)
    return absl::OkStatus();
  if (times[i].posted < 0) {
    times[i].posted = now();
    if (options.onInstruction)
      CONDUIT_RETURN_IF_ERROR(options.onInstruction(step, i));
  }
  partner.begin = partner.at;
  partner.end = workEnd(stream, partner.at);
  const std::vector<int64_t> indices(stream.list.begin() + partner.begin,
                                     stream.list.begin() + partner.end);
  begin(stream, partner.begin, partner.end, now());
  CONDUIT_ASSIGN_OR_RETURN(partner.ticket, backend.startPaired(indices));
  partner.started = true;
  ++pairs.together;
  partner.done = partner.ticket == kCompleted;
  if (partner.done)
    partner.endTime = now();
  progress = true;
  return absl::OkStatus();
}

void Executor::finish(Stream &stream, double t) {
  for (size_t k = stream.next; k < stream.inFlightEnd; ++k)
    times[stream.list[k]].end = t;
  stream.next = stream.inFlightEnd;
  stream.busy = false;
  stream.partner.looking = false; // a partner not started by now starts in its turn
}

absl::Status Executor::stalled(double waitedS) const {
  const Config &c = plan.config;
  const std::vector<Instruction> &program = plan.ranks[rank].instructions;
  const int32_t tensor = options.tensorRank;
  std::string message = absl::StrCat(
      "rank ", c.globalRank(rank, replica, tensor), " (pipeline rank ", rank, ", replica ", replica,
      c.tensor > 1 ? absl::StrCat(", tensor rank ", tensor) : "", ") made no progress for ",
      static_cast<int64_t>(waitedS), " s at step ", currentStep);
  for (int s = 0; s < kMaxStreams; ++s) {
    const Stream &stream = streams[s];
    if (stream.next >= stream.list.size())
      continue;
    const int64_t i = stream.list[stream.next];
    const Instruction &x = program[i];
    absl::StrAppend(&message, "; stream ", s, " waits at instruction ", i, " (", describe(x), ")");
    if (x.isCompute() && stream.busy) {
      // A half of a paired step, parked at an all-to-all of its expert group or a collective
      // of its tensor group.
      const int64_t self = c.globalRank(rank, replica, tensor);
      absl::StrAppend(&message, " at an expert all-to-all, for ranks ",
                      otherRanks(expertGroupRanks(c, rank, replica, tensor), self));
      if (c.tensor > 1)
        absl::StrAppend(&message, ", or a tensor collective, for ranks ",
                        otherRanks(tensorGroupRanks(c, rank, replica), self));
    } else if (x.isTransfer() || x.op == Op::TieGrads)
      absl::StrAppend(&message, " for rank ", c.globalRank(x.peer, replica, tensor),
                      " (pipeline rank ", x.peer, ")");
    else if (x.isCollective()) {
      std::string members;
      for (int32_t r : plan.groups[x.group].ranks)
        for (int32_t d = 0; d < c.data; ++d)
          if (!(r == rank && d == replica))
            absl::StrAppend(&members, members.empty() ? "" : ", ", c.globalRank(r, d, tensor));
      absl::StrAppend(&message, " for ranks ", members);
    } else if (x.op == Op::Wait)
      absl::StrAppend(&message, " for event ", x.event);
  }
  absl::StrAppend(&message, "; the rank it waits for may have failed or stalled");
  return absl::DeadlineExceededError(message);
}

} // namespace conduit::runtime
