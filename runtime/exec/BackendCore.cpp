//===- BackendCore.cpp - the stage bookkeeping every backend shares -------===//

#include "runtime/exec/BackendCore.h"

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>
#include <type_traits>

namespace conduit::runtime {

namespace {

/// How long a collective outside the step (restore, stageParameters) may take.
constexpr double kOutOfStepTimeoutS = 300;

/// Gradient accumulators, counted at the plan's gradient width whatever `Grad` is (the CPU's
/// are doubles).
template <typename Grad> model::Buffer<Grad> allocateGrad(model::Ops<float> &ops, int64_t n) {
  model::MemoryScope scope(ops.memory(), ops.memory().use(), model::kPlanGradientBytes);
  if constexpr (std::is_same_v<Grad, double>)
    return ops.allocateDouble(n);
  else
    return ops.allocate(n);
}

} // namespace

template <typename Grad>
class BackendCore<Grad>::TensorCalls final : public model::TensorGroup<float> {
public:
  TensorCalls(Transport &transport, StreamHandle stream) : transport(transport), stream(stream) {}

  void allReduce(int64_t n, float *data, model::Reduction op) override {
    issue(Op::TensorAllReduce, [&] { return transport.tensorAllReduce(data, n, op, stream); });
  }
  void allGather(int64_t n, const float *shard, float *full) override {
    issue(Op::TensorAllGather, [&] { return transport.tensorAllGather(shard, full, n, stream); });
  }
  void reduceScatter(int64_t n, const float *full, float *shard) override {
    issue(Op::TensorReduceScatter,
          [&] { return transport.tensorReduceScatter(full, shard, n, stream); });
  }

  /// What the layers issued since the last call, and the first failure; both start again.
  std::vector<Op> takeIssued() { return std::exchange(issued, {}); }
  absl::Status takeFailure() { return std::exchange(failure, absl::OkStatus()); }

private:
  template <typename Call> void issue(Op op, Call call) {
    issued.push_back(op);
    if (failure.ok()) // after a failure the group's members no longer match: issue nothing
      failure = call();
  }

  Transport &transport;
  StreamHandle stream;
  std::vector<Op> issued;
  absl::Status failure;
};

/// One stage of this process: its layers, parameters, gradients and what a step keeps.
template <typename Grad> struct BackendCore<Grad>::Stage : ShardLayout {
  const runtime::Stage *spec = nullptr;
  model::LayerChain<float> chain;
  /// The whole parameters compute uses; with full sharding only while gathered. When not
  /// sharded these are also the parameters the optimizer updates.
  model::Buffer<float> full;
  bool gathered = false;
  model::Buffer<float> master;    ///< sharded: this replica's shard, which the optimizer updates
  model::Buffer<float> optimizer; ///< optimizer state of what this replica updates
  /// Accumulated gradients, `padded` long. Where gradients are sharded (ZeRO-2 and full
  /// sharding) they exist only from the stage's first backward of a step to its
  /// reduce-scatter, as the memory plan assumes; otherwise always.
  model::Buffer<Grad> grad;
  model::Buffer<Grad> gradShard; ///< sharded: this replica's part of the reduced gradients
  int64_t optimizerSteps = 0;
  int32_t group = -1; ///< the plan group of this stage's replicas
  // What a step keeps, per micro-batch.
  std::vector<model::Buffer<float>> outputs, inputGrads;
  /// Per piece (sample, or the whole micro-batch): from the forward to the backward, or to
  /// the W of a split backward, with the stash its I left. With full checkpointing, each
  /// layer's input until the backward recomputes the layer.
  std::vector<std::vector<Cache>> caches;
  /// Which compute of each micro-batch ran this step.
  std::vector<ComputeProgress> progress;

  int64_t samplesOf(int64_t mb) const { return spec->samples[mb + 1] - spec->samples[mb]; }
  /// The parameters the optimizer updates and their gradients.
  float *updated(bool sharded) const { return sharded ? master.data() : full.data(); }
  model::Buffer<Grad> &updateGrads(bool sharded) { return sharded ? gradShard : grad; }
  int64_t updatedCount(bool sharded) const { return sharded ? shardLen : n; }
};

template <typename Grad>
BackendCore<Grad>::BackendCore(int64_t rank, bool measureLayers)
    : rank(rank), measureLayers(measureLayers) {}

template <typename Grad> BackendCore<Grad>::~BackendCore() = default;

template <typename Grad> void BackendCore<Grad>::release() {
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
  rowFloats = shape->localSeq() * shape->hidden;
  CONDUIT_ASSIGN_OR_RETURN(transport, connect(p));
  model::Ops<float> &math = ops();
  if (shape->tensorParallel()) {
    tensor = std::make_unique<TensorCalls>(*transport, streamOf(kComputeStream));
    math.setTensorGroup(tensor.get());
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
    CONDUIT_ASSIGN_OR_RETURN(stage->chain,
                             model::LayerChain<float>::build(p, *shape, spec.firstLayer,
                                                             spec.endLayer, math, c.checkpointing));
    static_cast<ShardLayout &>(*stage) =
        ShardLayout::of(stage->chain.numParams(), c, sharded, where.replica);
    // Every replica initialises the whole stage identically, then keeps its shard.
    {
      MemoryScope parameters(math.memory(), MemoryUse::Parameters);
      stage->full = math.allocate(stage->padded);
      stage->chain.initialise(stage->full.data(), static_cast<uint64_t>(c.seed));
      if (sharded) {
        stage->master = math.allocate(stage->shardLen);
        math.copy(stage->shardLen, stage->full.data() + stage->shardOffset, stage->master.data());
      }
    }
    stage->gathered = true;
    if (c.sharding == Sharding::Full && sharded) {
      stage->full.reset();
      stage->gathered = false;
    }
    {
      MemoryScope state(math.memory(), MemoryUse::OptimizerState);
      stage->optimizer = math.allocate(optimizer.stateWidth() * stage->shardLen);
    }
    MemoryScope gradients(math.memory(), MemoryUse::Gradients);
    if (sharded)
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
  if (tensor && first.isCompute()) {
    tensor->takeIssued();
    CONDUIT_RETURN_IF_ERROR(tensor->takeFailure());
  }
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
  if (first.isCompute())
    CONDUIT_RETURN_IF_ERROR(checkTensorCalls(indices));
  CONDUIT_RETURN_IF_ERROR(deviceStatus());
  return kCompleted;
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
      " tensor collectives (", names(issued, issued.size() / std::max<size_t>(pieces, 1)),
      pieces > 1 ? absl::StrCat(" per sample, over ", pieces, " samples") : "",
      "), the plan lists ", listed.size(), " after it (", names(listed, listed.size()),
      "); the plan was compiled for other tensor collectives than this runtime's layers issue "
      "(runtime/plan/TensorCollectives.h)"));
}

template <typename Grad> absl::StatusOr<bool> BackendCore<Grad>::poll(Ticket ticket) {
  auto it = pending.find(ticket);
  if (it == pending.end())
    return absl::InternalError(absl::StrCat("unknown ticket ", ticket));
  Pending &p = it->second;
  CONDUIT_ASSIGN_OR_RETURN(bool done, p.work->test());
  if (!done)
    return false;
  if (p.gathered)
    p.gathered->gathered = true;
  if (p.reduced) {
    if (gradientsSharded())
      p.reduced->grad.reset(); // until the stage's next backward
    else
      CONDUIT_RETURN_IF_ERROR(
          zeroGradients(p.reduced->grad.data(), p.reduced->grad.size(), p.stream));
  }
  if (p.tied)
    addGradients(p.incoming.data(), p.tied);
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
  lossSum += ops().takeLoss(); // what forwards left (all of it, when read once per step)
  CONDUIT_RETURN_IF_ERROR(deviceStatus());
  CONDUIT_RETURN_IF_ERROR(synchronizeAll());
  CONDUIT_ASSIGN_OR_RETURN(double total, transport->sumOverRanks(lossSum));
  const Config &c = plan->config;
  StepOutcome outcome;
  outcome.loss = total / c.stepTokens(shape->seq);
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
// Compute
//===----------------------------------------------------------------------===//

template <typename Grad>
model::Tokens BackendCore<Grad>::tokensOf(const Stage &stage, int64_t mb,
                                          std::vector<int32_t> &tokens,
                                          std::vector<int32_t> &targets) const {
  return microbatchTokens(plan->config, *data, *shape, *stage.spec, mb, where.replica, step, tokens,
                          targets);
}

template <typename Grad>
std::vector<typename BackendCore<Grad>::Produced>
BackendCore<Grad>::localReads(const Instruction &inst) const {
  const Stage &consumer = *stages[inst.stage];
  const bool forward = inst.op == Op::Forward;
  if (inst.slot >= 0 || inst.op == Op::BackwardWeight || inst.op == Op::OptimizerStep ||
      (forward ? consumer.chain.hasEmbedding() : consumer.chain.hasHead()))
    return {};
  const int32_t from = inst.stage + (forward ? -1 : 1);
  if (from < 0 || from >= static_cast<int32_t>(stages.size()) || !stages[from])
    return {};
  std::vector<Produced> reads;
  const int64_t begin = consumer.spec->samples[inst.microbatch],
                end = consumer.spec->samples[inst.microbatch + 1];
  for (const Piece &piece : piecesOf(begin, end, stages[from]->spec->samples))
    reads.push_back({from, static_cast<int32_t>(piece.producerMicrobatch), forward});
  return reads;
}

template <typename Grad> void BackendCore<Grad>::doneReading(const Instruction &inst) {
  for (const Produced &read : localReads(inst))
    readBy(read);
}

template <typename Grad> void BackendCore<Grad>::readBy(const Produced &what) {
  auto it = readersLeft.find(what);
  if (it == readersLeft.end() || --it->second > 0)
    return;
  Stage &producer = *stages[what.stage];
  (what.activation ? producer.outputs : producer.inputGrads)[what.microbatch].reset();
}

template <typename Grad>
absl::StatusOr<const float *> BackendCore<Grad>::localInput(const Stage &consumer, int64_t mb,
                                                            bool forward,
                                                            model::Buffer<float> &scratch) {
  model::Ops<float> &math = ops();
  model::MemoryScope scope(math.memory(), model::MemoryUse::Working);
  return gatherLocalInput(
      stages, consumer, mb, forward, rowFloats, scratch,
      [&math](int64_t floats) { return math.allocate(floats); },
      [&math](int64_t floats, const float *from, float *to) { math.copy(floats, from, to); });
}

template <typename Grad> absl::Status BackendCore<Grad>::forward(const Instruction &inst) {
  Stage &stage = *stages[inst.stage];
  CONDUIT_RETURN_IF_ERROR(takeCompute(stage, inst));
  if (!stage.gathered)
    return absl::InternalError(absl::StrCat(describe(inst), ": parameters are not gathered"));
  const int64_t mb = inst.microbatch;
  std::vector<int32_t> tokens, targets;
  const model::Tokens batch = tokensOf(stage, mb, tokens, targets);
  model::Buffer<float> scratch;
  const float *x = nullptr;
  if (!stage.chain.hasEmbedding()) {
    if (inst.slot >= 0) {
      x = slots[inst.slot].data();
    } else {
      CONDUIT_ASSIGN_OR_RETURN(x, localInput(stage, mb, /*forward=*/true, scratch));
    }
  }
  model::MemoryCounter &memory = ops().memory();
  float *y = nullptr;
  if (!stage.chain.hasHead()) {
    model::MemoryScope send(memory, model::MemoryUse::SendBuffers);
    stage.outputs[mb] = ops().allocate(batch.samples * rowFloats);
    y = stage.outputs[mb].data();
  }
  model::MemoryScope saved(memory, model::MemoryUse::Activations);
  std::vector<double> seconds;
  std::vector<Cache> caches;
  stage.chain.forwardSamples(stage.full.data(), x, batch, y, caches,
                             measureLayers ? &seconds : nullptr);
  if constexpr (std::is_same_v<Grad, double>)
    lossSum += ops().takeLoss();
  timer.record(stage.spec->firstLayer, batch.samples, seconds, Op::Forward);
  stage.caches[mb] = std::move(caches);
  doneReading(inst);
  return absl::OkStatus();
}

template <typename Grad>
absl::Status BackendCore<Grad>::takeCompute(Stage &stage, const Instruction &inst) {
  if (const char *misplaced = stage.progress[inst.microbatch].take(inst.op))
    return absl::FailedPreconditionError(absl::StrCat(
        describe(inst), ": ", misplaced, " in this step; the plan orders its compute wrongly"));
  return absl::OkStatus();
}

template <typename Grad>
absl::Status BackendCore<Grad>::checkNoWeightPending(const Stage &stage,
                                                     const Instruction &inst) const {
  for (size_t mb = 0; mb < stage.progress.size(); ++mb)
    if (stage.progress[mb].weightPending())
      return absl::FailedPreconditionError(
          absl::StrCat(describe(inst), ": micro-batch ", mb,
                       " ran its backward_input but not yet its backward_weight; the stage's "
                       "gradients are not complete"));
  return absl::OkStatus();
}

template <typename Grad>
void BackendCore<Grad>::backwardPieces(Stage &stage, std::vector<Cache> &caches, Op pass,
                                       const float *dy, float *dx, std::vector<double> *seconds) {
  const model::LayerChain<float> &chain = stage.chain;
  const float *params = stage.full.data(); // W reads none: it may run after a reshard
  if constexpr (std::is_same_v<Grad, double>) {
    if (pass == Op::Backward)
      chain.backwardSamples(params, caches, dy, stage.grad.data(), dx, seconds);
    else if (pass == Op::BackwardInput)
      chain.backwardInputSamples(params, caches, dy, dx, seconds);
    else
      chain.backwardWeightSamples(caches, stage.grad.data(), seconds);
  } else {
    // Gradients accumulate in place, in float.
    const int64_t row = chain.sampleSize();
    int64_t at = 0;
    std::vector<double> one;
    for (Cache &cache : caches) {
      const int64_t samples = cache.samples;
      const float *pieceDy = dy ? dy + at * row : nullptr;
      float *pieceDx = dx ? dx + at * row : nullptr;
      std::vector<double> *timing = seconds ? &one : nullptr;
      if (pass == Op::Backward)
        chain.backward(params, cache, pieceDy, stage.grad.data(), pieceDx, timing);
      else if (pass == Op::BackwardInput)
        chain.backwardInput(params, cache, pieceDy, pieceDx, timing);
      else
        chain.backwardWeight(cache, stage.grad.data(), timing);
      if (seconds) {
        seconds->resize(one.size(), 0);
        for (size_t i = 0; i < one.size(); ++i)
          (*seconds)[i] += one[i];
      }
      at += samples;
    }
  }
}

template <typename Grad> void BackendCore<Grad>::needGradients(Stage &stage) {
  if (!stage.grad.empty())
    return;
  model::MemoryScope scope(ops().memory(), model::MemoryUse::Gradients);
  stage.grad = allocateGrad<Grad>(ops(), stage.padded); // zeroed
}

template <typename Grad> absl::Status BackendCore<Grad>::backward(const Instruction &inst) {
  Stage &stage = *stages[inst.stage];
  CONDUIT_RETURN_IF_ERROR(takeCompute(stage, inst));
  needGradients(stage);
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
  model::MemoryCounter &memory = ops().memory();
  float *dx = nullptr;
  if (!stage.chain.hasEmbedding()) {
    model::MemoryScope send(memory, model::MemoryUse::SendBuffers);
    stage.inputGrads[mb] = ops().allocate(samples * rowFloats);
    dx = stage.inputGrads[mb].data();
  }
  std::vector<double> seconds;
  {
    // What I stashes waits for the W; a whole backward's stash lives for one layer. With
    // full checkpointing the chain recomputes each layer's cache first, as working memory,
    // which after an I waits for the W too.
    model::MemoryScope stash(memory, inst.op == Op::BackwardInput
                                         ? model::MemoryUse::WeightGradientInputs
                                         : model::MemoryUse::Working);
    backwardPieces(stage, stage.caches[mb], inst.op, dy, dx, measureLayers ? &seconds : nullptr);
  }
  timer.record(stage.spec->firstLayer, samples, seconds, inst.op);
  if (inst.op == Op::Backward)
    stage.caches[mb].clear(); // else they wait for the W
  doneReading(inst);
  return absl::OkStatus();
}

template <typename Grad> absl::Status BackendCore<Grad>::backwardWeight(const Instruction &inst) {
  Stage &stage = *stages[inst.stage];
  CONDUIT_RETURN_IF_ERROR(takeCompute(stage, inst));
  needGradients(stage);
  const int64_t mb = inst.microbatch;
  std::vector<double> seconds;
  model::MemoryScope working(ops().memory(), model::MemoryUse::Working);
  backwardPieces(stage, stage.caches[mb], inst.op, nullptr, nullptr,
                 measureLayers ? &seconds : nullptr);
  timer.record(stage.spec->firstLayer, stage.samplesOf(mb), seconds, inst.op);
  stage.caches[mb].clear();
  return absl::OkStatus();
}

template <typename Grad>
absl::Status BackendCore<Grad>::optimizerStep(Stage &stage, const Instruction &inst) {
  CONDUIT_RETURN_IF_ERROR(checkNoWeightPending(stage, inst));
  const int64_t t = ++stage.optimizerSteps;
  const int64_t n = stage.updatedCount(sharded);
  model::Buffer<Grad> &grads = stage.updateGrads(sharded);
  if (measureLayers)
    ops().synchronize();
  const auto start = std::chrono::steady_clock::now();
  CONDUIT_RETURN_IF_ERROR(
      applyOptimizer(t, n, stage.updated(sharded), stage.optimizer.data(), grads.data()));
  CONDUIT_RETURN_IF_ERROR(zeroGradients(grads.data(), grads.size(), streamOf(kComputeStream)));
  if (measureLayers) {
    ops().synchronize();
    timer.recordOptimizer(
        n, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return absl::OkStatus();
}

//===----------------------------------------------------------------------===//
// Communication
//===----------------------------------------------------------------------===//

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
      CONDUIT_ASSIGN_OR_RETURN(stage.full,
                               gatherBuffer(stage.padded, p.stream, streamOf(kComputeStream)));
    }
    CONDUIT_ASSIGN_OR_RETURN(p.work,
                             transport->allGather(inst.group, Element::Float32, stage.master.data(),
                                                  stage.full.data(), stage.shardLen, p.stream));
    p.gathered = &stage;
    break;
  }
  case Op::ReduceScatter: {
    if (!sharded)
      return absl::FailedPreconditionError(
          absl::StrCat(describe(inst), ": the stage is not sharded"));
    CONDUIT_RETURN_IF_ERROR(checkNoWeightPending(stage, inst));
    CONDUIT_ASSIGN_OR_RETURN(p.work, transport->reduceScatter(inst.group, grads, stage.grad.data(),
                                                              stage.gradShard.data(),
                                                              stage.shardLen, p.stream));
    p.reduced = &stage;
    break;
  }
  case Op::AllReduce: {
    CONDUIT_RETURN_IF_ERROR(checkNoWeightPending(stage, inst));
    CONDUIT_ASSIGN_OR_RETURN(
        p.work, transport->allReduce(inst.group, grads, stage.grad.data(), stage.padded, p.stream));
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
  // The head: its norm's weights (and biases with LayerNorm), then the tied matrix.
  return stage.grad.data() + stage.chain.offset(stage.chain.size() - 1) + shape->normParams();
}

template <typename Grad> void BackendCore<Grad>::addGradients(const Grad *src, Grad *dst) {
  const int64_t n = shape->localVocab() * shape->hidden; // this tensor rank's rows
  if constexpr (std::is_same_v<Grad, float>) {
    ops().add(n, src, dst);
  } else {
    // Double accumulators live in host memory (the CPU backend).
    for (int64_t j = 0; j < n; ++j)
      dst[j] += src[j];
  }
}

template <typename Grad>
absl::StatusOr<bool> BackendCore<Grad>::tieGradients(const Instruction &inst, Pending &p) {
  const int32_t last = static_cast<int32_t>(plan->stages.size()) - 1;
  Stage *mine = stages[inst.stage].get();
  if (!mine || !plan->transformer)
    return absl::InternalError(absl::StrCat(describe(inst), ": no tied copy on this rank"));
  CONDUIT_RETURN_IF_ERROR(checkNoWeightPending(*mine, inst));
  const int64_t n = shape->localVocab() * shape->hidden; // this tensor rank's rows
  if (inst.peer == where.pipelineRank) {
    // Both copies here: each becomes the same sum (addition commutes, so the bits agree).
    Stage *other = stages[inst.peerStage].get();
    if (!other)
      return absl::InternalError(absl::StrCat(describe(inst), ": the other copy is not here"));
    CONDUIT_RETURN_IF_ERROR(checkNoWeightPending(*other, inst));
    Grad *embedding = tiedGradient(inst.stage == 0 ? *mine : *other, /*head=*/false);
    Grad *head = tiedGradient(inst.stage == last ? *mine : *other, /*head=*/true);
    addGradients(embedding, head);
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
absl::Status BackendCore<Grad>::gatherOutOfStep(Stage &stage, float *full, StreamHandle stream) {
  CONDUIT_ASSIGN_OR_RETURN(std::unique_ptr<Work> work,
                           transport->allGather(stage.group, Element::Float32, stage.master.data(),
                                                full, stage.shardLen, stream));
  return complete(std::move(work));
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
      ops().download(stage->updated(sharded), s.params.size(), s.params.data());
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
          optimizer.stateWidth() == 0 ? "SGD keeps none" : "Adam keeps two per parameter", ")"));
    stage->optimizerSteps = s.optimizerSteps;
    ops().upload(s.optimizer.data(), s.optimizer.size(), stage->optimizer.data());
    if (!sharded) {
      ops().upload(s.params.data(), params, stage->full.data());
      continue;
    }
    ops().upload(s.params.data(), params, stage->master.data());
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
    std::vector<float> whole(stage->n);
    if (sharded) {
      StreamHandle stream = streamOf(kCollectiveStream);
      CONDUIT_ASSIGN_OR_RETURN(model::Buffer<float> gathered,
                               gatherBuffer(stage->padded, stream, stream));
      CONDUIT_RETURN_IF_ERROR(gatherOutOfStep(*stage, gathered.data(), stream));
      ops().download(gathered.data(), stage->n, whole.data());
    } else {
      ops().download(stage->full.data(), stage->n, whole.data());
    }
    if (tensor) {
      // The whole layers from every tensor rank's part (replicated parameters from each).
      const int64_t part = stage->n;
      model::Buffer<float> mine = ops().allocate(part),
                           parts = ops().allocate(part * shape->tensorSize);
      ops().upload(whole.data(), part, mine.data());
      StreamHandle stream = streamOf(kComputeStream);
      CONDUIT_RETURN_IF_ERROR(transport->tensorAllGather(mine.data(), parts.data(), part, stream));
      CONDUIT_RETURN_IF_ERROR(synchronizeAll());
      std::vector<float> all(part * shape->tensorSize);
      ops().download(parts.data(), all.size(), all.data());
      whole = model::wholeFromTensorParts(*plan, *shape, stage->spec->firstLayer,
                                          stage->spec->endLayer, all.data());
    }
    out.push_back(std::move(whole));
  }
  CONDUIT_RETURN_IF_ERROR(deviceStatus());
  return out;
}

template class BackendCore<float>;
template class BackendCore<double>;

} // namespace conduit::runtime
