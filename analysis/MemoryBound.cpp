//===- MemoryBound.cpp - memory no plan of a job can go below ------------===//

#include "analysis/MemoryBound.h"

#include "analysis/PeakMemory.h"

#include <algorithm>
#include <vector>

using namespace conduit;

namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// What one tensor rank holds of `total`, of which `replicated` is not split.
int64_t tensorShare(int64_t total, int64_t replicated, int64_t tensor) {
  return replicated + (total - replicated) / tensor;
}

} // namespace

MemoryBound conduit::memoryLowerBound(const Job &job, const ParallelismSpec &par) {
  MemoryBound bound;
  const int64_t tensor = std::max<int64_t>(par.tensor, 1);
  int64_t params = 0;
  std::vector<LayerBytes> layers;
  for (const LayerSpec &layer : job.model.layers) {
    params += tensorShare(layer.params, layer.replicatedParams.value_or(0), tensor);
    const int64_t replicated = layer.replicatedActivationBytes.value_or(0);
    auto split = [&](int64_t bytes) {
      return tensorShare(bytes, std::min(bytes, replicated), tensor);
    };
    layers.push_back({split(layer.activationBytes), split(layer.checkpointBytes),
                      split(layer.weightGradientBytes.value_or(layer.activationBytes)),
                      split(layer.attentionCoreBytes.value_or(0))});
  }
  // The static state, summed over the pipeline ranks, then their mean (sharded state rounds up
  // per stage, so the mean of the rounded shards is at least this).
  const runtime::Sharding sharding = par.data > 1 ? par.sharding : runtime::Sharding::None;
  const int64_t e = job.training.elementBytes();
  const bool adam = job.training.optimizer == runtime::Optimizer::Adam;
  const int64_t statePerParam = adam ? (e == 4 ? 8 : 12) : (e == 4 ? 0 : 4);
  const int64_t shard = ceilDiv(params, par.data);
  const bool fullGradients =
      sharding == runtime::Sharding::Gradients || sharding == runtime::Sharding::Full;
  const int64_t state = (sharding == runtime::Sharding::Full ? shard : params) * e +
                        (sharding != runtime::Sharding::None ? shard : params) * statePerParam +
                        (fullGradients ? shard : params) * runtime::kGradientBytes;
  bound.staticBytes = state / par.pipeline;
  // Every forward before the first backward: at that backward each rank keeps every
  // micro-batch of each of its stages.
  if (par.schedule == runtime::Schedule::GPipe || par.schedule == runtime::Schedule::BreadthFirst) {
    const double stored = static_cast<double>(stageActivations(layers, par.checkpointing).stored);
    const double bytes = stored * static_cast<double>(par.microbatches) *
                         static_cast<double>(par.microbatchSize) /
                         static_cast<double>(par.pipeline);
    // Rounded down, and saturated where a job's batch is absurd.
    bound.activationBytes =
        bytes >= 9.0e18 ? int64_t(9'000'000'000'000'000'000) : static_cast<int64_t>(bytes);
  }
  return bound;
}
