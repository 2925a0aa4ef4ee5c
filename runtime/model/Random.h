//===- Random.h - reproducible random numbers -------------------*- C++ -*-===//
//
// SplitMix64 (Steele, Lea and Flood, OOPSLA 2014) seeded from a mix of integers: the same
// (seed, layer) or (seed, step, sample) gives the same numbers on every rank and platform,
// which is what makes every plan of a job train the same model.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_MODEL_RANDOM_H
#define CONDUIT_RUNTIME_MODEL_RANDOM_H

#include <cmath>
#include <cstdint>
#include <initializer_list>

namespace conduit::model {

class Random {
public:
  /// A stream determined by all of `keys`.
  explicit Random(std::initializer_list<uint64_t> keys) {
    for (uint64_t key : keys) {
      state ^= key + 0x9e3779b97f4a7c15ull + (state << 6) + (state >> 2);
      next();
    }
  }

  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  /// Uniform integer in [0, n).
  uint64_t below(uint64_t n) { return next() % n; }
  /// Standard normal (Box-Muller; one value per call).
  double normal() {
    const double u = 1.0 - uniform(), v = uniform();
    return std::sqrt(-2.0 * std::log(u)) * std::cos(6.283185307179586 * v);
  }

private:
  uint64_t state = 0x853c49e6748fea9bull;
};

} // namespace conduit::model

#endif // CONDUIT_RUNTIME_MODEL_RANDOM_H
