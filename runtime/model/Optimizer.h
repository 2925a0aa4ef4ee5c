//===- Optimizer.h - parameter updates on flat arrays -----------*- C++ -*-===//
//
// Adam (Kingma and Ba, arXiv 1412.6980, with bias correction) and plain SGD, applied to a
// flat run of parameters: a whole stage, or a data-parallel shard of it. Adam's moments are
// stored in fp32 or, with bf16Moments (config.adam_moments), in bf16: loaded, updated in fp32,
// the parameter moved by the fp32 values, and stored rounded to nearest even. Gradients arrive
// accumulated in double precision (see the CPU backend); the update is element-wise, so a
// shard updated on one rank gives the same bits as the whole model updated in one process.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_MODEL_OPTIMIZER_H
#define CONDUIT_RUNTIME_MODEL_OPTIMIZER_H

#include "runtime/plan/Plan.h"

#include <cstdint>

namespace conduit::model {

struct OptimizerConfig {
  runtime::Optimizer kind = runtime::Optimizer::Adam;
  bool bf16Moments = false;
  double learningRate = 1e-3;
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8;

  static OptimizerConfig fromPlan(const runtime::Config &config);
  /// Floats of optimizer state per parameter (Adam: first and second moments; in bf16, the two
  /// take one float's bytes).
  int64_t stateWidth() const {
    return kind == runtime::Optimizer::Adam ? (bf16Moments ? 1 : 2) : 0;
  }
};

/// Applies update number `step` (1-based) to `n` parameters. `state` holds stateWidth() × n
/// floats: Adam's first moments, then its second moments (with bf16Moments, n bf16 values
/// each, in the same bytes).
void optimizerStep(const OptimizerConfig &config, int64_t step, int64_t n, float *params,
                   float *state, const double *grads);

/// DeepSeek-V3's auxiliary-loss-free balancing (arXiv 2412.19437, §2.1.2), for one expert's
/// router bias whose gradient slot holds the step's count of choices of the expert, summed
/// over every rank that routed a token: the bias rises by `rate` where the count is below
/// `mean` (the step's assignments over the experts), falls by it where above, and stays where
/// equal. The slot is zeroed, so that the update rule the optimizer applies after it (no
/// gradient, no moments) leaves the bias where this put it.
void balanceBias(double rate, double mean, float &bias, double &count);
/// balanceBias's mean: each expert's count of a step's `tokens` routed to `topK` of
/// `experts`, were the load even.
double evenLoad(double tokens, int64_t topK, int64_t experts);

} // namespace conduit::model

#endif // CONDUIT_RUNTIME_MODEL_OPTIMIZER_H
