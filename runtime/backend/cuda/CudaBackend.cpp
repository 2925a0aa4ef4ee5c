//===- CudaBackend.cpp - plans on NVIDIA GPUs -----------------------------===//

#include "runtime/backend/cuda/CudaBackend.h"

#include "runtime/backend/cuda/CudaCheck.h"
#include "runtime/backend/cuda/Kernels.h"

#include "absl/strings/str_cat.h"

#include <chrono>
#include <cmath>
#include <thread>

namespace conduit::cuda {

using runtime::Instruction;
using runtime::Op;
using runtime::Sharding;

namespace {

/// How long a collective outside the step (restore, stageParameters) may take.
constexpr double kOutOfStepTimeoutS = 300;

/// Device memory allocated on `allocateOn` and released on `releaseOn`: the streams of its
/// first and last use.
absl::StatusOr<model::Buffer<float>> streamBuffer(int64_t n, cudaStream_t allocateOn,
                                                  cudaStream_t releaseOn) {
  float *p = nullptr;
  CONDUIT_CUDA(cudaMallocAsync(reinterpret_cast<void **>(&p), n * sizeof(float), allocateOn));
  CONDUIT_CUDA(cudaMemsetAsync(p, 0, n * sizeof(float), allocateOn));
  return model::Buffer<float>(p, n, [releaseOn](float *q) {
    absl::Status ignored; // the stream outlives the buffer; a failure here has no caller
    CONDUIT_CUDA_NOTE(ignored, cudaFreeAsync(q, releaseOn));
  });
}

} // namespace

/// One stage of this rank: layers, device parameters, gradients and what a step keeps.
struct CudaBackend::Stage : runtime::ShardLayout {
  const runtime::Stage *spec = nullptr;
  model::LayerChain<float> chain;
  /// The whole parameters compute uses; with full sharding only while gathered. When not
  /// sharded, also the parameters the optimizer updates.
  model::Buffer<float> full;
  bool gathered = false;
  model::Buffer<float> master;    ///< sharded: this replica's shard, which the optimizer updates
  model::Buffer<float> optimizer; ///< Adam moments of what this replica updates
  model::Buffer<float> grad;      ///< accumulated gradients, `padded` long
  model::Buffer<float> gradShard; ///< sharded: this replica's part of the reduced gradients
  int64_t optimizerSteps = 0;
  int32_t group = -1;
  // What a step keeps, per micro-batch.
  std::vector<model::Buffer<float>> outputs, inputGrads, inputs;
  std::vector<model::LayerChain<float>::Cache> caches;

  int64_t samplesOf(int64_t mb) const { return spec->samples[mb + 1] - spec->samples[mb]; }
  /// The parameters the optimizer updates and their gradients.
  float *updated(bool sharded) const { return sharded ? master.data() : full.data(); }
  float *updateGrads(bool sharded) const { return sharded ? gradShard.data() : grad.data(); }
  int64_t updatedCount(bool sharded) const { return sharded ? shardLen : n; }
};

CudaBackend::CudaBackend(int64_t rank, int64_t worldSize, int device, bool measureLayers,
                         TransportFactory makeTransport)
    : rank(rank), worldSize(worldSize), device(device), measureLayers(measureLayers),
      makeTransport(std::move(makeTransport)) {}

CudaBackend::~CudaBackend() {
  // Communication still in flight means the run failed; its kernels may wait for a peer that
  // will never come, so stop them before waiting for the streams.
  if (!pending.empty())
    abort();
  absl::Status ignored;
  for (cudaStream_t s : streams)
    CONDUIT_CUDA_NOTE(ignored, cudaStreamSynchronize(s));
  // Everything allocated on the streams goes before the streams.
  pending.clear();
  slots.clear();
  stages.clear();
  transport.reset();
  ops.reset();
  for (cudaEvent_t e : events)
    CONDUIT_CUDA_NOTE(ignored, cudaEventDestroy(e));
  for (cudaStream_t s : streams)
    CONDUIT_CUDA_NOTE(ignored, cudaStreamDestroy(s));
}

absl::StatusOr<int> CudaBackend::deviceCount() {
  int count = 0;
  const cudaError_t result = cudaGetDeviceCount(&count);
  if (result != cudaSuccess || count == 0)
    return absl::UnavailableError(absl::StrCat(
        "no CUDA device is usable here (", result == cudaSuccess ? "none found"
                                                                 : cudaGetErrorString(result),
        ")"));
  return count;
}

absl::Status CudaBackend::validate(const runtime::Plan &p) {
  const runtime::Config &c = p.config;
  if (worldSize != c.worldSize())
    return absl::FailedPreconditionError(absl::StrCat(
        "the plan runs on ", c.worldSize(), " ranks (pipeline ", c.pipeline, " x data ", c.data,
        "); this run has ", worldSize, ": start it with mpirun -np ", c.worldSize(),
        ", or on one GPU with --ranks-per-process=", c.worldSize()));
  CONDUIT_RETURN_IF_ERROR(validateModel(p, "CUDA"));
  for (const runtime::RankProgram &program : p.ranks)
    for (const Instruction &inst : program.instructions) {
      const bool compute = inst.op == Op::Forward || inst.op == Op::Backward ||
                           inst.op == Op::OptimizerStep || inst.op == Op::Free;
      if (compute && inst.stream != runtime::kComputeStream)
        return absl::FailedPreconditionError(absl::StrCat(
            describe(inst), " is on stream ", inst.stream, "; the CUDA backend computes on "
            "stream ", runtime::kComputeStream, " only"));
    }
  CONDUIT_ASSIGN_OR_RETURN(int count, deviceCount());
  if (device >= count)
    return absl::FailedPreconditionError(
        absl::StrCat("device ", device, " does not exist; this machine has ", count));
  return absl::OkStatus();
}

absl::Status CudaBackend::initialise(const runtime::Plan &p) {
  plan = &p;
  const runtime::Config &c = p.config;
  where = runtime::RankPosition::of(c, rank);
  CONDUIT_CUDA(cudaSetDevice(device));
  CONDUIT_ASSIGN_OR_RETURN(shape, model::GptShape::fromPlan(p));
  data.emplace(static_cast<uint64_t>(c.seed), shape->vocab, shape->seq);
  optimizer = model::OptimizerConfig::fromPlan(c);
  sharded = runtime::isSharded(c);
  rowFloats = shape->seq * shape->hidden;

  const runtime::RankProgram &program = p.ranks[where.pipelineRank];
  int numStreams = runtime::kCollectiveStream + 1;
  for (const Instruction &inst : program.instructions)
    numStreams = std::max(numStreams, inst.stream + 1);
  streams.assign(numStreams, nullptr);
  for (cudaStream_t &s : streams)
    CONDUIT_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  events.assign(program.events, nullptr);
  for (cudaEvent_t &e : events)
    CONDUIT_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  CONDUIT_ASSIGN_OR_RETURN(ops, CudaOps::create(streams[runtime::kComputeStream], c.dtype));
  CONDUIT_ASSIGN_OR_RETURN(transport, makeTransport(p));

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
                                               p, *shape, spec.firstLayer, spec.endLayer, *ops));
    static_cast<runtime::ShardLayout &>(*stage) =
        runtime::ShardLayout::of(stage->chain.numParams(), c, sharded, where.replica);
    // Every replica initialises the whole stage identically, then keeps its shard.
    stage->full = ops->allocate(stage->padded);
    stage->chain.initialise(stage->full.data(), static_cast<uint64_t>(c.seed));
    if (sharded) {
      stage->master = ops->allocate(stage->shardLen);
      ops->copy(stage->shardLen, stage->full.data() + stage->shardOffset, stage->master.data());
      stage->gradShard = ops->allocate(stage->shardLen);
    }
    stage->gathered = true;
    if (c.sharding == Sharding::Full && sharded) {
      stage->full.reset();
      stage->gathered = false;
    }
    stage->optimizer = ops->allocate(optimizer.stateWidth() * stage->shardLen);
    stage->grad = ops->allocate(stage->padded);
    stages[spec.index] = std::move(stage);
  }
  int64_t largest = 0; // samples of the largest local micro-batch
  for (const std::unique_ptr<Stage> &stage : stages)
    if (stage)
      for (int64_t mb = 0; mb < stage->spec->numMicrobatches(); ++mb)
        largest = std::max(largest, stage->samplesOf(mb));
  CONDUIT_RETURN_IF_ERROR(ops->reserveTokens(largest * shape->seq));
  for (int64_t bytes : program.slots)
    slots.push_back(ops->allocate(bytes / c.elementBytes()));
  ops->synchronize();
  return ops->status();
}

absl::Status CudaBackend::beginStep(int64_t s) {
  step = s;
  for (std::unique_ptr<Stage> &stage : stages)
    if (stage) {
      const size_t m = stage->spec->numMicrobatches();
      for (auto *v : {&stage->outputs, &stage->inputGrads, &stage->inputs}) {
        v->clear();
        v->resize(m);
      }
      stage->caches.clear();
      stage->caches.resize(m);
    }
  return absl::OkStatus();
}

absl::StatusOr<runtime::Ticket> CudaBackend::start(const std::vector<int64_t> &indices) {
  const std::vector<Instruction> &program = plan->ranks[where.pipelineRank].instructions;
  const Instruction &first = program[indices[0]];
  if (first.isTransfer() || first.isCollective()) {
    Pending p;
    if (first.isTransfer())
      CONDUIT_RETURN_IF_ERROR(postTransfers(indices, p));
    else
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
      // Released on the compute stream, after the last compute that reads it.
      stages[first.stage]->full.reset();
      stages[first.stage]->gathered = false;
    }
    break;
  default:
    return absl::InternalError(absl::StrCat("the CUDA backend cannot start ", describe(first)));
  }
  CONDUIT_RETURN_IF_ERROR(ops->status());
  return runtime::kCompleted;
}

absl::StatusOr<bool> CudaBackend::poll(runtime::Ticket ticket) {
  auto it = pending.find(ticket);
  if (it == pending.end())
    return absl::InternalError(absl::StrCat("unknown ticket ", ticket));
  Pending &p = it->second;
  CONDUIT_ASSIGN_OR_RETURN(bool done, p.work->test());
  if (!done)
    return false;
  if (p.gathered)
    p.gathered->gathered = true;
  if (p.reduced)
    CONDUIT_CUDA(cudaMemsetAsync(p.reduced->grad.data(), 0, p.reduced->padded * sizeof(float),
                                 p.stream));
  pending.erase(it);
  return true;
}

absl::Status CudaBackend::signal(int stream, int32_t event) {
  if (event < 0 || event >= static_cast<int32_t>(events.size()))
    return absl::InternalError(absl::StrCat("event ", event, " does not exist"));
  CONDUIT_CUDA(cudaEventRecord(events[event], streams[stream]));
  return absl::OkStatus();
}

absl::Status CudaBackend::wait(int stream, int32_t event) {
  if (event < 0 || event >= static_cast<int32_t>(events.size()))
    return absl::InternalError(absl::StrCat("event ", event, " does not exist"));
  CONDUIT_CUDA(cudaStreamWaitEvent(streams[stream], events[event], 0));
  return absl::OkStatus();
}

absl::Status CudaBackend::synchronizeStreams() {
  for (cudaStream_t s : streams)
    CONDUIT_CUDA(cudaStreamSynchronize(s));
  return absl::OkStatus();
}

absl::StatusOr<runtime::StepOutcome> CudaBackend::endStep(int64_t) {
  if (!pending.empty())
    return absl::InternalError("the step ended with communication in flight");
  const double local = ops->takeLoss();
  CONDUIT_RETURN_IF_ERROR(ops->status());
  CONDUIT_RETURN_IF_ERROR(synchronizeStreams());
  CONDUIT_ASSIGN_OR_RETURN(double total, transport->sumOverRanks(local));
  const runtime::Config &c = plan->config;
  runtime::StepOutcome outcome;
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

absl::StatusOr<const float *> CudaBackend::localInput(const Stage &consumer, int64_t mb,
                                                     bool forward,
                                                     model::Buffer<float> &scratch) {
  return runtime::gatherLocalInput(
      stages, consumer, mb, forward, rowFloats, scratch,
      [this](int64_t floats) { return ops->allocate(floats); },
      [this](int64_t floats, const float *from, float *to) { ops->copy(floats, from, to); });
}

absl::Status CudaBackend::forward(const Instruction &inst) {
  Stage &stage = *stages[inst.stage];
  if (!stage.gathered)
    return absl::InternalError(absl::StrCat(describe(inst), ": parameters are not gathered"));
  const int64_t mb = inst.microbatch;
  std::vector<int32_t> tokens, targets;
  const model::Tokens batch = runtime::microbatchTokens(
      plan->config, *data, *shape, *stage.spec, mb, where.replica, step, tokens, targets);
  model::Buffer<float> scratch;
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
    stage.outputs[mb] = ops->allocate(batch.samples * rowFloats);
    y = stage.outputs[mb].data();
  }
  std::vector<double> seconds;
  model::LayerChain<float>::Cache cache;
  stage.chain.forward(stage.full.data(), x, batch, y, cache, measureLayers ? &seconds : nullptr);
  timer.record(stage.spec->firstLayer, batch.samples, seconds, /*forward=*/true);
  if (plan->config.checkpointing) {
    // Keep the stage input only; the backward runs the forward again.
    if (x) {
      stage.inputs[mb] = ops->allocate(batch.samples * rowFloats);
      ops->copy(batch.samples * rowFloats, x, stage.inputs[mb].data());
    }
  } else {
    stage.caches[mb] = std::move(cache);
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::backward(const Instruction &inst) {
  Stage &stage = *stages[inst.stage];
  if (!stage.gathered)
    return absl::InternalError(absl::StrCat(describe(inst), ": parameters are not gathered"));
  const int64_t mb = inst.microbatch, samples = stage.samplesOf(mb);
  model::Buffer<float> scratch;
  const float *dy = nullptr;
  if (!stage.chain.hasHead()) {
    if (inst.slot >= 0) {
      dy = slots[inst.slot].data();
    } else {
      CONDUIT_ASSIGN_OR_RETURN(dy, localInput(stage, mb, /*forward=*/false, scratch));
    }
  }
  model::LayerChain<float>::Cache recomputed;
  const model::LayerChain<float>::Cache *cache = &stage.caches[mb];
  if (plan->config.checkpointing) {
    std::vector<int32_t> tokens, targets;
    const model::Tokens batch = runtime::microbatchTokens(
        plan->config, *data, *shape, *stage.spec, mb, where.replica, step, tokens, targets);
    model::Buffer<float> y;
    if (!stage.chain.hasHead())
      y = ops->allocate(samples * rowFloats);
    ops->countLoss(false); // counted by the first forward
    stage.chain.forward(stage.full.data(), stage.inputs[mb].data(), batch, y.data(), recomputed);
    ops->countLoss(true);
    cache = &recomputed;
  }
  float *dx = nullptr;
  if (!stage.chain.hasEmbedding()) {
    stage.inputGrads[mb] = ops->allocate(samples * rowFloats);
    dx = stage.inputGrads[mb].data();
  }
  std::vector<double> seconds;
  stage.chain.backward(stage.full.data(), *cache, dy, stage.grad.data(), dx,
                       measureLayers ? &seconds : nullptr);
  timer.record(stage.spec->firstLayer, samples, seconds, /*forward=*/false);
  stage.caches[mb] = {};
  stage.inputs[mb].reset();
  return absl::OkStatus();
}

absl::Status CudaBackend::optimizerStep(Stage &stage) {
  const int64_t t = ++stage.optimizerSteps;
  cudaStream_t stream = ops->stream();
  const int64_t n = stage.updatedCount(sharded);
  float *params = stage.updated(sharded), *grads = stage.updateGrads(sharded);
  const model::OptimizerConfig &o = optimizer;
  if (measureLayers)
    ops->synchronize();
  const auto start = std::chrono::steady_clock::now();
  if (o.kind == runtime::Optimizer::SGD) {
    CONDUIT_CUDA(sgdStep(n, static_cast<float>(o.learningRate), params, grads, stream));
  } else {
    CONDUIT_CUDA(adamStep(n, static_cast<float>(o.learningRate), static_cast<float>(o.beta1),
                          static_cast<float>(o.beta2), static_cast<float>(o.epsilon),
                          static_cast<float>(1 - std::pow(o.beta1, static_cast<double>(t))),
                          static_cast<float>(1 - std::pow(o.beta2, static_cast<double>(t))),
                          params, stage.optimizer.data(), grads, stream));
  }
  CONDUIT_CUDA(cudaMemsetAsync(grads, 0, (sharded ? n : stage.padded) * sizeof(float), stream));
  if (measureLayers) {
    ops->synchronize();
    timer.recordOptimizer(
        n, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return absl::OkStatus();
}

//===----------------------------------------------------------------------===//
// Communication
//===----------------------------------------------------------------------===//

absl::Status CudaBackend::postTransfers(const std::vector<int64_t> &indices, Pending &p) {
  const std::vector<Instruction> &program = plan->ranks[where.pipelineRank].instructions;
  std::vector<PeerTransfer> transfers;
  for (int64_t i : indices) {
    const Instruction &inst = program[i];
    CONDUIT_ASSIGN_OR_RETURN(int64_t floats,
                             runtime::transferFloats(inst, plan->config, rowFloats));
    const Stage *stage = stages[inst.stage].get();
    if (!stage)
      return absl::InternalError(absl::StrCat(describe(inst), ": the stage is not on this rank"));
    const int64_t offset = (inst.begin - stage->spec->samples[inst.microbatch]) * rowFloats;
    PeerTransfer t;
    t.send = inst.op == Op::Send;
    t.peer = plan->config.globalRank(inst.peer, where.replica);
    t.count = floats;
    const model::Buffer<float> &buffer =
        !t.send ? slots[inst.slot]
                : (inst.kind == runtime::Transfer::Activation ? stage->outputs[inst.microbatch]
                                                               : stage->inputGrads[inst.microbatch]);
    if (buffer.empty() || offset + floats > buffer.size())
      return absl::InternalError(absl::StrCat(
          describe(inst), t.send ? ": nothing to send" : ": the receive slot is too small"));
    t.data = buffer.data() + offset;
    transfers.push_back(t);
  }
  p.stream = streams[program[indices[0]].stream];
  CONDUIT_ASSIGN_OR_RETURN(p.work, transport->exchange(transfers, p.stream));
  return absl::OkStatus();
}

absl::Status CudaBackend::postCollective(const Instruction &inst, Pending &p) {
  Stage &stage = *stages[inst.stage];
  p.stream = streams[inst.stream];
  switch (inst.op) {
  case Op::AllGather: {
    if (!sharded)
      return absl::FailedPreconditionError(
          absl::StrCat(describe(inst), ": nothing to gather, the stage is not sharded"));
    if (stage.full.empty()) {
      // Written first here, released by a Free on the compute stream.
      CONDUIT_ASSIGN_OR_RETURN(stage.full, streamBuffer(stage.padded, p.stream, ops->stream()));
    }
    CONDUIT_ASSIGN_OR_RETURN(p.work, transport->allGather(inst.group, stage.master.data(),
                                                          stage.full.data(), stage.shardLen,
                                                          p.stream));
    p.gathered = &stage;
    break;
  }
  case Op::ReduceScatter: {
    if (!sharded)
      return absl::FailedPreconditionError(
          absl::StrCat(describe(inst), ": the stage is not sharded"));
    CONDUIT_ASSIGN_OR_RETURN(p.work, transport->reduceScatter(inst.group, stage.grad.data(),
                                                              stage.gradShard.data(),
                                                              stage.shardLen, p.stream));
    p.reduced = &stage;
    break;
  }
  case Op::AllReduce: {
    CONDUIT_ASSIGN_OR_RETURN(
        p.work, transport->allReduce(inst.group, stage.grad.data(), stage.padded, p.stream));
    break;
  }
  default:
    return absl::InternalError(absl::StrCat(describe(inst), " is not a collective"));
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::complete(std::unique_ptr<Work> work) {
  const auto start = std::chrono::steady_clock::now();
  while (true) {
    absl::StatusOr<bool> done = work->test();
    if (done.ok() && *done)
      return synchronizeStreams();
    absl::Status failure = done.status();
    if (failure.ok() &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >
            kOutOfStepTimeoutS)
      failure = absl::DeadlineExceededError(absl::StrCat(
          "rank ", rank, ": a collective outside the step did not complete in ",
          kOutOfStepTimeoutS, " s"));
    if (!failure.ok()) {
      // The collective's kernel may wait for a peer that is gone: stop it, or nothing that
      // synchronizes the device (the destructor included) would return.
      abort();
      return failure;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

//===----------------------------------------------------------------------===//
// State
//===----------------------------------------------------------------------===//

absl::StatusOr<std::vector<runtime::StageState>> CudaBackend::snapshot() {
  CONDUIT_RETURN_IF_ERROR(synchronizeStreams());
  std::vector<runtime::StageState> out;
  for (const std::unique_ptr<Stage> &stage : stages)
    if (stage) {
      runtime::StageState s;
      s.stage = stage->spec->index;
      s.optimizerSteps = stage->optimizerSteps;
      s.params.resize(stage->updatedCount(sharded));
      ops->download(stage->updated(sharded), s.params.size(), s.params.data());
      s.optimizer.resize(stage->optimizer.size());
      ops->download(stage->optimizer.data(), s.optimizer.size(), s.optimizer.data());
      out.push_back(std::move(s));
    }
  CONDUIT_RETURN_IF_ERROR(ops->status());
  return out;
}

absl::Status CudaBackend::restore(const std::vector<runtime::StageState> &states) {
  size_t k = 0;
  for (std::unique_ptr<Stage> &stage : stages) {
    if (!stage)
      continue;
    if (k >= states.size() || states[k].stage != stage->spec->index)
      return absl::FailedPreconditionError(
          absl::StrCat("the checkpoint has no state for stage ", stage->spec->index));
    const runtime::StageState &s = states[k++];
    const int64_t params = stage->updatedCount(sharded);
    if (static_cast<int64_t>(s.params.size()) != params ||
        static_cast<int64_t>(s.optimizer.size()) != stage->optimizer.size())
      return absl::FailedPreconditionError(absl::StrCat(
          "the checkpoint's state of stage ", stage->spec->index, " has ", s.params.size(),
          " parameters; this run keeps ", params));
    stage->optimizerSteps = s.optimizerSteps;
    ops->upload(s.optimizer.data(), s.optimizer.size(), stage->optimizer.data());
    if (!sharded) {
      ops->upload(s.params.data(), params, stage->full.data());
      continue;
    }
    ops->upload(s.params.data(), params, stage->master.data());
    if (plan->config.sharding == Sharding::Full) {
      stage->full.reset();
      stage->gathered = false;
    } else {
      // The replicated parameters of ZeRO-1/2 are the gathered shards.
      ops->synchronize();
      cudaStream_t stream = streams[runtime::kCollectiveStream];
      CONDUIT_ASSIGN_OR_RETURN(std::unique_ptr<Work> work,
                               transport->allGather(stage->group, stage->master.data(),
                                                    stage->full.data(), stage->shardLen, stream));
      CONDUIT_RETURN_IF_ERROR(complete(std::move(work)));
    }
  }
  if (k != states.size())
    return absl::FailedPreconditionError("the checkpoint holds stages this rank does not run");
  ops->synchronize();
  return ops->status();
}

absl::StatusOr<std::vector<std::vector<float>>> CudaBackend::stageParameters() {
  CONDUIT_RETURN_IF_ERROR(synchronizeStreams());
  std::vector<std::vector<float>> out;
  for (const std::unique_ptr<Stage> &stage : stages) {
    if (!stage)
      continue;
    std::vector<float> whole(stage->n);
    if (sharded) {
      cudaStream_t stream = streams[runtime::kCollectiveStream];
      CONDUIT_ASSIGN_OR_RETURN(model::Buffer<float> gathered,
                               streamBuffer(stage->padded, stream, stream));
      CONDUIT_ASSIGN_OR_RETURN(std::unique_ptr<Work> work,
                               transport->allGather(stage->group, stage->master.data(),
                                                    gathered.data(), stage->shardLen, stream));
      CONDUIT_RETURN_IF_ERROR(complete(std::move(work)));
      ops->download(gathered.data(), stage->n, whole.data());
    } else {
      ops->download(stage->full.data(), stage->n, whole.data());
    }
    out.push_back(std::move(whole));
  }
  CONDUIT_RETURN_IF_ERROR(ops->status());
  return out;
}

void CudaBackend::abort() {
  if (transport)
    transport->abort();
}

} // namespace conduit::cuda
