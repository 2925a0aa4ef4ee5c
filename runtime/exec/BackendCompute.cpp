//===- BackendCompute.cpp - a BackendCore's compute -----------------------===//
//
// The compute instructions of a BackendCore: a micro-batch's tokens and inputs (from a
// receive slot or another local stage), forward, backward whole or as its input-gradient and
// weight-gradient halves, by pieces of the micro-batch as the gradient policy wants, the
// release of what the last local reader has read, and the optimizer step.
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/BackendStage.h"

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <chrono>

namespace conduit::runtime {

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
  if constexpr (std::is_same_v<Grad, double>) {
    takeLosses();
  }
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
  stage.grad = allocateGrad<Grad>(ops(), stage.allocatedLen()); // zeroed
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
  if (gradientsSharded() && !stage.grad.empty())
    return absl::FailedPreconditionError(
        absl::StrCat(describe(inst), ": the stage has gradients that no reduction covered"));
  const int64_t t = ++stage.optimizerSteps;
  const int64_t n = stage.updatedCount(sharded);
  if (measureLayers)
    ops().synchronize();
  const auto start = std::chrono::steady_clock::now();
  absl::Status status = absl::OkStatus();
  stage.forEachUpdated(sharded, [&](float *params, Grad *grads, int64_t at, int64_t count) {
    // The routers' biases among these move by their counts first (the step's choices of each
    // expert against the mean of the experts' assignments), leaving the update rule nothing.
    const std::vector<int64_t> &biases = stage.balancedBiases;
    std::vector<int64_t> offsets;
    for (auto i = std::lower_bound(biases.begin(), biases.end(), at);
         i != biases.end() && *i < at + count; ++i)
      offsets.push_back(*i - at);
    if (status.ok() && !offsets.empty()) {
      const Transformer &x = *plan->transformer;
      status = balanceBiases(
          params, grads, offsets, x.biasUpdateRate,
          model::evenLoad(plan->config.stepTokens(x.seqLength), x.topK, x.numExperts));
    }
    if (status.ok())
      status = applyOptimizer(t, count, params,
                              stage.optimizer.data() + optimizer.stateWidth() * at, grads);
    if (status.ok())
      status = zeroGradients(grads, count, streamOf(kComputeStream));
  });
  CONDUIT_RETURN_IF_ERROR(status);
  if (reducesInPlace()) // the rest of the whole gradients: the other replicas' partial sums
    CONDUIT_RETURN_IF_ERROR(
        zeroGradients(stage.grad.data(), stage.grad.size(), streamOf(kComputeStream)));
  if (measureLayers) {
    ops().synchronize();
    timer.recordOptimizer(
        n, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return absl::OkStatus();
}

// The members this file defines, for both gradient types (BackendCore.cpp instantiates the
// class and the rest of its members).
#define CONDUIT_INSTANTIATE_COMPUTE(Grad)                                                          \
  template model::Tokens BackendCore<Grad>::tokensOf(                                              \
      const Stage &, int64_t, std::vector<int32_t> &, std::vector<int32_t> &) const;               \
  template std::vector<BackendCore<Grad>::Produced> BackendCore<Grad>::localReads(                 \
      const Instruction &) const;                                                                  \
  template void BackendCore<Grad>::doneReading(const Instruction &);                               \
  template void BackendCore<Grad>::readBy(const Produced &);                                       \
  template absl::StatusOr<const float *> BackendCore<Grad>::localInput(                            \
      const Stage &, int64_t, bool, model::Buffer<float> &);                                       \
  template absl::Status BackendCore<Grad>::forward(const Instruction &);                           \
  template absl::Status BackendCore<Grad>::takeCompute(Stage &, const Instruction &);              \
  template absl::Status BackendCore<Grad>::checkNoWeightPending(const Stage &,                     \
                                                                const Instruction &) const;        \
  template void BackendCore<Grad>::backwardPieces(Stage &, std::vector<Cache> &, Op,               \
                                                  const float *, float *, std::vector<double> *);  \
  template void BackendCore<Grad>::needGradients(Stage &);                                         \
  template absl::Status BackendCore<Grad>::backward(const Instruction &);                          \
  template absl::Status BackendCore<Grad>::backwardWeight(const Instruction &);                    \
  template absl::Status BackendCore<Grad>::optimizerStep(Stage &, const Instruction &);

CONDUIT_INSTANTIATE_COMPUTE(float)
CONDUIT_INSTANTIATE_COMPUTE(double)

} // namespace conduit::runtime
