//===- PlanMemory.cpp - conduit-plan-memory -------------------------------===//
//
// Computes every rank's peak memory over the step (analysis/PeakMemory.h, through
// analyzeMemory in PeakMemory.h), records it on the rank, and refuses a plan that does not fit
// the device: the message lists the largest contributors at the peak and which changes would
// make it fit, evaluated on the same plan.
//
//===----------------------------------------------------------------------===//

#include "analysis/Units.h"
#include "passes/PassUtils.h"
#include "passes/Passes.h"
#include "passes/PeakMemory.h"

#include "mlir/IR/Builders.h"

#include "llvm/ADT/StringExtras.h"

#include <algorithm>

namespace conduit {
#define GEN_PASS_DEF_CONDUITPLANMEMORY
#include "passes/Passes.h.inc"
} // namespace conduit

using namespace conduit;
using namespace mlir;

namespace {

int64_t worstPeak(const std::vector<RankMemory> &ranks) {
  int64_t worst = 0;
  for (const RankMemory &r : ranks)
    worst = std::max(worst, r.peak);
  return worst;
}

std::string describeAt(Operation *op) {
  if (!op)
    return "before the first instruction";
  if (auto f = dyn_cast<pipe::ForwardOp>(op))
    return "at the forward of stage " + std::to_string(f.getStage()) + " micro-batch " +
           std::to_string(f.getMicrobatch());
  if (pipe::isCompute(op)) {
    auto [stage, mb] = pipe::computeStageAndMicrobatch(op);
    const char *what = isa<pipe::BackwardOp>(op)        ? "backward"
                       : isa<pipe::BackwardInputOp>(op) ? "input gradient"
                                                        : "weight gradient";
    return std::string("at the ") + what + " of stage " + std::to_string(stage) + " micro-batch " +
           std::to_string(mb);
  }
  return "at " + op->getName().getStringRef().str();
}

/// "activations 61.2 GiB (64 stage micro-batches in flight), gathered parameters 12.0 GiB".
std::string contributors(const RankMemory &m) {
  std::vector<int> kinds(kNumMemoryKinds);
  for (int k = 0; k < kNumMemoryKinds; ++k)
    kinds[k] = k;
  std::stable_sort(kinds.begin(), kinds.end(),
                   [&](int a, int b) { return m.atPeak[a] > m.atPeak[b]; });
  std::string text;
  for (int k : kinds) {
    if (m.atPeak[k] <= 0)
      continue;
    text += (text.empty() ? "" : ", ") + std::string(memoryKindName(MemoryKind(k))) + " " +
            formatBytes(static_cast<double>(m.atPeak[k]));
    if (MemoryKind(k) == MemoryKind::Activations)
      text += " (" + std::to_string(m.activationsInFlight) + " stage micro-batches in flight)";
  }
  return text;
}

struct PlanMemory : conduit::impl::ConduitPlanMemoryBase<PlanMemory> {
  void runOnOperation() override {
    for (pipe::ModelOp model : getOperation().getOps<pipe::ModelOp>())
      if (failed(planModel(model)))
        return signalPassFailure();
  }

  LogicalResult planModel(pipe::ModelOp model) {
    if (failed(requirePhase(model, pipe::Phase::Communicating, "conduit-plan-memory")))
      return failure();
    // A fused attention kernel keeps no scores: selective checkpointing of the attention core
    // alone has nothing to drop.
    std::optional<pipe::TransformerAttr> architecture = model.getArchitecture();
    const bool flash = architecture && architecture->getAttention() != pipe::AttentionKind::Eager;
    if (flash && model.getParallelism().getCheckpointing() == pipe::Checkpointing::Selective &&
        model.getParallelism().getRecomputeModules() == pipe::RecomputeModule::CoreAttn)
      model.emitWarning() << "parallelism.activation_checkpointing \"selective\" recomputes "
                             "nothing with model.attention \""
                          << pipe::stringifyAttentionKind(architecture->getAttention())
                          << "\": a fused kernel keeps no attention scores, so the plan keeps "
                             "and computes what \"none\" would";
    FailureOr<std::vector<RankMemory>> analyzed = analyzeMemory(model);
    if (failed(analyzed))
      return failure();
    std::vector<RankMemory> &ranks = *analyzed;
    Builder builder(model.getContext());
    for (auto [rank, memory] : llvm::zip(model.getRanks(), ranks))
      rank.setPeakMemoryAttr(builder.getI64IntegerAttr(memory.peak));
    peakBytes = std::max<uint64_t>(peakBytes, worstPeak(ranks));

    const int64_t device = model.getCluster().getMemoryBytes();
    auto worst =
        std::max_element(ranks.begin(), ranks.end(),
                         [](const RankMemory &a, const RankMemory &b) { return a.peak < b.peak; });
    if (worst->peak <= device)
      return success();

    // What would fit, evaluated on this plan.
    pipe::ParallelismAttr par = model.getParallelism();
    std::vector<std::string> fits;
    auto tryVariant = [&](MemoryVariant variant, const std::string &change) {
      FailureOr<std::vector<RankMemory>> ranks = analyzeMemory(model, variant);
      if (failed(ranks))
        return false;
      int64_t peak = worstPeak(*ranks);
      if (peak > device)
        return false;
      fits.push_back(change + " (peak " + formatBytes(static_cast<double>(peak)) + ")");
      return true;
    };
    // Checkpointing that recomputes more than the job's, the cheaper first: selective repeats
    // the attention cores, blocks the blocks' forwards, full the head's too. The first that
    // fits is suggested.
    const pipe::Checkpointing current = par.getCheckpointing();
    std::vector<pipe::Checkpointing> recomputeMore;
    if (current == pipe::Checkpointing::None && !flash)
      recomputeMore.push_back(pipe::Checkpointing::Selective);
    if (current == pipe::Checkpointing::None || current == pipe::Checkpointing::Selective)
      recomputeMore.push_back(pipe::Checkpointing::Blocks);
    if (current != pipe::Checkpointing::Full)
      recomputeMore.push_back(pipe::Checkpointing::Full);
    auto tryCheckpointing = [&](double scale, const std::string &change) {
      for (pipe::Checkpointing mode : recomputeMore)
        if (tryVariant({mode, scale, std::nullopt}, change + "activation_checkpointing \"" +
                                                        pipe::stringifyCheckpointing(mode).str() +
                                                        "\""))
          return true;
      return false;
    };
    tryCheckpointing(1.0, "parallelism.");
    for (int64_t size = par.getMicrobatchSize() / 2; size >= 1; size /= 2) {
      double scale = static_cast<double>(size) / static_cast<double>(par.getMicrobatchSize());
      const std::string change = "parallelism.microbatch_size " + std::to_string(size);
      if (tryVariant({std::nullopt, scale, std::nullopt}, change) ||
          tryCheckpointing(scale, change + " with "))
        break;
    }
    // More tensor-parallel ranks, inside a node, as far as Megatron-LM's partitioning divides
    // the model: the smallest that fits.
    for (int64_t t = 2 * par.getTensor(); t <= model.getCluster().getGpusPerNode(); t *= 2) {
      if (std::optional<pipe::TransformerAttr> arch = model.getArchitecture())
        if (arch->getNumHeads() % t || arch->getNumKvHeads() % t || arch->getFfnHiddenSize() % t ||
            arch->getVocabSize() % t || (par.getSequenceParallel() && arch->getSeqLength() % t))
          break;
      MemoryVariant variant;
      variant.tensor = t;
      if (tryVariant(variant, "parallelism.tensor " + std::to_string(t)))
        break;
    }
    std::string advice =
        fits.empty()
            ? "no single change of checkpointing, micro-batch size or tensor parallelism fits; "
              "raise parallelism.pipeline or parallelism.stages_per_device (each stage holds "
              "fewer layers)" +
                  std::string(par.getSharding() != pipe::Sharding::Full && par.getData() > 1
                                  ? ", or set parallelism.sharding \"full\""
                                  : "")
            : "would fit: " + llvm::join(fits, "; ");
    int64_t r = worst - ranks.begin();
    return model.emitOpError() << "rank " << r << " needs "
                               << formatBytes(static_cast<double>(worst->peak)) << " at its peak ("
                               << describeAt(worst->peakOp) << ") but the device has "
                               << formatBytes(static_cast<double>(device)) << ": "
                               << contributors(*worst) << "; " << advice;
  }
};

} // namespace
