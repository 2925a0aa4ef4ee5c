//===- TensorCollectivesTest.cpp - the tensor group's collectives per compute ---===//
//
// Checks tensorCollectives() against the table of runtime/plan/TensorCollectives.h: which
// collectives each compute of a stage issues, in which order, with which bytes.
//
//===----------------------------------------------------------------------===//

#include "runtime/plan/TensorCollectives.h"

#include <gtest/gtest.h>

#include <string>

using namespace conduit::runtime;

namespace {

constexpr int64_t kTokens = 8;
constexpr int64_t kHidden = 16;
constexpr int64_t kRow = kTokens * kHidden * 2; // one sample's activations in bf16

/// embedding, two blocks, head.
std::vector<Layer> chain() {
  std::vector<Layer> layers(4);
  layers[0].kind = LayerKind::Embedding;
  layers[1].kind = layers[2].kind = LayerKind::Block;
  layers[3].kind = LayerKind::Head;
  for (int i = 0; i < 3; ++i)
    layers[i].outputBytes = kRow;
  layers[3].outputBytes = 4;
  return layers;
}

Config config(int tensor, bool sequenceParallel,
              Checkpointing checkpointing = Checkpointing::None) {
  Config c;
  c.tensor = tensor;
  c.sequenceParallel = sequenceParallel;
  c.checkpointing = checkpointing;
  c.tokensPerSample = kTokens;
  return c;
}

/// "AR:1:512 AG:2:512 ...": kind, layer and bytes of each collective.
std::string render(const std::vector<TensorCollective> &calls) {
  std::string out;
  for (const TensorCollective &c : calls) {
    const char *kind = c.op == Op::TensorAllReduce   ? "AR"
                       : c.op == Op::TensorAllGather ? "AG"
                                                     : "RS";
    out += (out.empty() ? "" : " ") + std::string(kind) + ":" + std::to_string(c.layer) + ":" +
           std::to_string(c.bytes);
  }
  return out;
}

std::string of(const Config &c, int32_t first, int32_t end, Op op, int64_t samples = 1) {
  return render(tensorCollectives(c, chain(), first, end, op, samples));
}

TEST(TensorCollectives, NoneWithoutTensorParallelism) {
  for (Op op : {Op::Forward, Op::Backward, Op::BackwardInput, Op::BackwardWeight})
    EXPECT_EQ(of(config(1, false, Checkpointing::Full), 0, 4, op), "");
}

TEST(TensorCollectives, AllReducesWithoutSequenceParallelism) {
  const Config c = config(2, false);
  // The embedding's partial lookups, then two per block (attention, MLP), three per head (the
  // parallel cross-entropy's max, sum of exponentials and target logit, one float per token).
  EXPECT_EQ(of(c, 0, 4, Op::Forward), "AR:0:256 AR:1:256 AR:1:256 AR:2:256 AR:2:256 "
                                      "AR:3:32 AR:3:32 AR:3:32");
  // Backward from the last layer: the head's input gradient, two per block, none for the
  // embedding; the weight pass needs none.
  EXPECT_EQ(of(c, 0, 4, Op::Backward), "AR:3:256 AR:2:256 AR:2:256 AR:1:256 AR:1:256");
  EXPECT_EQ(of(c, 0, 4, Op::BackwardInput), of(c, 0, 4, Op::Backward));
  EXPECT_EQ(of(c, 0, 4, Op::BackwardWeight), "");
  // Bytes scale with the micro-batch.
  EXPECT_EQ(of(c, 1, 2, Op::Forward, 3), "AR:1:768 AR:1:768");
}

TEST(TensorCollectives, FullRecomputationRepeatsEachLayersForward) {
  const Config c = config(2, false, Checkpointing::Full);
  // Layer by layer from the last: its forward again, then its backward.
  EXPECT_EQ(of(c, 0, 2, Op::Backward), "AR:1:256 AR:1:256 AR:1:256 AR:1:256 AR:0:256");
  EXPECT_EQ(of(c, 0, 2, Op::BackwardInput), of(c, 0, 2, Op::Backward));
  EXPECT_EQ(of(c, 0, 2, Op::BackwardWeight), "");
  // Selective recomputation repeats the attention core only, which communicates nothing.
  const Config selective = config(2, false, Checkpointing::Selective);
  EXPECT_EQ(of(selective, 0, 2, Op::Backward), of(config(2, false), 0, 2, Op::Backward));
}

TEST(TensorCollectives, SequenceParallelismGathersAndScatters) {
  const Config c = config(4, true);
  EXPECT_EQ(of(c, 0, 2, Op::Forward), "RS:0:256 AG:1:256 RS:1:256 AG:1:256 RS:1:256");
  // The head gathers its input, then reduces the cross-entropy's statistics.
  EXPECT_EQ(of(c, 3, 4, Op::Forward), "AG:3:256 AR:3:32 AR:3:32 AR:3:32");
  // Input gradients: per block the output gradient gathered and the input gradient scattered,
  // MLP then attention; the embedding gathers its output gradient.
  EXPECT_EQ(of(c, 0, 2, Op::BackwardInput), "AG:1:256 RS:1:256 AG:1:256 RS:1:256 AG:0:256");
  // Weight gradients: the norms' outputs gathered again and the norms' gradients summed
  // (2 norms x gain and bias x one token's 32 bytes).
  EXPECT_EQ(of(c, 1, 2, Op::BackwardWeight), "AG:1:256 AG:1:256 AR:1:128");
  EXPECT_EQ(of(c, 3, 4, Op::BackwardWeight), "AG:3:256 AR:3:64");
  // A whole backward is each layer's input pass then its weight pass, from the last layer.
  EXPECT_EQ(of(c, 1, 3, Op::Backward),
            "AG:2:256 RS:2:256 AG:2:256 RS:2:256 AG:2:256 AG:2:256 AR:2:128 "
            "AG:1:256 RS:1:256 AG:1:256 RS:1:256 AG:1:256 AG:1:256 AR:1:128");
}

} // namespace
