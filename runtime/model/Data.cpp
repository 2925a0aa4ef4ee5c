//===- Data.cpp - synthetic token data with structure to learn ------------===//

#include "runtime/model/Data.h"

#include "runtime/model/Random.h"

#include <numeric>
#include <utility>

using namespace conduit::model;

namespace {
/// Probability that a token is its predecessor's successor rather than random.
constexpr double kStructure = 0.8;
constexpr uint64_t kTableKey = 0x5eed7ab1e;
} // namespace

SyntheticData::SyntheticData(uint64_t seed, int64_t vocab, int64_t seq)
    : seed(seed), vocab(vocab), seq(seq), successor(vocab) {
  std::iota(successor.begin(), successor.end(), 0);
  Random random({seed, kTableKey});
  for (int64_t i = vocab - 1; i > 0; --i)
    std::swap(successor[i], successor[random.below(static_cast<uint64_t>(i) + 1)]);
}

void SyntheticData::batch(int64_t step, int64_t first, int64_t count, std::vector<int32_t> &tokens,
                          std::vector<int32_t> &targets) const {
  tokens.resize(count * seq);
  targets.resize(count * seq);
  for (int64_t n = 0; n < count; ++n) {
    Random random({seed, static_cast<uint64_t>(step), static_cast<uint64_t>(first + n)});
    int32_t token = static_cast<int32_t>(random.below(vocab));
    for (int64_t t = 0; t <= seq; ++t) {
      if (t < seq)
        tokens[n * seq + t] = token;
      if (t > 0)
        targets[n * seq + t - 1] = token;
      token = random.uniform() < kStructure ? successor[token]
                                            : static_cast<int32_t>(random.below(vocab));
    }
  }
}
