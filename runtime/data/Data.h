//===- Data.h - where the training tokens come from -------------*- C++ -*-===//
//
// A TokenSource gives the tokens and next-token targets of any run of global samples of a step,
// drawn from (seed, step, global sample index) alone, so that every plan of a job and the
// single-process reference train on the same samples however the batch is cut into
// micro-batches and spread over replicas. There are two kinds:
// - SyntheticData: each token is mostly a fixed random successor of the previous one,
//   sometimes a random token. A model that learns the successor table drives the loss from
//   ln(vocab) towards the entropy of the noise, so a falling loss shows that training works.
// - TokenFile: a file of token ids (little-endian uint16 or uint32, as nanoGPT's prepare.py
//   and Megatron-style preprocessors write them) or of text (one byte, one token), mapped
//   read-only. A sample is seq + 1 consecutive tokens from an offset drawn from (seed, step,
//   index): the first seq are its inputs, the last seq its targets.
// makeTokenSource builds the one a plan names and refuses, before training, a file that is
// missing, unreadable, empty, shorter than one sample, cut inside a token, or holding a token
// outside the model's vocabulary.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_DATA_DATA_H
#define CONDUIT_RUNTIME_DATA_DATA_H

#include "runtime/plan/Plan.h"

#include "absl/status/statusor.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace conduit::model {

class TokenSource {
public:
  virtual ~TokenSource() = default;

  /// Tokens and next-token targets of global samples [first, first + count) of `step`, each
  /// `seq` long, appended sample after sample (both vectors are resized to count × seq).
  virtual void batch(int64_t step, int64_t first, int64_t count, std::vector<int32_t> &tokens,
                     std::vector<int32_t> &targets) const = 0;
};

class SyntheticData final : public TokenSource {
public:
  SyntheticData(uint64_t seed, int64_t vocab, int64_t seq);

  void batch(int64_t step, int64_t first, int64_t count, std::vector<int32_t> &tokens,
             std::vector<int32_t> &targets) const override;

private:
  uint64_t seed;
  int64_t vocab, seq;
  std::vector<int32_t> successor;
};

/// Token ids read from a file mapped read-only for the life of the object.
class TokenFile final : public TokenSource {
public:
  /// Maps `path`, whose tokens are `width` bytes each (1: text, a byte per token; 2: uint16;
  /// 4: uint32, little-endian), and reads every token once to check it is below `vocab`.
  /// Refuses a file that cannot be opened or mapped, is not a regular file, is empty, holds
  /// fewer than seq + 1 tokens, ends inside a token, or holds a token outside the vocabulary;
  /// each message names the file and the reason.
  static absl::StatusOr<std::unique_ptr<TokenFile>> open(const std::string &path, int width,
                                                         uint64_t seed, int64_t vocab, int64_t seq);
  ~TokenFile() override;
  TokenFile(const TokenFile &) = delete;
  TokenFile &operator=(const TokenFile &) = delete;

  void batch(int64_t step, int64_t first, int64_t count, std::vector<int32_t> &tokens,
             std::vector<int32_t> &targets) const override;

  /// Tokens in the file.
  int64_t size() const { return numTokens; }
  /// Token `i` of the file (0 <= i < size()).
  uint32_t at(int64_t i) const;
  /// The first token of global sample `index` of `step` in the file: uniform in
  /// [0, size() - seq), so that the sample's seq + 1 tokens lie inside it.
  int64_t offsetOf(int64_t step, int64_t index) const;

private:
  TokenFile(const unsigned char *bytes, size_t length, int width, uint64_t seed, int64_t seq);

  const unsigned char *bytes; ///< the mapping
  size_t length;              ///< bytes mapped
  int width;
  int64_t numTokens;
  uint64_t seed;
  int64_t seq;
};

/// The tokens `config.dataSource` names, for a model of `vocab` tokens and `seq`-token
/// samples; an error, naming the file and the reason, where a file cannot be used.
absl::StatusOr<std::unique_ptr<TokenSource>> makeTokenSource(const runtime::Config &config,
                                                             int64_t vocab, int64_t seq);

} // namespace conduit::model

#endif // CONDUIT_RUNTIME_DATA_DATA_H
