//===- JobCostsTest.cpp - the cost model's view of a job ------------------===//
//
// The roofline prices a transformer layer product by product from the job's shape
// (analysis/JobCosts.h); those products must add up to the FLOPs the job's layer chain counts
// (job/TransformerCosts.h), pass by pass.
//
//===----------------------------------------------------------------------===//

#include "analysis/JobCosts.h"

#include "job/TransformerCosts.h"
#include "tests/unit/job/GptShape.h"

#include <gtest/gtest.h>

using namespace conduit;

namespace {

TEST(JobCosts, TheRooflinesProductsHaveTheLayersFlops) {
  // What the cost model prices product by product (analysis/Roofline.h) is what the layers
  // count: the forward, the input gradient (I) and the weight gradient (W) of every block and
  // of the head, for GPT- and Llama-style shapes.
  TransformerSpec gqa = gpt(2, 4096, 32, 1024, 32000);
  gqa.numKvHeads = 8;
  gqa.mlp = MlpKind::SwiGLU;
  gqa.ffnHiddenSize = 11008;
  for (const TransformerSpec &spec : {gpt(2, 768, 12, 1024, 50257), gqa}) {
    auto layers = expandTransformer(spec, 2);
    ASSERT_TRUE(layers.ok());
    TransformerShape shape = transformerShape(spec, 2);
    for (auto [index, kind] :
         {std::pair{1, TransformerLayer::Block}, std::pair{3, TransformerLayer::Head}}) {
      const LayerSpec &layer = (*layers)[index];
      LayerWork work = transformerWork(shape, kind, 1, false);
      EXPECT_DOUBLE_EQ(work.forward.flops() + work.attentionCore.flops(), layer.fwdFlops);
      EXPECT_DOUBLE_EQ(work.inputGradient.flops(), layer.bwdFlops - layer.bwdWeightFlops);
      EXPECT_DOUBLE_EQ(work.weightGradient.flops(), layer.bwdWeightFlops);
    }
  }
}

} // namespace
