//===- Profile.cpp - measured layer times for the cost model --------------===//

#include "runtime/session/Profile.h"

#include "runtime/plan/JsonWriter.h"
#include "runtime/plan/ProfileKeys.h"

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <array>
#include <iterator>
#include <map>
#include <set>

namespace conduit::runtime {

static_assert(std::size(kProfileMemoryCategories) == model::kNumMemoryUses,
              "one profile key per memory category");

namespace {
/// Round trips per size of the ping-pong, and how long each side is busy before it sends:
/// long enough that the receiver waits as the executor waits for a peer's compute (past
/// its first rounds of yielding, idleWait), short against the run.
constexpr int kPingPongRounds = 30;
constexpr double kPingPongPauseS = 200e-6;
/// The smallest of the sizes that show the bandwidth: 1 MiB.
constexpr int64_t kBandwidthProbeBytes = int64_t(1) << 20;

/// The profile's name of compute instruction `op`, or null.
const char *instructionKind(int64_t op) {
  switch (static_cast<Op>(op)) {
  case Op::Forward:
    return kProfileInstructionKinds[0];
  case Op::Backward:
    return kProfileInstructionKinds[1];
  case Op::BackwardInput:
    return kProfileInstructionKinds[2];
  case Op::BackwardWeight:
    return kProfileInstructionKinds[3];
  default:
    return nullptr;
  }
}
} // namespace

TransportFit fitTransport(const TransportTiming &timing) {
  const size_t n = timing.bytes.size();
  TransportFit fit;
  if (n == 0)
    return fit;
  double mx = 0, my = 0;
  for (size_t i = 0; i < n; ++i) {
    mx += static_cast<double>(timing.bytes[i]) / static_cast<double>(n);
    my += timing.oneWayS[i] / static_cast<double>(n);
  }
  double sxy = 0, sxx = 0;
  for (size_t i = 0; i < n; ++i) {
    const double dx = static_cast<double>(timing.bytes[i]) - mx;
    sxy += dx * (timing.oneWayS[i] - my);
    sxx += dx * dx;
  }
  const double slope = sxx > 0 ? sxy / sxx : 0;
  if (slope > 0) {
    fit.bandwidth = 1 / slope;
    fit.latencyS = std::max(0.0, my - slope * mx);
    return fit;
  }
  // The times do not grow with the size beyond their spread: the mean is the latency, and
  // the bandwidth is at least the largest size over that spread (the bound is recorded).
  const auto [fastest, slowest] = std::minmax_element(timing.oneWayS.begin(), timing.oneWayS.end());
  const double spread = std::max(*slowest - *fastest, 1e-9);
  fit.latencyS = my;
  fit.bandwidth =
      static_cast<double>(*std::max_element(timing.bytes.begin(), timing.bytes.end())) / spread;
  return fit;
}

absl::StatusOr<TransportTiming> timeTransport(const Plan &plan, Backend &backend, int64_t rank) {
  std::set<int64_t> sizes = {4};
  for (const RankProgram &program : plan.ranks)
    for (const Instruction &inst : program.instructions)
      if (inst.op == Op::Send && inst.bytes > 0)
        sizes.insert(inst.bytes);
  // A size well above them, where the bandwidth shows above the waiting's noise.
  sizes.insert(std::max<int64_t>(kBandwidthProbeBytes, 4 * *sizes.rbegin()));
  TransportTiming timing;
  for (int64_t bytes : sizes) {
    CONDUIT_ASSIGN_OR_RETURN(
        double s, backend.pingPong(1 - rank, bytes, kPingPongRounds, rank == 0, kPingPongPauseS));
    timing.bytes.push_back(bytes);
    timing.oneWayS.push_back(s);
  }
  return timing;
}

namespace {

/// The (seconds, count) pairs of a timing, one per pass.
std::array<std::pair<double *, int64_t *>, 4> passesOf(LayerTiming &t) {
  return {{{&t.forwardS, &t.forwardCount},
           {&t.backwardS, &t.backwardCount},
           {&t.inputS, &t.inputCount},
           {&t.weightS, &t.weightCount}}};
}

} // namespace

double median(std::vector<double> values) {
  if (values.empty())
    return 0;
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  if (values.size() % 2 == 1)
    return values[mid];
  const double upper = values[mid];
  return (*std::max_element(values.begin(), values.begin() + mid) + upper) / 2;
}

std::vector<LayerTiming> typicalTimings(const std::vector<std::vector<LayerTiming>> &steps) {
  // Per layer and size, in the order of first appearance: the run's counts, and each step's
  // mean time per pass.
  struct Entry {
    LayerTiming run;
    std::array<std::vector<double>, 4> means;
  };
  std::vector<Entry> entries;
  std::map<std::pair<int64_t, int64_t>, size_t> index;
  for (const std::vector<LayerTiming> &step : steps)
    for (LayerTiming t : step) {
      auto [it, added] = index.try_emplace({t.layer, t.samples}, entries.size());
      if (added)
        entries.push_back({LayerTiming{t.layer, t.samples}, {}});
      Entry &e = entries[it->second];
      const auto inStep = passesOf(t);
      const auto inRun = passesOf(e.run);
      for (size_t pass = 0; pass < inStep.size(); ++pass) {
        if (*inStep[pass].second <= 0)
          continue;
        e.means[pass].push_back(*inStep[pass].first / static_cast<double>(*inStep[pass].second));
        *inRun[pass].second += *inStep[pass].second;
      }
    }
  std::vector<LayerTiming> out;
  for (Entry &e : entries) {
    const auto inRun = passesOf(e.run);
    for (size_t pass = 0; pass < inRun.size(); ++pass)
      *inRun[pass].first = median(e.means[pass]) * static_cast<double>(*inRun[pass].second);
    out.push_back(e.run);
  }
  return out;
}

absl::Status writeProfile(const Plan &plan, const std::string &backend,
                          const std::vector<LayerTiming> &timings, const RunMeasurements &measured,
                          std::ostream &os) {
  const std::vector<RankMemory> &memory = measured.memory;
  const std::optional<TransportTiming> &transport = measured.transport;
  // Merge the ranks' (and replicas') measurements per layer and micro-batch size, and the
  // optimizer steps into one time per parameter.
  std::vector<std::map<int64_t, LayerTiming>> byLayer(plan.layers.size());
  double optimizerS = 0, optimizerParams = 0;
  std::map<std::string, double> overheadS;
  std::map<std::string, int64_t> overheadCount;
  for (const LayerTiming &t : timings) {
    if (t.layer == kOverheadTiming) {
      if (const char *kind = instructionKind(t.samples)) {
        overheadS[kind] += t.forwardS;
        overheadCount[kind] += t.forwardCount;
      }
      continue;
    }
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
  if (!overheadS.empty()) {
    // In the order of kProfileInstructionKinds; never negative (the clock's noise).
    os << ", " << key(kProfileInstructionOverhead) << "{";
    bool any = false;
    for (const char *kind : kProfileInstructionKinds)
      if (overheadCount[kind] > 0) {
        os << (any ? ", " : "") << key(kind)
           << jsonNumber(std::max(0.0, overheadS[kind] / static_cast<double>(overheadCount[kind])));
        any = true;
      }
    os << "}";
  }
  if (const TransportFit fit = transport ? fitTransport(*transport) : TransportFit();
      fit.bandwidth > 0) {
    os << ", " << key(kProfileTransport) << "{" << key(kProfileTransportLatencyS)
       << jsonNumber(fit.latencyS) << ", " << key(kProfileTransportBandwidth)
       << jsonNumber(fit.bandwidth) << "}";
  }
  if (const std::optional<model::RoutedLoad> &load = measured.routedLoad;
      load && load->pieces > 0 && plan.config.expert > 1)
    os << ", " << key(kProfileRoutedLoad) << "{" << key(kProfileRoutedLoadExpert)
       << plan.config.expert << ", " << key(kProfileRoutedLoadPeak) << jsonNumber(load->peak)
       << ", " << key(kProfileRoutedLoadPieces) << load->pieces << "}";
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
