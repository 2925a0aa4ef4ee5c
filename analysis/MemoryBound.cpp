//===- MemoryBound.cpp - memory no plan of a job can go below ------------===//

#include "analysis/MemoryBound.h"

#include "analysis/PeakMemory.h"
#include "analysis/TensorShare.h"

#include <algorithm>
#include <vector>

using namespace conduit;

namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

} // namespace

namespace {

/// The static state of `params` parameters sharded (as `sharding` says) over `ranks` ranks.
int64_t shardedState(const Job &job, runtime::Sharding sharding, int64_t ranks, int64_t params) {
  if (ranks <= 1)
    sharding = runtime::Sharding::None;
  // The stored parameters, and a master copy where they are 16-bit (PeakMemory's addStatic).
  const int64_t e = job.training.storedParameterBytes();
  const bool adam = job.training.optimizer == runtime::Optimizer::Adam;
  const int64_t statePerParam = (adam ? 2 * job.training.momentBytes() : 0) + (e == 4 ? 0 : 4);
  const int64_t shard = ceilDiv(params, ranks);
  return (sharding == runtime::Sharding::Full ? shard : params) * e +
         (sharding != runtime::Sharding::None ? shard : params) * statePerParam +
         (runtime::shardsGradients(sharding) ? shard : params) * runtime::kGradientBytes;
}

} // namespace

int64_t conduit::staticStateBytes(const Job &job, const ParallelismSpec &par, int64_t params,
                                  int64_t expertParams) {
  expertParams = std::clamp<int64_t>(expertParams, 0, params);
  const int64_t expertData = par.data * par.tensor / std::max<int64_t>(par.expert, 1);
  return shardedState(job, par.sharding, par.data, params - expertParams) +
         shardedState(job, par.sharding, expertData, expertParams);
}

MemoryBound conduit::memoryLowerBound(const Job &job, const ParallelismSpec &par) {
  MemoryBound bound;
  // What one rank of a tensor group holds of each layer (TensorShare.h, as the plan counts it).
  int64_t params = 0, expertParams = 0;
  std::vector<LayerBytes> layers;
  for (const LayerSpec &layer : job.model.layers) {
    const TensorShare share =
        tensorShare(splitLayer(layer, par.recomputeModules), std::max<int64_t>(par.tensor, 1),
                    par.sequenceParallel, par.expert);
    params += share.params;
    expertParams += share.expertParams;
    layers.push_back({share.activationBytes, share.checkpointBytes, share.weightGradientBytes,
                      share.selectiveBytes, layer.kind});
  }
  // The static state of the whole model over the pipeline ranks: the fullest holds at least
  // the mean, and splitting the parameters into stages only rounds the shards up.
  bound.staticBytes = ceilDiv(staticStateBytes(job, par, params, expertParams), par.pipeline);
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
