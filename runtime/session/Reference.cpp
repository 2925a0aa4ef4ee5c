//===- Reference.cpp - the oracle: one process, no parallelism ------------===//

#include "runtime/session/Reference.h"

#include "runtime/exec/StageWork.h"
#include "runtime/plan/Limits.h"

#include "absl/strings/str_cat.h"

namespace conduit::runtime {

absl::StatusOr<ReferenceWork> Reference::estimate(const Plan &plan) {
  using limits::checkedAdd;
  using limits::checkedMul;
  CONDUIT_ASSIGN_OR_RETURN(model::GptShape shape, model::GptShape::fromPlan(plan));
  const Config &c = plan.config;
  int64_t params = 0; // at most 2^53: readPlan bounds the layers' sum
  for (const Layer &layer : plan.layers)
    params += layer.params;
  const int64_t width = model::OptimizerConfig::fromPlan(c).stateWidth();
  std::optional<int64_t> activations =
      shape.activationElements(c.microbatchSize, shape.blocks + shape.mtpLayers, /*head=*/true);
  std::optional<int64_t> bytes =
      checkedMul(params, int64_t(sizeof(float)) * (1 + width) + int64_t(sizeof(double)));
  std::optional<int64_t> activationBytes =
      activations ? checkedMul(*activations, int64_t(sizeof(float))) : std::nullopt;
  bytes = bytes && activationBytes ? checkedAdd(*bytes, *activationBytes) : std::nullopt;
  // Synthetic data's successor table: one token per vocabulary entry (a file of tokens is
  // mapped, not held).
  if (bytes)
    bytes = checkedAdd(*bytes, shape.vocab * int64_t(sizeof(int32_t)));
  if (!bytes)
    return absl::FailedPreconditionError(
        "the reference would need more than 2^63 bytes for the model and one micro-batch");
  ReferenceWork work;
  work.memoryBytes = *bytes;
  work.samplesPerStep = c.batchSamples() * c.data; // at most 2^60
  // 2 FLOPs per multiply-add forward, 4 backward, for every weight and token; attention's
  // two products of seq x seq per head likewise.
  const double seq = static_cast<double>(shape.seq);
  const double perSample =
      6.0 * static_cast<double>(params) * seq +
      12.0 * static_cast<double>(shape.blocks) * seq * seq * static_cast<double>(shape.hidden);
  work.flopsPerStep = perSample * static_cast<double>(work.samplesPerStep);
  return work;
}

absl::StatusOr<Reference> Reference::create(const Plan &plan) {
  // The whole model in one process, whatever tensor parallelism the plan uses.
  CONDUIT_ASSIGN_OR_RETURN(model::GptShape split, model::GptShape::fromPlan(plan));
  const model::GptShape shape = split.whole();
  CONDUIT_ASSIGN_OR_RETURN(ReferenceWork work, estimate(plan));
  const int64_t host = hostMemoryBytes();
  if (host > 0 && work.memoryBytes > host)
    return absl::ResourceExhaustedError(
        absl::StrCat("the reference needs at least ", formatBytes(work.memoryBytes),
                     " (the whole model's parameters, optimizer state and gradients, and one "
                     "micro-batch's activations); this machine has ",
                     formatBytes(host)));
  auto ops = std::make_unique<model::CpuOps<float>>();
  CONDUIT_ASSIGN_OR_RETURN(model::LayerChain<float> chain,
                           model::LayerChain<float>::build(
                               plan, shape, 0, static_cast<int64_t>(plan.layers.size()), *ops));
  CONDUIT_ASSIGN_OR_RETURN(std::unique_ptr<model::TokenSource> data,
                           model::makeTokenSource(plan.config, shape.vocab, shape.seq));
  return Reference(plan, shape, std::move(ops), std::move(chain), std::move(data));
}

Reference::Reference(const Plan &plan, model::GptShape shape,
                     std::unique_ptr<model::CpuOps<float>> ops, model::LayerChain<float> chain,
                     std::unique_ptr<model::TokenSource> data)
    : config(plan.config), shape(shape), ops(std::move(ops)), chain(std::move(chain)),
      data(std::move(data)), optimizer(model::OptimizerConfig::fromPlan(plan.config)) {
  if (plan.transformer && plan.transformer->sharesTokenTable()) {
    tied = true;
    tiedHead = this->chain.tableCopyAt();
  }
  params.assign(this->chain.numParams(), 0.0f);
  this->chain.initialise(params.data(), static_cast<uint64_t>(config.seed));
  state.assign(optimizer.stateWidth() * params.size(), 0.0f);
  grad.assign(params.size(), 0.0);
}

StepOutcome Reference::step(int64_t step) {
  const int64_t b = config.microbatchSize, perReplica = config.batchSamples();
  const double total = config.stepTokens(shape.seq);
  double loss = 0, aux = 0, z = 0, mtp = 0;
  std::vector<int32_t> tokens, targets;
  for (int64_t replica = 0; replica < config.data; ++replica)
    for (int64_t first = 0; first < perReplica; first += b) {
      data->batch(step, replica * perReplica + first, b, tokens, targets);
      model::Tokens batch{tokens.data(), targets.data(), b, 1.0 / total};
      std::vector<model::LayerChain<float>::Cache> caches;
      chain.forwardSamples(params.data(), nullptr, batch, nullptr, caches);
      loss += ops->takeLoss();
      aux += ops->takeAuxLoss();
      z += ops->takeZLoss();
      mtp += ops->takeMtpLoss();
      chain.backwardSamples(params.data(), caches, nullptr, grad.data(), nullptr);
    }
  if (tied) {
    // The token table and the LM head (or the modules' copy) are one weight held twice: both
    // take the summed gradient (as a plan's tie_grads does) and so the same update.
    const int64_t n = shape.vocab * shape.hidden;
    double *embedding = grad.data(), *head = grad.data() + tiedHead;
    for (int64_t j = 0; j < n; ++j)
      embedding[j] = head[j] = embedding[j] + head[j];
  }
  // The routers' biases that the load moves, by the step's counts of choices in their
  // gradients (as a plan's optimizer moves them).
  const double mean = model::evenLoad(total, shape.topK, shape.experts);
  for (int64_t bias : chain.loadBalancedBiases())
    for (int64_t e = 0; e < shape.experts; ++e)
      model::balanceBias(shape.biasUpdateRate, mean, params[bias + e], grad[bias + e]);
  model::optimizerStep(optimizer, ++optimizerSteps, static_cast<int64_t>(params.size()),
                       params.data(), state.data(), grad.data());
  std::fill(grad.begin(), grad.end(), 0.0);
  StepOutcome outcome;
  outcome.loss = loss / total;
  // The mean over the global batch's samples, computed as the backends compute it.
  const double seq = static_cast<double>(shape.seq);
  if (shape.moe())
    outcome.auxLoss = aux * seq / total;
  if (shape.moe() && shape.zLossCoefficient > 0)
    outcome.zLoss = z * seq / total;
  if (shape.mtpLayers > 0)
    outcome.mtpLoss = mtp / total;
  return outcome;
}

} // namespace conduit::runtime
