//===- Embedding.h - the token (and position) embedding ---------*- C++ -*-===//
//
// The chain's first layer: y = wte[token] (+ wpe[position] for learned positions). Parameters:
// the token table [vocab × h], then, for learned positions only, the position table [seq × h].
// The token table is the first vocab · h normals of (seed, 0), since the embedding is always
// layer 0; a tied head starts from the same values.
//
// Split over a tensor group the token table is split by vocabulary: each rank looks up its
// rows (zero for another rank's tokens) and the group sums; the position table is replicated
// and added once, after the sum (one rank adds it in the lookup itself).
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_MODEL_LAYERS_EMBEDDING_H
#define CONDUIT_RUNTIME_MODEL_LAYERS_EMBEDDING_H

#include "runtime/model/GptShape.h"
#include "runtime/model/layers/Layer.h"

namespace conduit::model {

template <typename T> class Embedding final : public Layer<T> {
public:
  explicit Embedding(const GptShape &s) : s(s) {}

  CONDUIT_LAYER_OVERRIDES(T)

private:
  /// The position table within `params` (or its gradient), null with rotary positions.
  template <typename P> P *positions(P *params) const {
    return s.rotary ? nullptr : params + s.localVocab() * s.hidden;
  }

  GptShape s;
};

} // namespace conduit::model

#endif // CONDUIT_RUNTIME_MODEL_LAYERS_EMBEDDING_H
