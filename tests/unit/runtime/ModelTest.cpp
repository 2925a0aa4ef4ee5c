//===- ModelTest.cpp - the GPT model's gradients, data and optimizer ------===//
//
// Every parameter gradient and the input gradient of each layer kind, in double precision,
// against central finite differences; the float model against the double one; per-sample
// processing independent of the batch cut; data and initialisation that depend on their keys
// only; Adam against its formula.
//
//===----------------------------------------------------------------------===//

#include "runtime/model/Data.h"
#include "runtime/model/Gpt.h"
#include "runtime/model/Optimizer.h"
#include "runtime/model/Random.h"
#include "tests/unit/runtime/GptPlan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>

using namespace conduit;
using namespace conduit::model;

namespace {

GptShape tinyShape(bool qkvBias = true, bool otherBias = true) {
  GptShape s;
  s.blocks = 2;
  s.hidden = 8;
  s.heads = 2;
  s.ffn = 12;
  s.seq = 5;
  s.vocab = 11;
  s.qkvBias = qkvBias;
  s.otherBias = otherBias;
  return s;
}

struct Batch {
  std::vector<int32_t> tokens, targets;
  Tokens view;
};

Batch makeBatch(const GptShape &s, int64_t samples) {
  Batch b;
  SyntheticData(3, s.vocab, s.seq).batch(1, 0, samples, b.tokens, b.targets);
  b.view = {b.tokens.data(), b.targets.data(), samples, 1.0};
  return b;
}

/// Checks the gradients of layers [first, end) of the tiny model: every parameter, and the
/// input when the chain does not start with the embedding.
void checkGradients(const GptShape &s, int64_t first, int64_t end) {
  runtime::Plan plan = planFor(s);
  CpuOps<double> ops;
  LayerChain<double> chain = *LayerChain<double>::build(plan, s, first, end, ops);
  std::vector<double> params(chain.numParams());
  chain.initialise(params.data(), 42);
  // Larger weights than the initialisation's, so that every path carries signal.
  Random random({9});
  for (double &p : params)
    p += 0.3 * random.normal();
  const int64_t samples = 2, width = s.seq * s.hidden;
  Batch batch = makeBatch(s, samples);
  std::vector<double> x;
  if (!chain.hasEmbedding())
    for (int64_t i = 0; i < samples * width; ++i)
      x.push_back(random.normal());
  // A fixed projection of the output makes a scalar loss for chains without the head.
  std::vector<double> projection(samples * width);
  for (double &p : projection)
    p = random.normal();

  auto loss = [&](const std::vector<double> &p, const std::vector<double> &input) {
    typename LayerChain<double>::Cache cache;
    std::vector<double> y(chain.hasHead() ? 0 : samples * width);
    chain.forward(p.data(), input.empty() ? nullptr : input.data(), batch.view,
                  y.empty() ? nullptr : y.data(), cache);
    double l = ops.takeLoss();
    for (size_t i = 0; i < y.size(); ++i)
      l += y[i] * projection[i];
    return l;
  };
  typename LayerChain<double>::Cache cache;
  std::vector<double> y(chain.hasHead() ? 0 : samples * width);
  chain.forward(params.data(), x.empty() ? nullptr : x.data(), batch.view,
                y.empty() ? nullptr : y.data(), cache);
  ops.takeLoss();
  std::vector<double> dparams(params.size(), 0.0), dx(x.size(), 0.0);
  chain.backward(params.data(), cache, chain.hasHead() ? nullptr : projection.data(),
                 dparams.data(), dx.empty() ? nullptr : dx.data());

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

TEST(Model, EmbeddingGradients) { checkGradients(tinyShape(), 0, 1); }
TEST(Model, BlockGradients) { checkGradients(tinyShape(), 1, 2); }
TEST(Model, BlockGradientsWithoutBiases) { checkGradients(tinyShape(false, false), 1, 2); }
TEST(Model, BlockGradientsWithQkvBiasOnly) { checkGradients(tinyShape(true, false), 1, 2); }
TEST(Model, HeadGradients) { checkGradients(tinyShape(), 3, 4); }
TEST(Model, WholeModelGradients) { checkGradients(tinyShape(), 0, 4); }

TEST(Model, FloatModelFollowsTheDoubleOne) {
  GptShape s = tinyShape();
  runtime::Plan plan = planFor(s);
  CpuOps<double> opsD;
  CpuOps<float> opsF;
  auto d = *LayerChain<double>::build(plan, s, 0, 4, opsD);
  auto f = *LayerChain<float>::build(plan, s, 0, 4, opsF);
  std::vector<double> pd(d.numParams());
  std::vector<float> pf(f.numParams());
  d.initialise(pd.data(), 5);
  f.initialise(pf.data(), 5);
  for (size_t i = 0; i < pd.size(); ++i)
    ASSERT_EQ(static_cast<float>(pd[i]), pf[i]) << "initialisation differs at " << i;
  Batch batch = makeBatch(s, 3);
  typename LayerChain<double>::Cache cd;
  typename LayerChain<float>::Cache cf;
  d.forward(pd.data(), nullptr, batch.view, nullptr, cd);
  f.forward(pf.data(), nullptr, batch.view, nullptr, cf);
  const double ld = opsD.takeLoss(), lf = opsF.takeLoss();
  EXPECT_NEAR(lf, ld, 1e-5 * std::abs(ld));
}

TEST(Model, PerSampleProcessingDoesNotDependOnTheCut) {
  GptShape s = tinyShape();
  runtime::Plan plan = planFor(s);
  CpuOps<float> ops;
  auto chain = *LayerChain<float>::build(plan, s, 0, 4, ops);
  std::vector<float> params(chain.numParams());
  chain.initialise(params.data(), 5);
  Batch batch = makeBatch(s, 4);
  // The whole batch at once, and as 1 + 3 samples.
  std::vector<double> whole(params.size(), 0.0), split(params.size(), 0.0);
  std::vector<typename LayerChain<float>::Cache> caches;
  chain.forwardSamples(params.data(), nullptr, batch.view, nullptr, caches);
  const double lossWhole = ops.takeLoss();
  chain.backwardSamples(params.data(), caches, nullptr, whole.data(), nullptr);
  // The loss is taken once after both pieces, so that it adds the same per-sample losses in
  // the same order as the whole batch: double addition is not associative, and the test is
  // about the per-sample values, not about the order of a sum.
  for (auto [first, count] : {std::pair<int64_t, int64_t>{0, 1}, {1, 3}}) {
    Tokens part = batch.view;
    part.tokens += first * s.seq;
    part.targets += first * s.seq;
    part.samples = count;
    chain.forwardSamples(params.data(), nullptr, part, nullptr, caches);
    chain.backwardSamples(params.data(), caches, nullptr, split.data(), nullptr);
  }
  const double lossSplit = ops.takeLoss();
  EXPECT_EQ(lossWhole, lossSplit);
  EXPECT_EQ(whole, split);
}

TEST(Model, ParameterCountsFollowTheCompilersFormula) {
  // 12h^2 + 13h per block with a 4h FFN and all biases; V·h + s·h; V·h + 2h.
  GptShape s = tinyShape();
  s.ffn = 4 * s.hidden;
  const int64_t h = s.hidden;
  EXPECT_EQ(makeLayer<float>(runtime::LayerKind::Block, s)->numParams(), 12 * h * h + 13 * h);
  EXPECT_EQ(makeLayer<float>(runtime::LayerKind::Embedding, s)->numParams(),
            s.vocab * h + s.seq * h);
  EXPECT_EQ(makeLayer<float>(runtime::LayerKind::Head, s)->numParams(), s.vocab * h + 2 * h);
}

TEST(Model, UnsupportedArchitecturesAreRefused) {
  runtime::Plan plan = planFor(tinyShape());
  EXPECT_TRUE(GptShape::fromPlan(plan).ok());
  for (auto edit : std::vector<std::function<void(runtime::Transformer &)>>{
           [](runtime::Transformer &t) { t.mlp = 1; }, [](runtime::Transformer &t) { t.norm = 1; },
           [](runtime::Transformer &t) { t.position = 1; },
           [](runtime::Transformer &t) { t.numKvHeads = 1; },
           [](runtime::Transformer &t) { t.tieEmbeddings = true; }}) {
    runtime::Plan changed = plan;
    edit(*changed.transformer);
    absl::StatusOr<GptShape> shape = GptShape::fromPlan(changed);
    EXPECT_FALSE(shape.ok());
    EXPECT_NE(shape.status().message().find("conduit-run does not implement"), std::string::npos);
  }
  runtime::Plan wrongCount = plan;
  wrongCount.layers[1].params += 1;
  CpuOps<float> ops;
  absl::StatusOr<LayerChain<float>> chain =
      LayerChain<float>::build(wrongCount, tinyShape(), 0, 4, ops);
  ASSERT_FALSE(chain.ok());
  EXPECT_NE(chain.status().message().find("block.0: the plan counts"), std::string::npos);
}

TEST(Data, SamplesDependOnSeedStepAndIndexOnly) {
  SyntheticData data(1, 50, 8);
  std::vector<int32_t> a, at, b, bt;
  data.batch(3, 10, 4, a, at);
  data.batch(3, 12, 1, b, bt);
  EXPECT_EQ(std::vector<int32_t>(a.begin() + 16, a.begin() + 24), b);
  EXPECT_EQ(std::vector<int32_t>(at.begin() + 16, at.begin() + 24), bt);
  // Targets are the next tokens.
  for (int t = 0; t + 1 < 8; ++t)
    EXPECT_EQ(at[t], a[t + 1]);
  data.batch(4, 10, 4, b, bt);
  EXPECT_NE(a, b);
  for (int32_t token : a)
    EXPECT_TRUE(token >= 0 && token < 50);
}

TEST(Data, MostTokensFollowTheSuccessorTable) {
  // The structure the model learns: the same token is followed by the same successor far
  // more often than by chance (1 in 50).
  SyntheticData data(1, 50, 64);
  std::vector<int32_t> tokens, targets;
  data.batch(1, 0, 64, tokens, targets);
  std::map<int32_t, std::map<int32_t, int>> follows;
  for (size_t i = 0; i < tokens.size(); ++i)
    ++follows[tokens[i]][targets[i]];
  int top = 0, total = 0;
  for (auto &[token, next] : follows) {
    int best = 0;
    for (auto &[t, count] : next) {
      best = std::max(best, count);
      total += count;
    }
    top += best;
  }
  EXPECT_GT(static_cast<double>(top) / total, 0.7);
}

TEST(Optimizer, AdamFollowsItsFormula) {
  OptimizerConfig config;
  config.learningRate = 0.1;
  std::vector<float> params = {1.0f, -2.0f}, state(4, 0.0f);
  std::vector<double> grads = {0.5, -0.25};
  optimizerStep(config, 1, 2, params.data(), state.data(), grads.data());
  // Step 1: m̂ = g, v̂ = g², so the update is lr · g / (|g| + eps).
  EXPECT_NEAR(params[0], 1.0 - 0.1, 1e-6);
  EXPECT_NEAR(params[1], -2.0 + 0.1, 1e-6);
  optimizerStep(config, 2, 2, params.data(), state.data(), grads.data());
  EXPECT_NEAR(params[0], 1.0 - 0.2, 1e-6);
  config.kind = runtime::Optimizer::SGD;
  optimizerStep(config, 1, 2, params.data(), state.data(), grads.data());
  EXPECT_NEAR(params[0], 0.8 - 0.05, 1e-6);
}

} // namespace
