//===- Optimizer.cpp - parameter updates on flat arrays -------------------===//

#include "runtime/model/Optimizer.h"

#include <cmath>

using namespace conduit::model;

OptimizerConfig OptimizerConfig::fromPlan(const runtime::Config &config) {
  OptimizerConfig c;
  c.kind = config.optimizer;
  c.learningRate = config.learningRate;
  return c;
}

void conduit::model::optimizerStep(const OptimizerConfig &c, int64_t step, int64_t n, float *params,
                                   float *state, const double *grads) {
  if (c.kind == runtime::Optimizer::SGD) {
    for (int64_t i = 0; i < n; ++i)
      params[i] = static_cast<float>(params[i] - c.learningRate * static_cast<float>(grads[i]));
    return;
  }
  float *m = state, *v = state + n;
  const double correction1 = 1 - std::pow(c.beta1, static_cast<double>(step));
  const double correction2 = 1 - std::pow(c.beta2, static_cast<double>(step));
  for (int64_t i = 0; i < n; ++i) {
    const double g = static_cast<float>(grads[i]);
    m[i] = static_cast<float>(c.beta1 * m[i] + (1 - c.beta1) * g);
    v[i] = static_cast<float>(c.beta2 * v[i] + (1 - c.beta2) * g * g);
    const double update = (m[i] / correction1) / (std::sqrt(v[i] / correction2) + c.epsilon);
    params[i] = static_cast<float>(params[i] - c.learningRate * update);
  }
}
