//===- GptShape.h - a GPT-style transformer shape for tests ------*- C++ -*-===//
//
// The shape the cost tests of job/ and analysis/ build their models from: multi-head attention
// (as many key/value heads as heads) and an FFN four times the hidden size, as GPT-2 and the
// breadth-first paper's models have.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_TESTS_UNIT_JOB_GPTSHAPE_H
#define CONDUIT_TESTS_UNIT_JOB_GPTSHAPE_H

#include "job/JobSpec.h"

namespace conduit {

inline TransformerSpec gpt(int64_t layers, int64_t hidden, int64_t heads, int64_t seq,
                           int64_t vocab) {
  TransformerSpec t;
  t.numLayers = layers;
  t.hiddenSize = hidden;
  t.numHeads = heads;
  t.numKvHeads = heads;
  t.ffnHiddenSize = 4 * hidden;
  t.seqLength = seq;
  t.vocabSize = vocab;
  return t;
}

} // namespace conduit

#endif // CONDUIT_TESTS_UNIT_JOB_GPTSHAPE_H
