//===- GemmEfficiencyTable.cpp - predicted efficiency by micro-batch and T -===//
//
// Prints, as a Markdown table, the efficiency the cost model predicts for one transformer
// block of a job's model (default: the 52B shape of testdata/jobs/gpt-52b-bfs.json on its
// cluster, A100-80GB) at micro-batch sizes 1 to 16 and tensor-parallel sizes 1 to 8: of its
// GEMMs alone (their FLOPs over their roofline time, as a fraction of the peak), and of the
// whole block, forward and backward (its FLOPs over its time, element-wise passes included),
// without and with sequence parallelism; and the lowest arithmetic intensity among the GEMMs
// with a weight, against the ridge point below which a GEMM is memory-bound. docs/performance.md
// quotes it:
//
//   build/bin/gemm_efficiency_table [JOB] [--set KEY=VALUE ...]
//
//===----------------------------------------------------------------------===//

#include "analysis/CostModel.h"
#include "analysis/JobCosts.h"
#include "job/JobFile.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

using namespace conduit;

namespace {

/// The cost model of `job` with T = `tensor` (sequence parallel or not), without
/// recomputation: compute only.
CostModel costModel(const Job &job, int64_t tensor, bool sequenceParallel) {
  CostInputs in = jobCostInputs(job);
  in.tensor = tensor;
  in.sequenceParallel = sequenceParallel;
  return llvm::cantFail(CostModel::build(in));
}

} // namespace

int main(int argc, char **argv) {
  std::string path = CONDUIT_TESTDATA "/jobs/gpt-52b-bfs.json";
  std::vector<std::string> overrides;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--set" && i + 1 < argc)
      overrides.push_back(argv[++i]);
    else
      path = arg;
  }
  Diagnostics diag(path);
  std::optional<Job> job = readJobFile(path, diag, overrides);
  if (!job) {
    std::fprintf(stderr, "%s\n", diag.getError()->str().c_str());
    return 1;
  }
  if (!job->model.transformer) {
    std::fprintf(stderr, "%s: not a transformer model\n", path.c_str());
    return 1;
  }
  const TransformerSpec &spec = *job->model.transformer;
  const Cluster &cluster = job->cluster;
  const TransformerShape shape = transformerShape(spec, job->training.elementBytes());
  const Roofline roofline = Roofline::of(cluster, shape.elementBytes);
  const double blockFlops = job->model.layers[1].fwdFlops + job->model.layers[1].bwdFlops;

  std::printf("%s, h %lld, s %lld, on %s (peak %.0f TFLOP/s, ceiling %.2f, HBM %.3g TB/s)\n\n",
              path.substr(path.rfind('/') + 1).c_str(), static_cast<long long>(spec.hiddenSize),
              static_cast<long long>(spec.seqLength), cluster.preset.c_str(),
              cluster.peakFlops / 1e12, cluster.efficiency, cluster.memoryBandwidth / 1e12);
  const Work core = transformerWork(shape, TransformerLayer::Block, 1, false).attentionCore;
  if (core.gemms.empty())
    std::printf("Ridge point %.0f FLOP/byte; the attention core is one fused kernel.\n\n",
                roofline.flopRate / roofline.memoryBandwidth);
  else
    std::printf("Ridge point %.0f FLOP/byte; the attention core's products have %.0f.\n\n",
                roofline.flopRate / roofline.memoryBandwidth,
                core.gemms.front().flops() / core.gemms.front().bytes(shape.elementBytes));
  std::printf("| T | micro-batch | narrowest weight GEMM, FLOP/byte | GEMMs | block | block, "
              "sequence parallel |\n|---|---|---|---|---|---|\n");
  for (int64_t t : {1, 2, 4, 8}) {
    const LayerWork work = transformerWork(shape, TransformerLayer::Block, t, false);
    const CostModel replicated = costModel(*job, t, false);
    const CostModel sequence = costModel(*job, t, true);
    for (int64_t b : {1, 2, 4, 8, 16}) {
      double flops = 0, time = 0, intensity = std::numeric_limits<double>::infinity();
      for (const Work *pass :
           {&work.forward, &work.attentionCore, &work.inputGradient, &work.weightGradient}) {
        flops += pass->flops() * static_cast<double>(b);
        time += roofline.gemmTime(*pass, b);
        for (const Gemm &gemm : pass->gemms) {
          const Gemm g = gemm.forSamples(b);
          if (g.grows != Grows::Batch) // the attention core's do not depend on b and T
            intensity = std::min(intensity, g.flops() / g.bytes(shape.elementBytes));
        }
      }
      const double rankFlops = blockFlops * static_cast<double>(b) / static_cast<double>(t);
      auto efficiency = [&](const CostModel &cost) {
        return rankFlops / (cost.forwardTime(1, b) + cost.backwardTime(1, b)) / cluster.peakFlops;
      };
      std::printf("| %lld | %lld | %.0f | %.1f%% | %.1f%% | %.1f%% |\n", static_cast<long long>(t),
                  static_cast<long long>(b), intensity, 100 * flops / time / cluster.peakFlops,
                  100 * efficiency(replicated), 100 * efficiency(sequence));
    }
  }
  return 0;
}
