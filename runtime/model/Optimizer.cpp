//===- Optimizer.cpp - parameter updates on flat arrays -------------------===//

#include "runtime/model/Optimizer.h"

#include <cmath>
#include <cstdint>
#include <cstring>

using namespace conduit::model;

namespace {
/// bf16 element `i` of the bytes at `at`, as a float.
float loadBf16(const unsigned char *at, int64_t i) {
  uint16_t half;
  std::memcpy(&half, at + 2 * i, 2);
  const uint32_t bits = uint32_t(half) << 16;
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
}
/// Stores `value` rounded to the nearest bf16 (ties to even) as element `i` of `at`.
void storeBf16(unsigned char *at, int64_t i, float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  const uint16_t half = std::isnan(value)
                            ? static_cast<uint16_t>((bits >> 16) | 0x40)
                            : static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
  std::memcpy(at + 2 * i, &half, 2);
}
} // namespace

OptimizerConfig OptimizerConfig::fromPlan(const runtime::Config &config) {
  OptimizerConfig c;
  c.kind = config.optimizer;
  c.bf16Moments = config.adamMoments == runtime::AdamMoments::BF16;
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
  const double correction1 = 1 - std::pow(c.beta1, static_cast<double>(step));
  const double correction2 = 1 - std::pow(c.beta2, static_cast<double>(step));
  if (c.bf16Moments) {
    unsigned char *m = reinterpret_cast<unsigned char *>(state), *v = m + 2 * n;
    for (int64_t i = 0; i < n; ++i) {
      const double g = static_cast<float>(grads[i]);
      const float mi = static_cast<float>(c.beta1 * loadBf16(m, i) + (1 - c.beta1) * g);
      const float vi = static_cast<float>(c.beta2 * loadBf16(v, i) + (1 - c.beta2) * g * g);
      const double update = (mi / correction1) / (std::sqrt(vi / correction2) + c.epsilon);
      params[i] = static_cast<float>(params[i] - c.learningRate * update);
      storeBf16(m, i, mi);
      storeBf16(v, i, vi);
    }
    return;
  }
  float *m = state, *v = state + n;
  for (int64_t i = 0; i < n; ++i) {
    const double g = static_cast<float>(grads[i]);
    m[i] = static_cast<float>(c.beta1 * m[i] + (1 - c.beta1) * g);
    v[i] = static_cast<float>(c.beta2 * v[i] + (1 - c.beta2) * g * g);
    const double update = (m[i] / correction1) / (std::sqrt(v[i] / correction2) + c.epsilon);
    params[i] = static_cast<float>(params[i] - c.learningRate * update);
  }
}
