//===- ProfileReader.cpp - measured layer times for the cost model -------===//

#include "analysis/ProfileReader.h"

#include "runtime/plan/Limits.h"
#include "runtime/plan/ProfileKeys.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>

using namespace conduit;
using namespace conduit::runtime;

namespace {
/// Bounds on a profile's numbers: a micro-batch of 2^40 samples, an hour per layer and pass.
constexpr double kMaxProfileSamples = 1099511627776.0;
constexpr double kMaxProfileSeconds = 3600;
/// A transport's bandwidth: 1 PB/s, far above any link.
constexpr double kMaxProfileBandwidth = 1e15;
/// Bytes of one rank: 2^60.
constexpr int64_t kMaxProfileBytes = int64_t(1) << 60;

/// The profile's "memory": one object per rank, in rank order, with every key present.
void readMemory(ObjectReader &top, const Json &list, std::vector<RankMemoryProfile> &out) {
  Diagnostics &diag = top.getDiagnostics();
  for (size_t i = 0; i < list.size(); ++i) {
    const Json &value = list[i];
    std::string at = top.elementPath(kProfileMemory, i);
    if (!value.is_object()) {
      diag.report(at, "expected an object, got " + describeJson(value));
      return;
    }
    ObjectReader rank(value, at, diag);
    for (const char *key : {kProfileMemoryRank, kProfileMemoryPipelineRank, kProfileMemoryPredicted,
                            kProfileMemoryPeak, kProfileMemoryHeldPeak, kProfileMemoryAtPeak})
      if (!rank.require(key))
        return;
    RankMemoryProfile m;
    m.rank = rank.integer(kProfileMemoryRank, 0, kMaxProfileBytes).value_or(0);
    m.pipelineRank = rank.integer(kProfileMemoryPipelineRank, 0, kMaxProfileBytes).value_or(0);
    m.predictedBytes = rank.integer(kProfileMemoryPredicted, 0, kMaxProfileBytes).value_or(0);
    m.peakBytes = rank.integer(kProfileMemoryPeak, 0, kMaxProfileBytes).value_or(0);
    m.heldPeakBytes = rank.integer(kProfileMemoryHeldPeak, 0, kMaxProfileBytes).value_or(0);
    if (const Json *categories = rank.object(kProfileMemoryAtPeak)) {
      ObjectReader atPeak(*categories, rank.keyPath(kProfileMemoryAtPeak), diag);
      for (const char *category : kProfileMemoryCategories) {
        if (!atPeak.require(category))
          return;
        m.atPeak.push_back(atPeak.integer(category, 0, kMaxProfileBytes).value_or(0));
      }
      atPeak.rejectUnknownKeys();
    }
    rank.rejectUnknownKeys();
    if (diag.failed())
      return;
    if (m.rank != static_cast<int64_t>(i)) {
      diag.report(rank.keyPath(kProfileMemoryRank),
                  "expected rank " + std::to_string(i) + " (ranks are listed in order)");
      return;
    }
    out.push_back(std::move(m));
  }
}
/// The profile's "instruction_overhead_s": a number of seconds per instruction kind named.
void readOverhead(ObjectReader &top, const Json &object, MeasuredProfile &out) {
  ObjectReader kinds(object, top.keyPath(kProfileInstructionOverhead), top.getDiagnostics());
  for (size_t k = 0; k < std::size(kProfileInstructionKinds); ++k)
    out.instructionOverheadS[k] = kinds.number(kProfileInstructionKinds[k], 0, kMaxProfileSeconds);
  kinds.rejectUnknownKeys();
}

/// The profile's "transport": its latency and bandwidth, both required.
void readTransport(ObjectReader &top, const Json &object, MeasuredProfile &out) {
  ObjectReader transport(object, top.keyPath(kProfileTransport), top.getDiagnostics());
  if (!transport.require(kProfileTransportLatencyS) ||
      !transport.require(kProfileTransportBandwidth))
    return;
  out.transportLatencyS = transport.number(kProfileTransportLatencyS, 0, kMaxProfileSeconds);
  out.transportBandwidth =
      transport.number(kProfileTransportBandwidth, 0, kMaxProfileBandwidth, /*minExclusive=*/true);
  transport.rejectUnknownKeys();
}
/// The profile's "routed_load": the measured imbalance of an expert-parallel run, every key
/// required.
void readRoutedLoad(ObjectReader &top, const Json &object, MeasuredProfile &out) {
  ObjectReader load(object, top.keyPath(kProfileRoutedLoad), top.getDiagnostics());
  for (const char *key :
       {kProfileRoutedLoadExpert, kProfileRoutedLoadPeak, kProfileRoutedLoadPieces})
    if (!load.require(key))
      return;
  std::optional<int64_t> expert = load.integer(kProfileRoutedLoadExpert, 2, limits::kMaxWorld);
  // At least the balanced share (some rank takes that much), at most all of its group's.
  std::optional<double> peak =
      load.number(kProfileRoutedLoadPeak, 1, static_cast<double>(expert.value_or(2)));
  std::optional<int64_t> pieces = load.integer(kProfileRoutedLoadPieces, 1, INT64_MAX);
  load.rejectUnknownKeys();
  if (expert && peak && pieces)
    out.routedLoad = RoutedLoadProfile{*expert, *peak, *pieces};
}
} // namespace

llvm::Expected<MeasuredProfile> conduit::readProfile(llvm::StringRef path) {
  Diagnostics diag(path.str());
  std::optional<Json> root = loadJsonFile(path, diag);
  if (!root)
    return llvm::createStringError(diag.getError()->str());
  return parseProfile(*root, path);
}

llvm::Expected<MeasuredProfile> conduit::parseProfile(const Json &root, llvm::StringRef path) {
  Diagnostics diag(path.str());
  auto fail = [&]() { return llvm::createStringError(diag.getError()->str()); };
  if (!root.is_object()) {
    diag.report("", "expected a JSON object, got " + describeJson(root));
    return fail();
  }
  ObjectReader top(root, "", diag);
  for (const char *key : {kProfileFormat, kProfileLayers})
    if (!top.require(key))
      return fail();
  if (std::optional<int64_t> version = top.integer(kProfileFormat, 1, 1000);
      version && *version != kProfileVersion)
    diag.report(top.keyPath(kProfileFormat), "format version " + std::to_string(*version) +
                                                 " is newer than this compiler reads (" +
                                                 std::to_string(kProfileVersion) +
                                                 "); compile with the Conduit that "
                                                 "wrote the profile");
  std::optional<std::string> backend = top.string(kProfileBackend);
  top.string(kProfileJob);
  const Json *layers = top.array(kProfileLayers);
  MeasuredProfile profile;
  profile.backend = backend.value_or("");
  if (std::optional<size_t> kind = top.choice(kProfileOptimizer, {"adam", "sgd"}))
    profile.optimizerAdam = *kind == 0;
  profile.optimizerSPerParam = top.number(kProfileOptimizerSPerParam, 0, kMaxProfileSeconds);
  if (const Json *memory = top.array(kProfileMemory))
    readMemory(top, *memory, profile.memory);
  if (const Json *overhead = top.object(kProfileInstructionOverhead))
    readOverhead(top, *overhead, profile);
  if (const Json *transport = top.object(kProfileTransport))
    readTransport(top, *transport, profile);
  if (const Json *load = top.object(kProfileRoutedLoad))
    readRoutedLoad(top, *load, profile);
  top.rejectUnknownKeys();
  if (diag.failed())
    return fail();

  std::vector<LayerProfile> &profiles = profile.layers;
  for (size_t i = 0; i < layers->size(); ++i) {
    const Json &value = (*layers)[i];
    std::string at = top.elementPath(kProfileLayers, i);
    if (!value.is_object()) {
      diag.report(at, "expected an object, got " + describeJson(value));
      return fail();
    }
    ObjectReader layer(value, at, diag);
    for (const char *key :
         {kProfileLayerName, kProfileLayerSamples, kProfileLayerForwardS, kProfileLayerBackwardS})
      if (!layer.require(key))
        return fail();
    LayerProfile p;
    p.name = layer.string(kProfileLayerName).value_or("");
    // Samples are micro-batch sizes, times are seconds: both bounded far above any measurement,
    // so that interpolating and extending them stays finite.
    auto readList = [&](const char *key, std::vector<double> &out, bool samples) {
      const Json *list = layer.array(key);
      if (!list)
        return;
      const double max = samples ? kMaxProfileSamples : kMaxProfileSeconds;
      for (size_t k = 0; k < list->size(); ++k) {
        const Json &element = (*list)[k];
        std::optional<double> v =
            element.is_number() ? std::optional<double>(element.get<double>()) : std::nullopt;
        if (!v || !(*v <= max) || *v < 0 || (samples && *v <= 0)) {
          diag.report(layer.elementPath(key, k), std::string("expected a ") +
                                                     (samples ? "positive" : "non-negative") +
                                                     " number up to " + describeJson(Json(max)) +
                                                     ", got " + describeJson(element));
          return;
        }
        out.push_back(*v);
      }
    };
    readList(kProfileLayerSamples, p.samples, true);
    readList(kProfileLayerForwardS, p.forwardS, false);
    readList(kProfileLayerBackwardS, p.backwardS, false);
    // The halves of a split backward, measured by plans that split it: both or neither.
    readList(kProfileLayerBackwardInputS, p.inputS, false);
    readList(kProfileLayerBackwardWeightS, p.weightS, false);
    layer.rejectUnknownKeys();
    if (diag.failed())
      return fail();
    if (p.samples.empty() || p.forwardS.size() != p.samples.size() ||
        p.backwardS.size() != p.samples.size()) {
      diag.report(at, "needs as many forward_s and backward_s entries as samples (at least one)");
      return fail();
    }
    if ((!p.inputS.empty() || !p.weightS.empty()) &&
        (p.inputS.size() != p.samples.size() || p.weightS.size() != p.samples.size())) {
      diag.report(at, "needs as many backward_input_s and backward_weight_s entries as samples, "
                      "or neither");
      return fail();
    }
    for (size_t k = 1; k < p.samples.size(); ++k)
      if (p.samples[k] <= p.samples[k - 1]) {
        diag.report(layer.keyPath(kProfileLayerSamples), "must increase strictly");
        return fail();
      }
    profiles.push_back(std::move(p));
  }
  return profile;
}

double conduit::profiledTime(const std::vector<double> &times, const LayerProfile &p,
                             int64_t samples) {
  const std::vector<double> &x = p.samples;
  const double s = static_cast<double>(samples);
  if (x.size() == 1)
    return times[0] * s / x[0];
  // Piecewise linear through the measurements, extended linearly beyond them.
  size_t hi = std::upper_bound(x.begin(), x.end(), s) - x.begin();
  hi = std::clamp<size_t>(hi, 1, x.size() - 1);
  size_t lo = hi - 1;
  double slope = (times[hi] - times[lo]) / (x[hi] - x[lo]);
  return std::max(0.0, times[lo] + slope * (s - x[lo]));
}
