//===- Profile.cpp - measured layer times for the cost model --------------===//

#include "runtime/session/Profile.h"

#include "runtime/plan/JsonWriter.h"
#include "runtime/plan/ProfileKeys.h"

#include "absl/strings/str_cat.h"

#include <iterator>
#include <map>

namespace conduit::runtime {

static_assert(std::size(kProfileMemoryCategories) == model::kNumMemoryUses,
              "one profile key per memory category");

absl::Status writeProfile(const Plan &plan, const std::string &backend,
                          const std::vector<LayerTiming> &timings,
                          const std::vector<RankMemory> &memory, std::ostream &os) {
  // Merge the ranks' (and replicas') measurements per layer and micro-batch size, and the
  // optimizer steps into one time per parameter.
  std::vector<std::map<int64_t, LayerTiming>> byLayer(plan.layers.size());
  double optimizerS = 0, optimizerParams = 0;
  for (const LayerTiming &t : timings) {
    if (t.layer == kOptimizerTiming) {
      optimizerS += t.forwardS;
      optimizerParams += static_cast<double>(t.samples) * static_cast<double>(t.forwardCount);
      continue;
    }
    if (t.layer < 0 || t.layer >= static_cast<int64_t>(plan.layers.size()))
      return absl::InternalError(absl::StrCat("a timing names layer ", t.layer));
    LayerTiming &m = byLayer[t.layer][t.samples];
    m.forwardS += t.forwardS;
    m.backwardS += t.backwardS;
    m.inputS += t.inputS;
    m.weightS += t.weightS;
    m.forwardCount += t.forwardCount;
    m.backwardCount += t.backwardCount;
    m.inputCount += t.inputCount;
    m.weightCount += t.weightCount;
  }
  auto key = [](const char *name) { return jsonString(name) + ": "; };
  os << "{" << key(kProfileFormat) << kProfileVersion << ", " << key(kProfileBackend)
     << jsonString(backend) << ", " << key(kProfileJob) << jsonString(plan.name);
  if (optimizerParams > 0)
    os << ", " << key(kProfileOptimizer)
       << jsonString(plan.config.optimizer == Optimizer::Adam ? "adam" : "sgd") << ", "
       << key(kProfileOptimizerSPerParam) << jsonNumber(optimizerS / optimizerParams);
  os << ", " << key(kProfileLayers) << "[";
  for (size_t l = 0; l < plan.layers.size(); ++l) {
    if (byLayer[l].empty())
      return absl::FailedPreconditionError(
          absl::StrCat("layer ", plan.layers[l].name, " never ran: nothing to profile"));
    // backward_s is the mean whole backward where one ran, else the sum of the halves' means;
    // the halves are listed when every size listed ran split.
    std::string samples, forward, backward, input, weight;
    bool split = true;
    for (const auto &[n, t] : byLayer[l]) {
      const bool whole = t.backwardCount > 0, halves = t.inputCount > 0 && t.weightCount > 0;
      if (t.forwardCount == 0 || (!whole && !halves))
        continue;
      const double inputS = halves ? t.inputS / t.inputCount : 0;
      const double weightS = halves ? t.weightS / t.weightCount : 0;
      const char *sep = samples.empty() ? "" : ", ";
      absl::StrAppend(&samples, sep, n);
      absl::StrAppend(&forward, sep, jsonNumber(t.forwardS / t.forwardCount));
      absl::StrAppend(&backward, sep,
                      jsonNumber(whole ? t.backwardS / t.backwardCount : inputS + weightS));
      absl::StrAppend(&input, sep, jsonNumber(inputS));
      absl::StrAppend(&weight, sep, jsonNumber(weightS));
      split = split && halves;
    }
    os << (l ? ",\n  " : "\n  ") << "{" << key(kProfileLayerName) << jsonString(plan.layers[l].name)
       << ", " << key(kProfileLayerSamples) << "[" << samples << "], " << key(kProfileLayerForwardS)
       << "[" << forward << "], " << key(kProfileLayerBackwardS) << "[" << backward << "]";
    if (split && !samples.empty())
      os << ", " << key(kProfileLayerBackwardInputS) << "[" << input << "], "
         << key(kProfileLayerBackwardWeightS) << "[" << weight << "]";
    os << "}";
  }
  os << "\n]";
  if (!memory.empty()) {
    os << ", " << key(kProfileMemory) << "[";
    for (size_t r = 0; r < memory.size(); ++r) {
      const RankMemory &m = memory[r];
      os << (r ? ",\n  " : "\n  ") << "{" << key(kProfileMemoryRank) << m.rank << ", "
         << key(kProfileMemoryPipelineRank) << m.pipelineRank << ", "
         << key(kProfileMemoryPredicted) << m.predictedBytes << ", " << key(kProfileMemoryPeak)
         << m.measured.countedBytes << ", " << key(kProfileMemoryHeldPeak) << m.measured.heldBytes
         << ", " << key(kProfileMemoryAtPeak) << "{";
      for (int k = 0; k < model::kNumMemoryUses; ++k)
        os << (k ? ", " : "") << key(kProfileMemoryCategories[k]) << m.measured.atPeak[k];
      os << "}}";
    }
    os << "\n]";
  }
  os << "}\n";
  return absl::OkStatus();
}

} // namespace conduit::runtime
