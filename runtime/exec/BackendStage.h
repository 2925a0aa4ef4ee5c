//===- BackendStage.h - one stage of a BackendCore --------------*- C++ -*-===//
//
// What BackendCore keeps per local stage (layers, parameters whole and sharded, gradient
// accumulators, optimizer state, and per micro-batch what a step keeps), shared by the files
// that implement BackendCore: BackendCore.cpp (set-up, the step, dispatch, saved state),
// BackendCompute.cpp (forward, backward, optimizer) and BackendCommunication.cpp (transfers,
// collectives, tied gradients). Only those files include it.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_EXEC_BACKENDSTAGE_H
#define CONDUIT_RUNTIME_EXEC_BACKENDSTAGE_H

#include "runtime/exec/BackendCore.h"

#include <type_traits>

namespace conduit::runtime {

/// Gradient accumulators, counted at the plan's gradient width whatever `Grad` is (the CPU's
/// are doubles).
template <typename Grad> model::Buffer<Grad> allocateGrad(model::Ops<float> &ops, int64_t n) {
  model::MemoryScope scope(ops.memory(), ops.memory().use(), model::kPlanGradientBytes);
  if constexpr (std::is_same_v<Grad, double>)
    return ops.allocateDouble(n);
  else
    return ops.allocate(n);
}

/// One stage of this process: its layers, parameters, gradients and what a step keeps.
template <typename Grad> struct BackendCore<Grad>::Stage : ShardLayout {
  const runtime::Stage *spec = nullptr;
  model::LayerChain<float> chain;
  /// The whole parameters compute uses; with full sharding only while gathered. When not
  /// sharded these are also the parameters the optimizer updates.
  model::Buffer<float> full;
  bool gathered = false;
  model::Buffer<float> master; ///< sharded: this replica's shard, which the optimizer updates
  /// A segment kept apart (ShardSegment::apart, the routed experts): its parameters under full
  /// sharding (else they stay in `full`) and its gradients, all step, placed in the chain.
  model::Buffer<float> apartParams;
  model::Buffer<Grad> apartGrads;
  model::Buffer<float> optimizer; ///< optimizer state of what this replica updates
  /// Accumulated gradients, `allocatedLen()` long. Where gradients are sharded (ZeRO-2 and full
  /// sharding) they exist only from the stage's first backward of a step to its
  /// reduce-scatter, as the memory plan assumes; otherwise always.
  model::Buffer<Grad> grad;
  /// ZeRO-2 and full sharding: this replica's part of the reduced gradients (ZeRO-1 leaves it in
  /// place in `grad`).
  model::Buffer<Grad> gradShard;
  int64_t optimizerSteps = 0;
  /// Where the routers' biases that the load moves lie among what this replica updates
  /// (ShardLayout::updatedIndex), ascending: their gradients hold counts of choices.
  std::vector<int64_t> balancedBiases;
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
  /// The parameters the optimizer updates, in the order of its state and of a checkpoint:
  /// f(parameters, their gradients, where they start in that order, how many). Not sharded,
  /// the whole array; sharded, the kept shards, then each segment updated in place.
  template <typename F> void forEachUpdated(bool sharded, F f) {
    if (!sharded) {
      f(full.data(), grad.data(), int64_t(0), n);
      return;
    }
    if (shardLen > 0 && !gradShard.empty()) {
      f(master.data(), gradShard.data(), int64_t(0), shardLen);
    } else {
      // The reduced gradients lie in place in the whole ones (BackendCore::reducesInPlace).
      for (const ShardSegment *g : {&dense, &experts})
        if (!g->inPlace && g->shardLen > 0)
          f(master.data() + g->shardAt, grad.data() + g->at + g->shardOffset, g->shardAt,
            g->shardLen);
    }
    for (const ShardSegment *g : {&dense, &experts})
      if (g->inPlace && g->n > 0)
        f(g->apart && !apartParams.empty() ? apartParams.data() : full.data() + g->at,
          g->apart ? apartGrads.data() : grad.data() + g->at, g->shardAt, g->n);
  }
  int64_t updatedCount(bool sharded) const { return sharded ? updatedLen : n; }
};

} // namespace conduit::runtime

#endif // CONDUIT_RUNTIME_EXEC_BACKENDSTAGE_H
