//===- ModelTest.cpp - the GPT model's gradients, data and optimizer ------===//
//
// Every parameter gradient and the input gradient of each layer kind and variant (GPT-style;
// RMSNorm, SwiGLU, rotary positions, grouped-query attention, tied head, no biases, and all of
// them at once as in Llama), in double precision, against central finite differences, for the
// whole backward and the split one (input gradient, later weight gradient); the split backward
// against the whole one bit for bit, in float and double, with weight gradients in another
// order than input gradients, and what it keeps in between; the rotary convention and
// grouped-query attention against their definitions; the float model against the double one;
// per-sample processing independent of the batch cut; data and initialisation that depend on
// their keys only; Adam against its formula.
//
//===----------------------------------------------------------------------===//

#include "runtime/data/Data.h"
#include "runtime/model/Gpt.h"
#include "runtime/model/Optimizer.h"
#include "runtime/model/Random.h"
#include "tests/unit/runtime/GradientCheck.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>

using namespace conduit;
using namespace conduit::model;

namespace {

/// A shape with every Llama-family feature: RMSNorm, SwiGLU, rotary positions, 4 query heads
/// sharing 2 key/value heads, no biases, a tied head; norm epsilon and rotary base other than
/// the defaults, so that passing them on shows.
GptShape llamaShape() {
  GptShape s = tinyShape(false, false);
  s.hidden = 16;
  s.heads = 4;
  s.kvHeads = 2;
  s.gated = s.rmsNorm = s.rotary = s.tied = true;
  s.normEps = 1e-3;
  s.ropeTheta = 100;
  return s;
}

/// Qwen3's attention on the Llama shape: heads 6 wide (not hidden / heads = 4) and an RMSNorm
/// on each head's queries and keys.
GptShape qwen3Shape() {
  GptShape s = llamaShape();
  s.headWidth = 6;
  s.qkNorm = true;
  return s;
}

/// DeepSeek-V3's attention on the Llama shape (multi-head): a query latent of rank 6, a
/// key/value latent of rank 5, heads 4 + 2 wide for queries and keys (the rotary part 2) and 3
/// for values, so that the values are padded in the kernel.
GptShape latentShape() { return withLatentAttention(llamaShape()); }

/// The tiny shape with one feature changed.
GptShape tinyWith(const std::function<void(GptShape &)> &change) {
  GptShape s = tinyShape();
  change(s);
  return s;
}

/// Every layer kind and bias variant, and the whole model: layers [first, end) of a shape.
struct LayerRange {
  std::string name;
  GptShape shape;
  int64_t first, end;
};
std::vector<LayerRange> splitCases() {
  const GptShape rms = tinyWith([](GptShape &s) { s.rmsNorm = true; });
  const GptShape swiglu = tinyWith([](GptShape &s) { s.gated = true; });
  const GptShape rotary = tinyWith([](GptShape &s) { s.rotary = true; });
  const GptShape gqa = tinyWith([](GptShape &s) { s.kvHeads = 1; });
  const GptShape tied = tinyWith([](GptShape &s) { s.tied = true; });
  return {{"embedding", tinyShape(), 0, 1},
          {"block", tinyShape(), 1, 2},
          {"block with qkv bias only", tinyShape(true, false), 1, 2},
          {"block without biases", tinyShape(false, false), 1, 2},
          {"head", tinyShape(), 3, 4},
          {"whole model", tinyShape(), 0, 4},
          {"RMSNorm block", rms, 1, 2},
          {"RMSNorm head", rms, 3, 4},
          {"SwiGLU block", swiglu, 1, 2},
          {"rotary embedding", rotary, 0, 1},
          {"rotary block", rotary, 1, 2},
          {"grouped-query block", gqa, 1, 2},
          {"tied head", tied, 3, 4},
          {"Llama block", llamaShape(), 1, 2},
          {"Llama head", llamaShape(), 3, 4},
          {"Llama whole model", llamaShape(), 0, 4},
          {"Qwen3 block", qwen3Shape(), 1, 2},
          {"Qwen3 whole model", qwen3Shape(), 0, 4},
          {"latent-attention block", latentShape(), 1, 2},
          {"latent-attention whole model", latentShape(), 0, 4}};
}

TEST(Model, EmbeddingGradients) { checkGradients(tinyShape(), 0, 1); }
TEST(Model, BlockGradients) { checkGradients(tinyShape(), 1, 2); }
TEST(Model, BlockGradientsWithoutBiases) { checkGradients(tinyShape(false, false), 1, 2); }
TEST(Model, BlockGradientsWithQkvBiasOnly) { checkGradients(tinyShape(true, false), 1, 2); }
TEST(Model, HeadGradients) { checkGradients(tinyShape(), 3, 4); }
TEST(Model, WholeModelGradients) { checkGradients(tinyShape(), 0, 4); }

TEST(Model, RmsNormGradients) {
  const GptShape s = tinyWith([](GptShape &s) { s.rmsNorm = true; });
  checkGradients(s, 1, 2);
  checkGradients(s, 3, 4);
}
TEST(Model, SwigluGradients) {
  checkGradients(tinyWith([](GptShape &s) { s.gated = true; }), 1, 2);
}
TEST(Model, RotaryGradients) {
  const GptShape s = tinyWith([](GptShape &s) {
    s.rotary = true;
    s.ropeTheta = 50; // large angles at these few positions
  });
  checkGradients(s, 0, 1);
  checkGradients(s, 1, 2);
}
TEST(Model, GroupedQueryAttentionGradients) {
  // 4 query heads on 2 and on 1 key/value heads.
  for (int64_t kv : {2, 1}) {
    SCOPED_TRACE(kv);
    checkGradients(tinyWith([&](GptShape &s) {
                     s.hidden = 16;
                     s.heads = 4;
                     s.kvHeads = kv;
                   }),
                   1, 2);
  }
}
TEST(Model, TiedHeadGradients) {
  checkGradients(tinyWith([](GptShape &s) { s.tied = true; }), 3, 4);
}
TEST(Model, LlamaGradients) {
  checkGradients(llamaShape(), 1, 2);
  checkGradients(llamaShape(), 3, 4);
  checkGradients(llamaShape(), 0, 4);
}

TEST(Model, Qwen3AttentionGradients) {
  checkGradients(qwen3Shape(), 1, 2);
  checkGradients(qwen3Shape(), 0, 4);
  // Each feature alone: heads of their own width (wider and narrower than hidden / heads), and
  // q/k norms on heads of the usual width, without rotary positions too.
  for (int64_t width : {6, 2})
    checkGradients(tinyWith([&](GptShape &s) { s.headWidth = width; }), 1, 2);
  checkGradients(tinyWith([](GptShape &s) { s.qkNorm = true; }), 1, 2);
  checkGradients(tinyWith([](GptShape &s) {
                   s.qkNorm = s.rotary = true;
                   s.kvHeads = 1;
                 }),
                 1, 2);
}

TEST(Model, LatentAttentionGradients) {
  checkGradients(latentShape(), 1, 2);
  checkGradients(latentShape(), 0, 4);
  // Each variant alone: queries projected directly (no query latent); values as wide as the
  // queries and keys (no padding); no rotary part; learned positions (the rope part as
  // projected); GPT-2's biases and LayerNorm around it (the output projection's bias).
  for (auto change : std::vector<std::function<void(GptShape &)>>{
           [](GptShape &s) { s.qLora = 0; }, [](GptShape &s) { s.vHead = 6; },
           [](GptShape &s) {
             s.qkRope = 0;
             s.qkNope = 5;
           },
           [](GptShape &s) { s.rotary = false; },
           [](GptShape &s) {
             s.qkvBias = s.otherBias = true;
             s.rmsNorm = s.gated = false;
           }}) {
    GptShape s = latentShape();
    change(s);
    checkGradients(s, 1, 2);
  }
}

namespace {
/// The shape's rotary positions extended as `type` with the given magnitude and (yarn)
/// mscale_all_dim, over an original context a third of the sequence.
GptShape extended(GptShape s, runtime::RopeType type, double magnitude = 1,
                  double mscaleAllDim = 0) {
  s.ropeScaling.type = type;
  s.ropeScaling.factor = 3;
  s.ropeScaling.originalPositions = std::max<int64_t>(1, s.seq / 3);
  s.ropeScaling.attentionFactor = magnitude;
  s.ropeScaling.mscaleAllDim = mscaleAllDim;
  return s;
}
} // namespace

TEST(Model, RotaryExtensionGradients) {
  checkGradients(extended(llamaShape(), runtime::RopeType::Llama3), 1, 2);
  checkGradients(extended(llamaShape(), runtime::RopeType::Yarn, 1.2), 1, 2);
  checkGradients(extended(latentShape(), runtime::RopeType::Yarn, 1.2, 0.7), 1, 2);
  GptShape direct = extended(latentShape(), runtime::RopeType::Yarn, 1, 1);
  direct.qLora = 0;
  checkGradients(direct, 1, 2);
}

// DeepSeek's softmax factor (yarn's mscale_all_dim on latent attention) scales every score:
// the block computes what it computes without the factor with Wuq (or Wq) times the factor.
TEST(Model, LatentSoftmaxFactorScalesTheQueries) {
  for (int64_t qLora : {6, 0}) {
    SCOPED_TRACE(qLora);
    GptShape with = extended(latentShape(), runtime::RopeType::Yarn, 1, 1);
    with.qLora = qLora;
    GptShape without = with;
    without.ropeScaling.mscaleAllDim = 0;
    const double factor = with.ropeScaling.latentSoftmaxFactor();
    ASSERT_GT(factor, 1.01);
    auto block = makeLayer<double>(runtime::LayerKind::Block, with);
    std::vector<double> params(block->numParams());
    block->initialise(params.data(), 7, 1);
    // The block's parameters: norm1 (h), then Wdq [h × rq], its gain, Wuq [rq × H(dn + dr)];
    // without a query latent, Wq [h × H(dn + dr)].
    const int64_t h = with.hidden, q = with.heads * with.qkHead();
    const int64_t first = qLora > 0 ? h + h * qLora + qLora : h,
                  count = (qLora > 0 ? qLora : h) * q;
    std::vector<double> scaled = params;
    for (int64_t i = first; i < first + count; ++i)
      scaled[i] *= factor;
    CpuOps<double> ops;
    std::vector<double> x(with.seq * h);
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = std::cos(0.3 * static_cast<double>(i));
    Tokens batch;
    batch.samples = 1;
    auto output = [&](const GptShape &s, const std::vector<double> &p) {
      auto layer = makeLayer<double>(runtime::LayerKind::Block, s);
      LayerCache<double> cache;
      std::vector<double> y(x.size());
      layer->forward(ops, p.data(), x.data(), batch, y.data(), cache);
      return y;
    };
    const std::vector<double> a = output(with, params), b = output(without, scaled),
                              unscaled = output(without, params);
    double apart = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_NEAR(a[i], b[i], 1e-12) << i;
      apart = std::max(apart, std::abs(a[i] - unscaled[i]));
    }
    EXPECT_GT(apart, 1e-8) << "the factor changed nothing";
  }
}

// Latent attention's rotary key is one for every head, its nope keys and values each head's
// own: with every value but head 1's zeroed, head 1 is the attention's only contribution, and
// scaling the shared key's columns of Wdkv moves the block's output where scaling head 2's
// first nope key column of Wukv leaves it exactly as it was.
TEST(Model, LatentAttentionSharesItsRotaryKeyOverTheHeads) {
  const GptShape s = latentShape();
  const int64_t h = s.hidden, heads = s.heads, dn = s.qkNope, dv = s.vHead, kvl = s.kvLora;
  auto block = makeLayer<double>(runtime::LayerKind::Block, s);
  std::vector<double> params(block->numParams());
  block->initialise(params.data(), 7, 1);
  CpuOps<double> ops;
  Random random({3, 4});
  std::vector<double> x(s.seq * h);
  for (double &v : x)
    v = random.normal();
  Tokens batch;
  batch.samples = 1;
  auto output = [&](const std::vector<double> &p) {
    LayerCache<double> cache;
    std::vector<double> y(x.size());
    block->forward(ops, p.data(), x.data(), batch, y.data(), cache);
    return y;
  };
  // The block's parameters: norm1 (h), then the attention's Wdq, gain, Wuq, Wdkv, gain, Wukv.
  const int64_t wDkv = h + h * s.qLora + s.qLora + s.qLora * heads * s.qkHead();
  const int64_t wUkv = wDkv + h * (kvl + s.qkRope) + kvl;
  auto distance = [&](const std::vector<double> &p, const std::vector<double> &from) {
    const std::vector<double> y = output(p);
    double most = 0;
    for (size_t i = 0; i < y.size(); ++i)
      most = std::max(most, std::abs(y[i] - from[i]));
    return most;
  };
  std::vector<double> oneHead = params;
  for (int64_t r = 0; r < kvl; ++r)
    for (int64_t hd = 0; hd < heads; ++hd)
      if (hd != 1)
        for (int64_t c = 0; c < dv; ++c)
          oneHead[wUkv + r * heads * (dn + dv) + hd * (dn + dv) + dn + c] = 0;
  const std::vector<double> single = output(oneHead);
  std::vector<double> sharedKey = oneHead, otherNope = oneHead;
  for (int64_t r = 0; r < h; ++r)
    sharedKey[wDkv + r * (kvl + s.qkRope) + kvl] *= 3;
  for (int64_t r = 0; r < kvl; ++r)
    otherNope[wUkv + r * heads * (dn + dv) + 2 * (dn + dv)] *= 3;
  EXPECT_GT(distance(oneHead, output(params)), 1e-6) << "the other heads contributed";
  EXPECT_GT(distance(sharedKey, single), 1e-9) << "head 1 reads the shared rotary key";
  EXPECT_EQ(distance(otherNope, single), 0) << "head 1 does not read head 2's keys";
}

// Selective checkpointing of latent attention's up projections (mla_up_proj) computes q, k and
// v again from the kept latents: the same bits as keeping them, beside the norms recomputed and
// with or without the attention core, and the forward keeps each block's assembled heads less.
TEST(Model, LatentHeadsRecomputedGiveTheBitsOfKeptOnes) {
  const GptShape s = latentShape();
  const int64_t samples = 2, rows = samples * s.seq;
  for (uint32_t core : {0u, uint32_t(runtime::kRecomputeCoreAttention)}) {
    SCOPED_TRACE(core);
    std::vector<double> dparams[2];
    double loss[2];
    int64_t kept[2];
    for (int recompute : {0, 1}) {
      runtime::Plan plan = planFor(s);
      plan.config.recomputeModules = core | runtime::kRecomputeLayerNorm |
                                     (recompute ? runtime::kRecomputeLatentUpProjection : 0u);
      CpuOps<double> ops;
      auto chain = *LayerChain<double>::build(plan, s, 0, 4, ops, Checkpointing::Selective);
      std::vector<double> params(chain.numParams());
      chain.initialise(params.data(), 5);
      Batch batch = makeBatch(s, samples, 1.0 / rows);
      typename LayerChain<double>::Cache cache;
      chain.forward(params.data(), nullptr, batch.view, nullptr, cache);
      kept[recompute] = 0;
      for (const LayerCache<double> &layer : cache.layers)
        kept[recompute] += layer.savedElements();
      dparams[recompute].assign(params.size(), 0.0);
      chain.backward(params.data(), cache, nullptr, dparams[recompute].data(), nullptr);
      loss[recompute] = ops.takeLoss();
    }
    EXPECT_EQ(loss[1], loss[0]);
    EXPECT_EQ(dparams[1], dparams[0]);
    // Two blocks' q, k and v, each head dn + dr wide.
    EXPECT_EQ(kept[0] - kept[1], 2 * rows * 3 * s.heads * s.qkHead());
  }
}

// The q/k norms make the attention blind to the scale of each head's query and key: a block's
// output does not move when a query head's columns of Wqkv, or a key head's, are multiplied by
// a constant (up to the norm's epsilon, tiny here). Without the norms it does.
TEST(Model, QkNormsNormaliseEachHeadsQueriesAndKeys) {
  for (bool qkNorm : {true, false}) {
    SCOPED_TRACE(qkNorm);
    GptShape s = qwen3Shape();
    s.qkNorm = qkNorm;
    s.normEps = 1e-12;
    const runtime::Plan plan = planFor(s);
    CpuOps<double> ops;
    LayerChain<double> chain = *LayerChain<double>::build(plan, s, 1, 2, ops);
    std::vector<double> params(chain.numParams());
    chain.initialise(params.data(), 5);
    Random random({4});
    for (double &p : params) // larger than the initialisation: scores far from uniform
      p += 0.5 * random.normal();
    const int64_t samples = 1, width = s.seq * s.hidden;
    std::vector<double> x(samples * width);
    for (double &v : x)
      v = random.normal();
    const Batch batch = makeBatch(s, samples);
    auto output = [&](const std::vector<double> &p) {
      typename LayerChain<double>::Cache cache;
      std::vector<double> y(samples * width);
      chain.forward(p.data(), x.data(), batch.view, y.data(), cache);
      return y;
    };
    // Block parameters: norm1's gain, then Wqkv [h × (q + 2 kvd)]. Scale query head 1 and key
    // head 0.
    const int64_t d = s.headDim(), qkv = s.qkvWidth(), first = s.hidden;
    std::vector<double> scaled = params;
    for (int64_t row = 0; row < s.hidden; ++row)
      for (int64_t c = 0; c < d; ++c) {
        scaled[first + row * qkv + d + c] *= 7;
        scaled[first + row * qkv + s.qWidth() + c] *= 0.3;
      }
    const std::vector<double> before = output(params), after = output(scaled);
    double largest = 0;
    for (size_t i = 0; i < before.size(); ++i)
      largest = std::max(largest, std::abs(after[i] - before[i]));
    if (qkNorm)
      EXPECT_LT(largest, 1e-9);
    else
      EXPECT_GT(largest, 1e-3);
  }
}

TEST(Model, SplitBackwardGradients) {
  for (const auto &[name, shape, first, end] : splitCases()) {
    SCOPED_TRACE(name);
    checkGradients(shape, first, end, /*split=*/true);
  }
}

// The convention Hugging Face's Llama uses (rotate_half): dimensions i and i + d/2 pair up,
// with angle t · theta^(−2i/d); v is not rotated, and the backward rotates back.
TEST(Model, RotaryFollowsHuggingFaceRotateHalf) {
  const int64_t seq = 3, heads = 2, kvHeads = 1, d = 4, width = (heads + 2 * kvHeads) * d;
  const double theta = 10000;
  std::vector<double> qkv(seq * width);
  for (size_t i = 0; i < qkv.size(); ++i)
    qkv[i] = 1.0 + static_cast<double>(i % width);
  std::vector<double> rotated = qkv;
  CpuOps<double> ops;
  ops.rotaryForward(1, seq, heads, kvHeads, d, {theta, {}}, rotated.data());
  for (int64_t t = 0; t < seq; ++t)
    for (int64_t head = 0; head < heads + 2 * kvHeads; ++head) {
      const double *x = qkv.data() + t * width + head * d;
      const double *y = rotated.data() + t * width + head * d;
      for (int64_t i = 0; i < d / 2; ++i) {
        const bool isV = head == heads + kvHeads;
        const double angle = isV ? 0.0 : t * std::pow(theta, -2.0 * i / d);
        EXPECT_DOUBLE_EQ(y[i], x[i] * std::cos(angle) - x[i + d / 2] * std::sin(angle))
            << "t " << t << " head " << head << " i " << i;
        EXPECT_DOUBLE_EQ(y[i + d / 2], x[i + d / 2] * std::cos(angle) + x[i] * std::sin(angle))
            << "t " << t << " head " << head << " i " << i;
      }
    }
  ops.rotaryBackward(1, seq, heads, kvHeads, d, {theta, {}}, rotated.data());
  for (size_t i = 0; i < qkv.size(); ++i)
    EXPECT_NEAR(rotated[i], qkv[i], 1e-12) << i;
}

// Query head i reads key/value head i / (heads / kvHeads): grouped-query attention is
// multi-head attention with each kv-head repeated for its group, and a kv-head's gradient is
// the sum of its copies'.
TEST(Model, GroupedQueryAttentionIsMultiHeadWithRepeatedKvHeads) {
  const int64_t samples = 2, seq = 4, heads = 6, kvHeads = 2, d = 3, group = heads / kvHeads;
  const int64_t width = heads * d, kvWidth = kvHeads * d, grouped = width + 2 * kvWidth;
  Random random({31});
  std::vector<double> qkv(samples * seq * grouped), dout(samples * seq * width);
  for (double &x : qkv)
    x = random.normal();
  for (double &x : dout)
    x = random.normal();
  std::vector<double> repeated(samples * seq * 3 * width);
  for (int64_t r = 0; r < samples * seq; ++r)
    for (int64_t i = 0; i < heads; ++i)
      for (int64_t c = 0; c < d; ++c) {
        const double *row = qkv.data() + r * grouped;
        double *out = repeated.data() + r * 3 * width;
        out[i * d + c] = row[i * d + c];
        out[width + i * d + c] = row[width + (i / group) * d + c];
        out[2 * width + i * d + c] = row[width + kvWidth + (i / group) * d + c];
      }
  CpuOps<double> ops;
  std::vector<double> probs(samples * heads * seq * seq), out(samples * seq * width),
      probsMha = probs, outMha = out, dqkv(qkv.size()), dqkvMha(repeated.size());
  ops.attentionForward(samples, seq, heads, kvHeads, d, qkv.data(), probs.data(), out.data());
  ops.attentionForward(samples, seq, heads, heads, d, repeated.data(), probsMha.data(),
                       outMha.data());
  EXPECT_EQ(probs, probsMha);
  EXPECT_EQ(out, outMha);
  ops.attentionBackward(samples, seq, heads, kvHeads, d, qkv.data(), probs.data(), dout.data(),
                        dqkv.data());
  ops.attentionBackward(samples, seq, heads, heads, d, repeated.data(), probsMha.data(),
                        dout.data(), dqkvMha.data());
  for (int64_t r = 0; r < samples * seq; ++r) {
    const double *g = dqkv.data() + r * grouped, *m = dqkvMha.data() + r * 3 * width;
    for (int64_t c = 0; c < width; ++c)
      EXPECT_EQ(g[c], m[c]) << "dq, row " << r;
    for (int64_t j = 0; j < kvHeads; ++j)
      for (int64_t c = 0; c < d; ++c) {
        double dk = 0, dv = 0;
        for (int64_t i = j * group; i < (j + 1) * group; ++i) {
          dk += m[width + i * d + c];
          dv += m[2 * width + i * d + c];
        }
        EXPECT_NEAR(g[width + j * d + c], dk, 1e-12) << "dk, row " << r;
        EXPECT_NEAR(g[width + kvWidth + j * d + c], dv, 1e-12) << "dv, row " << r;
      }
  }
}

// A tied head holds the LM head in the token table's layout [vocab × h] and starts from the
// embedding's token table, value for value; a rotary embedding has no position table.
TEST(Model, TiedHeadStartsFromTheTokenTable) {
  const GptShape s = llamaShape();
  runtime::Plan plan = planFor(s);
  CpuOps<float> ops;
  auto chain = *LayerChain<float>::build(plan, s, 0, 4, ops);
  std::vector<float> params(chain.numParams());
  chain.initialise(params.data(), 77);
  const int64_t table = s.vocab * s.hidden;
  ASSERT_EQ(makeLayer<float>(runtime::LayerKind::Embedding, s)->numParams(), table);
  const int64_t head = chain.numParams() - table;
  EXPECT_EQ(std::vector<float>(params.begin(), params.begin() + table),
            std::vector<float>(params.begin() + head, params.end()));
  // The head on its own (a last pipeline stage) starts from the same values.
  auto last = *LayerChain<float>::build(plan, s, 3, 4, ops);
  std::vector<float> alone(last.numParams());
  last.initialise(alone.data(), 77);
  EXPECT_EQ(std::vector<float>(alone.end() - table, alone.end()),
            std::vector<float>(params.begin(), params.begin() + table));
  EXPECT_EQ(std::vector<float>(alone.begin(), alone.end() - table),
            std::vector<float>(s.hidden, 1.0f))
      << "RMSNorm gain only";
}

TEST(Model, FloatModelFollowsTheDoubleOne) {
  for (const GptShape &s : {tinyShape(), llamaShape()}) {
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

//===----------------------------------------------------------------------===//
// Split backward: backwardInput then backwardWeight give the bits of backward
//===----------------------------------------------------------------------===//

/// Micro-batches of random inputs and output gradients for layers [first, end) of a shape, on
/// a chain that keeps what `checkpointing` says.
template <typename T> struct Microbatches {
  Microbatches(const LayerRange &range, int64_t count, int64_t samples,
               Checkpointing checkpointing = Checkpointing::None)
      : range(range) {
    const GptShape &s = range.shape;
    runtime::Plan plan = planFor(s);
    chain = std::make_unique<LayerChain<T>>(
        *LayerChain<T>::build(plan, s, range.first, range.end, ops, checkpointing));
    params.resize(chain->numParams());
    chain->initialise(params.data(), 42);
    Random random({17});
    for (T &p : params) // larger than the initialisation, so that every path carries signal
      p += static_cast<T>(0.3 * random.normal());
    width = samples * s.seq * s.hidden;
    for (int64_t mb = 0; mb < count; ++mb) {
      Batch &b = batches.emplace_back();
      SyntheticData(3, s.vocab, s.seq).batch(1, mb * samples, samples, b.tokens, b.targets);
      b.view = {b.tokens.data(), b.targets.data(), samples, 1.0 / (count * samples * s.seq)};
      std::vector<T> &x = inputs.emplace_back(), &dy = outputGrads.emplace_back();
      for (int64_t i = 0; !chain->hasEmbedding() && i < width; ++i)
        x.push_back(static_cast<T>(random.normal()));
      for (int64_t i = 0; !chain->hasHead() && i < width; ++i)
        dy.push_back(static_cast<T>(random.normal()));
    }
  }
  /// The vector's data, or null when empty (no input, no output gradient).
  static T *dataOf(std::vector<T> &v) { return v.empty() ? nullptr : v.data(); }

  LayerRange range;
  CpuOps<T> ops;
  std::unique_ptr<LayerChain<T>> chain;
  std::vector<T> params;
  int64_t width = 0;
  std::vector<Batch> batches;
  std::vector<std::vector<T>> inputs, outputGrads;
};

/// What the backward of each micro-batch produced.
template <typename Grad, typename T> struct Gradients {
  std::vector<double> losses;
  std::vector<std::vector<Grad>> params;
  std::vector<std::vector<T>> inputs;
};

template <typename T> class SplitBackward : public ::testing::Test {};
using ElementTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(SplitBackward, ElementTypes);

// Forwards, input gradients and weight gradients interleaved as a zero-bubble schedule runs
// them (F0 F1 I0 F2 I1 W1 I2 W2 W0), against backward micro-batch by micro-batch. The input
// and output gradient buffers are reused, as receive slots are, and overwritten after each
// use: what W needs must have been kept.
TYPED_TEST(SplitBackward, LayersGiveTheBitsOfBackwardInAnyOrder) {
  using T = TypeParam;
  for (const LayerRange &range : splitCases()) {
    SCOPED_TRACE(range.name);
    Microbatches<T> m(range, 3, 2);
    LayerChain<T> &chain = *m.chain;
    auto fresh = [&]() {
      Gradients<T, T> g;
      g.losses.assign(3, 0);
      g.params.assign(3, std::vector<T>(m.params.size(), T(0)));
      g.inputs.assign(3, std::vector<T>(m.inputs[0].size(), T(0)));
      return g;
    };
    std::vector<T> y(chain.hasHead() ? 0 : m.width);
    Gradients<T, T> whole = fresh();
    for (int64_t mb = 0; mb < 3; ++mb) {
      typename LayerChain<T>::Cache cache;
      chain.forward(m.params.data(), m.dataOf(m.inputs[mb]), m.batches[mb].view, m.dataOf(y),
                    cache);
      whole.losses[mb] = m.ops.takeLoss();
      chain.backward(m.params.data(), cache, m.dataOf(m.outputGrads[mb]), whole.params[mb].data(),
                     m.dataOf(whole.inputs[mb]));
    }

    Gradients<T, T> split = fresh();
    std::vector<typename LayerChain<T>::Cache> caches(3);
    std::vector<T> x(m.inputs[0].size()), dy(m.outputGrads[0].size());
    auto forward = [&](int64_t mb) {
      x = m.inputs[mb];
      chain.forward(m.params.data(), m.dataOf(x), m.batches[mb].view, m.dataOf(y), caches[mb]);
      split.losses[mb] = m.ops.takeLoss();
      std::fill(x.begin(), x.end(), T(3));
    };
    auto input = [&](int64_t mb) {
      dy = m.outputGrads[mb];
      chain.backwardInput(m.params.data(), caches[mb], m.dataOf(dy), m.dataOf(split.inputs[mb]));
      std::fill(dy.begin(), dy.end(), T(5));
    };
    auto weight = [&](int64_t mb) { chain.backwardWeight(caches[mb], split.params[mb].data()); };
    forward(0);
    forward(1);
    input(0);
    forward(2);
    input(1);
    weight(1);
    input(2);
    weight(2);
    weight(0);
    EXPECT_EQ(split.losses, whole.losses);
    EXPECT_EQ(split.params, whole.params);
    EXPECT_EQ(split.inputs, whole.inputs);
    for (const auto &cache : caches)
      EXPECT_TRUE(cache.layers.empty()) << "W releases the caches";
  }
}

// A recomputing chain (full checkpointing: every layer again from its kept input; blocks: the
// blocks so, the embedding and the head kept; selective: each block's attention probabilities
// again) computes the bits of the chain that keeps everything, in a whole backward and in I
// and W, and counts the loss once.
TYPED_TEST(SplitBackward, RecomputationGivesTheBitsOfTheUninterruptedForward) {
  using T = TypeParam;
  for (const LayerRange &range : splitCases())
    for (Checkpointing mode :
         {Checkpointing::Full, Checkpointing::Blocks, Checkpointing::Selective}) {
      SCOPED_TRACE(range.name + " checkpointing " + std::to_string(static_cast<int>(mode)));
      Microbatches<T> kept(range, 2, 2), recomputed(range, 2, 2, mode);
      ASSERT_EQ(kept.params, recomputed.params);
      auto run = [](Microbatches<T> &m, int64_t mb, bool split) {
        Gradients<T, T> g;
        g.params.assign(1, std::vector<T>(m.params.size(), T(0)));
        g.inputs.assign(1, std::vector<T>(m.inputs[mb].size(), T(0)));
        std::vector<T> y(m.chain->hasHead() ? 0 : m.width);
        typename LayerChain<T>::Cache cache;
        m.chain->forward(m.params.data(), m.dataOf(m.inputs[mb]), m.batches[mb].view, m.dataOf(y),
                         cache);
        g.losses.push_back(m.ops.takeLoss());
        if (split) {
          m.chain->backwardInput(m.params.data(), cache, m.dataOf(m.outputGrads[mb]),
                                 m.dataOf(g.inputs[0]));
          m.chain->backwardWeight(cache, g.params[0].data());
        } else {
          m.chain->backward(m.params.data(), cache, m.dataOf(m.outputGrads[mb]), g.params[0].data(),
                            m.dataOf(g.inputs[0]));
        }
        g.losses.push_back(m.ops.takeLoss()); // none: the recomputed head does not count it
        return g;
      };
      for (int64_t mb = 0; mb < 2; ++mb) {
        const bool split = mb == 1;
        Gradients<T, T> a = run(kept, mb, split), b = run(recomputed, mb, split);
        EXPECT_EQ(b.losses, a.losses);
        EXPECT_EQ(b.losses[1], 0.0);
        EXPECT_EQ(b.params, a.params);
        EXPECT_EQ(b.inputs, a.inputs);
      }
    }
}

// The per-sample form the CPU backend and the reference run: each micro-batch's weight
// gradients in double accumulators of their own, W in another order than I.
TYPED_TEST(SplitBackward, SamplesGiveTheBitsOfBackwardSamples) {
  using T = TypeParam;
  for (const LayerRange &range : splitCases()) {
    SCOPED_TRACE(range.name);
    Microbatches<T> m(range, 3, 2);
    LayerChain<T> &chain = *m.chain;
    std::vector<T> y(chain.hasHead() ? 0 : m.width);
    auto fresh = [&]() {
      Gradients<double, T> g;
      g.params.assign(3, std::vector<double>(m.params.size(), 0.0));
      g.inputs.assign(3, std::vector<T>(m.inputs[0].size(), T(0)));
      return g;
    };
    std::vector<std::vector<typename LayerChain<T>::Cache>> caches(3);
    auto forward = [&](int64_t mb) {
      chain.forwardSamples(m.params.data(), m.dataOf(m.inputs[mb]), m.batches[mb].view, m.dataOf(y),
                           caches[mb]);
    };
    Gradients<double, T> whole = fresh(), split = fresh();
    for (int64_t mb = 0; mb < 3; ++mb) {
      forward(mb);
      chain.backwardSamples(m.params.data(), caches[mb], m.dataOf(m.outputGrads[mb]),
                            whole.params[mb].data(), m.dataOf(whole.inputs[mb]));
    }
    for (int64_t mb = 0; mb < 3; ++mb) {
      forward(mb);
      chain.backwardInputSamples(m.params.data(), caches[mb], m.dataOf(m.outputGrads[mb]),
                                 m.dataOf(split.inputs[mb]));
    }
    for (int64_t mb : {2, 0, 1})
      chain.backwardWeightSamples(caches[mb], split.params[mb].data());
    EXPECT_EQ(split.params, whole.params);
    EXPECT_EQ(split.inputs, whole.inputs);
  }
}

// As the CPU backend trains: every micro-batch's weight gradients added to the same double
// accumulators, W in the reverse order of I, against backwardSamples in order. Sums of a few
// float contributions in double are exact in practice, so the order does not show.
TEST(Model, SplitBackwardSumsDoNotDependOnTheOrderOfW) {
  Microbatches<float> m({"whole model", tinyShape(), 0, 4}, 4, 2);
  LayerChain<float> &chain = *m.chain;
  std::vector<double> whole(m.params.size(), 0.0), split(m.params.size(), 0.0);
  std::vector<std::vector<LayerChain<float>::Cache>> caches(4);
  for (int64_t mb = 0; mb < 4; ++mb) {
    chain.forwardSamples(m.params.data(), nullptr, m.batches[mb].view, nullptr, caches[mb]);
    chain.backwardSamples(m.params.data(), caches[mb], nullptr, whole.data(), nullptr);
  }
  for (int64_t mb = 0; mb < 4; ++mb) {
    chain.forwardSamples(m.params.data(), nullptr, m.batches[mb].view, nullptr, caches[mb]);
    chain.backwardInputSamples(m.params.data(), caches[mb], nullptr, nullptr);
  }
  for (int64_t mb = 4; mb-- > 0;)
    chain.backwardWeightSamples(caches[mb], split.data());
  EXPECT_EQ(split, whole);
}

// Between I and W a block keeps its forward cache less the attention's and the activation's
// inputs, and the output gradients of its weight GEMMs and norms; the chain keeps no layer
// inputs. W releases everything.
TEST(Model, SplitBackwardKeepsOnlyWhatWeightGradientsNeed) {
  for (const GptShape &s : {tinyShape(), llamaShape()}) {
    Microbatches<float> m({"blocks", s, 1, 3}, 1, 2);
    LayerChain<float> &chain = *m.chain;
    std::vector<float> y(m.width);
    LayerChain<float>::Cache cache;
    chain.forward(m.params.data(), m.inputs[0].data(), m.batches[0].view, y.data(), cache);
    const int64_t rows = 2 * s.seq, h = s.hidden;
    std::vector<int64_t> saved;
    for (const LayerCache<float> &layer : cache.layers) {
      saved.push_back(layer.savedElements());
      EXPECT_EQ(layer.stashedElements(), 0);
    }
    std::vector<float> dx(m.width);
    chain.backwardInput(m.params.data(), cache, m.outputGrads[0].data(), dx.data());
    for (size_t k = 0; k < cache.layers.size(); ++k) {
      // Released: qkv [rows × (h + 2 kvd)], the probabilities [2 × heads × seq × seq], the
      // MLP's first projection [rows × f or 2f].
      EXPECT_EQ(cache.layers[k].savedElements(),
                saved[k] - rows * s.qkvWidth() - 2 * s.heads * s.seq * s.seq - rows * s.upWidth());
      for (const LayerCache<float> &part : cache.layers[k].parts)
        EXPECT_TRUE(part.inputOnly.empty());
      // Stashed: dy, du, dh2, dx2, dqkv, dh1.
      EXPECT_EQ(cache.layers[k].stashedElements(), rows * (4 * h + s.upWidth() + s.qkvWidth()));
    }
    std::vector<float> grads(m.params.size());
    chain.backwardWeight(cache, grads.data());
    EXPECT_TRUE(cache.layers.empty());
  }
}

// The bound the memory checks use covers what a forward keeps: every layer's cache (each layer
// keeps its own input; the chain keeps none).
TEST(Model, ActivationElementsBoundWhatTheForwardKeeps) {
  for (const GptShape &s : {tinyShape(), llamaShape(), latentShape()}) {
    const int64_t samples = 3;
    Microbatches<float> m({"blocks and head", s, 1, 4}, 1, samples);
    LayerChain<float>::Cache cache;
    m.chain->forward(m.params.data(), m.inputs[0].data(), m.batches[0].view, nullptr, cache);
    int64_t kept = m.width; // the chain's input
    for (const LayerCache<float> &layer : cache.layers)
      kept += layer.savedElements();
    const std::optional<int64_t> bound = s.activationElements(samples, 2, /*head=*/true);
    ASSERT_TRUE(bound.has_value());
    EXPECT_GE(*bound, kept);
    EXPECT_LE(*bound, 2 * kept) << "an upper bound, not a wild one";
  }
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
  // job/TransformerCosts.cpp: attention 2h² + 2h·kvd, MLP 3hf (SwiGLU), biases (all:
  // h + 2kvd + h + 2f + h; qkv: h + 2kvd), two norms (h each for RMSNorm); the embedding
  // without a position table for rotary; the head a norm and V·h, tied or not.
  GptShape l = llamaShape();
  const int64_t lh = l.hidden, kvd = l.kvWidth(), f = l.ffn;
  EXPECT_EQ(kvd, lh / 2);
  const int64_t weights = 2 * lh * lh + 2 * lh * kvd + 3 * lh * f + 2 * lh;
  EXPECT_EQ(makeLayer<float>(runtime::LayerKind::Block, l)->numParams(), weights);
  l.qkvBias = true;
  EXPECT_EQ(makeLayer<float>(runtime::LayerKind::Block, l)->numParams(), weights + lh + 2 * kvd);
  l.otherBias = true;
  EXPECT_EQ(makeLayer<float>(runtime::LayerKind::Block, l)->numParams(),
            weights + (lh + 2 * kvd) + lh + 2 * f + lh);
  EXPECT_EQ(makeLayer<float>(runtime::LayerKind::Embedding, l)->numParams(), l.vocab * lh);
  EXPECT_EQ(makeLayer<float>(runtime::LayerKind::Head, l)->numParams(), l.vocab * lh + lh);
  // Qwen3: q = heads · d wide (Wqkv's q columns and Wo's rows), and the two norms' gains.
  const GptShape q3 = qwen3Shape();
  const int64_t q = q3.heads * q3.headWidth, qkvd = q3.kvHeads * q3.headWidth;
  EXPECT_EQ(q3.qWidth(), q);
  EXPECT_EQ(makeLayer<float>(runtime::LayerKind::Block, q3)->numParams(),
            2 * lh * q + 2 * lh * qkvd + 3 * lh * f + 2 * lh + 2 * q3.headWidth);
  // Latent attention (attentionWeights and attentionOtherParams there): h·rq + rq·H(dn + dr)
  // for the queries (h·H(dn + dr) without a query latent), h(rkv + dr) + rkv·H(dn + dv) for the
  // keys and values, H·dv·h out, and the two latents' gains.
  GptShape mla = latentShape();
  const int64_t heads = mla.heads, qk = mla.qkHead(), dv = mla.vHead, rq = mla.qLora,
                rkv = mla.kvLora;
  const int64_t keysValues =
      lh * (rkv + mla.qkRope) + rkv * heads * (mla.qkNope + dv) + heads * dv * lh + rkv;
  const int64_t rest = 3 * lh * f + 2 * lh;
  EXPECT_EQ(makeLayer<float>(runtime::LayerKind::Block, mla)->numParams(),
            lh * rq + rq * heads * qk + rq + keysValues + rest);
  mla.qLora = 0;
  EXPECT_EQ(makeLayer<float>(runtime::LayerKind::Block, mla)->numParams(),
            lh * heads * qk + keysValues + rest);
}

TEST(Model, LlamaVariantsAreBuilt) {
  runtime::Plan plan = planFor(tinyShape());
  for (auto edit : std::vector<std::function<void(runtime::Transformer &)>>{
           [](runtime::Transformer &t) { t.mlp = 1; }, [](runtime::Transformer &t) { t.norm = 1; },
           [](runtime::Transformer &t) { t.position = 1; },
           [](runtime::Transformer &t) { t.numKvHeads = 1; },
           [](runtime::Transformer &t) { t.tieEmbeddings = true; },
           [](runtime::Transformer &t) { t.bias = 2; }}) {
    runtime::Plan changed = plan;
    edit(*changed.transformer);
    absl::StatusOr<GptShape> shape = GptShape::fromPlan(changed);
    ASSERT_TRUE(shape.ok()) << shape.status().message();
  }
  // Every field reaches the shape, and the layers built from it take the plan's counts.
  const GptShape l = llamaShape();
  runtime::Plan llama = planFor(l);
  absl::StatusOr<GptShape> shape = GptShape::fromPlan(llama);
  ASSERT_TRUE(shape.ok()) << shape.status().message();
  EXPECT_EQ(shape->numKvHeads(), 2);
  EXPECT_TRUE(shape->gated && shape->rmsNorm && shape->rotary && shape->tied);
  EXPECT_FALSE(shape->qkvBias || shape->otherBias);
  EXPECT_EQ(shape->ropeTheta, l.ropeTheta);
  EXPECT_EQ(shape->normEps, l.normEps);
  CpuOps<float> ops;
  EXPECT_TRUE(LayerChain<float>::build(llama, *shape, 0, 4, ops).ok());
}

TEST(Model, ShapesTheRuntimeCannotBuildAreRefusedNamingTheKey) {
  runtime::Plan plan = planFor(tinyShape()); // hidden 8, 2 heads
  const struct {
    std::function<void(runtime::Transformer &)> edit;
    std::string key;
  } cases[] = {
      {[](runtime::Transformer &t) { t.numKvHeads = 3; }, "model.num_kv_heads"},
      {[](runtime::Transformer &t) { t.numKvHeads = 0; }, "model.num_kv_heads"},
      {[](runtime::Transformer &t) {
         t.hiddenSize = 6;
         t.position = 1;
       },
       "even model.head_dim (or model.hidden_size / model.num_heads)"},
      {[](runtime::Transformer &t) {
         t.headDim = 3;
         t.position = 1;
       },
       "even model.head_dim"},
      {[](runtime::Transformer &t) { t.hiddenSize = 7; }, "model.head_dim set"},
      {[](runtime::Transformer &t) {
         t.position = 1;
         t.ropeTheta = 0;
       },
       "model.rope_theta"},
      {[](runtime::Transformer &t) {
         t.position = 1;
         t.ropeTheta = INFINITY;
       },
       "model.rope_theta"},
      {[](runtime::Transformer &t) { t.normEps = 0; }, "model.norm_eps"},
      {[](runtime::Transformer &t) { t.normEps = NAN; }, "model.norm_eps"},
      {[](runtime::Transformer &t) { t.mlp = 2; }, "mlp kind"},
      // Latent attention the layer does not implement.
      {[](runtime::Transformer &t) {
         t.kvLoraRank = 4;
         t.qkNopeHeadDim = t.vHeadDim = 4;
         t.numKvHeads = 1;
       },
       "model.num_kv_heads"},
      {[](runtime::Transformer &t) {
         t.kvLoraRank = 4;
         t.qkNopeHeadDim = 2;
         t.vHeadDim = 4;
       },
       "model.latent_attention.v_head_dim at most qk_nope_head_dim + qk_rope_head_dim"},
      {[](runtime::Transformer &t) {
         t.kvLoraRank = 4;
         t.qkNopeHeadDim = t.vHeadDim = 4;
         t.qkRopeHeadDim = 3;
         t.position = 1;
       },
       "model.latent_attention's head widths in range"},
  };
  for (const auto &c : cases) {
    SCOPED_TRACE(c.key);
    runtime::Plan changed = plan;
    c.edit(*changed.transformer);
    absl::StatusOr<GptShape> shape = GptShape::fromPlan(changed);
    ASSERT_FALSE(shape.ok());
    EXPECT_NE(shape.status().message().find(c.key), std::string::npos) << shape.status().message();
  }
  // With learned positions the head dimension may be odd; with a head width of its own the
  // hidden size need not be a multiple of the heads.
  runtime::Plan odd = plan;
  odd.transformer->hiddenSize = 6;
  EXPECT_TRUE(GptShape::fromPlan(odd).ok());
  runtime::Plan ownWidth = plan;
  ownWidth.transformer->hiddenSize = 7;
  ownWidth.transformer->headDim = 4;
  ownWidth.transformer->position = 1;
  EXPECT_TRUE(GptShape::fromPlan(ownWidth).ok());

  // Latent attention's heads have widths of their own: hidden / heads need not be whole or
  // even; a tensor group splits its heads, which must divide.
  runtime::Plan latent = planFor(latentShape());
  latent.transformer->hiddenSize = 18; // 4 heads
  EXPECT_TRUE(GptShape::fromPlan(latent).ok()) << GptShape::fromPlan(latent).status();
  latent.config.tensor = 2;
  latent.transformer->vocabSize = 12;
  absl::StatusOr<GptShape> split = GptShape::fromPlan(latent);
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_EQ(split->localHeads(), 2);
  latent.config.tensor = 3;
  split = GptShape::fromPlan(latent);
  ASSERT_FALSE(split.ok());
  EXPECT_NE(split.status().message().find("splits model.num_heads (4) over 3 ranks"),
            std::string::npos)
      << split.status().message();

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

// DeepSeek-V3's rule: a bias rises by the rate below the mean, falls above it, stays at it;
// the count is consumed, so that Adam after it (no gradient, no moments) moves nothing.
TEST(Optimizer, BalanceBiasMovesBySignAgainstTheMean) {
  std::vector<float> bias = {0.5f, 0.5f, 0.5f};
  std::vector<double> counts = {3, 5, 4};
  for (size_t e = 0; e < bias.size(); ++e)
    balanceBias(0.25, 4.0, bias[e], counts[e]);
  EXPECT_EQ(bias, (std::vector<float>{0.75f, 0.25f, 0.5f}));
  EXPECT_EQ(counts, (std::vector<double>{0, 0, 0}));
  OptimizerConfig config;
  std::vector<float> state(2 * bias.size(), 0.0f), before = bias;
  optimizerStep(config, 1, 3, bias.data(), state.data(), counts.data());
  EXPECT_EQ(bias, before);
}

// With bf16 moments the state is half as wide, the moments are stored rounded to bf16 (here
// g = 0.3 and g² = 0.09, neither a bf16 value), and the update uses the unrounded fp32 ones.
TEST(Optimizer, Bf16MomentsAreStoredRoundedInHalfTheState) {
  OptimizerConfig fp32, bf16;
  fp32.learningRate = bf16.learningRate = 0.1;
  bf16.bf16Moments = true;
  EXPECT_EQ(fp32.stateWidth(), 2);
  EXPECT_EQ(bf16.stateWidth(), 1);
  std::vector<float> wide = {1.0f, -2.0f}, narrow = wide;
  std::vector<float> wideState(4, 0.0f), narrowState(2, 0.0f);
  const std::vector<double> grads = {0.3, -0.3};
  optimizerStep(fp32, 1, 2, wide.data(), wideState.data(), grads.data());
  optimizerStep(bf16, 1, 2, narrow.data(), narrowState.data(), grads.data());
  EXPECT_EQ(narrow, wide); // the first update reads zero moments either way
  // The stored moments: bf16 bit patterns, the fp32 ones rounded to nearest even.
  auto rounded = [](float x) {
    uint32_t bits;
    std::memcpy(&bits, &x, 4);
    return static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
  };
  std::vector<uint16_t> stored(4);
  std::memcpy(stored.data(), narrowState.data(), 8);
  EXPECT_EQ(stored[0], rounded(wideState[0]));
  EXPECT_EQ(stored[1], rounded(wideState[1]));
  EXPECT_EQ(stored[2], rounded(wideState[2]));
  EXPECT_EQ(stored[3], rounded(wideState[3]));
  EXPECT_NE(uint32_t(stored[0]) << 16, [&] {
    uint32_t bits;
    std::memcpy(&bits, &wideState[0], 4);
    return bits;
  }()) << "0.3 · (1 − 0.9) is not a bf16 value";
  // The second update reads the rounded moments: close to the fp32 run's, not equal.
  optimizerStep(fp32, 2, 2, wide.data(), wideState.data(), grads.data());
  optimizerStep(bf16, 2, 2, narrow.data(), narrowState.data(), grads.data());
  EXPECT_NEAR(narrow[0], wide[0], 1e-3);
  EXPECT_NE(narrow[0], wide[0]);
}

} // namespace
