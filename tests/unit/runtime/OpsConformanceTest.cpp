//===- OpsConformanceTest.cpp - every Ops implementation against one oracle --===//
//
// One suite for every implementation of the model's math: each operation, and the forward
// and backward of each layer kind (GPT-style, Llama-style: RMSNorm, SwiGLU, rotary positions,
// grouped-query attention, tied head, no biases; Qwen3-style: heads of their own width, q/k
// norms; and mixtures of experts, Mixtral-like and with
// a shared expert and a sigmoid router), on random inputs, against the CPU
// implementation in double precision, and the split backward (input gradient, later weight
// gradient) against the whole one on the implementation itself, bit for bit. Instantiated for
// the implementations the binary names (OpsConformance.h): the CPU (float) in runtime_tests;
// CUDA at float32 and at bf16 GEMM precision in runtime_cuda_tests, where the CUDA backend is
// built, skipping themselves on machines without a usable GPU. The tolerance is per
// implementation: float32 rounding, or bf16 inputs to the GEMMs.
//
//===----------------------------------------------------------------------===//

#include "tests/unit/runtime/OpsConformance.h"

#include "runtime/model/Gpt.h"
#include "runtime/model/Random.h"
#include "tests/unit/runtime/GptPlan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

using namespace conduit;
using namespace conduit::model;
using namespace conduit::model::testing;

namespace {

class OpsConformance : public ::testing::TestWithParam<Implementation> {
protected:
  void SetUp() override {
    std::string skip;
    ops = GetParam().make(skip);
    if (!ops)
      GTEST_SKIP() << GetParam().name << ": " << skip;
  }

  void TearDown() override {
    if (ops && GetParam().keptFailure) {
      const std::string failure = GetParam().keptFailure(*ops);
      EXPECT_TRUE(failure.empty()) << failure;
    }
  }

  /// Random values in the oracle's precision, rounded to float so both sides see the same.
  std::vector<double> random(int64_t n, double scale = 1.0) {
    std::vector<double> v(n);
    for (double &x : v)
      x = static_cast<float>(scale * rng.normal());
    return v;
  }

  Buffer<float> upload(const std::vector<double> &v) {
    Buffer<float> b = ops->allocate(static_cast<int64_t>(v.size()));
    std::vector<float> f(v.begin(), v.end());
    ops->upload(f.data(), static_cast<int64_t>(f.size()), b.data());
    return b;
  }

  std::vector<double> download(const Buffer<float> &b) {
    std::vector<float> f(b.size());
    ops->download(b.data(), b.size(), f.data());
    return {f.begin(), f.end()};
  }

  /// The implementation's result against the oracle's, relative to the oracle's magnitude.
  void expectClose(const std::vector<double> &actual, const std::vector<double> &expected,
                   const std::string &what) {
    ASSERT_EQ(actual.size(), expected.size()) << what;
    double scale = 1e-30, worst = 0;
    for (double e : expected)
      scale = std::max(scale, std::abs(e));
    for (size_t i = 0; i < actual.size(); ++i)
      worst = std::max(worst, std::abs(actual[i] - expected[i]));
    EXPECT_LE(worst / scale, GetParam().tolerance)
        << what << ": largest error " << worst << " against values up to " << scale;
  }

  std::unique_ptr<Ops<float>> ops;
  CpuOps<double> oracle;
  Random rng{{2024}};
};

TEST_P(OpsConformance, ElementWise) {
  const int64_t rows = 37, n = 53;
  std::vector<double> x = random(rows * n), y = random(rows * n), bias = random(n);
  Buffer<float> dx = upload(x), dy = upload(y), db = upload(bias);
  ops->add(rows * n, dx.data(), dy.data());
  ops->addBias(rows, n, db.data(), dx.data());
  Buffer<float> sum = upload(bias);
  ops->sumRows(rows, n, dy.data(), sum.data());
  Buffer<float> filled = ops->allocate(n);
  ops->fill(n, 0.5f, filled.data());
  Buffer<float> copied = ops->allocate(rows * n);
  ops->copy(rows * n, dx.data(), copied.data());
  // Columns [7, 7 + 11) of dx's rows into columns [3, 3 + 11) of rows 20 apart.
  const int64_t width = 11, stride = 20;
  Buffer<float> block = upload(std::vector<double>(rows * stride, -1.0));
  ops->copyRows(rows, width, dx.data() + 7, n, block.data() + 3, stride);

  std::vector<double> ey = y, ex = x, esum = bias;
  oracle.add(rows * n, x.data(), ey.data());
  oracle.addBias(rows, n, bias.data(), ex.data());
  oracle.sumRows(rows, n, ey.data(), esum.data());
  expectClose(download(dy), ey, "add");
  expectClose(download(dx), ex, "addBias");
  expectClose(download(sum), esum, "sumRows");
  expectClose(download(filled), std::vector<double>(n, 0.5), "fill");
  expectClose(download(copied), ex, "copy");
  std::vector<double> eblock(rows * stride, -1.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < width; ++c)
      eblock[r * stride + 3 + c] = ex[r * n + 7 + c];
  expectClose(download(block), eblock, "copyRows");
}

TEST_P(OpsConformance, GemmInEveryLayout) {
  const int64_t m = 19, n = 23, k = 29;
  for (bool transA : {false, true})
    for (bool transB : {false, true}) {
      std::vector<double> a = random(m * k), b = random(k * n), c = random(m * n);
      Buffer<float> da = upload(a), db = upload(b), dc = upload(c);
      ops->gemm(transA, transB, m, n, k, 0.75f, da.data(), db.data(), 0.5f, dc.data());
      oracle.gemm(transA, transB, m, n, k, 0.75, a.data(), b.data(), 0.5, c.data());
      expectClose(download(dc), c,
                  std::string("gemm ") + (transA ? "T" : "N") + (transB ? "T" : "N"));
    }
}

TEST_P(OpsConformance, LayerNorm) {
  const int64_t rows = 33, h = 300; // wider than a thread block
  for (double eps : {1e-5, 0.25}) { // the default, and one that shows whether eps arrives
    SCOPED_TRACE(eps);
    std::vector<double> x = random(rows * h, 3.0), gamma = random(h), beta = random(h),
                        dy = random(rows * h);
    Buffer<float> dxIn = upload(x), dg = upload(gamma), dbt = upload(beta), ddy = upload(dy);
    Buffer<float> y = ops->allocate(rows * h), mean = ops->allocate(rows),
                  rstd = ops->allocate(rows);
    ops->layerNormForward(rows, h, dxIn.data(), dg.data(), dbt.data(), eps, y.data(), mean.data(),
                          rstd.data());
    std::vector<double> dgammaStart = random(h), dbetaStart = random(h);
    Buffer<float> dx = ops->allocate(rows * h), dgamma = upload(dgammaStart),
                  dbeta = upload(dbetaStart);
    ops->layerNormBackwardInput(rows, h, dxIn.data(), dg.data(), mean.data(), rstd.data(),
                                ddy.data(), dx.data());
    ops->layerNormBackwardWeight(rows, h, dxIn.data(), mean.data(), rstd.data(), ddy.data(),
                                 dgamma.data(), dbeta.data());

    std::vector<double> ey(rows * h), emean(rows), erstd(rows), edx(rows * h);
    oracle.layerNormForward(rows, h, x.data(), gamma.data(), beta.data(), eps, ey.data(),
                            emean.data(), erstd.data());
    oracle.layerNormBackwardInput(rows, h, x.data(), gamma.data(), emean.data(), erstd.data(),
                                  dy.data(), edx.data());
    oracle.layerNormBackwardWeight(rows, h, x.data(), emean.data(), erstd.data(), dy.data(),
                                   dgammaStart.data(), dbetaStart.data());
    expectClose(download(y), ey, "forward");
    expectClose(download(mean), emean, "mean");
    expectClose(download(rstd), erstd, "rstd");
    expectClose(download(dx), edx, "input gradient");
    expectClose(download(dgamma), dgammaStart, "gamma gradient");
    expectClose(download(dbeta), dbetaStart, "beta gradient");
  }
}

TEST_P(OpsConformance, RmsNorm) {
  const int64_t rows = 33, h = 300; // wider than a thread block
  for (double eps : {1e-6, 0.25}) {
    SCOPED_TRACE(eps);
    std::vector<double> x = random(rows * h, 0.5), gamma = random(h), dy = random(rows * h);
    Buffer<float> dxIn = upload(x), dg = upload(gamma), ddy = upload(dy);
    Buffer<float> y = ops->allocate(rows * h), rstd = ops->allocate(rows);
    ops->rmsNormForward(rows, h, dxIn.data(), dg.data(), eps, y.data(), rstd.data());
    std::vector<double> dgammaStart = random(h);
    Buffer<float> dx = ops->allocate(rows * h), dgamma = upload(dgammaStart);
    ops->rmsNormBackwardInput(rows, h, dxIn.data(), dg.data(), rstd.data(), ddy.data(), dx.data());
    ops->rmsNormBackwardWeight(rows, h, dxIn.data(), rstd.data(), ddy.data(), dgamma.data());

    std::vector<double> ey(rows * h), erstd(rows), edx(rows * h);
    oracle.rmsNormForward(rows, h, x.data(), gamma.data(), eps, ey.data(), erstd.data());
    oracle.rmsNormBackwardInput(rows, h, x.data(), gamma.data(), erstd.data(), dy.data(),
                                edx.data());
    oracle.rmsNormBackwardWeight(rows, h, x.data(), erstd.data(), dy.data(), dgammaStart.data());
    expectClose(download(y), ey, "forward");
    expectClose(download(rstd), erstd, "rstd");
    expectClose(download(dx), edx, "input gradient");
    expectClose(download(dgamma), dgammaStart, "gamma gradient");
  }
}

TEST_P(OpsConformance, Gelu) {
  const int64_t n = 1000;
  std::vector<double> x = random(n, 2.0), dy = random(n);
  Buffer<float> dxIn = upload(x), ddy = upload(dy), y = ops->allocate(n), dx = ops->allocate(n);
  ops->geluForward(n, dxIn.data(), y.data());
  ops->geluBackward(n, dxIn.data(), ddy.data(), dx.data());
  std::vector<double> ey(n), edx(n);
  oracle.geluForward(n, x.data(), ey.data());
  oracle.geluBackward(n, x.data(), dy.data(), edx.data());
  expectClose(download(y), ey, "forward");
  expectClose(download(dx), edx, "backward");
}

TEST_P(OpsConformance, Swiglu) {
  const int64_t rows = 13, f = 77;
  std::vector<double> gateUp = random(rows * 2 * f, 2.0), dout = random(rows * f);
  Buffer<float> dIn = upload(gateUp), ddout = upload(dout), out = ops->allocate(rows * f),
                dGateUp = ops->allocate(rows * 2 * f);
  ops->swigluForward(rows, f, dIn.data(), out.data());
  ops->swigluBackward(rows, f, dIn.data(), ddout.data(), dGateUp.data());
  std::vector<double> eout(rows * f), edGateUp(rows * 2 * f);
  oracle.swigluForward(rows, f, gateUp.data(), eout.data());
  oracle.swigluBackward(rows, f, gateUp.data(), dout.data(), edGateUp.data());
  expectClose(download(out), eout, "forward");
  expectClose(download(dGateUp), edGateUp, "backward");
}

TEST_P(OpsConformance, Rotary) {
  // Positions up to 40: angles well past 2π for the low dimensions. Heads 16 wide, so that
  // the context extensions below keep, blend and interpolate some of their 8 pairs each.
  const int64_t samples = 2, seq = 41, heads = 4, kvHeads = 2, headDim = 16;
  const int64_t n = samples * seq * (heads + 2 * kvHeads) * headDim;
  runtime::RotaryPositions llama3{500000, {}}, yarn{10000, {}}, dynamic{10000, {}, seq};
  llama3.scaling.type = runtime::RopeType::Llama3;
  llama3.scaling.factor = 8;
  llama3.scaling.originalPositions = 8192;
  yarn.scaling.type = runtime::RopeType::Yarn;
  yarn.scaling.factor = 40;
  yarn.scaling.originalPositions = 64;
  yarn.scaling.attentionFactor = 1.25;
  dynamic.scaling.type = runtime::RopeType::Dynamic;
  dynamic.scaling.factor = 4;
  dynamic.scaling.originalPositions = 16; // the sequence runs past: the base grows
  const std::pair<const char *, runtime::RotaryPositions> cases[] = {{"theta 10000", {10000, {}}},
                                                                     {"theta 500000", {500000, {}}},
                                                                     {"llama3", llama3},
                                                                     {"yarn", yarn},
                                                                     {"dynamic", dynamic}};
  for (const auto &[name, rope] : cases) {
    SCOPED_TRACE(name);
    std::vector<double> qkv = random(n), grad = random(n);
    Buffer<float> dqkv = upload(qkv), dgrad = upload(grad);
    ops->rotaryForward(samples, seq, heads, kvHeads, headDim, rope, dqkv.data());
    ops->rotaryBackward(samples, seq, heads, kvHeads, headDim, rope, dgrad.data());
    oracle.rotaryForward(samples, seq, heads, kvHeads, headDim, rope, qkv.data());
    oracle.rotaryBackward(samples, seq, heads, kvHeads, headDim, rope, grad.data());
    expectClose(download(dqkv), qkv, "forward");
    expectClose(download(dgrad), grad, "backward");
  }
}

TEST_P(OpsConformance, CausalAttention) {
  // Multi-head, and grouped-query with groups of 2 and of all heads.
  for (auto [heads, kvHeads] : {std::pair<int64_t, int64_t>{3, 3}, {4, 2}, {4, 1}}) {
    SCOPED_TRACE(std::to_string(heads) + " heads, " + std::to_string(kvHeads) + " kv-heads");
    const int64_t samples = 2, seq = 7, headDim = 4, width = heads * headDim,
                  stride = (heads + 2 * kvHeads) * headDim;
    std::vector<double> qkv = random(samples * seq * stride), dout = random(samples * seq * width);
    Buffer<float> dqkvIn = upload(qkv), ddout = upload(dout);
    Buffer<float> probs = ops->allocate(samples * heads * seq * seq),
                  out = ops->allocate(samples * seq * width),
                  dqkv = ops->allocate(samples * seq * stride);
    ops->attentionForward(samples, seq, heads, kvHeads, headDim, dqkvIn.data(), probs.data(),
                          out.data());
    ops->attentionBackward(samples, seq, heads, kvHeads, headDim, dqkvIn.data(), probs.data(),
                           ddout.data(), dqkv.data());
    std::vector<double> eprobs(samples * heads * seq * seq), eout(samples * seq * width),
        edqkv(samples * seq * stride);
    oracle.attentionForward(samples, seq, heads, kvHeads, headDim, qkv.data(), eprobs.data(),
                            eout.data());
    oracle.attentionBackward(samples, seq, heads, kvHeads, headDim, qkv.data(), eprobs.data(),
                             dout.data(), edqkv.data());
    expectClose(download(probs), eprobs, "probabilities (masked entries zero)");
    expectClose(download(out), eout, "output");
    expectClose(download(dqkv), edqkv, "qkv gradient");
  }
}

TEST_P(OpsConformance, EmbeddingWithRepeatedTokens) {
  const int64_t samples = 3, seq = 5, hidden = 6, vocab = 4; // tokens repeat
  std::vector<int32_t> tokens(samples * seq);
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = static_cast<int32_t>((i * 7 + 3) % vocab);
  std::vector<double> wte = random(vocab * hidden), wpe = random(seq * hidden),
                      dy = random(samples * seq * hidden), dwte = random(vocab * hidden),
                      dwpe = random(seq * hidden);
  Buffer<float> dwteIn = upload(wte), dwpeIn = upload(wpe), ddy = upload(dy),
                y = ops->allocate(samples * seq * hidden), gte = upload(dwte), gpe = upload(dwpe);
  ops->embeddingForward(samples, seq, hidden, tokens.data(), dwteIn.data(), dwpeIn.data(),
                        y.data());
  ops->embeddingBackward(samples, seq, hidden, tokens.data(), ddy.data(), gte.data(), gpe.data());
  std::vector<double> ey(samples * seq * hidden);
  oracle.embeddingForward(samples, seq, hidden, tokens.data(), wte.data(), wpe.data(), ey.data());
  oracle.embeddingBackward(samples, seq, hidden, tokens.data(), dy.data(), dwte.data(),
                           dwpe.data());
  expectClose(download(y), ey, "forward");
  expectClose(download(gte), dwte, "token table gradient");
  expectClose(download(gpe), dwpe, "position table gradient");

  // Without a position table (rotary positions): the token rows alone.
  ops->embeddingForward(samples, seq, hidden, tokens.data(), dwteIn.data(), nullptr, y.data());
  ops->embeddingBackward(samples, seq, hidden, tokens.data(), ddy.data(), gte.data(), nullptr);
  oracle.embeddingForward(samples, seq, hidden, tokens.data(), wte.data(), nullptr, ey.data());
  oracle.embeddingBackward(samples, seq, hidden, tokens.data(), dy.data(), dwte.data(), nullptr);
  expectClose(download(y), ey, "forward without positions");
  expectClose(download(gte), dwte, "token table gradient without positions");
}

TEST_P(OpsConformance, CrossEntropyAndItsLoss) {
  const int64_t rows = 9, vocab = 301;
  std::vector<double> logits = random(rows * vocab, 3.0);
  std::vector<int32_t> targets(rows);
  for (int64_t r = 0; r < rows; ++r)
    targets[r] = static_cast<int32_t>((r * 37) % vocab);
  Buffer<float> dlogitsIn = upload(logits), dlogits = ops->allocate(rows * vocab);
  ops->takeLoss();
  ops->crossEntropy(rows, vocab, dlogitsIn.data(), targets.data(), 0.25f, dlogits.data());
  ops->countLoss(false); // a recomputed forward does not count again
  ops->crossEntropy(rows, vocab, dlogitsIn.data(), targets.data(), 0.25f, dlogits.data());
  ops->countLoss(true);
  const double loss = ops->takeLoss();
  std::vector<double> edlogits(rows * vocab);
  oracle.crossEntropy(rows, vocab, logits.data(), targets.data(), 0.25, edlogits.data());
  const double expected = oracle.takeLoss();
  EXPECT_NEAR(loss, expected, GetParam().tolerance * std::abs(expected));
  expectClose(download(dlogits), edlogits, "logit gradient");
  EXPECT_EQ(ops->takeLoss(), 0.0) << "takeLoss starts the sum again";

  // In place, as the head computes it (the logits' buffer becomes their gradient), and in the
  // vocabulary-parallel parts on a group of one: the same gradient and loss.
  Buffer<float> inPlace = upload(logits), parts = upload(logits);
  ops->crossEntropy(rows, vocab, inPlace.data(), targets.data(), 0.25f, inPlace.data());
  const double inPlaceLoss = ops->takeLoss();
  Buffer<float> max = ops->allocate(rows), sums = ops->allocate(rows), picked = ops->allocate(rows);
  ops->rowMax(rows, vocab, parts.data(), max.data());
  ops->crossEntropyPartials(rows, vocab, parts.data(), targets.data(), max.data(), sums.data(),
                            picked.data());
  ops->crossEntropyFromPartials(rows, vocab, parts.data(), targets.data(), max.data(), sums.data(),
                                picked.data(), 0.25f, /*countLoss=*/true, parts.data());
  const double partsLoss = ops->takeLoss();
  EXPECT_NEAR(inPlaceLoss, expected, GetParam().tolerance * std::abs(expected));
  EXPECT_NEAR(partsLoss, expected, GetParam().tolerance * std::abs(expected));
  expectClose(download(inPlace), edlogits, "logit gradient, in place");
  expectClose(download(parts), edlogits, "logit gradient, in parts in place");
}

GptShape gptShape() {
  GptShape s;
  s.blocks = 2;
  s.hidden = 32;
  s.heads = 4;
  s.ffn = 64;
  s.seq = 8;
  s.vocab = 50;
  return s;
}

/// RMSNorm, SwiGLU, rotary positions, 4 query heads on 2 kv-heads, no biases, a tied head.
GptShape llamaShape() {
  GptShape s = gptShape();
  s.kvHeads = 2;
  s.gated = s.rmsNorm = s.rotary = s.tied = true;
  s.qkvBias = s.otherBias = false;
  s.normEps = 1e-6;
  return s;
}

/// Qwen3-style: the Llama-style model with heads 12 wide (not 32 / 4) and an RMSNorm on each
/// head's queries and keys.
GptShape qwen3Shape() {
  GptShape s = llamaShape();
  s.headWidth = 12;
  s.qkNorm = true;
  return s;
}

/// DeepSeek-V3's latent attention on the Llama-style model: latents of rank 16 (queries) and 12
/// (keys and values), heads 8 + 4 wide for queries and keys and 8 for values (padded).
GptShape latentShape() {
  GptShape s = llamaShape();
  s.kvHeads = 0;
  s.qLora = 16;
  s.kvLora = 12;
  s.qkNope = 8;
  s.qkRope = 4;
  s.vHead = 8;
  return s;
}

/// Mixtral-like: the Llama-style model with 4 SwiGLU experts in its second block, each token
/// taking the top 2 renormalised, and the auxiliary loss.
GptShape mixtralShape() {
  GptShape s = llamaShape();
  s.experts = 4;
  s.topK = 2;
  s.expertFfn = 24;
  s.normalizeTopK = true;
  s.auxLossCoefficient = 0.01;
  s.denseBlocks = 1;
  return s;
}

/// DeepSeek- and Qwen-like: a sigmoid router with its bias and a shared expert.
GptShape sharedExpertShape() {
  GptShape s = mixtralShape();
  s.sigmoidRouter = true;
  s.sharedFfn = 32;
  return s;
}

struct NamedShape {
  const char *name;
  GptShape shape;
};

/// The models whose every layer kind the suite runs. A mixture of experts only where the
/// implementation computes in float32: from bf16 GEMM inputs the router's scores may choose
/// other experts than the oracle's for a token, which no tolerance covers.
std::vector<NamedShape> modelsFor(const Implementation &implementation) {
  std::vector<NamedShape> out = {{"GPT-style", gptShape()},
                                 {"Llama-style", llamaShape()},
                                 {"Qwen3-style", qwen3Shape()},
                                 {"DeepSeek-style latent attention", latentShape()}};
  if (implementation.tolerance <= 1e-4) {
    out.push_back({"Mixtral-like experts", mixtralShape()});
    out.push_back({"shared expert, sigmoid router", sharedExpertShape()});
  }
  return out;
}

/// Forward and backward of layers [first, end) of a small GPT and a small Llama-style model,
/// on the implementation and on the oracle: outputs, the loss, parameter gradients and input
/// gradients.
TEST_P(OpsConformance, EveryLayerKindForwardAndBackward) {
  for (const auto &[name, s] : modelsFor(GetParam())) {
    SCOPED_TRACE(name);
    const runtime::Plan plan = planFor(s);
    const int64_t samples = 3, width = s.seq * s.hidden;
    std::vector<int32_t> tokens(samples * s.seq), targets(samples * s.seq);
    for (size_t i = 0; i < tokens.size(); ++i) {
      tokens[i] = static_cast<int32_t>((i * 13 + 5) % s.vocab);
      targets[i] = static_cast<int32_t>((i * 29 + 1) % s.vocab);
    }
    const Tokens batch{tokens.data(), targets.data(), samples, 1.0 / (samples * s.seq)};
    for (auto [first, end] : {std::pair<int64_t, int64_t>{0, 1}, {1, 3}, {3, 4}}) {
      SCOPED_TRACE("layers [" + std::to_string(first) + ", " + std::to_string(end) + ")");
      auto chain = *LayerChain<float>::build(plan, s, first, end, *ops);
      auto reference = *LayerChain<double>::build(plan, s, first, end, oracle);
      std::vector<double> params(reference.numParams());
      reference.initialise(params.data(), 11);
      for (double &p : params) // larger than the initialisation, so every path carries signal
        p = static_cast<float>(p + 0.1 * rng.normal());
      std::vector<double> x =
          chain.hasEmbedding() ? std::vector<double>{} : random(samples * width);
      std::vector<double> dy = chain.hasHead() ? std::vector<double>{} : random(samples * width);

      Buffer<float> dparams = upload(params), dx = upload(x), ddy = upload(dy);
      Buffer<float> y = ops->allocate(chain.hasHead() ? 0 : samples * width);
      Buffer<float> grads = ops->allocate(chain.numParams());
      Buffer<float> dinput = ops->allocate(x.size());
      typename LayerChain<float>::Cache cache;
      ops->takeLoss();
      chain.forward(dparams.data(), dx.data(), batch, y.data(), cache);
      const double loss = ops->takeLoss(), aux = ops->takeAuxLoss();
      chain.backward(dparams.data(), cache, ddy.data(), grads.data(), dinput.data());

      std::vector<double> ey(y.size()), egrads(params.size(), 0.0), edx(x.size());
      typename LayerChain<double>::Cache ecache;
      reference.forward(params.data(), x.empty() ? nullptr : x.data(), batch,
                        ey.empty() ? nullptr : ey.data(), ecache);
      const double eloss = oracle.takeLoss(), eaux = oracle.takeAuxLoss();
      reference.backward(params.data(), ecache, dy.empty() ? nullptr : dy.data(), egrads.data(),
                         edx.empty() ? nullptr : edx.data());
      if (chain.hasHead()) {
        EXPECT_NEAR(loss, eloss, GetParam().tolerance * std::abs(eloss)) << "loss";
      }
      EXPECT_NEAR(aux, eaux, GetParam().tolerance * std::abs(eaux)) << "auxiliary loss";
      expectClose(download(y), ey, "output");
      expectClose(download(grads), egrads, "parameter gradients");
      expectClose(download(dinput), edx, "input gradient");
    }
  }
}

/// The split backward of every layer kind on the implementation: I of two micro-batches, W
/// in the other order, against the whole backward of each. The same kernels run on the same
/// inputs, so every implementation must give the same bits.
TEST_P(OpsConformance, SplitBackwardGivesTheBitsOfBackward) {
  std::vector<NamedShape> models = modelsFor(GetParam());
  models[0].shape.otherBias = false; // "qkv": every bias path, present and absent
  for (const auto &[name, s] : models) {
    SCOPED_TRACE(name);
    const runtime::Plan plan = planFor(s);
    const int64_t samples = 2, width = s.seq * s.hidden;
    std::vector<int32_t> tokens(2 * samples * s.seq), targets(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) {
      tokens[i] = static_cast<int32_t>((i * 13 + 5) % s.vocab);
      targets[i] = static_cast<int32_t>((i * 29 + 1) % s.vocab);
    }
    auto batchOf = [&](int64_t mb) {
      return Tokens{tokens.data() + mb * samples * s.seq, targets.data() + mb * samples * s.seq,
                    samples, 1.0 / (2 * samples * s.seq)};
    };
    for (auto [first, end] : {std::pair<int64_t, int64_t>{0, 1}, {1, 3}, {3, 4}}) {
      SCOPED_TRACE("layers [" + std::to_string(first) + ", " + std::to_string(end) + ")");
      auto chain = *LayerChain<float>::build(plan, s, first, end, *ops);
      std::vector<double> params(chain.numParams());
      LayerChain<double>::build(plan, s, first, end, oracle)->initialise(params.data(), 11);
      for (double &p : params)
        p = static_cast<float>(p + 0.1 * rng.normal());
      Buffer<float> dparams = upload(params);
      std::vector<Buffer<float>> x, dy;
      for (int64_t mb = 0; mb < 2; ++mb) {
        x.push_back(upload(chain.hasEmbedding() ? std::vector<double>{} : random(samples * width)));
        dy.push_back(upload(chain.hasHead() ? std::vector<double>{} : random(samples * width)));
      }
      Buffer<float> y = ops->allocate(chain.hasHead() ? 0 : samples * width);
      std::vector<Buffer<float>> grads, dx;
      std::vector<typename LayerChain<float>::Cache> caches(4);
      for (int64_t k = 0; k < 4; ++k) {
        grads.push_back(ops->allocate(chain.numParams()));
        dx.push_back(ops->allocate(x[0].size()));
      }
      // Whole backwards into grads[0], grads[1]; split ones into grads[2], grads[3].
      for (int64_t mb = 0; mb < 2; ++mb) {
        chain.forward(dparams.data(), x[mb].data(), batchOf(mb), y.data(), caches[mb]);
        chain.backward(dparams.data(), caches[mb], dy[mb].data(), grads[mb].data(), dx[mb].data());
      }
      for (int64_t mb = 0; mb < 2; ++mb) {
        chain.forward(dparams.data(), x[mb].data(), batchOf(mb), y.data(), caches[2 + mb]);
        chain.backwardInput(dparams.data(), caches[2 + mb], dy[mb].data(), dx[2 + mb].data());
      }
      chain.backwardWeight(caches[3], grads[3].data());
      chain.backwardWeight(caches[2], grads[2].data());
      ops->takeLoss();
      for (int64_t mb = 0; mb < 2; ++mb) {
        EXPECT_EQ(download(grads[2 + mb]), download(grads[mb])) << "parameter gradients " << mb;
        EXPECT_EQ(download(dx[2 + mb]), download(dx[mb])) << "input gradient " << mb;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Implementations, OpsConformance,
                         ::testing::ValuesIn(implementationsUnderTest()),
                         [](const ::testing::TestParamInfo<Implementation> &info) {
                           return info.param.name;
                         });

} // namespace
