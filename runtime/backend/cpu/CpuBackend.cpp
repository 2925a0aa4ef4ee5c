//===- CpuBackend.cpp - plans on CPUs, with MPI ---------------------------===//

#include "runtime/backend/cpu/CpuBackend.h"

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace conduit::runtime {

/// One stage of this process: its layers, parameters, gradients and what a step keeps.
struct CpuBackend::Stage : ShardLayout {
  const runtime::Stage *spec = nullptr;
  model::LayerChain<float> chain;
  /// The whole parameters compute uses; with full sharding only while gathered. When not
  /// sharded these are also the parameters the optimizer updates.
  std::vector<float> full;
  bool gathered = false;
  std::vector<float> master;    ///< sharded: this replica's shard, which the optimizer updates
  std::vector<float> optimizer; ///< optimizer state of what this replica updates
  std::vector<double> grad;     ///< accumulated gradients, `padded` long
  std::vector<double> gradShard; ///< sharded: this replica's part of the reduced gradients
  int64_t optimizerSteps = 0;
  MPI_Comm group = MPI_COMM_NULL;
  // What a step keeps, per micro-batch.
  std::vector<std::vector<float>> outputs, inputGrads, inputs;
  std::vector<std::vector<model::LayerChain<float>::Cache>> caches; ///< per sample

  int64_t numMicrobatches() const { return spec->numMicrobatches(); }
  int64_t samplesOf(int64_t mb) const { return spec->samples[mb + 1] - spec->samples[mb]; }
};

CpuBackend::CpuBackend(MpiWorld world, bool measureLayers)
    : world(world), measureLayers(measureLayers) {}

CpuBackend::~CpuBackend() {
  for (auto &[ticket, p] : pending)
    for (MPI_Request &r : p.requests)
      if (r != MPI_REQUEST_NULL)
        MPI_Request_free(&r);
  for (MPI_Comm &c : groupComms)
    if (c != MPI_COMM_NULL)
      MPI_Comm_free(&c);
  if (pipeComm != MPI_COMM_NULL)
    MPI_Comm_free(&pipeComm);
}

absl::Status CpuBackend::validate(const Plan &p) {
  const Config &c = p.config;
  if (world.size != c.worldSize())
    return absl::FailedPreconditionError(absl::StrCat(
        "the plan runs on ", c.worldSize(), " processes (pipeline ", c.pipeline, " x data ",
        c.data, "); this run has ", world.size, ": start it with mpirun -np ", c.worldSize()));
  return validateModel(p, "CPU");
}

absl::Status CpuBackend::initialise(const Plan &p) {
  plan = &p;
  const Config &c = p.config;
  where = RankPosition::of(c, world.rank);
  CONDUIT_ASSIGN_OR_RETURN(shape, model::GptShape::fromPlan(p));
  data.emplace(static_cast<uint64_t>(c.seed), shape->vocab, shape->seq);
  optimizer = model::OptimizerConfig::fromPlan(c);
  sharded = isSharded(c);
  rowFloats = shape->seq * shape->hidden;

  // Communicators: the pipeline of this replica, and each group's replicas. Every process
  // takes part in every split.
  CONDUIT_MPI(MPI_Comm_split(MPI_COMM_WORLD, where.replica, where.pipelineRank, &pipeComm));
  CONDUIT_MPI(MPI_Comm_set_errhandler(pipeComm, MPI_ERRORS_RETURN));
  groupComms.assign(p.groups.size(), MPI_COMM_NULL);
  for (size_t g = 0; g < p.groups.size(); ++g) {
    const bool member = p.groups[g].ranks[0] == where.pipelineRank;
    CONDUIT_MPI(MPI_Comm_split(MPI_COMM_WORLD, member ? 0 : MPI_UNDEFINED, where.replica,
                               &groupComms[g]));
    if (member)
      CONDUIT_MPI(MPI_Comm_set_errhandler(groupComms[g], MPI_ERRORS_RETURN));
  }

  stages.clear();
  stages.resize(p.stages.size());
  for (const runtime::Stage &spec : p.stages) {
    if (spec.rank != where.pipelineRank)
      continue;
    auto stage = std::make_unique<Stage>();
    stage->spec = &spec;
    CONDUIT_ASSIGN_OR_RETURN(stage->chain, model::LayerChain<float>::build(
                                               p, *shape, spec.firstLayer, spec.endLayer, ops));
    static_cast<ShardLayout &>(*stage) =
        ShardLayout::of(stage->chain.numParams(), c, sharded, where.replica);
    // Every replica initialises the whole stage identically, then keeps its shard.
    stage->full.assign(stage->padded, 0.0f);
    stage->chain.initialise(stage->full.data(), static_cast<uint64_t>(c.seed));
    if (sharded)
      stage->master.assign(stage->full.begin() + stage->shardOffset,
                           stage->full.begin() + stage->shardOffset + stage->shardLen);
    stage->gathered = true;
    if (c.sharding == Sharding::Full && sharded) {
      stage->full = {};
      stage->gathered = false;
    }
    stage->optimizer.assign(optimizer.stateWidth() * stage->shardLen, 0.0f);
    stage->grad.assign(stage->padded, 0.0);
    if (sharded)
      stage->gradShard.assign(stage->shardLen, 0.0);
    for (size_t g = 0; g < p.groups.size(); ++g)
      if (p.groups[g].ranks[0] == where.pipelineRank)
        stage->group = groupComms[g];
    stages[spec.index] = std::move(stage);
  }

  const RankProgram &program = p.ranks[where.pipelineRank];
  for (int64_t bytes : program.slots)
    slots.emplace_back(bytes / c.elementBytes(), 0.0f);
  return absl::OkStatus();
}

absl::Status CpuBackend::beginStep(int64_t s) {
  step = s;
  lossSum = 0;
  for (std::unique_ptr<Stage> &stage : stages)
    if (stage) {
      const size_t m = stage->numMicrobatches();
      stage->outputs.assign(m, {});
      stage->inputGrads.assign(m, {});
      stage->inputs.assign(m, {});
      stage->caches.clear();
      stage->caches.resize(m);
    }
  return absl::OkStatus();
}

absl::StatusOr<Ticket> CpuBackend::start(const std::vector<int64_t> &indices) {
  const std::vector<Instruction> &program = plan->ranks[where.pipelineRank].instructions;
  const Instruction &first = program[indices[0]];
  if (first.isTransfer()) {
    Pending p;
    for (int64_t i : indices)
      CONDUIT_RETURN_IF_ERROR(postTransfer(program[i], p));
    pending.emplace(nextTicket, std::move(p));
    return nextTicket++;
  }
  if (first.isCollective()) {
    Pending p;
    CONDUIT_RETURN_IF_ERROR(postCollective(first, p));
    pending.emplace(nextTicket, std::move(p));
    return nextTicket++;
  }
  switch (first.op) {
  case Op::Forward:
    CONDUIT_RETURN_IF_ERROR(forward(first));
    break;
  case Op::Backward:
    CONDUIT_RETURN_IF_ERROR(backward(first));
    break;
  case Op::OptimizerStep:
    CONDUIT_RETURN_IF_ERROR(optimizerStep(*stages[first.stage]));
    break;
  case Op::Free:
    if (plan->config.sharding == Sharding::Full && sharded) {
      stages[first.stage]->full = {};
      stages[first.stage]->gathered = false;
    }
    break;
  default:
    return absl::InternalError(absl::StrCat("the CPU backend cannot start ", describe(first)));
  }
  return kCompleted;
}

absl::StatusOr<bool> CpuBackend::poll(Ticket ticket) {
  auto it = pending.find(ticket);
  if (it == pending.end())
    return absl::InternalError(absl::StrCat("unknown ticket ", ticket));
  Pending &p = it->second;
  int done = 0;
  CONDUIT_MPI(MPI_Testall(static_cast<int>(p.requests.size()), p.requests.data(), &done,
                          MPI_STATUSES_IGNORE));
  if (!done)
    return false;
  if (p.gathered)
    p.gathered->gathered = true;
  if (p.reduced)
    std::fill(p.reduced->grad.begin(), p.reduced->grad.end(), 0.0);
  pending.erase(it);
  return true;
}

absl::StatusOr<StepOutcome> CpuBackend::endStep(int64_t) {
  if (!pending.empty())
    return absl::InternalError("the step ended with communication in flight");
  double total = 0;
  CONDUIT_MPI(MPI_Allreduce(&lossSum, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
  const Config &c = plan->config;
  StepOutcome outcome;
  outcome.loss = total / static_cast<double>(c.batchSamples() * c.data * shape->seq);
  if (!std::isfinite(outcome.loss))
    return absl::DataLossError(absl::StrCat("the loss of step ", step, " is not finite"));
  for (std::unique_ptr<Stage> &stage : stages)
    if (stage) {
      stage->outputs.clear();
      stage->inputGrads.clear();
      stage->inputs.clear();
      stage->caches.clear();
    }
  return outcome;
}

//===----------------------------------------------------------------------===//
// Compute
//===----------------------------------------------------------------------===//

model::Tokens CpuBackend::tokensOf(const Stage &stage, int64_t mb, std::vector<int32_t> &tokens,
                                   std::vector<int32_t> &targets) const {
  return microbatchTokens(plan->config, *data, *shape, *stage.spec, mb, where.replica, step,
                          tokens, targets);
}

absl::StatusOr<const float *> CpuBackend::localInput(const Stage &consumer, int64_t mb,
                                                    bool forward,
                                                    std::vector<float> &scratch) const {
  return gatherLocalInput(
      stages, consumer, mb, forward, rowFloats, scratch,
      [](int64_t floats) { return std::vector<float>(floats); },
      [](int64_t floats, const float *from, float *to) { std::copy_n(from, floats, to); });
}

absl::Status CpuBackend::forward(const Instruction &inst) {
  Stage &stage = *stages[inst.stage];
  if (!stage.gathered)
    return absl::InternalError(absl::StrCat(describe(inst), ": parameters are not gathered"));
  const int64_t mb = inst.microbatch;
  std::vector<int32_t> tokens, targets;
  model::Tokens batch = tokensOf(stage, mb, tokens, targets);
  std::vector<float> scratch;
  const float *x = nullptr;
  if (!stage.chain.hasEmbedding()) {
    if (inst.slot >= 0) {
      x = slots[inst.slot].data();
    } else {
      CONDUIT_ASSIGN_OR_RETURN(x, localInput(stage, mb, /*forward=*/true, scratch));
    }
  }
  float *y = nullptr;
  if (!stage.chain.hasHead()) {
    stage.outputs[mb].assign(batch.samples * rowFloats, 0.0f);
    y = stage.outputs[mb].data();
  }
  std::vector<double> seconds;
  std::vector<model::LayerChain<float>::Cache> caches;
  stage.chain.forwardSamples(stage.full.data(), x, batch, y, caches,
                             measureLayers ? &seconds : nullptr);
  lossSum += ops.takeLoss();
  timer.record(stage.spec->firstLayer, batch.samples, seconds, /*forward=*/true);
  if (plan->config.checkpointing) {
    // Keep the stage input only; the backward runs the forward again.
    if (x)
      stage.inputs[mb].assign(x, x + batch.samples * rowFloats);
  } else {
    stage.caches[mb] = std::move(caches);
  }
  return absl::OkStatus();
}

absl::Status CpuBackend::backward(const Instruction &inst) {
  Stage &stage = *stages[inst.stage];
  if (!stage.gathered)
    return absl::InternalError(absl::StrCat(describe(inst), ": parameters are not gathered"));
  const int64_t mb = inst.microbatch;
  std::vector<float> scratch;
  const float *dy = nullptr;
  if (!stage.chain.hasHead()) {
    if (inst.slot >= 0) {
      dy = slots[inst.slot].data();
    } else {
      CONDUIT_ASSIGN_OR_RETURN(dy, localInput(stage, mb, /*forward=*/false, scratch));
    }
  }
  std::vector<model::LayerChain<float>::Cache> recomputed;
  const std::vector<model::LayerChain<float>::Cache> *caches = &stage.caches[mb];
  const int64_t samples = stage.samplesOf(mb);
  if (plan->config.checkpointing) {
    std::vector<int32_t> tokens, targets;
    model::Tokens batch = tokensOf(stage, mb, tokens, targets);
    std::vector<float> y(stage.chain.hasHead() ? 0 : samples * rowFloats);
    const float *x = stage.chain.hasEmbedding() ? nullptr : stage.inputs[mb].data();
    ops.countLoss(false); // counted by the first forward
    stage.chain.forwardSamples(stage.full.data(), x, batch, y.empty() ? nullptr : y.data(),
                               recomputed);
    ops.countLoss(true);
    caches = &recomputed;
  }
  float *dx = nullptr;
  if (!stage.chain.hasEmbedding()) {
    stage.inputGrads[mb].assign(samples * rowFloats, 0.0f);
    dx = stage.inputGrads[mb].data();
  }
  std::vector<double> seconds;
  stage.chain.backwardSamples(stage.full.data(), *caches, dy, stage.grad.data(), dx,
                              measureLayers ? &seconds : nullptr);
  timer.record(stage.spec->firstLayer, samples, seconds, /*forward=*/false);
  stage.caches[mb].clear();
  stage.inputs[mb] = {};
  return absl::OkStatus();
}

absl::Status CpuBackend::optimizerStep(Stage &stage) {
  ++stage.optimizerSteps;
  const auto start = std::chrono::steady_clock::now();
  if (sharded) {
    model::optimizerStep(optimizer, stage.optimizerSteps, stage.shardLen, stage.master.data(),
                         stage.optimizer.data(), stage.gradShard.data());
    std::fill(stage.gradShard.begin(), stage.gradShard.end(), 0.0);
  } else {
    model::optimizerStep(optimizer, stage.optimizerSteps, stage.n, stage.full.data(),
                         stage.optimizer.data(), stage.grad.data());
    std::fill(stage.grad.begin(), stage.grad.end(), 0.0);
  }
  if (measureLayers)
    timer.recordOptimizer(
        stage.shardLen,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return absl::OkStatus();
}

std::vector<LayerTiming> CpuBackend::layerTimings() const { return timer.timings(); }

//===----------------------------------------------------------------------===//
// Communication
//===----------------------------------------------------------------------===//

absl::Status CpuBackend::postTransfer(const Instruction &inst, Pending &p) {
  CONDUIT_ASSIGN_OR_RETURN(int64_t floats, transferFloats(inst, plan->config, rowFloats));
  MPI_Request request;
  if (inst.op == Op::Send) {
    const Stage &stage = *stages[inst.stage];
    const std::vector<float> &source = inst.kind == Transfer::Activation
                                           ? stage.outputs[inst.microbatch]
                                           : stage.inputGrads[inst.microbatch];
    const int64_t offset = (inst.begin - stage.spec->samples[inst.microbatch]) * rowFloats;
    if (source.empty() || offset + floats > static_cast<int64_t>(source.size()))
      return absl::InternalError(absl::StrCat(describe(inst), ": nothing to send"));
    CONDUIT_MPI(MPI_Isend(source.data() + offset, static_cast<int>(floats), MPI_FLOAT, inst.peer,
                          0, pipeComm, &request));
  } else {
    const Stage &stage = *stages[inst.stage];
    const int64_t offset = (inst.begin - stage.spec->samples[inst.microbatch]) * rowFloats;
    std::vector<float> &slot = slots[inst.slot];
    if (offset + floats > static_cast<int64_t>(slot.size()))
      return absl::FailedPreconditionError(
          absl::StrCat(describe(inst), ": slot ", inst.slot, " is too small"));
    CONDUIT_MPI(MPI_Irecv(slot.data() + offset, static_cast<int>(floats), MPI_FLOAT, inst.peer, 0,
                          pipeComm, &request));
  }
  p.requests.push_back(request);
  return absl::OkStatus();
}

absl::Status CpuBackend::postCollective(const Instruction &inst, Pending &p) {
  Stage &stage = *stages[inst.stage];
  MPI_Comm comm = groupComms[inst.group];
  if (comm == MPI_COMM_NULL)
    return absl::InternalError(absl::StrCat(describe(inst), ": not a member of the group"));
  MPI_Request request;
  const int count = static_cast<int>(stage.shardLen);
  switch (inst.op) {
  case Op::AllGather:
    if (!sharded)
      return absl::FailedPreconditionError(
          absl::StrCat(describe(inst), ": nothing to gather, the stage is not sharded"));
    stage.full.resize(stage.padded);
    CONDUIT_MPI(MPI_Iallgather(stage.master.data(), count, MPI_FLOAT, stage.full.data(), count,
                               MPI_FLOAT, comm, &request));
    p.gathered = &stage;
    break;
  case Op::ReduceScatter:
    if (!sharded)
      return absl::FailedPreconditionError(
          absl::StrCat(describe(inst), ": the stage is not sharded"));
    CONDUIT_MPI(MPI_Ireduce_scatter_block(stage.grad.data(), stage.gradShard.data(), count,
                                          MPI_DOUBLE, MPI_SUM, comm, &request));
    p.reduced = &stage;
    break;
  case Op::AllReduce:
    CONDUIT_MPI(MPI_Iallreduce(MPI_IN_PLACE, stage.grad.data(), static_cast<int>(stage.padded),
                               MPI_DOUBLE, MPI_SUM, comm, &request));
    break;
  default:
    return absl::InternalError(absl::StrCat(describe(inst), " is not a collective"));
  }
  p.requests.push_back(request);
  return absl::OkStatus();
}

//===----------------------------------------------------------------------===//
// State
//===----------------------------------------------------------------------===//

absl::StatusOr<std::vector<StageState>> CpuBackend::snapshot() {
  std::vector<StageState> out;
  for (const std::unique_ptr<Stage> &stage : stages)
    if (stage) {
      StageState s;
      s.stage = stage->spec->index;
      s.optimizerSteps = stage->optimizerSteps;
      s.params = sharded ? stage->master
                         : std::vector<float>(stage->full.begin(), stage->full.begin() + stage->n);
      s.optimizer = stage->optimizer;
      out.push_back(std::move(s));
    }
  return out;
}

absl::Status CpuBackend::restore(const std::vector<StageState> &states) {
  size_t k = 0;
  for (std::unique_ptr<Stage> &stage : stages) {
    if (!stage)
      continue;
    if (k >= states.size() || states[k].stage != stage->spec->index)
      return absl::FailedPreconditionError(
          absl::StrCat("the checkpoint has no state for stage ", stage->spec->index));
    const StageState &s = states[k++];
    const size_t params = static_cast<size_t>(sharded ? stage->shardLen : stage->n);
    if (s.params.size() != params || s.optimizer.size() != stage->optimizer.size())
      return absl::FailedPreconditionError(absl::StrCat(
          "the checkpoint's state of stage ", stage->spec->index, " has ", s.params.size(),
          " parameters; this run keeps ", params));
    stage->optimizerSteps = s.optimizerSteps;
    stage->optimizer = s.optimizer;
    if (!sharded) {
      std::copy(s.params.begin(), s.params.end(), stage->full.begin());
      continue;
    }
    stage->master = s.params;
    if (plan->config.sharding == Sharding::Full) {
      stage->full = {};
      stage->gathered = false;
    } else {
      // The replicated parameters of ZeRO-1/2 are the gathered shards.
      CONDUIT_MPI(MPI_Allgather(stage->master.data(), static_cast<int>(stage->shardLen),
                                MPI_FLOAT, stage->full.data(), static_cast<int>(stage->shardLen),
                                MPI_FLOAT, stage->group));
    }
  }
  if (k != states.size())
    return absl::FailedPreconditionError("the checkpoint holds stages this rank does not run");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::vector<float>>> CpuBackend::stageParameters() {
  std::vector<std::vector<float>> out;
  for (const std::unique_ptr<Stage> &stage : stages) {
    if (!stage)
      continue;
    std::vector<float> whole(stage->padded);
    if (sharded) {
      CONDUIT_MPI(MPI_Allgather(stage->master.data(), static_cast<int>(stage->shardLen),
                                MPI_FLOAT, whole.data(), static_cast<int>(stage->shardLen),
                                MPI_FLOAT, stage->group));
    } else {
      std::copy(stage->full.begin(), stage->full.end(), whole.begin());
    }
    whole.resize(stage->n);
    out.push_back(std::move(whole));
  }
  return out;
}

} // namespace conduit::runtime
