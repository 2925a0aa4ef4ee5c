//===- Data.h - synthetic token data with structure to learn ----*- C++ -*-===//
//
// Each sample is a token sequence drawn from (seed, step, global sample index) alone: mostly a
// fixed random successor of the previous token, sometimes a random token. A model that learns
// the successor table drives the loss from ln(vocab) towards the entropy of the noise, so a
// falling loss shows that training works.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_MODEL_DATA_H
#define CONDUIT_RUNTIME_MODEL_DATA_H

#include <cstdint>
#include <vector>

namespace conduit::model {

class SyntheticData {
public:
  SyntheticData(uint64_t seed, int64_t vocab, int64_t seq);

  /// Tokens and next-token targets of global samples [first, first + count) of `step`, each
  /// `seq` long, appended sample after sample.
  void batch(int64_t step, int64_t first, int64_t count, std::vector<int32_t> &tokens,
             std::vector<int32_t> &targets) const;

private:
  uint64_t seed;
  int64_t vocab, seq;
  std::vector<int32_t> successor;
};

} // namespace conduit::model

#endif // CONDUIT_RUNTIME_MODEL_DATA_H
