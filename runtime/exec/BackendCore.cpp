//===- BackendCore.cpp - the stage bookkeeping every backend shares -------===//
//
// BackendCore's set-up (the stages of this rank, their shards, slots and the tensor group
// the layers call), the step (beginStep, start, which dispatches a batch of instructions to
// compute or communication, poll, endStep) and the saved state (snapshot, restore, the whole
// parameters of each stage). The compute is in BackendCompute.cpp, what goes through the
// transport in BackendCommunication.cpp.
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/BackendStage.h"
#include "runtime/exec/Executor.h"
#include "runtime/exec/Fiber.h"
#include "runtime/plan/TensorCollectives.h"

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace conduit::runtime {

/// What one compute's layers issued, its first failure, and how its expert all-to-alls and
/// tensor collectives wait: in place, or parked on the compute's fiber when it is a half of a
/// paired step.
template <typename Grad> struct BackendCore<Grad>::CallState {
  std::vector<Op> issued;
  absl::Status failure;
  GroupPass pass = GroupPass::Forward;
  Fiber *fiber = nullptr;  ///< the half's fiber
  Work *waiting = nullptr; ///< the collective it is parked at
};

template <typename Grad> struct BackendCore<Grad>::Half {
  std::unique_ptr<Fiber> fiber;
  CallState calls;
  ComputeContext context; ///< while parked
  absl::Status status;    ///< once ended
};

template <typename Grad>
class BackendCore<Grad>::TensorCalls final : public model::TensorGroup<float>,
                                             public model::ExpertGroup<float> {
public:
  /// `expertOthers`, `tensorOthers`: the other members of the expert and tensor groups, as
  /// messages name them; `postTensor`: whether the tensor collectives are posted (posts());
  /// `timeoutS`: how long a collective outside a paired step may wait for them.
  TensorCalls(BackendCore &backend, Transport &transport, StreamHandle stream, ExpertPlace expert,
              int64_t experts, std::string expertOthers, std::string tensorOthers, bool postTensor,
              const double &timeoutS)
      : backend(backend), transport(transport), stream(stream), expert(expert), experts(experts),
        expertOthers(std::move(expertOthers)), tensorOthers(std::move(tensorOthers)),
        postTensor(postTensor), timeoutS(timeoutS) {}

  // Where posted, waited for as an all-to-all is (collective()): a half of a paired step
  // parks, so that the other half computes meanwhile.
  void allReduce(int64_t n, float *data, model::Reduction op) override {
    issue(Op::TensorAllReduce, [&] {
      return collective(kTensor, [&](StreamHandle on) {
        return transport.tensorAllReduce(state->pass, posts(), data, n, op, on);
      });
    });
  }
  void allGather(int64_t n, const float *shard, float *full) override {
    issue(Op::TensorAllGather, [&] {
      return collective(kTensor, [&](StreamHandle on) {
        return transport.tensorAllGather(state->pass, posts(), shard, full, n, on);
      });
    });
  }
  void reduceScatter(int64_t n, const float *full, float *shard) override {
    issue(Op::TensorReduceScatter, [&] {
      return collective(kTensor, [&](StreamHandle on) {
        return transport.tensorReduceScatter(state->pass, posts(), full, shard, n, on);
      });
    });
  }
  int64_t size() const override { return experts; }
  int64_t position() const override { return expert.position; }
  void allToAll(model::ExpertExchange what, const float *send,
                const std::vector<int64_t> &sendCounts, float *recv,
                const std::vector<int64_t> &recvCounts) override {
    auto call = [&]() -> absl::Status {
      return collective(kAllToAll, [&](StreamHandle on) {
        return transport.expertAllToAll(state->pass, send, sendCounts, recv, recvCounts, on);
      });
    };
    // The counts belong to the dispatch that follows them: the plan lists that one.
    if (what == model::ExpertExchange::Counts) {
      if (state->failure.ok())
        state->failure = call();
      return;
    }
    issue(what == model::ExpertExchange::Dispatch ? Op::ExpertDispatch : Op::ExpertCombine, call);
  }

  /// The compute whose calls these are from now on (null: the backend's own).
  void use(CallState *calls) { state = calls ? calls : &own; }
  CallState *current() const { return state; }
  /// Starts a compute: its all-to-alls and tensor collectives belong to `pass`.
  void begin(GroupPass pass) {
    state->issued.clear();
    state->failure = absl::OkStatus();
    state->pass = pass;
  }
  /// What the layers issued since begin(), and the first failure.
  std::vector<Op> takeIssued() { return std::exchange(state->issued, {}); }
  absl::Status takeFailure() { return std::exchange(state->failure, absl::OkStatus()); }

private:
  template <typename Call> void issue(Op op, Call call) {
    state->issued.push_back(op);
    if (state->failure.ok()) // after a failure the group's members no longer match: issue nothing
      state->failure = call();
  }

  /// Whether the tensor collectives are posted: in a run that pairs steps, whose halves park
  /// at them. Elsewhere they run to their end in the call (MPI's blocking collectives, faster).
  /// Per run, not per compute: whether a paired step's second half runs as a half depends on
  /// when its input arrives, which differs between members, and MPI matches a non-blocking
  /// collective only with non-blocking ones.
  bool posts() const { return postTensor; }

  /// Which group a collective waits for, as messages name it.
  enum Group { kAllToAll, kTensor };

  /// A collective of `group` that `post(stream)` posts, until it has arrived. A half of a
  /// paired step on a device posts on its pass's stream, after what the compute stream holds
  /// (the input's writes), parks until that stream has run it, and then orders the compute
  /// stream after it: the other half's kernels, enqueued meanwhile, run beside the collective.
  /// Elsewhere it is posted on the compute stream.
  template <typename Post> absl::Status collective(Group group, Post post) {
    const StreamHandle side = state->fiber ? backend.passStream(state->pass) : nullptr;
    if (side)
      CONDUIT_RETURN_IF_ERROR(backend.order(stream, side));
    CONDUIT_ASSIGN_OR_RETURN(std::unique_ptr<Work> work, post(side ? side : stream));
    if (!side)
      return work ? arrive(*work, group) : absl::OkStatus();
    CONDUIT_ASSIGN_OR_RETURN(std::unique_ptr<Work> ran, backend.drained(side));
    work = joinWork(std::move(work), std::move(ran));
    if (work)
      CONDUIT_RETURN_IF_ERROR(arrive(*work, group));
    // After the transport's Work, which may have enqueued its copies on `side` since.
    return backend.order(side, stream);
  }

  /// Until `work` has arrived: parked, in a half of a paired step, so that the other half
  /// computes meanwhile; else polled here.
  absl::Status arrive(Work &work, Group group) {
    const char *what = group == kAllToAll ? "an expert all-to-all" : "a tensor collective";
    if (state->fiber) {
      state->waiting = &work;
      const bool resumed = state->fiber->park(); // the driver resumes it once `work` is done
      state->waiting = nullptr;
      if (!resumed)
        return absl::CancelledError(absl::StrCat("the step was abandoned during ", what));
      return absl::OkStatus();
    }
    CONDUIT_ASSIGN_OR_RETURN(bool done, waitFor(work, timeoutS));
    if (!done)
      return absl::DeadlineExceededError(absl::StrCat(
          what, " waited ", static_cast<int64_t>(timeoutS), " s for ranks ",
          group == kAllToAll ? expertOthers : tensorOthers, " of its ",
          group == kAllToAll ? "expert" : "tensor", " group; a member may have failed or stalled"));
    return absl::OkStatus();
  }

  BackendCore &backend;
  Transport &transport;
  StreamHandle stream;
  ExpertPlace expert;
  int64_t experts = 1;
  std::string expertOthers, tensorOthers;
  bool postTensor = false;
  const double &timeoutS;
  CallState own;
  CallState *state = &own;
};

template <typename Grad>
BackendCore<Grad>::BackendCore(int64_t rank, bool measureLayers)
    : rank(rank), measureLayers(measureLayers) {}

template <typename Grad> BackendCore<Grad>::~BackendCore() = default;

template <typename Grad> void BackendCore<Grad>::release() {
  // A parked half is cancelled: it runs to its end (communicating no more), in its context.
  for (std::unique_ptr<Half> &half : halves)
    if (half) {
      const ComputeContext driver = currentContext();
      enterContext(half->context);
      half->fiber.reset();
      enterContext(driver);
      half.reset();
    }
  pending.clear();
  slots.clear();
  stages.clear();
  transport.reset();
}

template <typename Grad> void BackendCore<Grad>::abort() {
  if (transport)
    transport->abort();
}

template <typename Grad> absl::Status BackendCore<Grad>::initialise(const Plan &p) {
  plan = &p;
  const Config &c = p.config;
  where = RankPosition::of(c, rank);
  CONDUIT_ASSIGN_OR_RETURN(shape, model::GptShape::fromPlan(p));
  CONDUIT_ASSIGN_OR_RETURN(data, model::makeTokenSource(c, shape->vocab, shape->seq));
  optimizer = model::OptimizerConfig::fromPlan(c);
  sharded = isSharded(c);
  shape->tensorRank = where.tensorRank;
  shape->expertRank = expertPlaceOf(c, where).position;
  rowFloats = shape->localSeq() * shape->hidden;
  CONDUIT_ASSIGN_OR_RETURN(transport, connect(p));
  model::Ops<float> &math = ops();
  if (shape->tensorParallel() || c.expert > 1) {
    std::string expertOthers =
        otherRanks(expertGroupRanks(c, where.pipelineRank, where.replica, where.tensorRank), rank);
    std::string tensorOthers =
        otherRanks(tensorGroupRanks(c, where.pipelineRank, where.replica), rank);
    // The program of this pipeline rank, which every member of the tensor group runs.
    const std::vector<Instruction> &program = p.ranks[where.pipelineRank].instructions;
    const bool pairs =
        overlapsPairs() && std::any_of(program.begin(), program.end(), [](const Instruction &x) {
          return x.flags == Instruction::kPaired;
        });
    tensor = std::make_unique<TensorCalls>(
        *this, *transport, streamOf(kComputeStream), expertPlaceOf(c, where), c.expert,
        std::move(expertOthers), std::move(tensorOthers), pairs, peerTimeoutS);
    if (shape->tensorParallel())
      math.setTensorGroup(tensor.get());
    if (c.expert > 1)
      math.setExpertGroup(tensor.get());
  }
  using model::MemoryScope;
  using model::MemoryUse;

  int32_t group = -1;
  for (size_t g = 0; g < p.groups.size(); ++g)
    if (p.groups[g].ranks[0] == where.pipelineRank)
      group = static_cast<int32_t>(g);
  stages.clear();
  stages.resize(p.stages.size());
  for (const runtime::Stage &spec : p.stages) {
    if (spec.rank != where.pipelineRank)
      continue;
    auto stage = std::make_unique<Stage>();
    stage->spec = &spec;
    stage->group = group;
    CONDUIT_ASSIGN_OR_RETURN(stage->chain, model::LayerChain<float>::build(
                                               p, *shape, spec.firstLayer, spec.endLayer, math,
                                               c.checkpointing, ShardLayout::align(c)));
    static_cast<ShardLayout &>(*stage) =
        ShardLayout::of(stage->chain.parameterLayout(), c, sharded, where);
    for (int64_t bias : stage->chain.loadBalancedBiases())
      for (int64_t e = 0; e < shape->experts; ++e)
        if (const int64_t i = stage->updatedIndex(bias + e, sharded); i >= 0)
          stage->balancedBiases.push_back(i);
    std::sort(stage->balancedBiases.begin(), stage->balancedBiases.end());
    // Every replica initialises its part of the stage as the others do, then keeps its shards.
    {
      MemoryScope parameters(math.memory(), MemoryUse::Parameters);
      stage->full = math.allocate(stage->padded);
      stage->chain.initialise(stage->full.data(), static_cast<uint64_t>(c.seed));
      if (sharded) {
        stage->master = math.allocate(stage->shardLen);
        stage->forEachShard([&](const ShardSegment &g, int64_t at, int64_t count) {
          if (!g.inPlace)
            math.copy(count, stage->full.data() + at, stage->master.data() + g.shardAt);
        });
      }
    }
    if (stage->experts.apart)
      keepApart(*stage, c.sharding == Sharding::Full);
    stage->gathered = true;
    if (c.sharding == Sharding::Full && sharded) {
      stage->full.reset();
      stage->gathered = false;
    }
    {
      MemoryScope state(math.memory(), MemoryUse::OptimizerState);
      stage->optimizer = math.allocate(optimizer.stateWidth() * stage->updatedLen);
    }
    MemoryScope gradients(math.memory(), MemoryUse::Gradients);
    if (sharded && !reducesInPlace())
      stage->gradShard = allocateGrad<Grad>(math, stage->shardLen);
    if (!gradientsSharded())
      stage->grad = allocateGrad<Grad>(math, stage->padded);
    stages[spec.index] = std::move(stage);
  }
  // The plan's receive slots, for the whole run (as its memory plan counts them).
  slots.clear();
  {
    MemoryScope receive(math.memory(), MemoryUse::ReceiveBuffers);
    for (int64_t bytes : p.ranks[where.pipelineRank].slots)
      slots.push_back(math.allocate(bytes / c.elementBytes()));
  }
  // Who reads what each stage produces: its sends, and the compute of a stage of this rank
  // that follows (forward) or precedes it (backward).
  readers.clear();
  for (const Instruction &inst : p.ranks[where.pipelineRank].instructions) {
    if (inst.op == Op::Send)
      ++readers[{inst.stage, inst.microbatch, inst.kind == Transfer::Activation}];
    else if (inst.isCompute() && stages[inst.stage])
      for (const Produced &read : localReads(inst))
        ++readers[read];
  }
  return initialised();
}

template <typename Grad> int64_t BackendCore<Grad>::largestMicrobatch() const {
  int64_t largest = 0;
  for (const std::unique_ptr<Stage> &stage : stages)
    if (stage)
      for (int64_t mb = 0; mb < stage->spec->numMicrobatches(); ++mb)
        largest = std::max(largest, stage->samplesOf(mb));
  return largest;
}

template <typename Grad> absl::Status BackendCore<Grad>::beginStep(int64_t s) {
  step = s;
  lossSum = 0;
  auxLossSum = zLossSum = mtpLossSum = 0;
  for (std::unique_ptr<Stage> &stage : stages)
    if (stage) {
      const size_t m = stage->spec->numMicrobatches();
      for (auto *v : {&stage->outputs, &stage->inputGrads}) {
        v->clear();
        v->resize(m);
      }
      stage->caches.clear();
      stage->caches.resize(m);
      stage->progress.assign(m, {});
    }
  readersLeft = readers;
  return absl::OkStatus();
}

template <typename Grad>
absl::StatusOr<Ticket> BackendCore<Grad>::start(const std::vector<int64_t> &indices) {
  const std::vector<Instruction> &program = plan->ranks[where.pipelineRank].instructions;
  const Instruction &first = program[indices[0]];
  if (first.communicates()) {
    Pending p;
    if (first.isTransfer()) {
      CONDUIT_RETURN_IF_ERROR(postTransfers(indices, p));
    } else if (first.isCollective()) {
      CONDUIT_RETURN_IF_ERROR(postCollective(first, p));
    } else {
      CONDUIT_ASSIGN_OR_RETURN(bool posted, tieGradients(first, p));
      if (!posted)
        return kCompleted;
    }
    pending.emplace(nextTicket, std::move(p));
    return nextTicket++;
  }
  CONDUIT_RETURN_IF_ERROR(compute(indices));
  return kCompleted;
}

template <typename Grad>
absl::Status BackendCore<Grad>::compute(const std::vector<int64_t> &indices) {
  const Instruction &first = plan->ranks[where.pipelineRank].instructions[indices[0]];
  if (tensor && first.isCompute())
    tensor->begin(first.op == Op::Forward ? GroupPass::Forward : GroupPass::Backward);
  // With --profile, a compute's time beyond its layers': the stage's own work around them.
  const double layersBefore = timer.recordedSeconds();
  const auto started = std::chrono::steady_clock::now();
  switch (first.op) {
  case Op::Forward:
    CONDUIT_RETURN_IF_ERROR(forward(first));
    break;
  case Op::Backward:
  case Op::BackwardInput:
    CONDUIT_RETURN_IF_ERROR(backward(first));
    break;
  case Op::BackwardWeight:
    CONDUIT_RETURN_IF_ERROR(backwardWeight(first));
    break;
  case Op::OptimizerStep:
    CONDUIT_RETURN_IF_ERROR(optimizerStep(*stages[first.stage], first));
    break;
  case Op::Free:
    if (plan->config.sharding == Sharding::Full && sharded) {
      // On a device, released on the compute stream after the last compute that reads it.
      stages[first.stage]->full.reset();
      stages[first.stage]->gathered = false;
    }
    break;
  default:
    return absl::InternalError(
        absl::StrCat("the ", name(), " backend cannot start ", describe(first)));
  }
  if (first.isCompute()) {
    CONDUIT_RETURN_IF_ERROR(checkTensorCalls(indices));
    if (measureLayers) {
      const double took =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      timer.recordOverhead(first.op, took - (timer.recordedSeconds() - layersBefore));
    }
  }
  return deviceStatus();
}

template <typename Grad> bool BackendCore<Grad>::overlapsPairs() const {
  // The transports match each pass's all-to-alls and tensor collectives apart, so the halves
  // may interleave theirs.
  return plan && plan->config.expert > 1 && !measureLayers;
}

template <typename Grad>
typename BackendCore<Grad>::ComputeContext BackendCore<Grad>::currentContext() {
  return {ops().memory().context(), ops().countsLoss(), tensor ? tensor->current() : nullptr};
}

template <typename Grad> void BackendCore<Grad>::enterContext(const ComputeContext &context) {
  ops().memory().setContext(context.memory);
  ops().countLoss(context.countingLoss);
  if (tensor)
    tensor->use(context.calls);
}

template <typename Grad> void BackendCore<Grad>::runHalf(Half &half, std::function<void()> body) {
  const ComputeContext driver = currentContext();
  enterContext(half.context);
  if (body)
    half.fiber->run(std::move(body));
  else
    half.fiber->resume();
  half.context = currentContext();
  enterContext(driver);
}

template <typename Grad>
absl::StatusOr<Ticket> BackendCore<Grad>::startPaired(const std::vector<int64_t> &indices) {
  if (!overlapsPairs())
    return start(indices);
  Half *free = nullptr;
  for (std::unique_ptr<Half> &half : halves) {
    if (half && half->fiber->unfinished())
      continue;
    if (!half) {
      CONDUIT_ASSIGN_OR_RETURN(std::unique_ptr<Fiber> fiber, Fiber::create());
      half = std::make_unique<Half>();
      half->fiber = std::move(fiber);
    }
    free = half.get();
    break;
  }
  if (!free) // both halves busy: not a pair the executor starts
    return start(indices);
  Half &half = *free;
  half.calls = CallState();
  half.calls.fiber = half.fiber.get();
  half.context = currentContext();
  half.context.calls = &half.calls;
  runHalf(half, [this, &half, indices] { half.status = compute(indices); });
  if (!half.fiber->unfinished()) {
    CONDUIT_RETURN_IF_ERROR(half.status);
    return kCompleted;
  }
  Pending p;
  p.half = &half;
  pending.emplace(nextTicket, std::move(p));
  return nextTicket++;
}

template <typename Grad>
absl::Status BackendCore<Grad>::checkTensorCalls(const std::vector<int64_t> &indices) {
  const std::vector<Instruction> &program = plan->ranks[where.pipelineRank].instructions;
  const Instruction &compute = program[indices[0]];
  std::vector<Op> listed;
  for (size_t k = 1; k < indices.size(); ++k)
    listed.push_back(program[indices[k]].op);
  const std::vector<Op> issued = tensor ? tensor->takeIssued() : std::vector<Op>();
  if (tensor)
    CONDUIT_RETURN_IF_ERROR(tensor->takeFailure());
  // On the CPU each sample of the micro-batch is a piece that issues the whole list.
  const Stage &stage = *stages[compute.stage];
  const size_t pieces = ops().perSample() ? stage.samplesOf(compute.microbatch) : 1;
  bool match = issued.size() == listed.size() * pieces;
  for (size_t k = 0; match && k < issued.size(); ++k)
    match = issued[k] == listed[k % listed.size()];
  if (match)
    return absl::OkStatus();
  auto names = [](const std::vector<Op> &ops, size_t count) {
    std::string out;
    for (size_t k = 0; k < std::min(count, ops.size()); ++k)
      absl::StrAppend(&out, k ? ", " : "", opName(ops[k]));
    return out.empty() ? std::string("none") : out;
  };
  return absl::FailedPreconditionError(absl::StrCat(
      describe(compute), " (instruction ", indices[0], "): its layers issued ", issued.size(),
      " inner collectives (", names(issued, issued.size() / std::max<size_t>(pieces, 1)),
      pieces > 1 ? absl::StrCat(" per sample, over ", pieces, " samples") : "",
      "), the plan lists ", listed.size(), " after it (", names(listed, listed.size()),
      "); the plan was compiled for other tensor collectives or expert all-to-alls than this "
      "runtime's layers issue (runtime/plan/TensorCollectives.h)"));
}

template <typename Grad> absl::StatusOr<bool> BackendCore<Grad>::poll(Ticket ticket) {
  auto it = pending.find(ticket);
  if (it == pending.end())
    return absl::InternalError(absl::StrCat("unknown ticket ", ticket));
  Pending &p = it->second;
  if (Half *half = p.half) {
    // Parked at an all-to-all: once it has arrived, on to the next one or the end.
    if (half->calls.waiting) {
      CONDUIT_ASSIGN_OR_RETURN(bool arrived, half->calls.waiting->test());
      if (!arrived)
        return false;
    }
    runHalf(*half);
    if (half->fiber->unfinished())
      return false;
    pending.erase(it);
    CONDUIT_RETURN_IF_ERROR(half->status);
    return true;
  }
  CONDUIT_ASSIGN_OR_RETURN(bool done, p.work->test());
  if (!done)
    return false;
  if (p.gathered)
    p.gathered->gathered = true;
  if (p.reduced) {
    if (addsReductions())
      addReducedShards(*p.reduced);
    if (gradientsSharded())
      p.reduced->grad.reset(); // until the stage's next backward
    // ZeRO-1 keeps the reduced gradients in place for the optimizer, which zeroes them.
  }
  if (p.tied)
    addGradients(tiedCount(), p.incoming.data(), p.tied);
  for (const Produced &sent : p.sent)
    readBy(sent);
  pending.erase(it);
  return true;
}

template <typename Grad> absl::StatusOr<StepOutcome> BackendCore<Grad>::endStep(int64_t) {
  if (!pending.empty())
    return absl::InternalError("the step ended with communication in flight");
  for (const std::unique_ptr<Stage> &stage : stages)
    if (stage)
      for (size_t mb = 0; mb < stage->progress.size(); ++mb)
        if (stage->progress[mb].weightPending())
          return absl::FailedPreconditionError(absl::StrCat(
              "stage ", stage->spec->index, " micro-batch ", mb,
              " ran its backward_input but not its backward_weight this step: its weight "
              "gradient was never computed"));
  takeLosses(); // what forwards left (all of them, when read once per step)
  CONDUIT_RETURN_IF_ERROR(deviceStatus());
  CONDUIT_RETURN_IF_ERROR(synchronizeAll());
  CONDUIT_ASSIGN_OR_RETURN(double total, transport->sumOverRanks(lossSum));
  const Config &c = plan->config;
  StepOutcome outcome;
  outcome.loss = total / c.stepTokens(shape->seq);
  if (shape->moe()) {
    // Every rank's blocks add their samples' sums: the mean over the global batch's samples.
    CONDUIT_ASSIGN_OR_RETURN(double aux, transport->sumOverRanks(auxLossSum));
    outcome.auxLoss = aux * static_cast<double>(shape->seq) / c.stepTokens(shape->seq);
  }
  if (shape->moe() && shape->zLossCoefficient > 0) {
    CONDUIT_ASSIGN_OR_RETURN(double z, transport->sumOverRanks(zLossSum));
    outcome.zLoss = z * static_cast<double>(shape->seq) / c.stepTokens(shape->seq);
  }
  if (shape->mtpLayers > 0) {
    CONDUIT_ASSIGN_OR_RETURN(double mtp, transport->sumOverRanks(mtpLossSum));
    outcome.mtpLoss = mtp / c.stepTokens(shape->seq);
  }
  if (!std::isfinite(outcome.loss))
    return absl::DataLossError(absl::StrCat(
        "the loss of step ", step,
        " is not finite: training diverged. Compile the job with a "
        "smaller training.learning_rate (this plan's is ",
        c.learningRate, "), or resume from a checkpoint written before the divergence"));
  for (std::unique_ptr<Stage> &stage : stages)
    if (stage) {
      stage->outputs.clear();
      stage->inputGrads.clear();
      stage->caches.clear();
    }
  return outcome;
}

//===----------------------------------------------------------------------===//
// State
//===----------------------------------------------------------------------===//

template <typename Grad> absl::StatusOr<std::vector<StageState>> BackendCore<Grad>::snapshot() {
  CONDUIT_RETURN_IF_ERROR(synchronizeAll());
  std::vector<StageState> out;
  for (const std::unique_ptr<Stage> &stage : stages)
    if (stage) {
      StageState s;
      s.stage = stage->spec->index;
      s.optimizerSteps = stage->optimizerSteps;
      s.params.resize(stage->updatedCount(sharded));
      stage->forEachUpdated(sharded, [&](float *params, Grad *, int64_t at, int64_t count) {
        ops().download(params, count, s.params.data() + at);
      });
      s.optimizer.resize(stage->optimizer.size());
      ops().download(stage->optimizer.data(), s.optimizer.size(), s.optimizer.data());
      out.push_back(std::move(s));
    }
  CONDUIT_RETURN_IF_ERROR(deviceStatus());
  return out;
}

template <typename Grad>
absl::Status BackendCore<Grad>::restore(const std::vector<StageState> &states) {
  size_t k = 0;
  for (std::unique_ptr<Stage> &stage : stages) {
    if (!stage)
      continue;
    if (k >= states.size() || states[k].stage != stage->spec->index)
      return absl::FailedPreconditionError(
          absl::StrCat("the checkpoint has no state for stage ", stage->spec->index,
                       ", which this rank runs; resume with the plan that wrote it"));
    const StageState &s = states[k++];
    const int64_t params = stage->updatedCount(sharded);
    if (static_cast<int64_t>(s.params.size()) != params ||
        static_cast<int64_t>(s.optimizer.size()) != stage->optimizer.size())
      return absl::FailedPreconditionError(absl::StrCat(
          "the checkpoint's state of stage ", stage->spec->index, " has ", s.params.size(),
          " parameters and ", s.optimizer.size(), " optimizer values; this run keeps ", params,
          " parameters and ", stage->optimizer.size(), " optimizer values (",
          optimizer.stateWidth() == 0 ? "SGD keeps none"
          : optimizer.bf16Moments     ? "Adam keeps two bf16 moments per parameter, in one's bytes"
                                      : "Adam keeps two per parameter",
          ")"));
    stage->optimizerSteps = s.optimizerSteps;
    ops().upload(s.optimizer.data(), s.optimizer.size(), stage->optimizer.data());
    stage->forEachUpdated(sharded, [&](float *params, Grad *, int64_t at, int64_t count) {
      ops().upload(s.params.data() + at, count, params);
    });
    if (!sharded)
      continue;
    if (plan->config.sharding == Sharding::Full) {
      stage->full.reset();
      stage->gathered = false;
    } else {
      // The replicated parameters of ZeRO-1/2 are the gathered shards.
      ops().synchronize();
      CONDUIT_RETURN_IF_ERROR(
          gatherOutOfStep(*stage, stage->full.data(), streamOf(kCollectiveStream)));
    }
  }
  if (k != states.size())
    return absl::FailedPreconditionError("the checkpoint holds stages this rank does not run");
  ops().synchronize();
  return deviceStatus();
}

template <typename Grad>
absl::StatusOr<std::vector<std::vector<float>>> BackendCore<Grad>::stageParameters() {
  CONDUIT_RETURN_IF_ERROR(synchronizeAll());
  std::vector<std::vector<float>> out;
  for (const std::unique_ptr<Stage> &stage : stages) {
    if (!stage)
      continue;
    std::vector<float> whole(stage->n); // this rank's array (StageLayout)
    if (sharded) {
      StreamHandle stream = streamOf(kCollectiveStream);
      CONDUIT_ASSIGN_OR_RETURN(model::Buffer<float> gathered,
                               gatherBuffer(stage->padded, stream, stream));
      CONDUIT_RETURN_IF_ERROR(gatherOutOfStep(*stage, gathered.data(), stream));
      ops().download(gathered.data(), stage->n, whole.data());
    } else {
      ops().download(stage->full.data(), stage->n, whole.data());
    }
    if (shape->split()) {
      // The whole layers from every part: the expert group's members' arrays (each member's
      // routed experts), then those of every tensor rank's expert group (each tensor rank's
      // part of the rest).
      const int64_t part = stage->n, T = shape->tensorSize,
                    E = shape->expertParallel() ? shape->expertSize : 1;
      StreamHandle stream = streamOf(kComputeStream);
      model::Buffer<float> group = ops().allocate(part * E);
      if (E > 1) {
        // An all-gather as the expert group's all-to-all: the same part to every member.
        model::Buffer<float> mine = ops().allocate(part * E);
        for (int64_t m = 0; m < E; ++m)
          ops().upload(whole.data(), part, mine.data() + m * part);
        const std::vector<int64_t> counts(E, part);
        CONDUIT_ASSIGN_OR_RETURN(std::unique_ptr<Work> work,
                                 transport->expertAllToAll(GroupPass::Forward, mine.data(), counts,
                                                           group.data(), counts, stream));
        if (work)
          CONDUIT_RETURN_IF_ERROR(complete(std::move(work)));
      } else {
        ops().upload(whole.data(), part, group.data());
      }
      model::Buffer<float> parts = ops().allocate(part * E * T);
      if (T > 1) {
        CONDUIT_ASSIGN_OR_RETURN(std::unique_ptr<Work> work,
                                 transport->tensorAllGather(GroupPass::Forward, /*post=*/false,
                                                            group.data(), parts.data(), part * E,
                                                            stream));
        if (work)
          CONDUIT_RETURN_IF_ERROR(complete(std::move(work)));
      } else
        ops().copy(part * E, group.data(), parts.data());
      CONDUIT_RETURN_IF_ERROR(synchronizeAll());
      std::vector<float> all(part * E * T);
      ops().download(parts.data(), all.size(), all.data());
      // Tensor rank t's expert group holds the E consecutive (replica, tensor rank) indices
      // around this replica's index for t (expertGroupRanks); member q of it sits at q.
      std::vector<model::PartPlace> places;
      for (int64_t t = 0; t < T; ++t)
        for (int64_t q = 0; q < E; ++q)
          places.push_back({((where.replica * T + t) / E * E + q) % T, q});
      whole = model::wholeFromParts(*plan, *shape, stage->spec->firstLayer, stage->spec->endLayer,
                                    ShardLayout::align(plan->config), all.data(), places);
    }
    out.push_back(std::move(whole));
  }
  CONDUIT_RETURN_IF_ERROR(deviceStatus());
  return out;
}

template <typename Grad> void BackendCore<Grad>::keepApart(Stage &stage, bool parameters) {
  const ShardSegment &g = stage.experts;
  if (parameters) {
    model::MemoryScope scope(ops().memory(), model::MemoryUse::Parameters);
    stage.apartParams = ops().allocate(g.n);
    ops().copy(g.n, stage.full.data() + g.at, stage.apartParams.data());
  }
  {
    model::MemoryScope scope(ops().memory(), model::MemoryUse::Gradients);
    stage.apartGrads = allocateGrad<Grad>(ops(), g.n); // zeroed
  }
  const float *params = parameters ? stage.apartParams.data() : nullptr;
  if constexpr (std::is_same_v<Grad, double>)
    stage.chain.placeExpertsApart(params, nullptr, stage.apartGrads.data());
  else
    stage.chain.placeExpertsApart(params, stage.apartGrads.data(), nullptr);
}

template class BackendCore<float>;
template class BackendCore<double>;

} // namespace conduit::runtime
