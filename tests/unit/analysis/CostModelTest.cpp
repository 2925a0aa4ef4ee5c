//===- CostModelTest.cpp - compute and communication times ----------------===//
//
// The roofline of transformer layers against hand-computed figures (compute-bound and
// memory-bound products, what grows with the micro-batch, Megatron's partitioning over T, what
// sequence parallelism divides), the FLOP-based formula of other layers, the recomputation
// terms, and the tensor dimension: global ranks, links and the tensor group's collectives.
//
//===----------------------------------------------------------------------===//

#include "analysis/CostModel.h"

#include <algorithm>
#include <gtest/gtest.h>

using namespace conduit;

namespace {

/// An A100-80GB-like device: 312 TFLOP/s peak, 0.5 ceiling, 2.039 TB/s.
Cluster a100() {
  Cluster c;
  c.preset = "a100-80gb";
  c.peakFlops = 312e12;
  c.efficiency = 0.5;
  c.memoryBandwidth = 2.039e12;
  c.memoryBytes = int64_t(80) << 30;
  c.gpusPerNode = 8;
  c.intraNodeBandwidth = 300e9;
  c.interNodeBandwidth = 25e9;
  c.latencyS = 10e-6;
  return c;
}

/// The 52B shape of docs/results.md: 64 blocks, h 8192, 64 heads, s 2048, V 51200.
TransformerShape gpt52b() {
  TransformerShape x;
  x.numLayers = 64;
  x.seqLength = 2048;
  x.hiddenSize = 8192;
  x.numHeads = 64;
  x.numKvHeads = 64;
  x.ffnHiddenSize = 4 * 8192;
  x.vocabSize = 51200;
  return x;
}

/// The 52B shape with fused attention, a gated MLP and 64 experts of 2048 (4 a token) over
/// 8 expert ranks, the first block dense.
TransformerShape moe52b() {
  TransformerShape x = gpt52b();
  x.attention = AttentionKind::Flash;
  x.gated = true;
  x.numExperts = 64;
  x.topK = 4;
  x.expertFfnHiddenSize = 2048;
  x.denseLayers = 1;
  x.expert = 8;
  return x;
}

/// Cost inputs for `shape`'s chain (FLOPs left at zero: the roofline must not read them).
CostInputs transformerInputs(const TransformerShape &shape, int64_t tensor = 1,
                             bool sequenceParallel = false) {
  CostInputs in;
  in.cluster = a100();
  in.tensor = tensor;
  in.sequenceParallel = sequenceParallel;
  in.transformer = shape;
  const int64_t last = shape.numLayers + shape.mtpLayers + 1;
  for (int64_t l = 0; l <= last; ++l) {
    in.names.push_back("layer" + std::to_string(l));
    in.kinds.push_back(l == 0      ? runtime::LayerKind::Embedding
                       : l == last ? runtime::LayerKind::Head
                                   : runtime::LayerKind::Block);
    in.fwdFlops.push_back(0);
    in.bwdFlops.push_back(0);
    in.bwdWeightFlops.push_back(0);
  }
  return in;
}

CostModel build(const CostInputs &in) {
  llvm::Expected<CostModel> cost = CostModel::build(in);
  if (!cost) {
    ADD_FAILURE() << llvm::toString(cost.takeError());
    return llvm::cantFail(CostModel::build(CostInputs{}));
  }
  return std::move(*cost);
}

double blockForwardFlops(const TransformerShape &x) {
  const double s = x.seqLength, h = x.hiddenSize, f = x.ffnHiddenSize;
  const double c = h / x.numHeads * x.numKvHeads;
  return 2 * s * (2 * h * h + 2 * h * c + (x.gated ? 3 : 2) * h * f) + 4 * s * s * h;
}

TEST(RooflineTest, ProductIsComputeOrMemoryBound) {
  // 2·64³ FLOPs take 0.5 ms at 1 GFLOP/s, 3·64²·2 bytes 2458 s at 10 B/s: memory-bound.
  Gemm square{64, 64, 64, 1, Grows::Rows, false};
  EXPECT_DOUBLE_EQ((Roofline{1e9, 10, 2}.time(square, 1)), 3 * 64 * 64 * 2 / 10.0);
  // At 100 FLOP/s and 1 GB/s: compute-bound.
  EXPECT_DOUBLE_EQ((Roofline{100, 1e9, 2}.time(square, 1)), 2.0 * 64 * 64 * 64 / 100);
  // A weight gradient accumulates its output in fp32: read and written, 8 bytes an element.
  Gemm accumulated{64, 64, 64, 1, Grows::Inner, true};
  EXPECT_DOUBLE_EQ(accumulated.bytes(2), (64 * 64 + 64 * 64) * 2.0 + 64 * 64 * 8);
}

TEST(RooflineTest, EachKindOfProductGrowsItsOwnDimension) {
  Gemm rows{2, 3, 4, 5, Grows::Rows, false}, inner{2, 3, 4, 5, Grows::Inner, false},
      batch{2, 3, 4, 5, Grows::Batch, false};
  EXPECT_DOUBLE_EQ(rows.forSamples(7).m, 14);
  EXPECT_DOUBLE_EQ(inner.forSamples(7).k, 28);
  EXPECT_DOUBLE_EQ(batch.forSamples(7).batch, 35);
  // The FLOPs grow alike; the weights (k x n) of a token GEMM are read once per micro-batch.
  for (const Gemm &g : {rows, inner, batch})
    EXPECT_DOUBLE_EQ(g.forSamples(7).flops(), 7 * g.flops());
  EXPECT_DOUBLE_EQ(rows.forSamples(7).bytes(2) - 7 * rows.bytes(2), -6 * 5 * 4 * 3 * 2.0);
}

TEST(RooflineTest, BlockFlopsAreMegatronsCountDividedByT) {
  for (bool gated : {false, true})
    for (int64_t kvHeads : {64, 8})
      for (int64_t t : {1, 2, 4, 8}) {
        TransformerShape x = gpt52b();
        x.gated = gated;
        x.numKvHeads = kvHeads;
        LayerWork w = transformerWork(x, TransformerLayer::Block, t, false);
        const double fwd = blockForwardFlops(x) / t;
        const double core = 4.0 * x.seqLength * x.seqLength * x.hiddenSize / t;
        EXPECT_DOUBLE_EQ(w.attentionCore.flops(), core);
        EXPECT_DOUBLE_EQ(w.forward.flops() + w.attentionCore.flops(), fwd);
        // The input gradient: every GEMM's dX and twice the core; the weight gradient: every
        // weight GEMM once.
        EXPECT_DOUBLE_EQ(w.inputGradient.flops(), fwd + core);
        EXPECT_DOUBLE_EQ(w.weightGradient.flops(), fwd - core);
      }
}

TEST(RooflineTest, HeadAndEmbeddingAreVocabularyParallel) {
  TransformerShape x = gpt52b();
  const double s = x.seqLength, h = x.hiddenSize, v = x.vocabSize;
  for (int64_t t : {1, 8}) {
    LayerWork head = transformerWork(x, TransformerLayer::Head, t, false);
    EXPECT_DOUBLE_EQ(head.forward.flops(), 2 * s * h * v / t);
    EXPECT_DOUBLE_EQ(head.inputGradient.flops(), 2 * s * h * v / t);
    EXPECT_DOUBLE_EQ(head.weightGradient.flops(), 2 * s * h * v / t);
    LayerWork embedding = transformerWork(x, TransformerLayer::Embedding, t, false);
    EXPECT_TRUE(embedding.forward.gemms.empty());
    EXPECT_GT(embedding.forward.memoryBytes, 0);
    EXPECT_DOUBLE_EQ(embedding.inputGradient.memoryBytes, 0); // token ids have no gradient
  }
}

TEST(RooflineTest, SequenceParallelDividesNormsAndResiduals) {
  TransformerShape x = gpt52b();
  const double s = x.seqLength, h = x.hiddenSize, e = 2;
  LayerWork replicated = transformerWork(x, TransformerLayer::Block, 8, false);
  LayerWork split = transformerWork(x, TransformerLayer::Block, 8, true);
  // Forward: two norms (2·s·h each) and two residual adds (3·s·h each), now s·h/8 each.
  EXPECT_DOUBLE_EQ(replicated.forward.memoryBytes - split.forward.memoryBytes,
                   e * 10 * s * h * (1 - 1.0 / 8));
  EXPECT_DOUBLE_EQ(replicated.forward.flops(), split.forward.flops());
  EXPECT_DOUBLE_EQ(replicated.attentionCore.memoryBytes, split.attentionCore.memoryBytes);
}

TEST(CostModelTest, LargeShapesRunAtTheCeilingSmallOnesBelow) {
  // The 52B block at micro-batch 1: compute-bound, so its time is close to its FLOPs at the
  // ceiling (the element-wise passes add a few percent).
  CostModel cost = build(transformerInputs(gpt52b()));
  const double rate = 312e12 * 0.5;
  const double ideal = blockForwardFlops(gpt52b()) / rate;
  EXPECT_GT(cost.forwardTime(1, 1), ideal);
  EXPECT_LT(cost.forwardTime(1, 1), 1.1 * ideal);
  // A narrow shape at one short sample is memory-bound: far below the ceiling, and a bigger
  // micro-batch costs less per sample.
  TransformerShape tiny = gpt52b();
  tiny.numLayers = 2;
  tiny.hiddenSize = 256;
  tiny.numHeads = 4;
  tiny.numKvHeads = 4;
  tiny.ffnHiddenSize = 1024;
  tiny.seqLength = 16;
  CostModel small = build(transformerInputs(tiny));
  EXPECT_GT(small.forwardTime(1, 1), 5 * blockForwardFlops(tiny) / rate);
  EXPECT_LT(small.forwardTime(1, 64), 64 * small.forwardTime(1, 1) / 2);
}

TEST(CostModelTest, TensorParallelRanksComputeATthEach) {
  CostModel one = build(transformerInputs(gpt52b(), 1));
  for (int64_t t : {2, 4, 8}) {
    CostModel split = build(transformerInputs(gpt52b(), t));
    EXPECT_EQ(split.tensorSize(), t);
    // Compute-bound GEMMs divide exactly; the replicated norms and residuals do not.
    EXPECT_GT(split.forwardTime(1, 1), one.forwardTime(1, 1) / t);
    EXPECT_LT(split.forwardTime(1, 1), 1.1 * one.forwardTime(1, 1) / t);
    CostModel sequence = build(transformerInputs(gpt52b(), t, true));
    EXPECT_LT(sequence.forwardTime(1, 1), split.forwardTime(1, 1));
    EXPECT_LT(sequence.backwardTime(1, 1), split.backwardTime(1, 1));
  }
}

TEST(CostModelTest, BackwardIsTheSumOfItsHalves) {
  CostInputs in = transformerInputs(gpt52b(), 4);
  in.cluster.launchOverheadS = 20e-6;
  CostModel cost = build(in);
  for (int64_t l : {0, 1, 65})
    for (int64_t b : {1, 4}) {
      // A whole backward pays the launch overhead once, its halves once each.
      EXPECT_NEAR(cost.backwardTime(l, b),
                  cost.inputGradientTime(l, b) + cost.weightGradientTime(l, b) - 20e-6, 1e-12);
    }
  // The embedding's backward is all weight gradient.
  EXPECT_DOUBLE_EQ(cost.inputGradientTime(0, 1), 20e-6);
}

TEST(CostModelTest, RecomputationIsItsOwnTerm) {
  CostInputs in = transformerInputs(gpt52b());
  CostModel plain = build(in);
  in.checkpointing = runtime::Checkpointing::Full;
  CostModel recomputed = build(in);
  for (int64_t l : {0, 1, 65}) {
    EXPECT_DOUBLE_EQ(plain.recomputeTime(l, 2), 0);
    EXPECT_DOUBLE_EQ(recomputed.recomputeTime(l, 2), recomputed.forwardTime(l, 2));
    EXPECT_DOUBLE_EQ(recomputed.backwardTime(l, 2),
                     plain.backwardTime(l, 2) + recomputed.forwardTime(l, 2));
    EXPECT_DOUBLE_EQ(recomputed.inputGradientTime(l, 2),
                     plain.inputGradientTime(l, 2) + recomputed.forwardTime(l, 2));
    EXPECT_DOUBLE_EQ(recomputed.weightGradientTime(l, 2), plain.weightGradientTime(l, 2));
  }
  // The attention core is part of a block's forward (4·s²·h of its FLOPs, and the softmax).
  in.checkpointing = runtime::Checkpointing::None;
  in.recomputeModules = runtime::kRecomputeCoreAttention;
  CostModel selective = build(in);
  const double core = selective.selectiveRecomputeTime(1, 2);
  EXPECT_GT(core, 0);
  EXPECT_LT(core, plain.forwardTime(1, 2) / 4);
  EXPECT_DOUBLE_EQ(selective.selectiveRecomputeTime(0, 2), 0);
  EXPECT_DOUBLE_EQ(selective.selectiveRecomputeTime(65, 2), 0);
  EXPECT_DOUBLE_EQ(plain.selectiveRecomputeTime(1, 2), 0);
}

// `blocks` recomputes the blocks as `full` does, and neither the embedding nor the head.
TEST(CostModelTest, BlocksCheckpointingRecomputesTheBlocksOnly) {
  CostInputs in = transformerInputs(gpt52b());
  in.checkpointing = runtime::Checkpointing::Full;
  CostModel full = build(in);
  in.checkpointing = runtime::Checkpointing::Blocks;
  CostModel blocks = build(in);
  for (int64_t l : {1, 2, 64}) {
    EXPECT_GT(blocks.recomputeTime(l, 2), 0);
    EXPECT_DOUBLE_EQ(blocks.recomputeTime(l, 2), full.recomputeTime(l, 2));
    EXPECT_DOUBLE_EQ(blocks.backwardTime(l, 2), full.backwardTime(l, 2));
  }
  for (int64_t l : {0, 65}) {
    EXPECT_GT(full.recomputeTime(l, 2), 0);
    EXPECT_DOUBLE_EQ(blocks.recomputeTime(l, 2), 0);
    EXPECT_NEAR(blocks.backwardTime(l, 2), full.backwardTime(l, 2) - full.forwardTime(l, 2), 1e-15);
    EXPECT_NEAR(blocks.inputGradientTime(l, 2),
                full.inputGradientTime(l, 2) - full.forwardTime(l, 2), 1e-15);
  }
  // Layers of a list without kinds are custom, recomputed as full's.
  in.kinds.clear();
  EXPECT_DOUBLE_EQ(build(in).recomputeTime(65, 2), full.recomputeTime(65, 2));
}

// Selective checkpointing repeats a block's attention core in its backward (or input
// gradient), nothing of the embedding and the head.
TEST(CostModelTest, SelectiveRecomputationRepeatsTheAttentionCore) {
  CostInputs in = transformerInputs(gpt52b());
  CostModel plain = build(in);
  in.recomputeModules = runtime::kRecomputeCoreAttention;
  CostModel selective = build(in);
  // The eager core's two products and its softmax, as the forward runs them.
  const Roofline roofline = Roofline::of(in.cluster, 2);
  EXPECT_DOUBLE_EQ(
      selective.selectiveRecomputeTime(1, 2),
      roofline.time(transformerWork(gpt52b(), TransformerLayer::Block, 1, false).attentionCore, 2));
  for (int64_t l : {0, 1, 65}) {
    const double core = selective.selectiveRecomputeTime(l, 2);
    EXPECT_DOUBLE_EQ(selective.recomputeTime(l, 2), core);
    EXPECT_DOUBLE_EQ(selective.forwardTime(l, 2), plain.forwardTime(l, 2));
    EXPECT_DOUBLE_EQ(selective.backwardTime(l, 2), plain.backwardTime(l, 2) + core);
    EXPECT_DOUBLE_EQ(selective.inputGradientTime(l, 2), plain.inputGradientTime(l, 2) + core);
    EXPECT_DOUBLE_EQ(selective.weightGradientTime(l, 2), plain.weightGradientTime(l, 2));
  }
  EXPECT_GT(selective.recomputeTime(1, 2), 0);
}

// A fused attention kernel executes half the causal products, its backward 2.5 forwards, at the
// FlashAttention papers' efficiency; it keeps no scores, so selective checkpointing repeats
// nothing.
TEST(CostModelTest, FlashAttentionIsOneFusedKernelPerPass) {
  TransformerShape x = gpt52b();
  x.attention = AttentionKind::Flash;
  const double s = x.seqLength, h = x.hiddenSize;
  for (int64_t t : {1, 8}) {
    LayerWork w = transformerWork(x, TransformerLayer::Block, t, false);
    EXPECT_TRUE(w.attentionCore.gemms.empty());
    EXPECT_DOUBLE_EQ(w.attentionCore.flops(), 2 * s * s * h / t); // half of 4·s²·h
    EXPECT_DOUBLE_EQ(w.inputGradient.attention.flops(), 2.5 * 2 * s * s * h / t);
    EXPECT_DOUBLE_EQ(w.attentionCore.memoryBytes, 0);
  }
  // On a device with kernel figures, at the sequence length they were measured at and with
  // full waves, the kernel runs at the measured fraction of the peak.
  Cluster h100 = clusterPresets()[1];
  ASSERT_EQ(h100.preset, "h100-80gb");
  Roofline r = Roofline::of(h100, 2);
  FusedAttention forward{132, 16384, 128, false}, backward{132, 16384, 128, true};
  EXPECT_NEAR(forward.flops() / r.time(forward, 1) / h100.peakFlops, h100.kernels.attentionForward,
              1e-12);
  EXPECT_NEAR(backward.flops() / r.time(backward, 1) / h100.peakFlops,
              h100.kernels.attentionBackward, 1e-12);
  // Shorter sequences run below it.
  FusedAttention shorter{132, 1024, 128, false};
  EXPECT_LT(shorter.flops(16) / r.time(shorter, 16) / h100.peakFlops,
            0.95 * h100.kernels.attentionForward);
  // The backward's fixed cost is larger (it loads K and V, writes dK and dV, accumulates dQ):
  // at 1k tokens it keeps 57-61% of its 16k rate on an H200 (FlashAttention-2 and cuDNN,
  // testdata/measured/h200-kernels.json); the forward, with one block's worth, keeps more.
  FusedAttention shorterBackward{132, 1024, 128, true};
  const double backwardKept = shorterBackward.flops(16) / r.time(shorterBackward, 16) /
                              h100.peakFlops / h100.kernels.attentionBackward;
  const double forwardKept =
      shorter.flops(16) / r.time(shorter, 16) / h100.peakFlops / h100.kernels.attentionForward;
  EXPECT_GT(backwardKept, 0.55);
  EXPECT_LT(backwardKept, 0.65);
  EXPECT_GT(forwardKept, backwardKept + 0.1);
  // FlashAttention-2 on the same device: its own measured fraction (FlashAttention-3's paper:
  // 335 and 322 TFLOP/s where FlashAttention-3 runs 616 and 561); on A100, where it is the
  // best kernel, the same time as flash.
  FusedAttention forward2{132, 16384, 128, false, AttentionKind::Flash2},
      backward2{132, 16384, 128, true, AttentionKind::Flash2};
  EXPECT_NEAR(forward2.flops() / r.time(forward2, 1), 335e12, 1e3);
  EXPECT_NEAR(backward2.flops() / r.time(backward2, 1), 322e12, 1e3);
  Roofline a100 = Roofline::of(clusterPresets()[0], 2);
  EXPECT_DOUBLE_EQ(a100.time(forward2, 3), a100.time(forward, 3));
  TransformerShape x2 = x;
  x2.attention = AttentionKind::Flash2;
  LayerWork w2 = transformerWork(x2, TransformerLayer::Block, 1, false);
  EXPECT_EQ(w2.attentionCore.attention.kernel, AttentionKind::Flash2);
  EXPECT_EQ(w2.inputGradient.attention.kernel, AttentionKind::Flash2);
  EXPECT_DOUBLE_EQ(w2.attentionCore.flops(), 2 * s * s * h); // the same FLOPs, slower
  // FlashAttention in Triton: FlashAttention-2's rate over FlashAttention-2's measured speed-up
  // against it (1.4 forward, 2 backward), on either device; the same FLOPs.
  FusedAttention forwardTriton{132, 16384, 128, false, AttentionKind::FlashTriton},
      backwardTriton{132, 16384, 128, true, AttentionKind::FlashTriton};
  for (const Roofline &device : {r, a100}) {
    EXPECT_DOUBLE_EQ(device.time(forwardTriton, 3), 1.4 * device.time(forward2, 3));
    EXPECT_DOUBLE_EQ(device.time(backwardTriton, 3), 2.0 * device.time(backward2, 3));
  }
  TransformerShape xTriton = x;
  xTriton.attention = AttentionKind::FlashTriton;
  LayerWork wTriton = transformerWork(xTriton, TransformerLayer::Block, 1, false);
  EXPECT_EQ(wTriton.attentionCore.attention.kernel, AttentionKind::FlashTriton);
  EXPECT_EQ(wTriton.inputGradient.attention.kernel, AttentionKind::FlashTriton);
  EXPECT_DOUBLE_EQ(wTriton.attentionCore.flops(), 2 * s * s * h);

  CostInputs in = transformerInputs(x);
  CostModel plain = build(in);
  in.recomputeModules = runtime::kRecomputeCoreAttention;
  CostModel selective = build(in);
  EXPECT_DOUBLE_EQ(selective.recomputeTime(1, 2), 0);
  EXPECT_DOUBLE_EQ(selective.backwardTime(1, 2), plain.backwardTime(1, 2));
}

// A multi-token prediction module is priced as a block of the model's kind (experts and
// all) with the projection of its inputs and the shared head's products, and the chain must
// hold it between the blocks and the head.
TEST(CostModelTest, AMultiTokenPredictionModuleIsABlockWithTheHeadsWork) {
  TransformerShape x = moe52b();
  x.numLayers = 4;
  x.mtpLayers = 1;
  const double s = x.seqLength, h = x.hiddenSize;
  const LayerWork mtp = transformerWork(x, TransformerLayer::Mtp, 1, false, 4),
                  block = transformerWork(x, TransformerLayer::Block, 1, false, 4),
                  head = transformerWork(x, TransformerLayer::Head, 1, false);
  EXPECT_DOUBLE_EQ(mtp.forward.flops(),
                   block.forward.flops() + head.forward.flops() + 2 * s * 2 * h * h);
  EXPECT_DOUBLE_EQ(mtp.weightGradient.flops(),
                   block.weightGradient.flops() + head.weightGradient.flops() + 2 * s * 2 * h * h);
  EXPECT_DOUBLE_EQ(mtp.expertsForward.flops(), block.expertsForward.flops());
  EXPECT_GT(mtp.forward.memoryBytes, block.forward.memoryBytes + head.forward.memoryBytes);
  CostInputs in = transformerInputs(x);
  ASSERT_EQ(in.fwdFlops.size(), 7u); // embedding, 4 blocks, the module, head
  llvm::Expected<CostModel> cost = CostModel::build(in);
  ASSERT_TRUE(static_cast<bool>(cost)) << llvm::toString(cost.takeError());
  EXPECT_GT(cost->forwardTime(5, 1), cost->forwardTime(4, 1));
  in.transformer->mtpLayers = 0;
  llvm::Expected<CostModel> wrong = CostModel::build(in);
  ASSERT_FALSE(static_cast<bool>(wrong));
  EXPECT_NE(llvm::toString(wrong.takeError()).find("so its chain has 6 layers"), std::string::npos);
}

// PyTorch's eager mode runs the reference Llama code op by op: its kernels move more bytes than
// the fused ones by the counts of docs/cost-model.md, with the same products. A GPT-2 block
// (LayerNorm and GELU, native kernels; learned positions; one QKV product) moves the same.
TEST(CostModelTest, EagerElementwiseAddsItsKernelsTraffic) {
  TransformerShape x; // Llama 3 8B's shape
  x.numLayers = 2;
  x.seqLength = 8192;
  x.hiddenSize = 4096;
  x.numHeads = 32;
  x.numKvHeads = 8;
  x.ffnHiddenSize = 14336;
  x.vocabSize = 128256;
  x.gated = x.rotary = x.rmsNorm = true;
  x.attention = AttentionKind::Flash;
  const double s = x.seqLength, h = x.hiddenSize, q = h, c = 1024, f = x.ffnHiddenSize,
               v = x.vocabSize;
  auto work = [&](TransformerShape shape, ElementwiseKind kind, TransformerLayer layer) {
    shape.elementwise = kind;
    return transformerWork(shape, layer, 1, false);
  };
  const LayerWork fused = work(x, ElementwiseKind::Fused, TransformerLayer::Block),
                  eager = work(x, ElementwiseKind::Eager, TransformerLayer::Block),
                  fusedNorm = work(x, ElementwiseKind::EagerFusedNorm, TransformerLayer::Block);
  // Rotary through fp32 (cast up 6, complex product 8, cast down 6, for the fused 4), SwiGLU's
  // two kernels (2e forward, 4e backward), keys and values repeated from 1,024 to 4,096 wide,
  // and in the backward three sums of a norm output's gradients (wq, wk, wv; w1, w3).
  const double rotary = 16 * s * (q + c), repeated = 2 * 2 * s * (q + c);
  EXPECT_DOUBLE_EQ(fusedNorm.forward.memoryBytes - fused.forward.memoryBytes,
                   rotary + 4 * s * f + repeated);
  EXPECT_DOUBLE_EQ(fusedNorm.inputGradient.memoryBytes - fused.inputGradient.memoryBytes,
                   rotary + 8 * s * f + repeated + 3 * 6 * s * h);
  // The RMSNorms in fp32 ops: 36 bytes forward for the fused 4, 92 backward for 6.
  EXPECT_DOUBLE_EQ(eager.forward.memoryBytes - fusedNorm.forward.memoryBytes, 2 * 32 * s * h);
  EXPECT_DOUBLE_EQ(eager.inputGradient.memoryBytes - fusedNorm.inputGradient.memoryBytes,
                   2 * 86 * s * h);
  EXPECT_DOUBLE_EQ(eager.forward.flops(), fused.forward.flops());
  EXPECT_DOUBLE_EQ(eager.inputGradient.flops(), fused.inputGradient.flops());
  // The head: the final norm, and the loss on fp32 logits (a log-softmax written forward; a
  // zero-filled gradient, the log-softmax's gradient and the cast back backward).
  const LayerWork fusedHead = work(x, ElementwiseKind::Fused, TransformerLayer::Head),
                  eagerHead = work(x, ElementwiseKind::Eager, TransformerLayer::Head);
  EXPECT_DOUBLE_EQ(eagerHead.forward.memoryBytes - fusedHead.forward.memoryBytes,
                   32 * s * h + 8 * s * v);
  EXPECT_DOUBLE_EQ(eagerHead.inputGradient.memoryBytes - fusedHead.inputGradient.memoryBytes,
                   86 * s * h + 16 * s * v);
  // torchtitan's op-level checkpointing repeats the eager forward's passes.
  TransformerShape op = x;
  op.recomputeModules = runtime::kRecomputeOp;
  EXPECT_DOUBLE_EQ(
      work(op, ElementwiseKind::Eager, TransformerLayer::Block).recomputed.memoryBytes -
          work(op, ElementwiseKind::Fused, TransformerLayer::Block).recomputed.memoryBytes,
      eager.forward.memoryBytes - fused.forward.memoryBytes);
  // In fp32 there is nothing to cast: rotary moves what the fused kernel does.
  TransformerShape fp32 = x;
  fp32.elementBytes = 4;
  EXPECT_DOUBLE_EQ(
      work(fp32, ElementwiseKind::EagerFusedNorm, TransformerLayer::Block).forward.memoryBytes -
          work(fp32, ElementwiseKind::Fused, TransformerLayer::Block).forward.memoryBytes,
      4 * 2 * s * f + 2 * 4 * s * (q + c));
  // GPT-2's block is unchanged; its loss is not.
  TransformerShape gpt = gpt52b();
  gpt.attention = AttentionKind::Flash;
  EXPECT_DOUBLE_EQ(work(gpt, ElementwiseKind::Eager, TransformerLayer::Block).forward.memoryBytes,
                   work(gpt, ElementwiseKind::Fused, TransformerLayer::Block).forward.memoryBytes);
  EXPECT_DOUBLE_EQ(
      work(gpt, ElementwiseKind::Eager, TransformerLayer::Block).inputGradient.memoryBytes,
      work(gpt, ElementwiseKind::Fused, TransformerLayer::Block).inputGradient.memoryBytes);
  EXPECT_DOUBLE_EQ(
      work(gpt, ElementwiseKind::Eager, TransformerLayer::Head).forward.memoryBytes -
          work(gpt, ElementwiseKind::Fused, TransformerLayer::Head).forward.memoryBytes,
      8 * gpt.seqLength * gpt.vocabSize);
  // And the time: slower by those bytes at the device's streaming rate.
  CostInputs in = transformerInputs(x);
  CostModel fusedCost = build(in);
  in.transformer->elementwise = ElementwiseKind::Eager;
  CostModel eagerCost = build(in);
  EXPECT_GT(eagerCost.forwardTime(1, 1), fusedCost.forwardTime(1, 1));
  EXPECT_GT(eagerCost.backwardTime(1, 1), fusedCost.backwardTime(1, 1));
}

// Alike blocks repeat the previous layer's times, which the stage sums reuse: the same sums
// as adding every layer's own time.
TEST(CostModelTest, AlikeBlocksRepeatThePreviousLayersTimes) {
  TransformerShape x = moe52b();
  x.numLayers = 6;
  x.denseLayers = 2;
  CostInputs in = transformerInputs(x, 2, true);
  in.checkpointing = runtime::Checkpointing::Full;
  CostModel cost = build(in);
  // Layers: embedding, two dense blocks, four with experts, head.
  const bool repeats[] = {false, false, true, false, true, true, true, false};
  for (int64_t l = 0; l < cost.numLayers(); ++l)
    EXPECT_EQ(cost.repeatsPrevious(l), repeats[l]) << "layer " << l;
  for (int64_t samples : {1, 3})
    for (auto [first, end] : {std::pair{0, 8}, std::pair{2, 6}, std::pair{3, 4}}) {
      double forward = 0, backward = 0, input = 0, weight = 0;
      for (int64_t l = first; l < end; ++l) {
        forward += cost.forwardTime(l, samples);
        backward += cost.backwardTime(l, samples);
        input += cost.inputGradientTime(l, samples);
        weight += cost.weightGradientTime(l, samples);
      }
      EXPECT_EQ(cost.stageForwardTime(first, end, samples), forward);
      EXPECT_EQ(cost.stageBackwardTime(first, end, samples), backward);
      EXPECT_EQ(cost.stageInputGradientTime(first, end, samples), input);
      EXPECT_EQ(cost.stageWeightGradientTime(first, end, samples), weight);
    }
  // A layer list (no transformer) repeats nothing.
  CostInputs list = in;
  list.transformer.reset();
  CostModel chain = build(list);
  for (int64_t l = 0; l < chain.numLayers(); ++l)
    EXPECT_FALSE(chain.repeatsPrevious(l));
}

// A block with experts states its mixture-of-experts layer apart (what moe_layer_check.py
// prices against measured layers): the router and the routed experts' grouped GEMMs, each
// also among the block's, the routed tokens' activation and permutation and the router's
// softmax; the shared part of the block (attention, norms) is not in it, and a dense block
// has none.
TEST(CostModelTest, TheExpertsLayerIsItsPartOfTheBlock) {
  const TransformerShape x = moe52b();
  const double t = 2, tokens = x.seqLength / t, h = x.hiddenSize, fe = x.expertFfnHiddenSize;
  const double n = x.numExperts, k = x.topK;
  const LayerWork dense = transformerWork(x, TransformerLayer::Block, 2, true, 0);
  for (const Work *w :
       {&dense.expertsForward, &dense.expertsInputGradient, &dense.expertsWeightGradient}) {
    EXPECT_TRUE(w->gemms.empty());
    EXPECT_DOUBLE_EQ(w->memoryBytes, 0);
  }
  const LayerWork moe = transformerWork(x, TransformerLayer::Block, 2, true, 1);
  // Router: tokens x N x h; up and gate, down: K routed copies of the tokens (imbalance 1).
  const double flops = 2 * tokens * h * n + 2 * k * tokens * h * 3 * fe;
  EXPECT_DOUBLE_EQ(moe.expertsForward.flops(), flops);
  EXPECT_DOUBLE_EQ(moe.expertsInputGradient.flops(), flops);
  EXPECT_DOUBLE_EQ(moe.expertsWeightGradient.flops(), flops);
  EXPECT_DOUBLE_EQ(moe.expertsForward.memoryBytes,
                   2 * (3 * k * tokens * fe + 4 * k * tokens * h + 2 * tokens * n));
  EXPECT_DOUBLE_EQ(moe.expertsInputGradient.memoryBytes,
                   2 * (5 * k * tokens * fe + 4 * k * tokens * h + 3 * tokens * n));
  for (auto [part, whole] : {std::pair{&moe.expertsForward, &moe.forward},
                             std::pair{&moe.expertsInputGradient, &moe.inputGradient},
                             std::pair{&moe.expertsWeightGradient, &moe.weightGradient}}) {
    for (const Gemm &g : part->gemms)
      EXPECT_TRUE(std::any_of(whole->gemms.begin(), whole->gemms.end(), [&](const Gemm &b) {
        return b.m == g.m && b.n == g.n && b.k == g.k && b.batch == g.batch;
      }));
    EXPECT_LT(part->flops(), whole->flops()); // the attention's products are not in it
  }
  EXPECT_LT(moe.expertsForward.memoryBytes, moe.forward.memoryBytes);
  EXPECT_LT(moe.expertsInputGradient.memoryBytes, moe.inputGradient.memoryBytes);
}

// Priced as Megatron-LM's MoE layer (model.moe.kernels "megatron"), the experts' products
// take 1.37 times as long and each pass reads and writes the routed tokens' hidden + expert
// elements more times (6.1 forward, 13.3 backward, with the input gradient), at the
// element-wise kernels' rate: the layer's own passes and the block's change by the same time,
// and a dense block not at all.
TEST(CostModelTest, MegatronExpertsPriceItsMeasuredLayer) {
  const TransformerShape grouped = moe52b();
  TransformerShape megatron = grouped;
  megatron.megatronExperts = true;
  const Roofline roofline = Roofline::of(a100(), 2);
  const LayerWork a = transformerWork(grouped, TransformerLayer::Block, 2, true, 1);
  const LayerWork b = transformerWork(megatron, TransformerLayer::Block, 2, true, 1);
  const double tokens = grouped.seqLength / 2.0, h = grouped.hiddenSize;
  const double routed = grouped.topK * tokens * (h + grouped.expertFfnHiddenSize);
  for (int samples : {1, 3}) {
    const double extra[3] = {0.37 * roofline.gemmTime(a.expertsForward, samples) +
                                 2 * 6.1 * routed * samples / roofline.streamBandwidth(),
                             0.37 * roofline.gemmTime(a.expertsInputGradient, samples) +
                                 2 * 13.3 * routed * samples / roofline.streamBandwidth(),
                             0.37 * roofline.gemmTime(a.expertsWeightGradient, samples)};
    const Work *pairs[3][4] = {
        {&a.expertsForward, &b.expertsForward, &a.forward, &b.forward},
        {&a.expertsInputGradient, &b.expertsInputGradient, &a.inputGradient, &b.inputGradient},
        {&a.expertsWeightGradient, &b.expertsWeightGradient, &a.weightGradient, &b.weightGradient}};
    for (int pass = 0; pass < 3; ++pass) {
      auto [layerA, layerB, blockA, blockB] = pairs[pass];
      EXPECT_NEAR(roofline.time(*layerB, samples) - roofline.time(*layerA, samples), extra[pass],
                  1e-9 * extra[pass])
          << "pass " << pass;
      EXPECT_NEAR(roofline.time(*blockB, samples) - roofline.time(*blockA, samples), extra[pass],
                  1e-9 * extra[pass])
          << "pass " << pass;
    }
  }
  // The attention and a dense block are the same either way.
  EXPECT_DOUBLE_EQ(roofline.time(b.attentionCore, 2), roofline.time(a.attentionCore, 2));
  EXPECT_DOUBLE_EQ(
      roofline.time(transformerWork(megatron, TransformerLayer::Block, 2, true, 0).forward, 2),
      roofline.time(transformerWork(grouped, TransformerLayer::Block, 2, true, 0).forward, 2));
}

// In FP8 the routed experts' tokens are cast before their grouped products and their output
// gradients before the backward's (per element: read e bytes, write the operand and its
// transpose), counted in the block's passes and the layer's own; the router stays in the
// element type and casts nothing.
TEST(CostModelTest, Fp8CastsTheRoutedTokensNotTheRoutersInput) {
  TransformerShape x = moe52b();
  x.fp8 = true;
  const LayerWork w = transformerWork(x, TransformerLayer::Block, 2, true, 1);
  const double tokens = x.seqLength / 2.0, h = x.hiddenSize, fe = x.expertFfnHiddenSize;
  const double routed = x.topK * tokens, perElement = 2 + 2;
  // Up and gate read h, down reads fe; their output gradients are 2 fe and h wide.
  EXPECT_DOUBLE_EQ(w.expertsForward.castBytes, perElement * routed * (h + fe));
  EXPECT_DOUBLE_EQ(w.expertsInputGradient.castBytes, perElement * routed * (2 * fe + h));
  // Besides, the block casts its attention's two linears (QKV, h wide in, 3h/2 out on each of
  // the two tensor ranks; the output, h/2 in, h out) and nothing for the router.
  EXPECT_DOUBLE_EQ(w.forward.castBytes - w.expertsForward.castBytes,
                   perElement * x.seqLength * (h + h / 2));
  EXPECT_DOUBLE_EQ(w.inputGradient.castBytes - w.expertsInputGradient.castBytes,
                   perElement * x.seqLength * (3 * h / 2 + h));
}

// Megatron-Core's other recompute modules each repeat their own part of a block's forward
// before its backward, priced as the forward prices it, and together their sum; a module
// with nothing to repeat in a block (moe_act in a dense block, mla_up_proj without latent
// attention) costs nothing there.
TEST(CostModelTest, RecomputeModulesRepeatTheirPartOfTheForward) {
  const TransformerShape x = moe52b();
  const Roofline roofline = Roofline::of(a100(), 2);
  auto repeated = [&](uint32_t modules, int64_t block) {
    TransformerShape y = x;
    y.recomputeModules = modules;
    return roofline.time(transformerWork(y, TransformerLayer::Block, 2, true, block).recomputed, 2);
  };
  const double s = x.seqLength, h = x.hiddenSize;
  // layernorm: the two norms, each reading and writing the sequence's T-th part.
  // 2 samples x 2 bytes x (2 norms x 2 elements) x s h / T.
  EXPECT_DOUBLE_EQ(repeated(runtime::kRecomputeLayerNorm, 0),
                   2 * 2 * 4 * (s * h / 2) / roofline.streamBandwidth());
  // mlp: the dense block's MLP forward (its products and its activation), a sizeable part of
  // the block's forward; nothing in a block with experts.
  const double forward =
      roofline.time(transformerWork(x, TransformerLayer::Block, 2, true, 0).forward, 2);
  EXPECT_GT(repeated(runtime::kRecomputeMlp, 0), forward / 3);
  EXPECT_LT(repeated(runtime::kRecomputeMlp, 0), forward);
  EXPECT_DOUBLE_EQ(repeated(runtime::kRecomputeMlp, 1), 0);
  // moe_act: the routed experts' activation, element-wise, in blocks with experts only.
  EXPECT_GT(repeated(runtime::kRecomputeMoeActivation, 1), 0);
  EXPECT_DOUBLE_EQ(repeated(runtime::kRecomputeMoeActivation, 0), 0);
  // No latent attention, no up projections; a fused kernel keeps no scores to recompute.
  EXPECT_DOUBLE_EQ(repeated(runtime::kRecomputeLatentUpProjection, 1), 0);
  EXPECT_DOUBLE_EQ(repeated(runtime::kRecomputeCoreAttention, 1), 0);
  // Together, the sum.
  for (int64_t block : {0, 1})
    EXPECT_DOUBLE_EQ(repeated(runtime::kRecomputeAll & ~runtime::kRecomputeOp, block),
                     repeated(runtime::kRecomputeLayerNorm, block) +
                         repeated(runtime::kRecomputeMlp, block) +
                         repeated(runtime::kRecomputeMoeActivation, block));
  // op (torchtitan's policy) on the dense block: every second product of wq, wk, wv, wo, w1,
  // w3, w2 (wk, wo, w3) and every element-wise pass of the forward again.
  {
    TransformerShape y = x;
    y.recomputeModules = runtime::kRecomputeOp;
    const LayerWork w = transformerWork(y, TransformerLayer::Block, 2, true, 0);
    const double c = h / x.numHeads * x.numKvHeads, f = x.ffnHiddenSize;
    ASSERT_EQ(w.recomputed.gemms.size(), 3u);
    EXPECT_DOUBLE_EQ(w.recomputed.gemms[0].n, c / 2);
    EXPECT_DOUBLE_EQ(w.recomputed.gemms[1].n, h);
    EXPECT_DOUBLE_EQ(w.recomputed.gemms[2].n, f / 2);
    EXPECT_DOUBLE_EQ(w.recomputed.memoryBytes, w.forward.memoryBytes);
    EXPECT_TRUE(w.recomputed.attention.heads == 0); // the fused kernel's output is saved
  }
  // Latent attention: the query and key/value up projections again.
  TransformerShape latent = x;
  latent.qLoraRank = 1536;
  latent.kvLoraRank = 512;
  latent.qkNopeHeadDim = 128;
  latent.qkRopeHeadDim = 64;
  latent.vHeadDim = 128;
  latent.recomputeModules = runtime::kRecomputeLatentUpProjection;
  const LayerWork mla = transformerWork(latent, TransformerLayer::Block, 1, false, 1);
  ASSERT_EQ(mla.recomputed.gemms.size(), 2u);
  EXPECT_DOUBLE_EQ(mla.recomputed.gemms[0].k, 1536);
  EXPECT_DOUBLE_EQ(mla.recomputed.gemms[0].n, 64 * (128 + 64)); // 64 heads
  EXPECT_DOUBLE_EQ(mla.recomputed.gemms[1].k, 512);
  EXPECT_DOUBLE_EQ(mla.recomputed.gemms[1].n, 64 * (128 + 128));
  // And the cost model charges the job's modules to the backward.
  CostInputs in = transformerInputs(x, 2, true);
  CostModel plain = build(in);
  in.recomputeModules = runtime::kRecomputeLayerNorm | runtime::kRecomputeMoeActivation;
  CostModel selective = build(in);
  EXPECT_DOUBLE_EQ(selective.backwardTime(2, 2),
                   plain.backwardTime(2, 2) + repeated(in.recomputeModules, 1));
}

// Latent attention over a tensor group keeps its down projections whole on every rank, which
// projects the whole sequence; with sequence parallelism and a query latent each rank projects
// its own rows (the group gathers the latents instead), without a query latent the whole
// sequence still (the queries' projection reads it).
TEST(CostModelTest, LatentDownProjectionsTakeTheRanksRowsWithSequenceParallelism) {
  TransformerShape x = moe52b();
  x.kvLoraRank = 512;
  x.qkNopeHeadDim = 128;
  x.qkRopeHeadDim = 64;
  x.vHeadDim = 128;
  const double s = x.seqLength, h = x.hiddenSize;
  // The rows of the forward's GEMM from h to `width` columns.
  auto rows = [&](int64_t qLora, bool sequenceParallel, double width) {
    TransformerShape y = x;
    y.qLoraRank = qLora;
    const LayerWork w = transformerWork(y, TransformerLayer::Block, 2, sequenceParallel, 0);
    for (const Gemm &g : w.forward.gemms)
      if (g.k == h && g.n == width)
        return g.m;
    return -1.0;
  };
  EXPECT_DOUBLE_EQ(rows(1536, false, 1536), s);
  EXPECT_DOUBLE_EQ(rows(1536, false, 512 + 64), s);
  EXPECT_DOUBLE_EQ(rows(1536, true, 1536), s / 2);
  EXPECT_DOUBLE_EQ(rows(1536, true, 512 + 64), s / 2);
  EXPECT_DOUBLE_EQ(rows(0, true, 512 + 64), s);
}

// FP8 linear layers: one-byte operands at the FP8 rate, and the casts to FP8 as traffic of
// their own; the attention stays in the element type.
TEST(CostModelTest, Fp8LinearLayersRunAtTheFp8RatePlusTheirCasts) {
  TransformerShape x = gpt52b();
  x.attention = AttentionKind::Flash;
  TransformerShape fp8 = x;
  fp8.fp8 = true;
  LayerWork bf = transformerWork(x, TransformerLayer::Block, 1, false);
  LayerWork f8 = transformerWork(fp8, TransformerLayer::Block, 1, false);
  EXPECT_DOUBLE_EQ(f8.forward.flops(), bf.forward.flops());
  EXPECT_DOUBLE_EQ(f8.forward.memoryBytes, bf.forward.memoryBytes);
  EXPECT_GT(f8.forward.castBytes, 0);
  EXPECT_EQ(bf.forward.castBytes, 0);
  for (const Gemm &g : f8.forward.gemms)
    EXPECT_TRUE(g.fp8);
  Cluster h100 = clusterPresets()[1];
  Roofline r = Roofline::of(h100, 2);
  // A large FP8 GEMM runs near its own ceiling, 1.9 times the BF16 one.
  Gemm big{16384, 16384, 16384, 1, Grows::Rows, false, true};
  Gemm bigBf16{16384, 16384, 16384, 1, Grows::Rows, false, false};
  EXPECT_NEAR(r.time(bigBf16, 1) / r.time(big, 1), 1.9, 0.01);
  // The block: faster, but by less than the GEMMs alone (casts, attention, norms).
  const double bfTime = r.time(bf.forward, 4) + r.time(bf.attentionCore, 4);
  const double f8Time = r.time(f8.forward, 4) + r.time(f8.attentionCore, 4);
  EXPECT_LT(f8Time, bfTime / 1.3);
  EXPECT_GT(f8Time, bfTime / 1.9);
  // A100 has no FP8 figures: FP8 products would run at the BF16 ceiling.
  EXPECT_EQ(clusterPresets()[0].kernels.fp8PeakFlops, 0);
}

// FP8's casts: each input of a linear layer in the forward and each output gradient in the
// backward is read once (2 bytes) and written in both layouts (1 + 1), at the cast kernels'
// measured share of the memory bandwidth; current scaling reads it once more for its amax.
// Transformer Engine's H200 measurement the share comes from is reproduced: its 12 linears of a
// 5B layer (M = 15,872) cast in 2.193 ms with delayed scaling, and current scaling's 3.500 ms
// is predicted within 3%.
TEST(CostModelTest, Fp8CastsAtTheirMeasuredBandwidthAndCurrentScalingsAmaxPass) {
  TransformerShape x = gpt52b();
  x.attention = AttentionKind::Flash;
  x.fp8 = true;
  TransformerShape current = x;
  current.fp8CurrentScaling = true;
  const LayerWork delayedWork = transformerWork(x, TransformerLayer::Block, 1, false);
  const LayerWork currentWork = transformerWork(current, TransformerLayer::Block, 1, false);
  // Per sample: the inputs of QKV, the output projection, the MLP's up and down projections,
  // s x (h + h + h + f), and their output gradients, s x (3h + h + f + h).
  const double s = static_cast<double>(x.seqLength), h = static_cast<double>(x.hiddenSize),
               f = static_cast<double>(x.ffnHiddenSize);
  EXPECT_DOUBLE_EQ(delayedWork.forward.castBytes, 4 * s * (h + h + h + f));
  EXPECT_DOUBLE_EQ(delayedWork.inputGradient.castBytes, 4 * s * (3 * h + h + f + h));
  EXPECT_DOUBLE_EQ(currentWork.forward.castBytes, 6 * s * (h + h + h + f));
  EXPECT_DOUBLE_EQ(currentWork.inputGradient.castBytes, 6 * s * (3 * h + h + f + h));
  // Priced at 0.850 of the bandwidth on H100 and H200; at all of it without device kernels.
  Cluster h200 = clusterPresets()[2];
  const Roofline r = Roofline::of(h200, 2);
  Work casts;
  casts.castBytes = 1e9;
  EXPECT_DOUBLE_EQ(r.time(casts, 1), 1e9 / (4.8e12 * 0.850));
  Cluster plain = h200;
  plain.kernels = DeviceKernels();
  EXPECT_DOUBLE_EQ(Roofline::of(plain, 2).time(casts, 1), 1e9 / 4.8e12);
  // The benchmark's casts (each GEMM its own, inputs in both layouts, weights in one) at that
  // share: delayed exactly what it was calibrated on, current within 3% of its measurement.
  const double inputs = 1495.269376e6, weights = 987.758592e6;
  Work delayedBench, currentBench;
  delayedBench.castBytes = 4 * inputs + 3 * weights;
  currentBench.castBytes = 6 * inputs + 5 * weights;
  EXPECT_NEAR(r.time(delayedBench, 1), 2.193e-3, 0.001e-3);
  EXPECT_NEAR(r.time(currentBench, 1) / 3.500e-3, 1.0, 0.03);
}

TEST(CostModelTest, LayersWithoutAShapeKeepTheirFlops) {
  CostInputs in;
  in.cluster = a100();
  in.cluster.launchOverheadS = 1e-5;
  in.names = {"a", "b"};
  in.fwdFlops = {1e12, 2e12};
  in.bwdFlops = {2e12, 4e12};
  in.bwdWeightFlops = {1e12, 1e12};
  const double rate = 312e12 * 0.5;
  CostModel cost = build(in);
  EXPECT_DOUBLE_EQ(cost.forwardTime(0, 3), 1e-5 + 3e12 / rate);
  EXPECT_DOUBLE_EQ(cost.backwardTime(1, 1), 1e-5 + 4e12 / rate);
  EXPECT_DOUBLE_EQ(cost.inputGradientTime(1, 1), 1e-5 + 3e12 / rate);
  EXPECT_DOUBLE_EQ(cost.weightGradientTime(1, 1), 1e-5 + 1e12 / rate);
  in.recomputeModules = runtime::kRecomputeAll;
  EXPECT_DOUBLE_EQ(build(in).selectiveRecomputeTime(0, 1), 0);
  // Over T ranks, each computes a T-th.
  in.tensor = 4;
  CostModel split = build(in);
  EXPECT_DOUBLE_EQ(split.forwardTime(0, 3), 1e-5 + 3e12 / rate / 4);
}

TEST(CostModelTest, TheOptimizerStepIsPricedByItsBytes) {
  CostInputs in;
  in.cluster = a100();
  in.names = {"a"};
  in.fwdFlops = {1e12};
  in.bwdFlops = {2e12};
  const int64_t n = 1'000'000'000;
  // Adam on bf16 parameters: the fp32 gradient read (4), both moments read and written (16),
  // the fp32 master read and written (8), the bf16 copy written (2): 30 bytes a parameter.
  in.parameterBytes = 2;
  EXPECT_EQ(CostModel::optimizerBytesPerParam(true, 2), 30);
  EXPECT_DOUBLE_EQ(build(in).optimizerStepTime(true, n), 30.0 * n / 2.039e12);
  // fp32 parameters are their own master: 28. SGD keeps no moments: 14 and 12.
  EXPECT_EQ(CostModel::optimizerBytesPerParam(true, 4), 28);
  EXPECT_EQ(CostModel::optimizerBytesPerParam(false, 2), 14);
  EXPECT_EQ(CostModel::optimizerBytesPerParam(false, 4), 12);
  // bf16 moments: the two read and written at 2 bytes each, 8 bytes fewer.
  EXPECT_EQ(CostModel::optimizerBytesPerParam(true, 2, 2), 22);
  in.momentBytes = 2;
  EXPECT_DOUBLE_EQ(build(in).optimizerStepTime(true, n), 22.0 * n / 2.039e12);
  in.momentBytes = 4;
  in.parameterBytes = 4;
  EXPECT_DOUBLE_EQ(build(in).optimizerStepTime(false, n), 12.0 * n / 2.039e12);
  // The bytes, not the 10 FLOP a parameter, bound it: over 200 times the FLOPs' time here.
  EXPECT_GT(build(in).optimizerStepTime(true, n), 200 * 10.0 * n / (312e12 * 0.5));
  // Run as separate operations, each reads its operands and writes its result. PyTorch's
  // multi-tensor AdamW on fp32 parameters: lerp (12), mul (8), addcmul (12), sqrt (8), div (8),
  // add (8), addcdiv (16): 72 bytes, 14 per moment byte and 16, the temporary of the second
  // moment's type (bf16 moments: 44). One tensor at a time the first
  // moment's mul and add are two operations: 80. A separate bf16 working copy is a cast of its
  // own (the master read again, the copy written): 6 more. SGD's update is one operation
  // either way; only its working copy moves.
  using K = OptimizerKernels;
  EXPECT_EQ(CostModel::optimizerBytesPerParam(true, 4, 4, K::Foreach), 72);
  EXPECT_EQ(CostModel::optimizerBytesPerParam(true, 4, 4, K::PerTensor), 80);
  EXPECT_EQ(CostModel::optimizerBytesPerParam(true, 2, 4, K::Foreach), 78);
  EXPECT_EQ(CostModel::optimizerBytesPerParam(true, 4, 2, K::Foreach), 44);
  EXPECT_EQ(CostModel::optimizerBytesPerParam(false, 4, 4, K::PerTensor), 12);
  EXPECT_EQ(CostModel::optimizerBytesPerParam(false, 2, 4, K::Foreach), 18);
  in.optimizerKernels = K::PerTensor;
  EXPECT_DOUBLE_EQ(build(in).optimizerStepTime(true, n), 80.0 * n / 2.039e12);
  in.optimizerKernels = K::Fused;
  // On a preset's device it streams at the element-wise kernels' share of the bandwidth
  // (A100: BabelStream's 1,724.8 GB/s).
  in.cluster.kernels = presetKernels("a100-80gb");
  EXPECT_DOUBLE_EQ(build(in).optimizerStepTime(false, n), 12.0 * n / 1724.8e9);
  // A cluster without a memory bandwidth prices the FLOPs alone, as a unit-cost job wants.
  in.cluster.memoryBandwidth = 0;
  EXPECT_DOUBLE_EQ(build(in).optimizerStepTime(true, n), 10.0 * n / (312e12 * 0.5));
}

// Every element-wise pass (norms, activations, residuals, the routed tokens' permutation, FP8's
// casts) runs at the fraction of the memory bandwidth the device's stream kernels measure
// (A100: BabelStream's triad, 0.846; Hopper: Transformer Engine's casts, 0.850).
TEST(CostModelTest, ElementWisePassesStreamAtTheDevicesMeasuredShare) {
  const double shares[] = {0.846, 0.850, 0.850};
  for (size_t i = 0; i < 3; ++i) {
    const Cluster &preset = clusterPresets()[i];
    const Roofline r = Roofline::of(preset, 2);
    EXPECT_NEAR(preset.kernels.streamEfficiency, shares[i], 0.0005) << preset.preset;
    const double stream = preset.memoryBandwidth * preset.kernels.streamEfficiency;
    EXPECT_DOUBLE_EQ(r.streamBandwidth(), stream) << preset.preset;
    Work norms;
    norms.memoryBytes = 1e9;
    norms.castBytes = 2e9;
    EXPECT_DOUBLE_EQ(r.time(norms, 2), 2 * 3e9 / stream) << preset.preset;
  }
  // Without the device's kernels, all of the bandwidth.
  Cluster plain = clusterPresets()[0];
  plain.kernels = DeviceKernels();
  EXPECT_DOUBLE_EQ(Roofline::of(plain, 2).streamBandwidth(), plain.memoryBandwidth);
}

TEST(CostModelTest, TransformerInputsAreChecked) {
  CostInputs in = transformerInputs(gpt52b());
  in.cluster.memoryBandwidth = 0;
  llvm::Expected<CostModel> noBandwidth = CostModel::build(in);
  ASSERT_FALSE(noBandwidth);
  EXPECT_NE(llvm::toString(noBandwidth.takeError()).find("cluster.memory_bandwidth"),
            std::string::npos);
  in = transformerInputs(gpt52b());
  in.names.pop_back();
  in.fwdFlops.pop_back();
  in.bwdFlops.pop_back();
  llvm::Expected<CostModel> shortChain = CostModel::build(in);
  ASSERT_FALSE(shortChain);
  EXPECT_NE(llvm::toString(shortChain.takeError()).find("66 layers"), std::string::npos);
  in = transformerInputs(gpt52b(), 0);
  llvm::Expected<CostModel> noTensor = CostModel::build(in);
  ASSERT_FALSE(noTensor);
  EXPECT_NE(llvm::toString(noTensor.takeError()).find("parallelism.tensor"), std::string::npos);
}

CostModel ranks(int64_t p, int64_t d, int64_t t, bool pipelineInner = false,
                int64_t gpusPerNode = 8) {
  CostInputs in;
  in.cluster = a100();
  in.cluster.gpusPerNode = gpusPerNode;
  in.pipeline = p;
  in.data = d;
  in.tensor = t;
  in.pipelineInner = pipelineInner;
  return build(in);
}

TEST(CostModelTest, TensorRankIsInnermost) {
  CostModel dataInner = ranks(2, 3, 4);
  CostModel pipelineInner = ranks(2, 3, 4, true);
  for (int64_t p = 0; p < 2; ++p)
    for (int64_t d = 0; d < 3; ++d)
      for (int64_t t = 0; t < 4; ++t) {
        EXPECT_EQ(dataInner.globalRank(p, d, t), (p * 3 + d) * 4 + t);
        EXPECT_EQ(pipelineInner.globalRank(p, d, t), (d * 2 + p) * 4 + t);
      }
  // Without a tensor dimension, the numbering is the (pipeline, data) one.
  EXPECT_EQ(ranks(2, 3, 1).globalRank(1, 2), 5);
}

TEST(CostModelTest, TensorGroupsStayInANodeWhenTheyFit) {
  EXPECT_EQ(ranks(4, 2, 8).tensorRing().link, Link::IntraNode);
  EXPECT_EQ(ranks(4, 2, 4).tensorRing().link, Link::IntraNode);
  EXPECT_EQ(ranks(1, 1, 16).tensorRing().link, Link::InterNode); // T > gpus_per_node
  EXPECT_EQ(ranks(3, 1, 3).tensorRing().link, Link::InterNode);  // ranks 6, 7 | 8 straddle
  EXPECT_EQ(ranks(1, 2, 3).tensorRing().link, Link::IntraNode);  // six ranks: one node
}

TEST(CostModelTest, DataAndPipelineLinksJoinTheSameTensorRank) {
  // D = 2, T = 4: replicas of tensor rank t are t and 4 + t, one node.
  EXPECT_EQ(ranks(1, 2, 4).dataParallelRing(0).link, Link::IntraNode);
  // D = 4, T = 4: t, 4 + t, 8 + t, 12 + t span two nodes.
  EXPECT_EQ(ranks(1, 4, 4).dataParallelRing(0).link, Link::InterNode);
  // P = 2, T = 4: ranks 0..3 and 4..7, one node; T = 8: two.
  EXPECT_EQ(ranks(2, 1, 4).pipelineLink(0, 1), Link::IntraNode);
  EXPECT_EQ(ranks(2, 1, 8).pipelineLink(0, 1), Link::InterNode);
  // Pipeline-inner with D = 2, T = 2, P = 2: pipeline ranks of replica 1 are 4..5 and 6..7.
  EXPECT_EQ(ranks(2, 2, 2, true, 4).pipelineLink(0, 1), Link::IntraNode);
  EXPECT_EQ(ranks(2, 2, 2, true, 4).dataParallelRing(0).link, Link::InterNode);
}

TEST(CostModelTest, TensorCollectivesAreRingsOnTheTensorLink) {
  const int64_t bytes = int64_t(1) << 30;
  for (int64_t t : {2, 4, 8}) {
    CostModel cost = ranks(1, 1, t);
    const double n = static_cast<double>(t);
    EXPECT_NEAR(cost.tensorCollectiveTime(Collective::AllReduce, bytes),
                2 * (n - 1) * 10e-6 + 2 * (n - 1) / n * bytes / 300e9, 1e-12);
    EXPECT_NEAR(cost.tensorCollectiveTime(Collective::AllGather, bytes),
                (n - 1) * 10e-6 + (n - 1) / n * bytes / 300e9, 1e-12);
    EXPECT_NEAR(cost.tensorCollectiveTime(Collective::ReduceScatter, bytes),
                (n - 1) * 10e-6 + (n - 1) / n * bytes / 300e9, 1e-12);
  }
  EXPECT_EQ(ranks(1, 1, 1).tensorCollectiveTime(Collective::AllReduce, bytes), 0);
  // Across nodes, the network sets the pace: eight members a node, eight adapters.
  EXPECT_NEAR(ranks(1, 1, 16).tensorCollectiveTime(Collective::AllGather, bytes),
              15 * 10e-6 + 15.0 / 16 * bytes / (8 * 25e9), 1e-12);
}

TEST(CostModelTest, RingsOverTheNetworkUseTheAdaptersOfTheirMembers) {
  // One member a node: one adapter, the network's bandwidth.
  EXPECT_EQ(ranks(1, 4, 8).dataParallelRing(0).link, Link::InterNode);
  EXPECT_EQ(ranks(1, 4, 8).dataParallelRing(0).adapters, 1);
  EXPECT_EQ(ranks(1, 4, 8).ringBandwidth(ranks(1, 4, 8).dataParallelRing(0)), 25e9);
  // D = 4, T = 4: t, 4 + t | 8 + t, 12 + t, two members (and adapters) a node.
  EXPECT_EQ(ranks(1, 4, 4).dataParallelRing(0).adapters, 2);
  EXPECT_EQ(ranks(1, 4, 4).ringBandwidth(ranks(1, 4, 4).dataParallelRing(0)), 2 * 25e9);
  // Twelve replicas: eight on the first node, four on the second; the fewer set the pace.
  EXPECT_EQ(ranks(1, 12, 1).dataParallelRing(0).adapters, 4);
  // Sixteen adapters a node would outrun NVLink (300 GB/s), which then sets the pace.
  CostModel wide = ranks(1, 32, 1, false, 16);
  EXPECT_EQ(wide.dataParallelRing(0).adapters, 16);
  EXPECT_EQ(wide.ringBandwidth(wide.dataParallelRing(0)), 300e9);
  // Inside a node the adapters do not matter.
  EXPECT_EQ(ranks(1, 8, 1).dataParallelRing(0).link, Link::IntraNode);
  EXPECT_EQ(ranks(1, 8, 1).ringBandwidth(ranks(1, 8, 1).dataParallelRing(0)), 300e9);
  // The collective prices its ring: 16 replicas, eight a node.
  const int64_t bytes = int64_t(1) << 30;
  CostModel two = ranks(1, 16, 1);
  EXPECT_NEAR(two.collectiveTime(Collective::AllGather, bytes, 16, two.dataParallelRing(0)),
              15 * 10e-6 + 15.0 / 16 * bytes / (8 * 25e9), 1e-12);
  // The slower of two rings: over the network first, then over fewer adapters.
  EXPECT_EQ(Ring::slower({Link::IntraNode, 8}, {Link::InterNode, 4}).link, Link::InterNode);
  EXPECT_EQ(Ring::slower({Link::InterNode, 2}, {Link::InterNode, 4}).adapters, 2);
}

} // namespace
