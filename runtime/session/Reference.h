//===- Reference.h - the oracle: one process, no parallelism ----*- C++ -*-===//
//
// Trains the job of a plan in one process: the whole model, the whole global batch (every
// replica's samples, micro-batch after micro-batch), one optimizer step per step. Same data,
// same initialisation and the same kernels as the CPU backend, so every correct plan of the job
// must reproduce its losses and parameters.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_SESSION_REFERENCE_H
#define CONDUIT_RUNTIME_SESSION_REFERENCE_H

#include "runtime/data/Data.h"
#include "runtime/exec/Backend.h"
#include "runtime/model/Gpt.h"
#include "runtime/model/Optimizer.h"

#include <memory>

namespace conduit::runtime {

/// What training a plan in one process costs per step, from the model's shape (not from the
/// plan's figures, which a hostile file may set to anything).
struct ReferenceWork {
  int64_t samplesPerStep = 0; ///< every replica's batch
  double flopsPerStep = 0;    ///< forward and backward, approximately
  int64_t memoryBytes = 0;    ///< parameters, optimizer state, gradients, one micro-batch
};

class Reference {
public:
  /// The cost of `plan`'s reference run; an error when its memory does not fit in 64 bits.
  static absl::StatusOr<ReferenceWork> estimate(const Plan &plan);
  /// Refuses a plan whose memory the machine does not have.
  static absl::StatusOr<Reference> create(const Plan &plan);

  /// Runs step `step` (1-based); returns the mean loss over the global batch (the
  /// cross-entropy), and a mixture of experts' auxiliary losses as a plan's step gives them.
  StepOutcome step(int64_t step);

  const model::LayerChain<float> &model() const { return chain; }
  const std::vector<float> &parameters() const { return params; }
  /// Replaces the parameters before the first step (conduit-run --init): `values` holds the
  /// whole model's, in the chain's layout.
  absl::Status setParameters(std::vector<float> values) {
    if (values.size() != params.size())
      return absl::InvalidArgumentError("the reference's parameters have another size");
    params = std::move(values);
    return absl::OkStatus();
  }

private:
  Reference(const Plan &plan, model::GptShape shape, std::unique_ptr<model::CpuOps<float>> ops,
            model::LayerChain<float> chain, std::unique_ptr<model::TokenSource> data);

  Config config;
  model::GptShape shape;
  std::unique_ptr<model::CpuOps<float>> ops; ///< owned apart: the chain points at it
  model::LayerChain<float> chain;
  std::unique_ptr<model::TokenSource> data;
  model::OptimizerConfig optimizer;
  std::vector<float> params, state;
  std::vector<double> grad;
  int64_t optimizerSteps = 0;
  /// Tied embeddings: where the LM head's copy of the token table starts in the parameters.
  bool tied = false;
  int64_t tiedHead = 0;
};

} // namespace conduit::runtime

#endif // CONDUIT_RUNTIME_SESSION_REFERENCE_H
