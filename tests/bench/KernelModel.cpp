//===- KernelModel.cpp - the cost model's time of single kernels ---------===//
//
// Prints the time the cost model gives one kernel on a cluster preset, for holding it against
// measurements (tests/bench/kernel_model_check.py, with what tests/gpu/kernels.py measured;
// tests/bench/moe_layer_check.py, with published measurements of whole MoE layers).
// Reads one kernel a line from standard input and writes its predicted seconds a line:
//
//   gemm M N K BATCH FP8          C[M×N] = A[M×K]·B[K×N], BATCH of them; FP8 0 or 1; BF16
//                                 operands and output otherwise
//   attention HEADS SEQ DIM BACKWARD FLASH2 SAMPLES
//                                 causal fused attention of SAMPLES samples; BACKWARD, FLASH2
//                                 0 or 1
//   bytes B                       an element-wise pass reading and writing B bytes, at the
//                                 preset's element-wise kernels' share of the bandwidth
//   moe TOKENS HIDDEN FFN EXPERTS TOP_K BACKWARD [KERNELS]
//                                 a mixture-of-experts layer of SwiGLU experts FFN wide on one
//                                 rank holding all EXPERTS (router, grouped GEMMs, activation,
//                                 permutation; no shared experts), TOKENS routed to TOP_K each:
//                                 its forward, or with BACKWARD 1 its input and weight
//                                 gradients; KERNELS grouped (the default) or megatron, as the
//                                 job's model.moe.kernels
//   moe-gemms TOKENS HIDDEN FFN EXPERTS TOP_K BACKWARD
//                                 the grouped layer's products alone (router and grouped GEMMs)
//
//   build/bin/kernel_model PRESET < kernels.txt
//
//===----------------------------------------------------------------------===//

#include "analysis/Roofline.h"
#include "job/Cluster.h"

#include <cstdint>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>

using namespace conduit;

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: kernel_model PRESET < kernels.txt\n");
    return 2;
  }
  const Cluster *cluster = nullptr;
  for (const Cluster &c : clusterPresets())
    if (c.preset == argv[1])
      cluster = &c;
  if (!cluster) {
    std::fprintf(stderr, "kernel_model: no preset named '%s'\n", argv[1]);
    return 2;
  }
  const Roofline roofline = Roofline::of(*cluster, /*elementBytes=*/2);
  std::string line;
  for (int number = 1; std::getline(std::cin, line); ++number) {
    std::istringstream in(line);
    std::string kind;
    in >> kind;
    double seconds = -1;
    if (kind == "gemm") {
      Gemm g;
      int fp8 = 0;
      if (in >> g.m >> g.n >> g.k >> g.batch >> fp8) {
        g.fp8 = fp8 != 0;
        seconds = roofline.time(g, 1);
      }
    } else if (kind == "attention") {
      FusedAttention a;
      int backward = 0, flash2 = 0;
      int64_t samples = 0;
      if (in >> a.heads >> a.seqLength >> a.headDim >> backward >> flash2 >> samples &&
          samples > 0) {
        a.backward = backward != 0;
        a.kernel = flash2 != 0 ? AttentionKind::Flash2 : AttentionKind::Flash;
        seconds = roofline.time(a, samples);
      }
    } else if (kind == "moe" || kind == "moe-gemms") {
      TransformerShape shape;
      shape.numLayers = shape.numHeads = shape.numKvHeads = shape.vocabSize = 1;
      shape.gated = true;
      int backward = 0;
      if (in >> shape.seqLength >> shape.hiddenSize >> shape.expertFfnHiddenSize >>
              shape.numExperts >> shape.topK >> backward &&
          shape.seqLength > 0 && shape.hiddenSize > 0 && shape.expertFfnHiddenSize > 0 &&
          shape.topK > 0 && shape.topK <= shape.numExperts) {
        shape.ffnHiddenSize = shape.expertFfnHiddenSize;
        std::string kernels = "grouped";
        in >> kernels;
        if (kernels != "grouped" && (kernels != "megatron" || kind != "moe")) {
          std::fprintf(stderr, "kernel_model: line %d: no kernels named '%s'\n", number,
                       kernels.c_str());
          return 1;
        }
        shape.megatronExperts = kernels == "megatron";
        const LayerWork work = transformerWork(shape, TransformerLayer::Block, /*tensor=*/1,
                                               /*sequenceParallel=*/false);
        // moe-gemms: the products alone, without the element-wise passes.
        const auto time = [&](const Work &w) {
          return kind == "moe" ? roofline.time(w, 1) : roofline.gemmTime(w, 1);
        };
        seconds = backward ? time(work.expertsInputGradient) + time(work.expertsWeightGradient)
                           : time(work.expertsForward);
      }
    } else if (kind == "bytes") {
      double bytes = 0;
      if (in >> bytes && bytes >= 0)
        seconds = bytes / roofline.streamBandwidth();
    }
    if (seconds < 0) {
      std::fprintf(stderr, "kernel_model: line %d: not a kernel: %s\n", number, line.c_str());
      return 1;
    }
    std::printf("%.9g\n", seconds);
  }
  return 0;
}
