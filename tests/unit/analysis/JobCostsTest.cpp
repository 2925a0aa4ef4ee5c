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
  for (TransformerSpec spec : {gpt(2, 768, 12, 1024, 50257), gqa}) {
    spec.attention = AttentionKind::Eager; // whose products are all GEMMs
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
    // A fused kernel executes half the layer's 4·s²·h attention FLOPs (causal), and its
    // backward 2.5 times that where the layer counts twice the forward.
    spec.attention = AttentionKind::Flash;
    TransformerShape flash = transformerShape(spec, 2);
    EXPECT_TRUE(fusedAttention(flash.attention));
    LayerWork work = transformerWork(flash, TransformerLayer::Block, 1, false);
    const LayerSpec &block = (*layers)[1];
    const double attention = 4.0 * spec.seqLength * spec.seqLength * spec.hiddenSize;
    EXPECT_DOUBLE_EQ(work.forward.flops() + work.attentionCore.flops(),
                     block.fwdFlops - attention / 2);
    EXPECT_DOUBLE_EQ(work.inputGradient.flops(),
                     block.bwdFlops - block.bwdWeightFlops - 2 * attention + 2.5 * attention / 2);
  }
}

// How the element-wise operations ran and which norm the model has reach the shape the tuner
// prices, as they reach the compiler's from the IR (passes/CostModelBuilder.cpp).
TEST(JobCosts, TheShapeSaysHowElementwiseOperationsRan) {
  TransformerSpec spec = gpt(2, 768, 12, 1024, 50257);
  EXPECT_EQ(transformerShape(spec, 2).elementwise, ElementwiseKind::Fused);
  EXPECT_FALSE(transformerShape(spec, 2).rmsNorm);
  spec.norm = NormKind::RMSNorm;
  spec.elementwise = ElementwiseKind::EagerFusedNorm;
  const TransformerShape shape = transformerShape(spec, 2);
  EXPECT_EQ(shape.elementwise, ElementwiseKind::EagerFusedNorm);
  EXPECT_TRUE(shape.rmsNorm);
}

// How the optimizer's update runs reaches the tuner's cost inputs as it reaches the
// compiler's (passes/CostModelBuilder.cpp); CostModelTest prices each kind.
TEST(JobCosts, TheOptimizersKernelsReachTheCostInputs) {
  Job job;
  job.model.transformer = gpt(2, 768, 12, 1024, 50257);
  EXPECT_EQ(jobCostInputs(job).optimizerKernels, OptimizerKernels::Fused);
  for (OptimizerKernels kernels : {OptimizerKernels::Foreach, OptimizerKernels::PerTensor}) {
    job.training.optimizerKernels = kernels;
    EXPECT_EQ(jobCostInputs(job).optimizerKernels, kernels);
  }
}

} // namespace
