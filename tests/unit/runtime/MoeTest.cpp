//===- MoeTest.cpp - the mixture-of-experts layer ---------------------------===//
//
// The auxiliary loss against its formula (the router's choice and scores: RoutingTest.cpp), every
// parameter and input gradient of a block with experts against central finite differences in double
// precision (softmax and sigmoid routers, SwiGLU and GELU experts, shared experts, renormalised
// weights, capacity drops, the auxiliary loss; whole and split backward), dense leading blocks,
// per-sample processing independent of the batch cut, an expert group's gradients equal to the
// whole model's bit for bit, and the plans the runtime refuses naming the key.
//
//===----------------------------------------------------------------------===//

#include "runtime/model/layers/Moe.h"
#include "runtime/data/Data.h"
#include "runtime/model/Gpt.h"
#include "runtime/model/Random.h"
#include "runtime/model/StageLayout.h"
#include "tests/unit/runtime/GradientCheck.h"
#include "tests/unit/runtime/Meeting.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <thread>

using namespace conduit;
using namespace conduit::model;

namespace {

/// A Llama-style tiny model whose blocks after the first have 4 experts, 2 per token.
GptShape moeShape(const std::function<void(GptShape &)> &change = nullptr) {
  GptShape s = tinyShape(false, false);
  s.gated = s.rmsNorm = s.rotary = true;
  s.experts = 4;
  s.topK = 2;
  s.expertFfn = 6;
  s.denseBlocks = 1;
  if (change)
    change(s);
  return s;
}

} // namespace

TEST(Moe, AuxiliaryLossesFollowTheirFormulas) {
  const GptShape s = moeShape([](GptShape &s) {
    s.auxLossCoefficient = 0.01;
    s.zLossCoefficient = 0.001;
  });
  runtime::Plan plan = planFor(s);
  CpuOps<double> ops;
  // The second block alone: its MLP has experts.
  LayerChain<double> chain = *LayerChain<double>::build(plan, s, 2, 3, ops);
  std::vector<double> params(chain.numParams());
  chain.initialise(params.data(), 3);
  Random random({4});
  for (double &p : params)
    p += 0.3 * random.normal();
  const int64_t samples = 2;
  std::vector<double> x(samples * s.seq * s.hidden), y(x.size());
  for (double &v : x)
    v = random.normal();
  Batch batch = makeBatch(s, samples, 1.0);
  typename LayerChain<double>::Cache cache;
  chain.forward(params.data(), x.data(), batch.view, y.data(), cache);
  const double aux = ops.takeAuxLoss(), z = ops.takeZLoss();

  // The formula from the router's input (the block's normed residual stream, kept by the
  // block) and the router weights.
  const std::vector<Buffer<double>> &saved = cache.layers[0].saved;
  const double *h2 = saved[3].data(); // Block's X, H1, X2, H2
  const double *router = params.data() + chain.numParams() - Moe<double>(s).numParams();
  double expected = 0, expectedZ = 0;
  for (int64_t n = 0; n < samples; ++n) {
    std::vector<double> f(s.experts, 0.0), mean(s.experts, 0.0);
    for (int64_t t = 0; t < s.seq; ++t) {
      const double *row = h2 + (n * s.seq + t) * s.hidden;
      std::vector<double> logits(s.experts, 0.0), p(s.experts);
      for (int64_t e = 0; e < s.experts; ++e)
        for (int64_t i = 0; i < s.hidden; ++i)
          logits[e] += row[i] * router[i * s.experts + e];
      // Per sample: the coefficient times the mean over its tokens of lse².
      double sum = 0;
      for (double l : logits)
        sum += std::exp(l);
      expectedZ += 0.001 * std::log(sum) * std::log(sum) / s.seq;
      routerScores(1, s.experts, false, logits.data(), p.data());
      const Routing r = Routing::choose(p.data(), 1, s.experts, s.topK, {}, false);
      for (int64_t j = 0; j < s.topK; ++j)
        f[r.expert[j]] += 1.0 / (s.seq * s.topK);
      for (int64_t e = 0; e < s.experts; ++e)
        mean[e] += p[e] / s.seq;
    }
    double sum = 0;
    for (int64_t e = 0; e < s.experts; ++e)
      sum += f[e] * mean[e];
    expected += 0.01 * s.experts * sum;
  }
  EXPECT_NEAR(aux, expected, 1e-12);
  EXPECT_GT(aux, 0);
  EXPECT_NEAR(z, expectedZ, 1e-12);
  EXPECT_GT(z, 0);
}

TEST(Moe, DenseLeadingBlocksKeepTheirMlp) {
  const GptShape s = moeShape();
  runtime::Plan plan = planFor(s);
  GptShape dense = s;
  dense.experts = 0;
  EXPECT_EQ(plan.layers[1].params, makeLayer<float>(runtime::LayerKind::Block, dense)->numParams());
  const int64_t h = s.hidden, f = s.expertFfn;
  const int64_t attentionAndNorms =
      plan.layers[1].params - (h * 2 * s.ffn + s.ffn * h); // the dense SwiGLU MLP, no biases
  EXPECT_EQ(plan.layers[2].params,
            attentionAndNorms + h * s.experts + s.experts * (h * 2 * f + f * h));
  // The sigmoid router has a bias per expert; with bias "all" the experts have biases too.
  GptShape sigmoid = s;
  sigmoid.sigmoidRouter = true;
  EXPECT_EQ(
      makeLayer<float>(runtime::LayerKind::Block, sigmoid, Checkpointing::None, 2)->numParams(),
      plan.layers[2].params + s.experts);
  GptShape biased = s;
  biased.otherBias = true;
  // The attention's output bias bo, and each expert's b1 [2f] and b2 [h].
  EXPECT_EQ(
      makeLayer<float>(runtime::LayerKind::Block, biased, Checkpointing::None, 2)->numParams(),
      plan.layers[2].params + h + s.experts * (2 * f + h));
  EXPECT_FALSE(s.layerHasExperts(0));
  EXPECT_FALSE(s.layerHasExperts(1));
  EXPECT_TRUE(s.layerHasExperts(2));
  EXPECT_FALSE(s.layerHasExperts(3)); // the head
}

TEST(Moe, BlockGradients) { checkGradients(moeShape(), 2, 3); }
TEST(Moe, SigmoidRouterGradients) {
  checkGradients(moeShape([](GptShape &s) { s.sigmoidRouter = true; }), 2, 3);
}
TEST(Moe, RenormalisedTopKGradients) {
  checkGradients(moeShape([](GptShape &s) { s.normalizeTopK = true; }), 2, 3);
  checkGradients(moeShape([](GptShape &s) {
                   s.normalizeTopK = true;
                   s.sigmoidRouter = true;
                 }),
                 2, 3);
}
TEST(Moe, SharedExpertGradients) {
  checkGradients(moeShape([](GptShape &s) { s.sharedFfn = 10; }), 2, 3);
}
TEST(Moe, SharedExpertGateGradients) {
  auto gated = [](GptShape &s) {
    s.sharedFfn = 10;
    s.sharedGate = true;
  };
  checkGradients(moeShape(gated), 2, 3);
  checkGradients(moeShape(gated), 1, 3, /*split=*/true);
}
TEST(Moe, GeluExpertGradients) {
  checkGradients(moeShape([](GptShape &s) {
                   s.gated = false;
                   s.sharedFfn = 4;
                 }),
                 2, 3);
}
TEST(Moe, GroupLimitedRoutingGradients) {
  checkGradients(moeShape([](GptShape &s) {
                   s.routerGroups = 2;
                   s.routerGroupTopK = 1;
                   s.sigmoidRouter = true;
                 }),
                 2, 3);
}
TEST(Moe, RoutedScalingGradients) {
  checkGradients(moeShape([](GptShape &s) { s.routedScaling = 2.5; }), 2, 3);
  checkGradients(moeShape([](GptShape &s) {
                   s.routedScaling = 2.5;
                   s.normalizeTopK = true;
                   s.sigmoidRouter = true;
                   s.sharedFfn = 4;
                 }),
                 2, 3);
}
TEST(Moe, RoutedScalingMultipliesTheRoutedExperts) {
  // DeepSeek-V3's routed_scaling_factor γ: the same experts, their weights times γ, so the
  // block's output is affine in γ (the shared expert's part stays): y(4) = y(1) + 2 (y(2.5) −
  // y(1)).
  std::vector<std::vector<double>> outputs;
  std::vector<Routing> routings;
  for (double gamma : {1.0, 2.5, 4.0}) {
    const GptShape s = moeShape([&](GptShape &s) {
      s.routedScaling = gamma;
      s.normalizeTopK = true;
      s.sigmoidRouter = true;
      s.sharedFfn = 4;
    });
    runtime::Plan plan = planFor(s);
    CpuOps<double> ops;
    LayerChain<double> chain = *LayerChain<double>::build(plan, s, 2, 3, ops);
    std::vector<double> params(chain.numParams());
    chain.initialise(params.data(), 3);
    std::vector<double> x(s.seq * s.hidden), y(x.size());
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = std::sin(0.7 * static_cast<double>(i));
    Batch batch = makeBatch(s, 1, 1.0);
    typename LayerChain<double>::Cache cache;
    chain.forward(params.data(), x.data(), batch.view, y.data(), cache);
    routings.push_back(*std::static_pointer_cast<const Routing>(cache.layers[0].parts[3].host));
    outputs.push_back(y);
  }
  EXPECT_EQ(routings[1].expert, routings[0].expert);
  for (size_t a = 0; a < routings[0].weight.size(); ++a)
    EXPECT_DOUBLE_EQ(routings[1].weight[a], 2.5 * routings[0].weight[a]) << a;
  double moved = 0;
  for (size_t i = 0; i < outputs[0].size(); ++i) {
    EXPECT_NEAR(outputs[2][i], outputs[0][i] + 2 * (outputs[1][i] - outputs[0][i]), 1e-12) << i;
    moved = std::max(moved, std::abs(outputs[1][i] - outputs[0][i]));
  }
  EXPECT_GT(moved, 1e-6);
}
TEST(Moe, AuxiliaryLossGradients) {
  checkGradients(moeShape([](GptShape &s) { s.auxLossCoefficient = 0.5; }), 2, 3);
}
TEST(Moe, ExpertBiasGradients) {
  // GPT-style: LayerNorm, GELU, biases everywhere (the experts' and the shared experts' too).
  checkGradients(moeShape([](GptShape &s) {
                   s.gated = s.rmsNorm = s.rotary = false;
                   s.qkvBias = s.otherBias = true;
                   s.sharedFfn = 4;
                 }),
                 2, 3);
}
TEST(Moe, SigmoidRouterBiasSteersTheChoiceOnly) {
  const GptShape s = moeShape([](GptShape &s) { s.sigmoidRouter = true; });
  runtime::Plan plan = planFor(s);
  CpuOps<double> ops;
  LayerChain<double> chain = *LayerChain<double>::build(plan, s, 2, 3, ops);
  std::vector<double> params(chain.numParams());
  chain.initialise(params.data(), 3);
  // The bias follows the router's weights: expert 3 takes every token's first slot.
  const int64_t router = chain.numParams() - Moe<double>(s).numParams();
  double *bias = params.data() + router + s.hidden * s.experts;
  EXPECT_EQ(std::vector<double>(bias, bias + s.experts), std::vector<double>(s.experts, 0.0));
  bias[3] = 10;
  std::vector<double> x(s.seq * s.hidden, 0.5), y(x.size());
  Batch batch = makeBatch(s, 1, 1.0);
  typename LayerChain<double>::Cache cache;
  chain.forward(params.data(), x.data(), batch.view, y.data(), cache);
  const LayerCache<double> &moe = cache.layers[0].parts[3];
  const Routing &r = *std::static_pointer_cast<const Routing>(moe.host);
  for (int64_t t = 0; t < s.seq; ++t) {
    EXPECT_EQ(r.expert[t * s.topK], 3);
    EXPECT_LT(r.weight[t * s.topK], 1.0) << "a sigmoid score, not the biased key";
  }
  // No gradient reaches the bias.
  std::vector<double> dparams(params.size(), 0.0), dx(x.size());
  chain.backward(params.data(), cache, y.data(), dparams.data(), dx.data());
  for (int64_t e = 0; e < s.experts; ++e)
    EXPECT_EQ(dparams[router + s.hidden * s.experts + e], 0.0);
}
TEST(Moe, LoadBalancedBiasGradientHoldsEachExpertsChoices) {
  // Moved by the load, the bias's gradient slot takes each expert's count of the micro-batch's
  // choices (a capacity's drops included: the router chose them), and the chain says where it
  // lies; the router's own gradient is as without it.
  for (double capacity : {0.0, 0.5}) {
    GptShape s = moeShape([&](GptShape &s) {
      s.sigmoidRouter = true;
      s.capacityFactor = capacity;
    });
    runtime::Plan plan = planFor(s);
    CpuOps<double> ops;
    LayerChain<double> still = *LayerChain<double>::build(plan, s, 2, 3, ops);
    s.biasUpdateRate = 0.001;
    LayerChain<double> moved = *LayerChain<double>::build(plan, s, 2, 3, ops);
    const int64_t router = moved.numParams() - Moe<double>(s).numParams();
    const int64_t bias = router + s.hidden * s.experts;
    EXPECT_TRUE(still.loadBalancedBiases().empty());
    ASSERT_EQ(moved.loadBalancedBiases(), std::vector<int64_t>{bias});
    std::vector<double> params(moved.numParams());
    moved.initialise(params.data(), 3);
    std::vector<double> x(2 * s.seq * s.hidden), y(x.size()), dx(x.size());
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = std::sin(0.37 * static_cast<double>(i));
    Batch batch = makeBatch(s, 2, 1.0);
    std::vector<std::vector<double>> grads;
    std::vector<int64_t> counts(s.experts, 0);
    for (LayerChain<double> *chain : {&still, &moved}) {
      typename LayerChain<double>::Cache cache;
      chain->forward(params.data(), x.data(), batch.view, y.data(), cache);
      const Routing &r = *std::static_pointer_cast<const Routing>(cache.layers[0].parts[3].host);
      std::fill(counts.begin(), counts.end(), 0);
      for (int32_t e : r.expert)
        ++counts[e];
      grads.emplace_back(params.size(), 0.0);
      chain->backward(params.data(), cache, y.data(), grads.back().data(), dx.data());
    }
    int64_t total = 0;
    for (int64_t e = 0; e < s.experts; ++e) {
      EXPECT_EQ(grads[0][bias + e], 0.0);
      EXPECT_EQ(grads[1][bias + e], static_cast<double>(counts[e])) << "expert " << e;
      total += counts[e];
    }
    EXPECT_EQ(total, 2 * s.seq * s.topK);
    for (int64_t i = 0; i < bias; ++i)
      ASSERT_EQ(grads[0][i], grads[1][i]) << "parameter " << i;
  }
}
TEST(Moe, ZLossGradients) {
  // Both routers: the z-loss reads the logits, whatever scores them.
  for (bool sigmoid : {false, true}) {
    SCOPED_TRACE(sigmoid ? "sigmoid" : "softmax");
    checkGradients(moeShape([&](GptShape &s) {
                     s.zLossCoefficient = 0.5;
                     s.sigmoidRouter = sigmoid;
                   }),
                   2, 3);
  }
}
TEST(Moe, TheLayerDropsByTheWeightWhenAsked) {
  // 5 tokens x 2 choices over 4 experts, capacity 2 per sample: by weight, in each sample
  // every kept assignment of an expert weighs at least what each dropped one does, and the
  // layer drops other assignments than by position.
  std::vector<std::vector<int32_t>> positions;
  for (bool byWeight : {false, true}) {
    GptShape s = moeShape([&](GptShape &s) {
      s.capacityFactor = 0.5;
      s.dropByWeight = byWeight;
    });
    runtime::Plan plan = planFor(s);
    CpuOps<double> ops;
    LayerChain<double> chain = *LayerChain<double>::build(plan, s, 2, 3, ops);
    std::vector<double> params(chain.numParams());
    chain.initialise(params.data(), 3);
    std::vector<double> x(2 * s.seq * s.hidden), y(x.size());
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = std::sin(0.37 * static_cast<double>(i));
    Batch batch = makeBatch(s, 2, 1.0);
    typename LayerChain<double>::Cache cache;
    chain.forward(params.data(), x.data(), batch.view, y.data(), cache);
    const Routing &r = *std::static_pointer_cast<const Routing>(cache.layers[0].parts[3].host);
    positions.push_back(r.position);
    if (!byWeight)
      continue;
    const int64_t perSample = s.seq * s.topK;
    for (int64_t sample = 0; sample < 2; ++sample)
      for (int64_t a = sample * perSample; a < (sample + 1) * perSample; ++a)
        for (int64_t b = sample * perSample; b < (sample + 1) * perSample; ++b)
          if (r.expert[a] == r.expert[b] && r.position[a] >= 0 && r.position[b] < 0)
            EXPECT_GE(static_cast<float>(r.weight[a]), static_cast<float>(r.weight[b]))
                << "sample " << sample << ": kept " << a << ", dropped " << b;
  }
  EXPECT_NE(positions[0], positions[1]);
}

TEST(Moe, CapacityGradients) {
  // 5 tokens x 2 choices over 4 experts: capacity ceil(0.5 · 10 / 4) = 2 per sample drops some,
  // the last in token order or those of the lowest weight.
  for (bool byWeight : {false, true})
    checkGradients(moeShape([&](GptShape &s) {
                     s.capacityFactor = 0.5;
                     s.dropByWeight = byWeight;
                   }),
                   2, 3);
}
TEST(Moe, WholeModelGradients) {
  checkGradients(moeShape([](GptShape &s) {
                   s.sharedFfn = 4;
                   s.normalizeTopK = true;
                   s.auxLossCoefficient = 0.1;
                 }),
                 0, 4);
}
TEST(Moe, SplitBackwardGradients) {
  checkGradients(moeShape([](GptShape &s) {
                   s.sharedFfn = 4;
                   s.auxLossCoefficient = 0.1;
                 }),
                 1, 3, /*split=*/true);
}

TEST(Moe, PerSampleProcessingDoesNotDependOnTheCut) {
  const GptShape s = moeShape([](GptShape &s) {
    s.sharedFfn = 4;
    s.auxLossCoefficient = 0.01;
  });
  runtime::Plan plan = planFor(s);
  CpuOps<float> ops;
  auto chain = *LayerChain<float>::build(plan, s, 0, 4, ops);
  std::vector<float> params(chain.numParams());
  chain.initialise(params.data(), 5);
  Batch batch = makeBatch(s, 4, 1.0 / (4 * s.seq));
  std::vector<double> whole(params.size(), 0.0), split(params.size(), 0.0);
  std::vector<typename LayerChain<float>::Cache> caches;
  chain.forwardSamples(params.data(), nullptr, batch.view, nullptr, caches);
  const double lossWhole = ops.takeLoss(), auxWhole = ops.takeAuxLoss();
  chain.backwardSamples(params.data(), caches, nullptr, whole.data(), nullptr);
  for (auto [first, count] : {std::pair<int64_t, int64_t>{0, 1}, {1, 3}}) {
    Tokens part = batch.view;
    part.tokens += first * s.seq;
    part.targets += first * s.seq;
    part.samples = count;
    chain.forwardSamples(params.data(), nullptr, part, nullptr, caches);
    chain.backwardSamples(params.data(), caches, nullptr, split.data(), nullptr);
  }
  EXPECT_EQ(lossWhole, ops.takeLoss());
  EXPECT_EQ(auxWhole, ops.takeAuxLoss());
  EXPECT_GT(auxWhole, 0);
  EXPECT_EQ(whole, split);
}

// Expert parallelism on the CPU: two members of an expert group, each with two samples of its
// own, hold between them the parameter gradients the whole model computes for the four samples,
// to the bit. An expert's owner adds each member's tokens' part to its double accumulators on
// its own, as the reference adds each sample's; a float sum of the members' parts first would
// round. The dense parameters' gradients of the two members add up to the reference's.
TEST(Moe, AnExpertGroupComputesTheReferencesGradientsBitForBit) {
  const GptShape s = moeShape([](GptShape &s) {
    s.sharedFfn = 4;
    s.normalizeTopK = true;
    s.auxLossCoefficient = 0.01;
  });
  const runtime::Plan plan = planFor(s);
  const int64_t layers = 4, samples = 2, members = 2;
  const double lossScale = 1.0 / static_cast<double>(members * samples * s.seq);
  Batch batch = makeBatch(s, members * samples, lossScale);
  for (bool split : {false, true}) {
    SCOPED_TRACE(split ? "split backward" : "whole backward");
    auto backward = [&](LayerChain<float> &chain, const float *params,
                        std::vector<LayerChain<float>::Cache> &caches, double *grads) {
      if (!split) {
        chain.backwardSamples(params, caches, nullptr, grads, nullptr);
        return;
      }
      chain.backwardInputSamples(params, caches, nullptr, nullptr);
      chain.backwardWeightSamples(caches, grads);
    };
    // The reference: every expert, the four samples.
    CpuOps<float> ops;
    auto whole = *LayerChain<float>::build(plan, s, 0, layers, ops);
    std::vector<float> params(whole.numParams());
    whole.initialise(params.data(), 7);
    std::vector<double> expected(params.size(), 0.0);
    std::vector<LayerChain<float>::Cache> caches;
    whole.forwardSamples(params.data(), nullptr, batch.view, nullptr, caches);
    backward(whole, params.data(), caches, expected.data());

    Meeting<ThreadedExpertGroup<float>::Sent> meeting(members);
    std::vector<StageLayout> layouts;
    std::vector<std::vector<double>> got(members);
    std::vector<std::thread> threads;
    for (int64_t q = 0; q < members; ++q) {
      GptShape member = s;
      member.expertSize = members;
      member.expertRank = q;
      layouts.push_back(StageLayout::of(plan, member, 0, layers, 1));
      ASSERT_GT(layouts[q].experts, 0);
      threads.emplace_back([&, member, q] {
        CpuOps<float> mine;
        ThreadedExpertGroup<float> place(meeting, members, q);
        mine.setExpertGroup(&place);
        auto chain = *LayerChain<float>::build(plan, member, 0, layers, mine);
        const std::vector<float> part = layouts[q].part(params.data());
        got[q].assign(part.size(), 0.0);
        Tokens own = batch.view;
        own.tokens += q * samples * s.seq;
        own.targets += q * samples * s.seq;
        own.samples = samples;
        std::vector<LayerChain<float>::Cache> pieces;
        chain.forwardSamples(part.data(), nullptr, own, nullptr, pieces);
        backward(chain, part.data(), pieces, got[q].data());
      });
    }
    for (std::thread &t : threads)
      t.join();
    // Each member's runs against the reference's gradients: its experts' alone, the dense ones
    // summed over the members.
    int64_t experts = 0, dense = 0;
    for (int64_t q = 0; q < members; ++q)
      for (const ParameterRun &run : layouts[q].runs)
        for (int64_t i = 0; i < run.length; ++i) {
          const int64_t local = run.local + i, at = run.whole + i;
          if (local >= layouts[q].expertsAt) {
            ASSERT_EQ(got[q][local], expected[at]) << "member " << q << ", expert element " << at;
            ++experts;
          } else if (q == 0) {
            ASSERT_EQ(got[0][local] + got[1][local], expected[at]) << "element " << at;
            ++dense;
          }
        }
    EXPECT_EQ(experts + dense, static_cast<int64_t>(expected.size()));
    EXPECT_GT(experts, 0);
  }
}

TEST(Moe, RecomputedForwardCountsTheAuxiliaryLossesOnce) {
  const GptShape s = moeShape([](GptShape &s) {
    s.auxLossCoefficient = 0.01;
    s.zLossCoefficient = 0.001;
    s.capacityFactor = 0.5;
  });
  runtime::Plan plan = planFor(s);
  double aux[2], z[2];
  int64_t dropped[2];
  for (Checkpointing c : {Checkpointing::None, Checkpointing::Full}) {
    CpuOps<float> ops;
    auto chain = *LayerChain<float>::build(plan, s, 0, 4, ops, c);
    std::vector<float> params(chain.numParams());
    chain.initialise(params.data(), 5);
    Batch batch = makeBatch(s, 2, 1.0 / (2 * s.seq));
    typename LayerChain<float>::Cache cache;
    std::vector<float> dparams(params.size(), 0.0f);
    chain.forward(params.data(), nullptr, batch.view, nullptr, cache);
    chain.backward(params.data(), cache, nullptr, dparams.data(), nullptr);
    aux[c == Checkpointing::Full] = ops.takeAuxLoss();
    z[c == Checkpointing::Full] = ops.takeZLoss();
    dropped[c == Checkpointing::Full] = ops.routedLoad().dropped;
  }
  EXPECT_GT(aux[0], 0);
  EXPECT_EQ(aux[0], aux[1]);
  EXPECT_GT(z[0], 0);
  EXPECT_EQ(z[0], z[1]);
  // So are a capacity's drops.
  EXPECT_GT(dropped[0], 0);
  EXPECT_EQ(dropped[0], dropped[1]);
}

// Selective checkpointing's recompute modules: recomputing the norms' outputs, the dense MLP's
// hidden activations (mlp) and the routed experts' activations (moe_act) computes the same
// bits as keeping them, and the forward keeps exactly those tensors less.
TEST(Moe, RecomputeModulesComputeTheSameBitsAndKeepLess) {
  const GptShape s = moeShape();
  const int64_t samples = 2, rows = samples * s.seq;
  std::vector<float> dparams[2];
  double loss[2];
  int64_t kept[2];
  for (int recompute : {0, 1}) {
    runtime::Plan plan = planFor(s);
    plan.config.recomputeModules =
        runtime::kRecomputeCoreAttention |
        (recompute ? runtime::kRecomputeLayerNorm | runtime::kRecomputeMlp |
                         runtime::kRecomputeMoeActivation
                   : 0u);
    CpuOps<float> ops;
    auto chain = *LayerChain<float>::build(plan, s, 0, 4, ops, Checkpointing::Selective);
    std::vector<float> params(chain.numParams());
    chain.initialise(params.data(), 5);
    Batch batch = makeBatch(s, samples, 1.0 / (samples * s.seq));
    typename LayerChain<float>::Cache cache;
    chain.forward(params.data(), nullptr, batch.view, nullptr, cache);
    kept[recompute] = 0;
    for (const LayerCache<float> &layer : cache.layers)
      kept[recompute] += layer.savedElements();
    dparams[recompute].assign(params.size(), 0.0f);
    chain.backward(params.data(), cache, nullptr, dparams[recompute].data(), nullptr);
    loss[recompute] = ops.takeLoss();
  }
  EXPECT_EQ(loss[1], loss[0]);
  EXPECT_EQ(dparams[1], dparams[0]);
  // Two blocks' norm outputs; the dense block's first projection and activation; the expert
  // block's activations over its top-k assignments (dropless, one rank: all of them).
  EXPECT_EQ(kept[0] - kept[1],
            2 * 2 * rows * s.hidden + rows * (s.upWidth() + s.ffn) + rows * s.topK * s.expertFfn);
}

TEST(Moe, ActivationElementsBoundWhatTheForwardKeeps) {
  const GptShape s = moeShape([](GptShape &s) { s.sharedFfn = 4; });
  runtime::Plan plan = planFor(s);
  CpuOps<float> ops;
  auto chain = *LayerChain<float>::build(plan, s, 0, 4, ops);
  std::vector<float> params(chain.numParams());
  chain.initialise(params.data(), 5);
  Batch batch = makeBatch(s, 3, 1.0);
  typename LayerChain<float>::Cache cache;
  chain.forward(params.data(), nullptr, batch.view, nullptr, cache);
  int64_t kept = 0;
  for (const LayerCache<float> &layer : cache.layers)
    kept += layer.savedElements();
  EXPECT_LE(kept, *s.activationElements(3, s.blocks, /*head=*/true));
}

TEST(Moe, PlansTheRuntimeCannotRunAreRefusedNamingTheKey) {
  runtime::Plan plan = planFor(moeShape());
  ASSERT_TRUE(GptShape::fromPlan(plan).ok()) << GptShape::fromPlan(plan).status();
  const struct {
    std::function<void(runtime::Plan &)> edit;
    std::string key;
  } cases[] = {
      {[](runtime::Plan &p) { p.transformer->topK = 5; }, "model.moe.top_k"},
      {[](runtime::Plan &p) { p.transformer->topK = 0; }, "model.moe.top_k"},
      {[](runtime::Plan &p) { p.transformer->expertFfnHiddenSize = 0; },
       "model.moe.expert_ffn_hidden_size"},
      {[](runtime::Plan &p) { p.transformer->router = 2; }, "model.moe.router"},
      {[](runtime::Plan &p) { p.transformer->auxLossCoefficient = -1; },
       "model.moe.aux_loss_coefficient"},
      {[](runtime::Plan &p) { p.transformer->biasUpdateRate = 0.001; },
       "model.moe.bias_update_rate"},
      {[](runtime::Plan &p) { p.transformer->capacityFactor = NAN; }, "model.moe.capacity_factor"},
      {[](runtime::Plan &p) { p.transformer->zLossCoefficient = -1; },
       "model.moe.z_loss_coefficient"},
      {[](runtime::Plan &p) {
         p.transformer->sharedExperts = 1;
         p.transformer->sharedFfnHiddenSize = 0;
       },
       "model.moe.shared_ffn_hidden_size"},
      {[](runtime::Plan &p) { p.config.expert = 3; }, "parallelism.expert"},
      {[](runtime::Plan &p) { p.config.expert = 2; }, "parallelism.expert"}, // D = 1
      // Tensor parallelism splits the vocabulary (11 here) as for a dense model.
      {[](runtime::Plan &p) { p.config.tensor = 2; }, "parallelism.tensor"},
      // With T > 1: one replica reduces nothing, so every expert must be on one tensor rank;
      // each rank routes its T-th of a sample.
      {[](runtime::Plan &p) {
         p.transformer->vocabSize = 12;
         p.config.tensor = 2;
       },
       "parallelism.expert 2 (or parallelism.data above 1)"},
      {[](runtime::Plan &p) {
         p.transformer->vocabSize = 12;
         p.config.tensor = 4;
         p.transformer->numHeads = p.transformer->numKvHeads = 4;
         p.transformer->ffnHiddenSize = 16;
         p.config.expert = 2;
       },
       "parallelism.expert 4 (or parallelism.data above 1)"},
      {[](runtime::Plan &p) {
         p.transformer->vocabSize = 12;
         p.config.tensor = p.config.expert = 2;
       },
       "model.seq_length"},
  };
  for (const auto &c : cases) {
    SCOPED_TRACE(c.key);
    runtime::Plan changed = plan;
    c.edit(changed);
    absl::StatusOr<GptShape> shape = GptShape::fromPlan(changed);
    ASSERT_FALSE(shape.ok());
    EXPECT_NE(shape.status().message().find(c.key), std::string::npos) << shape.status().message();
  }
  // Tensor parallelism with E = T on one replica, the sequence split evenly.
  runtime::Plan tensor = plan;
  tensor.transformer->vocabSize = 12;
  tensor.transformer->seqLength = 6;
  tensor.config.tensor = tensor.config.expert = 2;
  EXPECT_TRUE(GptShape::fromPlan(tensor).ok()) << GptShape::fromPlan(tensor).status();
  // Qwen3-MoE's attention: heads of their own width, q/k norms.
  runtime::Plan qwen3 = plan;
  qwen3.transformer->headDim = 8;
  qwen3.transformer->qkNorm = true;
  EXPECT_TRUE(GptShape::fromPlan(qwen3).ok());
  // DeepSeek-V3's attention: latent attention, alone and split over the tensor group that
  // the experts fold into.
  runtime::Plan latent = plan;
  latent.transformer->kvLoraRank = 16;
  latent.transformer->qkNopeHeadDim = latent.transformer->vHeadDim = 4;
  latent.transformer->qkRopeHeadDim = 2;
  EXPECT_TRUE(GptShape::fromPlan(latent).ok()) << GptShape::fromPlan(latent).status();
  latent.transformer->vocabSize = 12;
  latent.transformer->seqLength = 6;
  latent.config.tensor = latent.config.expert = 2;
  EXPECT_TRUE(GptShape::fromPlan(latent).ok()) << GptShape::fromPlan(latent).status();
}
