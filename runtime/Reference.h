//===- Reference.h - the oracle: one process, no parallelism ----*- C++ -*-===//
//
// Trains the job of a plan in one process: the whole model, the whole global batch (every
// replica's samples, micro-batch after micro-batch), one optimizer step per step. Same data,
// same initialisation and the same kernels as the CPU backend, so every correct plan of the job
// must reproduce its losses and parameters.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_REFERENCE_H
#define CONDUIT_RUNTIME_REFERENCE_H

#include "runtime/model/Data.h"
#include "runtime/model/Gpt.h"
#include "runtime/model/Optimizer.h"

#include <memory>

namespace conduit::runtime {

class Reference {
public:
  static absl::StatusOr<Reference> create(const Plan &plan);

  /// Runs step `step` (1-based); returns the mean loss over the global batch.
  double step(int64_t step);

  const model::LayerChain<float> &model() const { return chain; }
  const std::vector<float> &parameters() const { return params; }

private:
  Reference(const Plan &plan, model::GptShape shape, std::unique_ptr<model::CpuOps<float>> ops,
            model::LayerChain<float> chain);

  Config config;
  model::GptShape shape;
  std::unique_ptr<model::CpuOps<float>> ops; ///< owned apart: the chain points at it
  model::LayerChain<float> chain;
  model::SyntheticData data;
  model::OptimizerConfig optimizer;
  std::vector<float> params, state;
  std::vector<double> grad;
  int64_t optimizerSteps = 0;
};

} // namespace conduit::runtime

#endif // CONDUIT_RUNTIME_REFERENCE_H
