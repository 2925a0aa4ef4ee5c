//===- MtpTest.cpp - multi-token prediction modules --------------------===//
//
// The modules of layers/Mtp.h: their gradients against central differences (alone with the
// head, in the whole model, tied and untied, dense and with experts, split), the rows their
// loss counts, where they read the shared tables, and what the runtime refuses.
//
//===----------------------------------------------------------------------===//

#include "runtime/model/Gpt.h"
#include "tests/unit/runtime/GradientCheck.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

using namespace conduit;
using namespace conduit::model;

namespace {

/// A Llama-style tiny model with `modules` multi-token prediction modules.
GptShape mtpShape(int64_t modules, const std::function<void(GptShape &)> &change = nullptr) {
  GptShape s = tinyShape(false, false);
  s.gated = s.rmsNorm = s.rotary = true;
  s.mtpLayers = modules;
  s.mtpLossCoefficient = 0.3;
  if (change)
    change(s);
  return s;
}

/// The chain's last layers: the modules and the head.
int64_t firstModule(const GptShape &s) { return s.blocks + 1; }
int64_t chainEnd(const GptShape &s) { return s.blocks + s.mtpLayers + 2; }

} // namespace

TEST(Mtp, ModuleAndHeadGradients) {
  for (int64_t modules : {1, 2}) {
    SCOPED_TRACE(modules);
    const GptShape s = mtpShape(modules);
    checkGradients(s, firstModule(s), chainEnd(s));
    checkGradients(s, firstModule(s), chainEnd(s), /*split=*/true);
  }
}

TEST(Mtp, WholeModelGradientsTiedAndUntied) {
  // Untied, the first module's copy of the token table takes the modules' embedding
  // gradients; tied, the head's matrix (which is that copy) takes them with the head's.
  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied);
    const GptShape s = mtpShape(2, [&](GptShape &x) { x.tied = tied; });
    checkGradients(s, 0, chainEnd(s));
  }
}

TEST(Mtp, GptStyleGradients) {
  // LayerNorm, GELU, learned positions in the main model: the modules embed the tokens only.
  GptShape s = tinyShape();
  s.mtpLayers = 1;
  s.mtpLossCoefficient = 0.5;
  checkGradients(s, 0, chainEnd(s));
}

TEST(Mtp, ModuleWithExpertsGradients) {
  // The module's block has experts where the model's blocks do; kept, recomputed whole (full
  // checkpointing: the modules' wider outputs kept as the next layer's input), and with the
  // experts' activations and the norms recomputed.
  const GptShape s = mtpShape(1, [](GptShape &x) {
    x.experts = 4;
    x.topK = 2;
    x.expertFfn = 6;
    x.denseBlocks = 1;
    x.auxLossCoefficient = 0.1;
  });
  EXPECT_TRUE(s.layerHasExperts(firstModule(s)));
  checkGradients(s, firstModule(s), chainEnd(s));
  checkGradients(s, firstModule(s), chainEnd(s), /*split=*/true);
  GptShape two = s;
  two.mtpLayers = 2;
  checkGradients(two, firstModule(two), chainEnd(two), /*split=*/true, Checkpointing::Full);
  checkGradients(two, firstModule(two), chainEnd(two), /*split=*/false, Checkpointing::Selective,
                 runtime::kRecomputeMoeActivation | runtime::kRecomputeLayerNorm);
}

TEST(Mtp, LossCountsThePositionsWithATokenThatFarAhead) {
  // At initialisation the logits are near zero, so each counted position's cross-entropy is
  // near ln(vocab): module k counts seq - k - 1 positions of each sample, and the modules'
  // loss is their mean.
  const GptShape s = mtpShape(2, [](GptShape &x) { x.seq = 6; });
  runtime::Plan plan = planFor(s);
  CpuOps<double> ops;
  LayerChain<double> chain = *LayerChain<double>::build(plan, s, 0, chainEnd(s), ops);
  std::vector<double> params(chain.numParams());
  chain.initialise(params.data(), 42);
  const int64_t samples = 3;
  Batch batch = makeBatch(s, samples);
  LayerChain<double>::Cache cache;
  chain.forward(params.data(), nullptr, batch.view, nullptr, cache);
  const double perRow = std::log(static_cast<double>(s.vocab));
  EXPECT_NEAR(ops.takeLoss(), samples * s.seq * perRow, 0.02 * samples * s.seq * perRow);
  // (5 + 4) counted positions per sample, over 2 modules.
  const double counted = samples * ((s.seq - 1) + (s.seq - 2)) / 2.0;
  EXPECT_NEAR(ops.takeMtpLoss(), counted * perRow, 0.02 * counted * perRow);
}

TEST(Mtp, EachModuleEmbedsTheTokenAheadAndPredictsTheOneAfter) {
  // Modules made to pass their embedding straight through (M's embedding half the identity,
  // its hidden half zero, blocks of zeros, which their residuals make the identity) to a head
  // whose matrix maps token v to v + 1: on the sequence 0, 1, 2, ... a module predicts right
  // only if it embeds the token k + 1 ahead and targets the one after it. Each counted
  // position's cross-entropy is then log(e^c + V - 1) - c (another shift gives log(e^c + V -
  // 1) or more), over the seq - k - 1 positions module k counts.
  const GptShape s = mtpShape(2, [](GptShape &x) { x.vocab = 8; });
  const int64_t h = s.hidden, vocab = s.vocab;
  runtime::Plan plan = planFor(s);
  CpuOps<double> ops;
  LayerChain<double> chain = *LayerChain<double>::build(plan, s, firstModule(s), chainEnd(s), ops);
  std::vector<double> params(chain.numParams(), 0.0);
  for (size_t m = 0; m < 2; ++m) {
    // Mtp.h's order: the table (the first module's: one-hot rows), ENorm, HNorm, M, HeadNorm,
    // then the block (zeros).
    double *p = params.data() + chain.offset(m);
    if (m == 0) {
      for (int64_t v = 0; v < vocab; ++v)
        p[v * h + v] = 1;
      p += vocab * h;
    }
    for (int64_t i = 0; i < h; ++i) {
      p[i] = p[h + i] = p[2 * h + 2 * h * h + i] = 1; // the three norms' gains
      p[2 * h + i * h + i] = 1;                       // M's embedding rows: the identity
    }
  }
  const double c = 6;
  double *head = params.data() + chain.offset(2);
  for (int64_t i = 0; i < h; ++i)
    head[i] = 1;
  for (int64_t v = 0; v < vocab; ++v) // W [h x V]: the normed one-hot row of v, c at v + 1
    head[h + v * vocab + (v + 1) % vocab] = c / std::sqrt(static_cast<double>(h));
  std::vector<int32_t> tokens(s.seq), targets(s.seq);
  for (int64_t i = 0; i < s.seq; ++i) {
    tokens[i] = static_cast<int32_t>(i);
    targets[i] = static_cast<int32_t>(i + 1);
  }
  std::vector<double> x(s.seq * h, 0.0);
  LayerChain<double>::Cache cache;
  chain.forward(params.data(), x.data(), Tokens{tokens.data(), targets.data(), 1, 1.0}, nullptr,
                cache);
  const double right = std::log(std::exp(c) + vocab - 1) - c;
  const double counted = (s.seq - 1) + (s.seq - 2);
  EXPECT_NEAR(ops.takeMtpLoss(), counted * right / 2, 1e-4 * counted * right);
}

TEST(Mtp, ModulesWithNoPositionLeftCountNothing) {
  // With seq 2 the second module has no token three ahead: its loss is zero, and neither its
  // projection nor its block get a gradient from it (the first module's is all there is).
  const GptShape s = mtpShape(2, [](GptShape &x) { x.seq = 2; });
  runtime::Plan plan = planFor(s);
  CpuOps<double> ops;
  LayerChain<double> chain = *LayerChain<double>::build(plan, s, 0, chainEnd(s), ops);
  std::vector<double> params(chain.numParams()), grads(chain.numParams(), 0.0);
  chain.initialise(params.data(), 42);
  Batch batch = makeBatch(s, 1, /*lossScale=*/1.0);
  LayerChain<double>::Cache cache;
  chain.forward(params.data(), nullptr, batch.view, nullptr, cache);
  const double perRow = std::log(static_cast<double>(s.vocab));
  EXPECT_NEAR(ops.takeMtpLoss(), perRow / 2, 0.02 * perRow);
  chain.backward(params.data(), cache, nullptr, grads.data(), nullptr);
  const int64_t second = chain.offset(chain.size() - 2), head = chain.offset(chain.size() - 1);
  for (int64_t i = second; i < head; ++i)
    ASSERT_EQ(grads[i], 0.0) << "parameter " << i - second << " of mtp.1";
}

TEST(Mtp, FirstModulesTableStartsAsTheEmbeddings) {
  // Untied, the modules' copy of the token table is the first module's first parameters, and
  // starts equal to the embedding's table; tied, it is the head's matrix.
  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied);
    const GptShape s = mtpShape(2, [&](GptShape &x) { x.tied = tied; });
    runtime::Plan plan = planFor(s);
    CpuOps<double> ops;
    LayerChain<double> chain = *LayerChain<double>::build(plan, s, 0, chainEnd(s), ops);
    std::vector<double> params(chain.numParams());
    chain.initialise(params.data(), 42);
    const int64_t copy = chain.tableCopyAt();
    EXPECT_EQ(copy, tied ? chain.offset(chain.size() - 1) + s.normParams()
                         : chain.offset(firstModule(s)));
    for (int64_t i = 0; i < s.vocab * s.hidden; ++i)
      ASSERT_EQ(params[copy + i], params[i]) << i;
    // The last stage alone holds the same copy where the whole model does.
    LayerChain<double> last = *LayerChain<double>::build(plan, s, firstModule(s), chainEnd(s), ops);
    EXPECT_EQ(last.tableCopyAt(), copy - chain.offset(firstModule(s)));
  }
}

TEST(Mtp, ModuleParametersFollowTheCompilersFormula) {
  // A block, the projection 2h x h and three norms; the first module of an untied model keeps
  // the token table's copy too (job/TransformerCosts.cpp counts the same).
  for (bool tied : {false, true}) {
    const GptShape s = mtpShape(2, [&](GptShape &x) { x.tied = tied; });
    const int64_t block =
        makeLayer<double>(runtime::LayerKind::Block, s, Checkpointing::None, 1)->numParams();
    const int64_t module = block + 2 * s.hidden * s.hidden + 3 * s.normParams();
    EXPECT_EQ(makeLayer<double>(runtime::LayerKind::Block, s, Checkpointing::None, firstModule(s))
                  ->numParams(),
              module + (tied ? 0 : s.vocab * s.hidden));
    EXPECT_EQ(
        makeLayer<double>(runtime::LayerKind::Block, s, Checkpointing::None, firstModule(s) + 1)
            ->numParams(),
        module);
  }
}

TEST(Mtp, ActivationElementsBoundWhatTheModulesKeep) {
  // The blocks, the modules and the head of the chain: what their forward keeps stays within
  // the bound the memory check counts before it allocates (GptShape::activationElements).
  for (bool experts : {false, true}) {
    SCOPED_TRACE(experts);
    const GptShape s = mtpShape(2, [&](GptShape &x) {
      if (experts) {
        x.experts = 4;
        x.topK = 2;
        x.expertFfn = 6;
      }
    });
    runtime::Plan plan = planFor(s);
    CpuOps<float> ops;
    LayerChain<float> chain = *LayerChain<float>::build(plan, s, 1, chainEnd(s), ops);
    std::vector<float> params(chain.numParams());
    chain.initialise(params.data(), 42);
    const int64_t samples = 3;
    Batch batch = makeBatch(s, samples);
    std::vector<float> x(samples * chain.sampleSize(), 0.5f);
    LayerChain<float>::Cache cache;
    chain.forward(params.data(), x.data(), batch.view, nullptr, cache);
    int64_t kept = static_cast<int64_t>(x.size()); // the chain's input
    for (const LayerCache<float> &layer : cache.layers)
      kept += layer.savedElements();
    const std::optional<int64_t> bound =
        s.activationElements(samples, s.blocks + s.mtpLayers, /*head=*/true);
    ASSERT_TRUE(bound.has_value());
    EXPECT_GE(*bound, kept);
    EXPECT_LE(*bound, 2 * kept) << "an upper bound, not a wild one";
  }
}

TEST(Mtp, ModuleAwayFromTheHeadIsRefused) {
  const GptShape s = mtpShape(2);
  runtime::Plan plan = planFor(s);
  CpuOps<double> ops;
  absl::StatusOr<LayerChain<double>> noHead =
      LayerChain<double>::build(plan, s, firstModule(s), chainEnd(s) - 1, ops);
  ASSERT_FALSE(noHead.ok());
  EXPECT_NE(noHead.status().message().find("without the head"), std::string::npos)
      << noHead.status().message();
  absl::StatusOr<LayerChain<double>> apart =
      LayerChain<double>::build(plan, s, firstModule(s) + 1, chainEnd(s), ops);
  ASSERT_FALSE(apart.ok());
  EXPECT_NE(apart.status().message().find("mtp.0"), std::string::npos) << apart.status().message();
}

TEST(Mtp, TheShapeCarriesTheModulesAndTheirWeight) {
  const GptShape s = mtpShape(1, [](GptShape &x) { x.vocab = 12; });
  runtime::Plan plan = planFor(s);
  plan.config.tensor = 2;
  absl::StatusOr<GptShape> shape = GptShape::fromPlan(plan);
  ASSERT_TRUE(shape.ok()) << shape.status();
  EXPECT_EQ(shape->mtpLayers, 1);
  EXPECT_EQ(shape->mtpLossCoefficient, 0.3);
}
