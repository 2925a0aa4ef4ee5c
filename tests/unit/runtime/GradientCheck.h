//===- GradientCheck.h - gradients against central differences --*- C++ -*-===//
//
// For the model tests: a chain of layers' analytic gradients (every parameter, and the input
// when the chain does not start with the embedding) against central finite differences in
// double precision, for the whole backward and the split one.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_TESTS_UNIT_GRADIENTCHECK_H
#define CONDUIT_TESTS_UNIT_GRADIENTCHECK_H

#include "runtime/data/Data.h"
#include "runtime/model/Gpt.h"
#include "runtime/model/Random.h"
#include "tests/unit/runtime/GptPlan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace conduit::model {

struct Batch {
  std::vector<int32_t> tokens, targets;
  Tokens view;
};

inline Batch makeBatch(const GptShape &s, int64_t samples, double lossScale = 1.0) {
  Batch b;
  SyntheticData(3, s.vocab, s.seq).batch(1, 0, samples, b.tokens, b.targets);
  b.view = {b.tokens.data(), b.targets.data(), samples, lossScale};
  return b;
}

/// Layers [first, end) of `s` against central differences of the loss plus the auxiliary loss
/// of experts (zero without them) and the multi-token prediction modules' loss times its
/// weight, all taking the batch's loss scale (not 1, so that passing
/// it on shows), for every parameter and the input. With `split`, the backward runs as
/// backwardInput, another micro-batch's forward and input gradient, then backwardWeight, and
/// the buffer the output gradient came in is overwritten before the weight gradient. The chain
/// keeps what `checkpointing` says (with Selective, recomputing `recomputed`).
inline void checkGradients(const GptShape &s, int64_t first, int64_t end, bool split = false,
                           Checkpointing checkpointing = Checkpointing::None,
                           uint32_t recomputed = runtime::kRecomputeCoreAttention) {
  runtime::Plan plan = planFor(s);
  plan.config.recomputeModules = recomputed;
  CpuOps<double> ops;
  LayerChain<double> chain = *LayerChain<double>::build(plan, s, first, end, ops, checkpointing);
  std::vector<double> params(chain.numParams());
  chain.initialise(params.data(), 42);
  Random random({9});
  for (double &p : params)
    p += 0.3 * random.normal();
  const int64_t samples = 2, width = s.seq * s.hidden;
  // The auxiliary loss enters the loss with weight lossScale · seq per sample.
  const double lossScale = 0.25;
  Batch batch = makeBatch(s, samples, lossScale);
  std::vector<double> x;
  if (!chain.hasEmbedding())
    for (int64_t i = 0; i < samples * width; ++i)
      x.push_back(random.normal());
  std::vector<double> projection(samples * width);
  for (double &p : projection)
    p = random.normal();

  auto loss = [&](const std::vector<double> &p, const std::vector<double> &input) {
    typename LayerChain<double>::Cache cache;
    std::vector<double> y(chain.hasHead() ? 0 : samples * width);
    chain.forward(p.data(), input.empty() ? nullptr : input.data(), batch.view,
                  y.empty() ? nullptr : y.data(), cache);
    double l = lossScale * ops.takeLoss() +
               lossScale * s.seq * (ops.takeAuxLoss() + ops.takeZLoss()) +
               lossScale * s.mtpLossCoefficient * ops.takeMtpLoss();
    for (size_t i = 0; i < y.size(); ++i)
      l += y[i] * projection[i];
    return l;
  };
  typename LayerChain<double>::Cache cache;
  std::vector<double> y(chain.hasHead() ? 0 : samples * width);
  chain.forward(params.data(), x.empty() ? nullptr : x.data(), batch.view,
                y.empty() ? nullptr : y.data(), cache);
  ops.takeLoss();
  ops.takeAuxLoss();
  ops.takeZLoss();
  ops.takeMtpLoss();
  std::vector<double> dparams(params.size(), 0.0), dx(x.size(), 0.0);
  if (!split) {
    chain.backward(params.data(), cache, chain.hasHead() ? nullptr : projection.data(),
                   dparams.data(), dx.empty() ? nullptr : dx.data());
  } else {
    std::vector<double> upstream = projection, otherDx = dx;
    chain.backwardInput(params.data(), cache, chain.hasHead() ? nullptr : upstream.data(),
                        dx.empty() ? nullptr : dx.data());
    std::fill(upstream.begin(), upstream.end(), 7.0);
    Batch other = makeBatch(s, samples, lossScale);
    std::reverse(other.tokens.begin(), other.tokens.end());
    typename LayerChain<double>::Cache otherCache;
    chain.forward(params.data(), x.empty() ? nullptr : projection.data(), other.view,
                  y.empty() ? nullptr : y.data(), otherCache);
    ops.takeLoss();
    ops.takeAuxLoss();
    ops.takeZLoss();
    ops.takeMtpLoss();
    chain.backwardInput(params.data(), otherCache, chain.hasHead() ? nullptr : upstream.data(),
                        otherDx.empty() ? nullptr : otherDx.data());
    chain.backwardWeight(cache, dparams.data());
  }

  const double eps = 1e-6;
  auto expectClose = [&](double analytic, double numeric, const std::string &what) {
    EXPECT_NEAR(analytic, numeric, 1e-6 + 1e-5 * std::abs(numeric)) << what;
  };
  for (size_t i = 0; i < params.size(); ++i) {
    std::vector<double> plus = params, minus = params;
    plus[i] += eps;
    minus[i] -= eps;
    expectClose(dparams[i], (loss(plus, x) - loss(minus, x)) / (2 * eps),
                "parameter " + std::to_string(i));
  }
  for (size_t i = 0; i < x.size(); ++i) {
    std::vector<double> plus = x, minus = x;
    plus[i] += eps;
    minus[i] -= eps;
    expectClose(dx[i], (loss(params, plus) - loss(params, minus)) / (2 * eps),
                "input " + std::to_string(i));
  }
}

} // namespace conduit::model

#endif // CONDUIT_TESTS_UNIT_GRADIENTCHECK_H
