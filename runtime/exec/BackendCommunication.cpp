//===- BackendCommunication.cpp - a BackendCore's transfers and collectives ===//
//
// What a BackendCore posts to its Transport: a batch of transfers, a data-parallel collective
// (all-gather, reduce-scatter, all-reduce) with what its completion means for the stage, and
// the tied embeddings' gradient exchange; and, outside a step, waiting for a collective to
// complete.
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/BackendStage.h"
#include "runtime/exec/Executor.h"

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace conduit::runtime {

namespace {

/// How long a collective outside the step (restore, stageParameters) may take.
constexpr double kOutOfStepTimeoutS = 300;

} // namespace

template <typename Grad>
absl::Status BackendCore<Grad>::postTransfers(const std::vector<int64_t> &indices, Pending &p) {
  const std::vector<Instruction> &program = plan->ranks[where.pipelineRank].instructions;
  std::vector<PeerTransfer> transfers;
  transfers.reserve(indices.size());
  for (int64_t i : indices) {
    const Instruction &inst = program[i];
    CONDUIT_ASSIGN_OR_RETURN(int64_t floats, transferFloats(inst, plan->config, rowFloats));
    const Stage *stage = stages[inst.stage].get();
    if (!stage)
      return absl::InternalError(absl::StrCat(describe(inst), ": the stage is not on this rank"));
    const int64_t offset = (inst.begin - stage->spec->samples[inst.microbatch]) * rowFloats;
    PeerTransfer t;
    t.send = inst.op == Op::Send;
    t.peer = where.peer(plan->config, inst.peer);
    t.count = floats;
    const model::Buffer<float> &buffer =
        !t.send ? slots[inst.slot]
                : (inst.kind == Transfer::Activation ? stage->outputs[inst.microbatch]
                                                     : stage->inputGrads[inst.microbatch]);
    if (buffer.empty() || offset + floats > buffer.size())
      return absl::InternalError(absl::StrCat(
          describe(inst), t.send ? ": nothing to send" : ": the receive slot is too small"));
    t.data = buffer.data() + offset;
    transfers.push_back(t);
    if (t.send)
      p.sent.push_back({inst.stage, inst.microbatch, inst.kind == Transfer::Activation});
  }
  p.stream = streamOf(program[indices[0]].stream);
  CONDUIT_ASSIGN_OR_RETURN(p.work, transport->exchange(transfers, p.stream));
  return absl::OkStatus();
}

template <typename Grad>
absl::Status BackendCore<Grad>::postCollective(const Instruction &inst, Pending &p) {
  Stage &stage = *stages[inst.stage];
  p.stream = streamOf(inst.stream);
  constexpr Element grads = elementOf<Grad>();
  switch (inst.op) {
  case Op::AllGather: {
    if (!sharded)
      return absl::FailedPreconditionError(
          absl::StrCat(describe(inst), ": nothing to gather, the stage is not sharded"));
    if (stage.full.empty()) {
      // Written first here, released by a Free on the compute stream.
      model::MemoryScope gathered(ops().memory(), model::MemoryUse::GatheredParameters);
      CONDUIT_ASSIGN_OR_RETURN(
          stage.full, gatherBuffer(stage.allocatedLen(), p.stream, streamOf(kComputeStream)));
    }
    CONDUIT_ASSIGN_OR_RETURN(p.work, gather(stage, stage.full.data(), p.stream));
    p.gathered = &stage;
    break;
  }
  case Op::ReduceScatter: {
    if (!sharded)
      return absl::FailedPreconditionError(
          absl::StrCat(describe(inst), ": the stage is not sharded"));
    // Reducing each run, an I may wait for its W, which a later reduction covers (the
    // optimizer step checks that none is left).
    if (!addsReductions())
      CONDUIT_RETURN_IF_ERROR(checkNoWeightPending(stage, inst));
    CONDUIT_ASSIGN_OR_RETURN(p.work, perSegment(stage, [&](const ShardSegment &g, int32_t group) {
                               // ZeRO-1, and each run's reduction: into this replica's block
                               // of the whole gradients.
                               Grad *shard = reducesInPlace() || addsReductions()
                                                 ? stage.grad.data() + g.at + g.shardOffset
                                                 : stage.gradShard.data() + g.shardAt;
                               return transport->reduceScatter(group, grads,
                                                               stage.grad.data() + g.at, shard,
                                                               g.shardLen, p.stream);
                             }));
    p.reduced = &stage;
    break;
  }
  case Op::AllReduce: {
    CONDUIT_RETURN_IF_ERROR(checkNoWeightPending(stage, inst));
    CONDUIT_ASSIGN_OR_RETURN(p.work, perSegment(stage, [&](const ShardSegment &g, int32_t group) {
                               return transport->allReduce(group, grads, stage.grad.data() + g.at,
                                                           g.padded, p.stream);
                             }));
    break;
  }
  default:
    return absl::InternalError(absl::StrCat(describe(inst), " is not a collective"));
  }
  return absl::OkStatus();
}

template <typename Grad> Grad *BackendCore<Grad>::tiedGradient(Stage &stage, bool head) {
  if (!head)
    return stage.grad.data(); // the embedding's token table comes first
  // The head's tied matrix, or the first multi-token prediction module's copy of the table.
  return stage.grad.data() + stage.chain.tableCopyAt();
}

template <typename Grad>
void BackendCore<Grad>::addGradients(int64_t n, const Grad *src, Grad *dst) {
  if constexpr (std::is_same_v<Grad, float>) {
    ops().add(n, src, dst);
  } else {
    // Double accumulators live in host memory (the CPU backend).
    for (int64_t j = 0; j < n; ++j)
      dst[j] += src[j];
  }
}

template <typename Grad> void BackendCore<Grad>::addReducedShards(Stage &stage) {
  for (const ShardSegment *g : {&stage.dense, &stage.experts})
    if (g->shardLen > 0 && !g->inPlace)
      addGradients(g->shardLen, stage.grad.data() + g->at + g->shardOffset,
                   stage.gradShard.data() + g->shardAt);
}

template <typename Grad>
absl::StatusOr<bool> BackendCore<Grad>::tieGradients(const Instruction &inst, Pending &p) {
  const int32_t last = static_cast<int32_t>(plan->stages.size()) - 1;
  Stage *mine = stages[inst.stage].get();
  // The last stage's copy: the head's tied matrix or the first module's (tableCopyAt).
  auto noCopy = [&](const Stage &s) { return s.spec->index == last && s.chain.tableCopyAt() < 0; };
  if (!mine || !plan->transformer || noCopy(*mine))
    return absl::InternalError(absl::StrCat(describe(inst), ": no tied copy on this rank"));
  CONDUIT_RETURN_IF_ERROR(checkNoWeightPending(*mine, inst));
  const int64_t n = tiedCount();
  if (inst.peer == where.pipelineRank) {
    // Both copies here: each becomes the same sum (addition commutes, so the bits agree).
    Stage *other = stages[inst.peerStage].get();
    if (!other || noCopy(*other))
      return absl::InternalError(absl::StrCat(describe(inst), ": the other copy is not here"));
    CONDUIT_RETURN_IF_ERROR(checkNoWeightPending(*other, inst));
    Grad *embedding = tiedGradient(inst.stage == 0 ? *mine : *other, /*head=*/false);
    Grad *head = tiedGradient(inst.stage == last ? *mine : *other, /*head=*/true);
    addGradients(n, embedding, head);
    if constexpr (std::is_same_v<Grad, float>)
      ops().copy(n, head, embedding);
    else
      std::copy(head, head + n, embedding);
    return false;
  }
  // Gradients travel as their bytes: double accumulators as two floats each.
  constexpr int64_t floatsPer = sizeof(Grad) / sizeof(float);
  p.tied = tiedGradient(*mine, /*head=*/inst.stage == last && inst.stage != 0);
  {
    // A receive buffer while it is added (as the memory plan counts it).
    model::MemoryScope receive(ops().memory(), model::MemoryUse::ReceiveBuffers);
    p.incoming = allocateGrad<Grad>(ops(), n);
  }
  const int64_t peer = where.peer(plan->config, inst.peer);
  std::vector<PeerTransfer> transfers(2);
  transfers[0] = {true, peer, reinterpret_cast<float *>(p.tied), n * floatsPer};
  transfers[1] = {false, peer, reinterpret_cast<float *>(p.incoming.data()), n * floatsPer};
  p.stream = streamOf(inst.stream);
  CONDUIT_ASSIGN_OR_RETURN(p.work, transport->exchange(transfers, p.stream));
  return true;
}

template <typename Grad> absl::Status BackendCore<Grad>::complete(std::unique_ptr<Work> work) {
  const auto start = std::chrono::steady_clock::now();
  while (true) {
    absl::StatusOr<bool> done = work->test();
    if (done.ok() && *done)
      return synchronizeAll();
    absl::Status failure = done.status();
    if (failure.ok() &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >
            kOutOfStepTimeoutS)
      failure = absl::DeadlineExceededError(
          absl::StrCat("rank ", rank, ": a collective outside the step did not complete in ",
                       kOutOfStepTimeoutS, " s"));
    if (!failure.ok()) {
      // A device collective may wait for a peer that is gone: stop it, or nothing that
      // synchronizes the device (the destructor included) would return.
      abort();
      return failure;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

template <typename Grad>
template <typename Post>
absl::StatusOr<std::unique_ptr<Work>> BackendCore<Grad>::perSegment(const Stage &stage, Post post) {
  CONDUIT_ASSIGN_OR_RETURN(std::unique_ptr<Work> work, post(stage.dense, stage.group));
  if (stage.experts.n == 0 || stage.experts.inPlace) // nothing to reduce or gather
    return work;
  CONDUIT_ASSIGN_OR_RETURN(std::unique_ptr<Work> experts,
                           post(stage.experts, expertDataGroup(*plan, stage.group)));
  return joinWork(std::move(work), std::move(experts));
}

template <typename Grad>
absl::StatusOr<std::unique_ptr<Work>> BackendCore<Grad>::gather(const Stage &stage, float *full,
                                                                StreamHandle stream) {
  // A segment updated in place is whole on this rank already: in the stage's own array, or
  // kept apart.
  const ShardSegment &g = stage.experts;
  if (g.inPlace && g.n > 0 && full != stage.full.data())
    ops().copy(g.n, stage.apartParams.empty() ? stage.full.data() + g.at : stage.apartParams.data(),
               full + g.at);
  return perSegment(stage, [&](const ShardSegment &g, int32_t group) {
    return transport->allGather(group, Element::Float32, stage.master.data() + g.shardAt,
                                full + g.at, g.shardLen, stream);
  });
}

template <typename Grad>
absl::Status BackendCore<Grad>::gatherOutOfStep(Stage &stage, float *full, StreamHandle stream) {
  CONDUIT_ASSIGN_OR_RETURN(std::unique_ptr<Work> work, gather(stage, full, stream));
  return complete(std::move(work));
}

template <typename Grad>
absl::StatusOr<double> BackendCore<Grad>::pingPong(int64_t peer, int64_t bytes, int rounds,
                                                   bool first, double pauseS) {
  const int64_t floats = std::max<int64_t>(1, (bytes + 3) / 4);
  model::Buffer<float> buffer = ops().allocate(floats);
  const StreamHandle stream = streamOf(kComputeStream);
  using Clock = std::chrono::steady_clock;
  // One message, waited for as the executor waits for a transfer.
  auto move = [&](bool send) -> absl::Status {
    CONDUIT_ASSIGN_OR_RETURN(std::unique_ptr<Work> work,
                             transport->exchange({{send, peer, buffer.data(), floats}}, stream));
    const Clock::time_point start = Clock::now();
    for (int round = 1;; ++round) {
      CONDUIT_ASSIGN_OR_RETURN(bool done, work->test());
      if (done)
        return absl::OkStatus();
      if (std::chrono::duration<double>(Clock::now() - start).count() > kOutOfStepTimeoutS)
        return absl::DeadlineExceededError(
            absl::StrCat("rank ", rank, ": timing the transport, rank ", peer, " did not answer"));
      idleWait(round);
    }
  };
  // Busy, as a compute keeps the core, before each message: its receiver has been waiting.
  auto pause = [&]() {
    const Clock::time_point until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                       std::chrono::duration<double>(pauseS));
    while (Clock::now() < until) {
    }
  };
  // The median round trip: a round in which the scheduler took the core away is not the
  // transport's. The first round trip sets the path up and is not counted.
  std::vector<double> roundTrips;
  for (int r = 0; r <= rounds; ++r) {
    const Clock::time_point start = Clock::now();
    if (first)
      pause();
    CONDUIT_RETURN_IF_ERROR(move(first));
    if (!first)
      pause();
    CONDUIT_RETURN_IF_ERROR(move(!first));
    if (r > 0)
      roundTrips.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  if (roundTrips.empty())
    return 0.0;
  std::nth_element(roundTrips.begin(), roundTrips.begin() + roundTrips.size() / 2,
                   roundTrips.end());
  return std::max(0.0, roundTrips[roundTrips.size() / 2] / 2 - pauseS);
}

// The members this file defines, for both gradient types (BackendCore.cpp instantiates the
// class and the rest of its members).
#define CONDUIT_INSTANTIATE_COMMUNICATION(Grad)                                                    \
  template absl::Status BackendCore<Grad>::postTransfers(const std::vector<int64_t> &, Pending &); \
  template absl::Status BackendCore<Grad>::postCollective(const Instruction &, Pending &);         \
  template Grad *BackendCore<Grad>::tiedGradient(Stage &, bool);                                   \
  template void BackendCore<Grad>::addGradients(int64_t, const Grad *, Grad *);                    \
  template void BackendCore<Grad>::addReducedShards(Stage &);                                      \
  template absl::StatusOr<bool> BackendCore<Grad>::tieGradients(const Instruction &, Pending &);   \
  template absl::Status BackendCore<Grad>::complete(std::unique_ptr<Work>);                        \
  template absl::StatusOr<double> BackendCore<Grad>::pingPong(int64_t, int64_t, int, bool,         \
                                                              double);                             \
  template absl::Status BackendCore<Grad>::gatherOutOfStep(Stage &, float *, StreamHandle);        \
  template absl::StatusOr<std::unique_ptr<Work>> BackendCore<Grad>::gather(const Stage &, float *, \
                                                                           StreamHandle);

CONDUIT_INSTANTIATE_COMMUNICATION(float)
CONDUIT_INSTANTIATE_COMMUNICATION(double)

} // namespace conduit::runtime
