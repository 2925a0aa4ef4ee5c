//===- Rotary.h - rotary positions' frequencies under a context extension -===//
//
// The inverse frequencies of rotary positions (Su et al., arXiv:2104.09864) under the
// context extensions Hugging Face's configs name in `rope_scaling` (transformers'
// modeling_rope_utils.py): `linear` (positions interpolated by the factor), `llama3` (Llama
// 3.1's wavelength bands: long wavelengths interpolated, short ones kept, a linear blend
// between) and `yarn` (Peng et al., "YaRN", arXiv:2309.00071: a ramp between interpolated and
// kept dimensions by how often each turns within the original context, and a magnitude on the
// rotation) and `dynamic` (dynamic NTK scaling: past the model's positions, a base raised with
// the length the positions run to, as the library computes it for the sequence it is given;
// within them, the base's). Plain data and inline arithmetic: the job reader, the plan, the CPU
// kernels and the CUDA kernels all read these.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_PLAN_ROTARY_H
#define CONDUIT_RUNTIME_PLAN_ROTARY_H

#include <math.h> // pow, log, floor, ceil: the same spelling on the host and in device code
#include <stdint.h>

#include <array>
#include <string_view>

#if defined(__CUDACC__)
#define CONDUIT_HOST_DEVICE __host__ __device__
#else
#define CONDUIT_HOST_DEVICE
#endif

namespace conduit::runtime {

/// Hugging Face's `rope_type` (older configs: `type`); Default: no extension.
enum class RopeType : uint8_t { Default, Linear, Llama3, Yarn, Dynamic };
/// The types' names, as Hugging Face and the job file spell them, in the enum's order.
constexpr std::array<std::string_view, 5> kRopeTypeNames = {"default", "linear", "llama3", "yarn",
                                                            "dynamic"};

/// A rotary context extension, with Hugging Face's keys under `rope_scaling`.
struct RopeScaling {
  RopeType type = RopeType::Default;
  /// How many times the original context the model is extended to (`factor`).
  double factor = 1;
  /// The context the model was trained with first (`original_max_position_embeddings`);
  /// llama3 and yarn. dynamic: the positions past which the base is raised (the library reads
  /// the config's `max_position_embeddings` for it).
  int64_t originalPositions = 0;
  /// llama3: wavelengths above originalPositions / lowFreqFactor are interpolated, those
  /// below originalPositions / highFreqFactor kept (`low_freq_factor`, `high_freq_factor`).
  double lowFreqFactor = 1, highFreqFactor = 4;
  /// yarn: dimensions turning more than betaFast times within the original context are kept,
  /// fewer than betaSlow times interpolated, a linear ramp between (`beta_fast`, `beta_slow`);
  /// the ramp's ends rounded outwards unless `truncate` is false.
  double betaFast = 32, betaSlow = 1;
  bool truncate = true;
  /// yarn: the rotation's magnitude, multiplying cos and sin (`attention_factor`, or derived
  /// from `mscale` and `mscale_all_dim` by the job reader); 1 for the other types.
  double attentionFactor = 1;
  /// yarn's `mscale_all_dim` (0: none): DeepSeek's latent attention multiplies its softmax
  /// scale by latentSoftmaxFactor().
  double mscaleAllDim = 0;

  bool scaled() const { return type != RopeType::Default; }
  /// The factor on latent attention's softmax scale (Hugging Face's DeepseekV3Attention):
  /// mscale(factor, mscale_all_dim)², 1 without mscale_all_dim.
  double latentSoftmaxFactor() const;
};

/// What a rotary kernel needs: the base, the extension and, for dynamic, the length the
/// positions run to (the sequence trained on).
struct RotaryPositions {
  double theta = 10000; ///< the base (Hugging Face's rope_theta)
  RopeScaling scaling;
  int64_t sequence = 0;
};

/// Dynamic NTK scaling's base for positions running to `sequence` (bloc97 and emozilla's rule,
/// as the transformers library's _compute_dynamic_ntk_parameters states it): within the model's
/// positions the base itself; past them theta · (factor · sequence / positions − (factor − 1))
/// ^ (dim / (dim − 2)).
CONDUIT_HOST_DEVICE inline double dynamicBase(const RotaryPositions &rope, int64_t dim) {
  const RopeScaling &s = rope.scaling;
  if (rope.sequence <= s.originalPositions)
    return rope.theta;
  const double d = static_cast<double>(dim);
  const double grown =
      s.factor * static_cast<double>(rope.sequence) / static_cast<double>(s.originalPositions) -
      (s.factor - 1);
  return rope.theta * pow(grown, d / (d - 2));
}

/// YaRN's magnitude for a context `factor` times the original: 0.1 · mscale · ln(factor) + 1
/// (1 at factor 1 or below).
CONDUIT_HOST_DEVICE inline double yarnMscale(double factor, double mscale) {
  return factor <= 1 ? 1.0 : 0.1 * mscale * log(factor) + 1.0;
}

inline double RopeScaling::latentSoftmaxFactor() const {
  if (!scaled() || mscaleAllDim == 0)
    return 1;
  const double m = yarnMscale(factor, mscaleAllDim);
  return m * m;
}

/// The inverse frequency of rotated pair `i` (i < dim / 2) of a rotary part `dim` wide:
/// theta^(−2i/dim), changed as the extension says.
CONDUIT_HOST_DEVICE inline double rotaryInverseFrequency(const RotaryPositions &rope, int64_t i,
                                                         int64_t dim) {
  const RopeScaling &s = rope.scaling;
  const double theta = rope.theta;
  const double kept = pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(dim));
  const double interpolated = kept / s.factor;
  const double kTwoPi = 6.283185307179586;
  switch (s.type) {
  case RopeType::Default:
    return kept;
  case RopeType::Dynamic:
    return pow(dynamicBase(rope, dim), -2.0 * static_cast<double>(i) / static_cast<double>(dim));
  case RopeType::Linear:
    return interpolated;
  case RopeType::Llama3: {
    const double original = static_cast<double>(s.originalPositions);
    const double wavelength = kTwoPi / kept;
    if (wavelength < original / s.highFreqFactor)
      return kept;
    if (wavelength > original / s.lowFreqFactor)
      return interpolated;
    const double smooth =
        (original / wavelength - s.lowFreqFactor) / (s.highFreqFactor - s.lowFreqFactor);
    return (1 - smooth) * interpolated + smooth * kept;
  }
  case RopeType::Yarn: {
    // The dimension index at which a pair turns `rotations` times within the original context.
    auto correction = [&](double rotations) {
      return static_cast<double>(dim) *
             log(static_cast<double>(s.originalPositions) / (rotations * kTwoPi)) /
             (2 * log(theta));
    };
    double low = correction(s.betaFast), high = correction(s.betaSlow);
    if (s.truncate) {
      low = floor(low);
      high = ceil(high);
    }
    low = low < 0 ? 0 : low;
    high = high > static_cast<double>(dim - 1) ? static_cast<double>(dim - 1) : high;
    if (low == high)
      high += 0.001;
    double ramp = (static_cast<double>(i) - low) / (high - low);
    ramp = ramp < 0 ? 0 : (ramp > 1 ? 1 : ramp);
    return interpolated * ramp + kept * (1 - ramp);
  }
  }
  return kept;
}

} // namespace conduit::runtime

#endif // CONDUIT_RUNTIME_PLAN_ROTARY_H
