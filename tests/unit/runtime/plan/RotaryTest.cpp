// The rotary context extensions against their definitions in Hugging Face's
// modeling_rope_utils.py, on the published configurations that use them: Llama 3.1's llama3
// bands and DeepSeek-V3's yarn ramp and softmax factor; and dynamic NTK scaling's base.

#include "runtime/plan/Rotary.h"
#include "runtime/model/Gpt.h"
#include "runtime/model/Ops.h"
#include "tests/unit/runtime/GptPlan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

using namespace conduit;
using namespace conduit::runtime;

namespace {

double kept(double theta, int64_t i, int64_t dim) { return std::pow(theta, -2.0 * i / dim); }

TEST(Rotary, DefaultAndLinear) {
  RotaryPositions rope{10000, {}};
  for (int64_t i = 0; i < 32; ++i)
    EXPECT_EQ(rotaryInverseFrequency(rope, i, 64), kept(10000, i, 64)) << i;
  rope.scaling.type = RopeType::Linear;
  rope.scaling.factor = 4;
  for (int64_t i = 0; i < 32; ++i)
    EXPECT_DOUBLE_EQ(rotaryInverseFrequency(rope, i, 64), kept(10000, i, 64) / 4) << i;
}

// Llama 3.1 (config.json of Meta-Llama-3.1-8B): theta 500000, heads 128 wide, factor 8,
// low_freq_factor 1, high_freq_factor 4, original context 8192. Wavelengths 2π / f below
// 8192 / 4 are kept, above 8192 / 1 divided by 8, and between blended by
// s = (8192 / wavelength − 1) / (4 − 1): of the 64 pairs, 29 kept, 6 blended, 29 interpolated.
TEST(Rotary, Llama3BandsOfLlama31) {
  RotaryPositions rope{500000, {}};
  rope.scaling.type = RopeType::Llama3;
  rope.scaling.factor = 8;
  rope.scaling.lowFreqFactor = 1;
  rope.scaling.highFreqFactor = 4;
  rope.scaling.originalPositions = 8192;
  int keptPairs = 0, blended = 0, interpolated = 0;
  double previous = INFINITY;
  for (int64_t i = 0; i < 64; ++i) {
    const double base = kept(500000, i, 128), f = rotaryInverseFrequency(rope, i, 128);
    const double wavelength = 2 * M_PI / base;
    if (f == base) {
      ++keptPairs;
      EXPECT_LT(wavelength, 8192.0 / 4) << i;
    } else if (f == base / 8) {
      ++interpolated;
      EXPECT_GT(wavelength, 8192.0) << i;
    } else {
      ++blended;
      const double s = (8192 / wavelength - 1) / (4 - 1);
      EXPECT_DOUBLE_EQ(f, (1 - s) * base / 8 + s * base) << i;
      EXPECT_GT(f, base / 8) << i;
      EXPECT_LT(f, base) << i;
    }
    EXPECT_LT(f, previous) << i; // the frequencies still fall with the pair
    previous = f;
  }
  EXPECT_EQ(keptPairs, 29);
  EXPECT_EQ(blended, 6);
  EXPECT_EQ(interpolated, 29);
}

// DeepSeek-V3 (its config.json): rotary parts 64 wide, theta 10000, yarn with factor 40 over an
// original 4096 positions, beta_fast 32, beta_slow 1. The ramp's ends are the pairs turning 32
// and once within 4096 positions: 64 ln(4096 / (32 · 2π)) / (2 ln 10000) = 10.47 and
// 64 ln(4096 / 2π) / (2 ln 10000) = 22.51, rounded outwards to 10 and 23.
TEST(Rotary, YarnRampOfDeepSeekV3) {
  RotaryPositions rope{10000, {}};
  RopeScaling &s = rope.scaling;
  s.type = RopeType::Yarn;
  s.factor = 40;
  s.originalPositions = 4096;
  for (int64_t i = 0; i < 32; ++i) {
    const double base = kept(10000, i, 64), ramp = std::clamp((i - 10.0) / 13.0, 0.0, 1.0);
    EXPECT_DOUBLE_EQ(rotaryInverseFrequency(rope, i, 64), base / 40 * ramp + base * (1 - ramp))
        << i;
  }
  EXPECT_EQ(rotaryInverseFrequency(rope, 10, 64), kept(10000, 10, 64));
  EXPECT_DOUBLE_EQ(rotaryInverseFrequency(rope, 23, 64), kept(10000, 23, 64) / 40);
  // Untruncated, the ramp runs between the unrounded ends.
  s.truncate = false;
  const double low = 64 * std::log(4096 / (32 * 2 * M_PI)) / (2 * std::log(10000.0)),
               high = 64 * std::log(4096 / (2 * M_PI)) / (2 * std::log(10000.0));
  EXPECT_NEAR(low, 10.472, 1e-3);
  EXPECT_NEAR(high, 22.513, 1e-3);
  const double ramp = (11 - low) / (high - low), base = kept(10000, 11, 64);
  EXPECT_DOUBLE_EQ(rotaryInverseFrequency(rope, 11, 64), base / 40 * ramp + base * (1 - ramp));
}

// Dynamic NTK scaling (the library's _compute_dynamic_ntk_parameters) on Llama 2's shape: heads
// 128 wide, 4096 positions, factor 2. Within the positions the base is kept; trained on 8192
// the base is 10000 · (2 · 8192 / 4096 − 1)^(128 / 126) = 10000 · 3^1.01587 = 30527.7, and
// every pair turns by that base's frequency.
TEST(Rotary, DynamicBaseGrowsPastThePositions) {
  RotaryPositions rope{10000, {}};
  rope.scaling.type = RopeType::Dynamic;
  rope.scaling.factor = 2;
  rope.scaling.originalPositions = 4096;
  for (int64_t sequence : {1, 2048, 4096}) {
    rope.sequence = sequence;
    EXPECT_EQ(dynamicBase(rope, 128), 10000) << sequence;
    for (int64_t i = 0; i < 64; ++i)
      EXPECT_DOUBLE_EQ(rotaryInverseFrequency(rope, i, 128), kept(10000, i, 128)) << i;
  }
  rope.sequence = 8192;
  EXPECT_NEAR(dynamicBase(rope, 128), 30527.7, 0.1);
  EXPECT_DOUBLE_EQ(dynamicBase(rope, 128), 10000 * std::pow(3.0, 128.0 / 126));
  for (int64_t i = 0; i < 64; ++i)
    EXPECT_DOUBLE_EQ(rotaryInverseFrequency(rope, i, 128), kept(dynamicBase(rope, 128), i, 128))
        << i;
  EXPECT_EQ(rotaryInverseFrequency(rope, 0, 128), 1); // the first pair turns once a position
  // One position past, the base has barely moved: the rule is continuous at the threshold.
  rope.sequence = 4097;
  EXPECT_NEAR(dynamicBase(rope, 128), 10000, 10);
  EXPECT_GT(dynamicBase(rope, 128), 10000);
}

// The shape hands the layers the sequence they train on: past its positions a dynamic model's
// attention rotates by the grown base (a block's output differs from the default's), within
// them by theta (the same bits).
TEST(Rotary, ADynamicModelRotatesByTheSequenceItTrainsOn) {
  model::GptShape shape = model::tinyShape(false, false);
  shape.gated = shape.rmsNorm = shape.rotary = true;
  auto blockOutput = [&](const RopeScaling &scaling) {
    model::GptShape s = shape;
    s.ropeScaling = scaling;
    model::CpuOps<double> ops;
    std::unique_ptr<model::Layer<double>> block =
        model::makeLayer<double>(LayerKind::Block, s, Checkpointing::None, 1);
    std::vector<double> params(block->numParams()), x(2 * s.seq * s.hidden), y(x.size());
    block->initialise(params.data(), 3, 1);
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = std::sin(0.7 * static_cast<double>(i));
    model::LayerCache<double> cache;
    block->forward(ops, params.data(), x.data(), model::Tokens{nullptr, nullptr, 2, 1.0}, y.data(),
                   cache);
    return y;
  };
  RopeScaling dynamic;
  dynamic.type = RopeType::Dynamic;
  dynamic.factor = 4;
  dynamic.originalPositions = 2;
  EXPECT_NE(blockOutput(dynamic), blockOutput({}));
  dynamic.originalPositions = shape.seq;
  EXPECT_EQ(blockOutput(dynamic), blockOutput({}));
}

TEST(Rotary, LatentSoftmaxFactor) {
  RopeScaling s;
  EXPECT_EQ(s.latentSoftmaxFactor(), 1); // no extension
  s.type = RopeType::Yarn;
  s.factor = 40;
  EXPECT_EQ(s.latentSoftmaxFactor(), 1); // no mscale_all_dim
  s.mscaleAllDim = 1;
  // DeepSeek-V3: (0.1 ln 40 + 1)² = 1.3689² = 1.8739.
  EXPECT_NEAR(s.latentSoftmaxFactor(), 1.873854, 1e-6);
  EXPECT_DOUBLE_EQ(yarnMscale(1, 1), 1);
  EXPECT_DOUBLE_EQ(yarnMscale(0.5, 1), 1);
}

// yarn's magnitude multiplies cos and sin: each rotated pair's length grows by it, the
// backward scales by it again, and v is left alone.
TEST(Rotary, YarnMagnitudeScalesTheRotatedPairs) {
  const int64_t seq = 5, heads = 2, kvHeads = 1, d = 8, width = (heads + 2 * kvHeads) * d;
  RotaryPositions rope{10000, {}};
  rope.scaling.type = RopeType::Yarn;
  rope.scaling.factor = 4;
  rope.scaling.originalPositions = 16;
  rope.scaling.attentionFactor = 1.5;
  std::vector<double> x(seq * width);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = 0.1 + static_cast<double>(i % 7);
  std::vector<double> y = x;
  model::CpuOps<double> ops;
  ops.rotaryForward(1, seq, heads, kvHeads, d, rope, y.data());
  for (int64_t t = 0; t < seq; ++t)
    for (int64_t head = 0; head < heads + 2 * kvHeads; ++head)
      for (int64_t i = 0; i < d / 2; ++i) {
        const int64_t a = t * width + head * d + i, b = a + d / 2;
        const double before = std::hypot(x[a], x[b]), after = std::hypot(y[a], y[b]);
        EXPECT_NEAR(after, head == heads + kvHeads ? before : 1.5 * before, 1e-12)
            << "t " << t << " head " << head << " i " << i;
      }
  ops.rotaryBackward(1, seq, heads, kvHeads, d, rope, y.data());
  for (int64_t t = 0; t < seq; ++t)
    for (int64_t c = 0; c < width; ++c) {
      const bool isV = c >= (heads + kvHeads) * d;
      EXPECT_NEAR(y[t * width + c], (isV ? 1.0 : 2.25) * x[t * width + c], 1e-12);
    }
}

} // namespace
