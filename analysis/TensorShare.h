//===- TensorShare.h - a layer's figures on one tensor rank -----*- C++ -*-===//
//
// What one rank of a tensor group holds of a layer, per sample: Megatron-LM's partitioning
// divides what the layer does not keep replicated by T, and sequence parallelism divides the
// activations, the layer input and the output too. A mixture of experts' routed experts are
// never split by T: the expert group's E ranks divide them instead (parallel folding). The one
// statement of it: the passes apply it to pipe.layer ops (passes/PassUtils.h), the tuner's bounds
// to the job's layers, so that a bound and the plan it bounds cannot disagree on it.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_ANALYSIS_TENSORSHARE_H
#define CONDUIT_ANALYSIS_TENSORSHARE_H

#include "job/JobSpec.h"

#include <cstdint>
#include <optional>

namespace conduit {

/// A layer's figures per sample as its pipe.layer (or the job's layer) states them.
struct SplitLayer {
  bool embedding = false;
  int64_t params = 0, replicatedParams = 0;
  /// Of params, the routed experts' (divided over the expert group, not the tensor group);
  /// replicatedParams is a part of the rest.
  int64_t expertParams = 0;
  int64_t activationBytes = 0, replicatedActivationBytes = 0;
  /// What a deferred weight gradient keeps (unset: the activations).
  std::optional<int64_t> weightGradientBytes;
  int64_t checkpointBytes = 0, outputBytes = 0, selectiveBytes = 0;
};

/// One layer's figures (per sample) on one rank of its tensor group. With T = 1, the layer's
/// own figures.
struct TensorShare {
  int64_t params = 0;
  /// Of params, the rank's routed experts: 1/E of the layer's. Their gradients are reduced,
  /// and sharded, over the expert-data group (the D x T / E ranks holding the same experts).
  int64_t expertParams = 0;
  int64_t activationBytes = 0;
  int64_t checkpointBytes = 0;
  int64_t outputBytes = 0;
  /// What a deferred weight gradient keeps (the layer's activations when unstated).
  int64_t weightGradientBytes = 0;
  /// Of activationBytes, what selective checkpointing recomputes (split like them).
  int64_t selectiveBytes = 0;
};

/// `expert`: the expert-parallel degree E.
TensorShare tensorShare(const SplitLayer &layer, int64_t tensor, bool sequenceParallel,
                        int64_t expert = 1);

/// The figures of a job's layer, selective checkpointing recomputing `recomputeModules`
/// (runtime::RecomputeModule bits: the job's parallelism.recomputeModules).
SplitLayer splitLayer(const LayerSpec &layer, uint32_t recomputeModules);

} // namespace conduit

#endif // CONDUIT_ANALYSIS_TENSORSHARE_H
