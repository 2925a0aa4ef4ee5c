//===- Optimizer.cpp - parameter updates on flat arrays -------------------===//

#include "runtime/model/Optimizer.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>

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

/// Adam's update of `n` parameters, its moments read by load(i) (a pair of floats) and written
/// back by store(i, m, v): the parameter moves by the fp32 moments, whatever they are stored as.
template <typename Load, typename Store>
void adamStep(const OptimizerConfig &c, int64_t step, int64_t n, float *params, const double *grads,
              Load load, Store store) {
  const double correction1 = 1 - std::pow(c.beta1, static_cast<double>(step));
  const double correction2 = 1 - std::pow(c.beta2, static_cast<double>(step));
  for (int64_t i = 0; i < n; ++i) {
    const double g = static_cast<float>(grads[i]);
    const auto [mPrev, vPrev] = load(i);
    const float mi = static_cast<float>(c.beta1 * mPrev + (1 - c.beta1) * g);
    const float vi = static_cast<float>(c.beta2 * vPrev + (1 - c.beta2) * g * g);
    const double update = (mi / correction1) / (std::sqrt(vi / correction2) + c.epsilon);
    params[i] = static_cast<float>(params[i] - c.learningRate * update);
    store(i, mi, vi);
  }
}
} // namespace

OptimizerConfig OptimizerConfig::fromPlan(const runtime::Config &config) {
  OptimizerConfig c;
  c.kind = config.optimizer;
  c.bf16Moments = config.adamMoments == runtime::AdamMoments::BF16;
  c.learningRate = config.learningRate;
  return c;
}

void conduit::model::balanceBias(double rate, double mean, float &bias, double &count) {
  const double direction = count < mean ? 1.0 : count > mean ? -1.0 : 0.0;
  bias = static_cast<float>(bias + rate * direction);
  count = 0;
}

double conduit::model::evenLoad(double tokens, int64_t topK, int64_t experts) {
  return tokens * static_cast<double>(topK) / static_cast<double>(experts);
}

void conduit::model::optimizerStep(const OptimizerConfig &c, int64_t step, int64_t n, float *params,
                                   float *state, const double *grads) {
  if (c.kind == runtime::Optimizer::SGD) {
    for (int64_t i = 0; i < n; ++i)
      params[i] = static_cast<float>(params[i] - c.learningRate * static_cast<float>(grads[i]));
    return;
  }
  if (c.bf16Moments) {
    unsigned char *m = reinterpret_cast<unsigned char *>(state), *v = m + 2 * n;
    adamStep(
        c, step, n, params, grads,
        [&](int64_t i) { return std::pair(loadBf16(m, i), loadBf16(v, i)); },
        [&](int64_t i, float mi, float vi) {
          storeBf16(m, i, mi);
          storeBf16(v, i, vi);
        });
    return;
  }
  float *m = state, *v = state + n;
  adamStep(
      c, step, n, params, grads, [&](int64_t i) { return std::pair(m[i], v[i]); },
      [&](int64_t i, float mi, float vi) {
        m[i] = mi;
        v[i] = vi;
      });
}
