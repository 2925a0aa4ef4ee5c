//===- Reference.cpp - the oracle: one process, no parallelism ------------===//

#include "runtime/Reference.h"

namespace conduit::runtime {

absl::StatusOr<Reference> Reference::create(const Plan &plan) {
  CONDUIT_ASSIGN_OR_RETURN(model::GptShape shape, model::GptShape::fromPlan(plan));
  auto ops = std::make_unique<model::CpuOps<float>>();
  CONDUIT_ASSIGN_OR_RETURN(model::LayerChain<float> chain,
                           model::LayerChain<float>::build(
                               plan, shape, 0, static_cast<int64_t>(plan.layers.size()), *ops));
  return Reference(plan, shape, std::move(ops), std::move(chain));
}

Reference::Reference(const Plan &plan, model::GptShape shape,
                     std::unique_ptr<model::CpuOps<float>> ops, model::LayerChain<float> chain)
    : config(plan.config), shape(shape), ops(std::move(ops)), chain(std::move(chain)),
      data(static_cast<uint64_t>(plan.config.seed), shape.vocab, shape.seq),
      optimizer(model::OptimizerConfig::fromPlan(plan.config)) {
  params.assign(this->chain.numParams(), 0.0f);
  this->chain.initialise(params.data(), static_cast<uint64_t>(config.seed));
  state.assign(optimizer.stateWidth() * params.size(), 0.0f);
  grad.assign(params.size(), 0.0);
}

double Reference::step(int64_t step) {
  const int64_t b = config.microbatchSize, perReplica = config.batchSamples();
  const double total = static_cast<double>(perReplica * config.data * shape.seq);
  double loss = 0;
  std::vector<int32_t> tokens, targets;
  for (int64_t replica = 0; replica < config.data; ++replica)
    for (int64_t first = 0; first < perReplica; first += b) {
      data.batch(step, replica * perReplica + first, b, tokens, targets);
      model::Tokens batch{tokens.data(), targets.data(), b, 1.0 / total};
      std::vector<model::LayerChain<float>::Cache> caches;
      chain.forwardSamples(params.data(), nullptr, batch, nullptr, caches);
      loss += ops->takeLoss();
      chain.backwardSamples(params.data(), caches, nullptr, grad.data(), nullptr);
    }
  model::optimizerStep(optimizer, ++optimizerSteps, static_cast<int64_t>(params.size()),
                       params.data(), state.data(), grad.data());
  std::fill(grad.begin(), grad.end(), 0.0);
  return loss / total;
}

} // namespace conduit::runtime
