//===- ProfileReader.cpp - measured layer times for the cost model -------===//

#include "analysis/ProfileReader.h"

#include "analysis/JsonReader.h"
#include "runtime/plan/ProfileKeys.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace conduit;
using namespace conduit::runtime;

namespace {
/// Bounds on a profile's numbers: a micro-batch of 2^40 samples, an hour per layer and pass.
constexpr double kMaxProfileSamples = 1099511627776.0;
constexpr double kMaxProfileSeconds = 3600;
/// Bytes of one rank: 2^60.
constexpr int64_t kMaxProfileBytes = int64_t(1) << 60;

/// The profile's "memory": one object per rank, in rank order, with every key present.
void readMemory(ObjectReader &top, const llvm::json::Array &list,
                std::vector<RankMemoryProfile> &out) {
  Diagnostics &diag = top.getDiagnostics();
  for (auto [i, value] : llvm::enumerate(list)) {
    std::string at = top.elementPath(kProfileMemory, i);
    const llvm::json::Object *entry = value.getAsObject();
    if (!entry) {
      diag.report(at, "expected an object, got " + describeJson(value));
      return;
    }
    ObjectReader rank(*entry, at, diag);
    for (llvm::StringRef key :
         {kProfileMemoryRank, kProfileMemoryPipelineRank, kProfileMemoryPredicted,
          kProfileMemoryPeak, kProfileMemoryHeldPeak, kProfileMemoryAtPeak})
      if (!rank.require(key))
        return;
    RankMemoryProfile m;
    m.rank = rank.integer(kProfileMemoryRank, 0, kMaxProfileBytes).value_or(0);
    m.pipelineRank = rank.integer(kProfileMemoryPipelineRank, 0, kMaxProfileBytes).value_or(0);
    m.predictedBytes = rank.integer(kProfileMemoryPredicted, 0, kMaxProfileBytes).value_or(0);
    m.peakBytes = rank.integer(kProfileMemoryPeak, 0, kMaxProfileBytes).value_or(0);
    m.heldPeakBytes = rank.integer(kProfileMemoryHeldPeak, 0, kMaxProfileBytes).value_or(0);
    if (const llvm::json::Object *categories = rank.object(kProfileMemoryAtPeak)) {
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
} // namespace

llvm::Expected<MeasuredProfile> conduit::readProfile(llvm::StringRef path) {
  Diagnostics diag(path.str());
  std::optional<llvm::json::Value> root = loadJsonFile(path, diag);
  if (!root)
    return llvm::createStringError(diag.getError()->str());
  return parseProfile(*root, path);
}

llvm::Expected<MeasuredProfile> conduit::parseProfile(const llvm::json::Value &root,
                                                      llvm::StringRef path) {
  Diagnostics diag(path.str());
  auto fail = [&]() { return llvm::createStringError(diag.getError()->str()); };
  const llvm::json::Object *object = root.getAsObject();
  if (!object) {
    diag.report("", "expected a JSON object, got " + describeJson(root));
    return fail();
  }
  ObjectReader top(*object, "", diag);
  for (llvm::StringRef key : {kProfileFormat, kProfileLayers})
    if (!top.require(key))
      return fail();
  if (std::optional<int64_t> version = top.integer(kProfileFormat, 1, 1000);
      version && *version != kProfileVersion)
    diag.report(top.keyPath(kProfileFormat), "format version " + std::to_string(*version) +
                                                 " is newer than this compiler reads (" +
                                                 std::to_string(kProfileVersion) +
                                                 "); compile with the Conduit that "
                                                 "wrote the profile");
  top.string(kProfileBackend);
  top.string(kProfileJob);
  const llvm::json::Array *layers = top.array(kProfileLayers);
  MeasuredProfile profile;
  if (std::optional<size_t> kind = top.choice(kProfileOptimizer, {"adam", "sgd"}))
    profile.optimizerAdam = *kind == 0;
  profile.optimizerSPerParam = top.number(kProfileOptimizerSPerParam, 0, kMaxProfileSeconds);
  if (const llvm::json::Array *memory = top.array(kProfileMemory))
    readMemory(top, *memory, profile.memory);
  top.rejectUnknownKeys();
  if (diag.failed())
    return fail();

  std::vector<LayerProfile> &profiles = profile.layers;
  for (auto [i, value] : llvm::enumerate(*layers)) {
    std::string at = top.elementPath(kProfileLayers, i);
    const llvm::json::Object *entry = value.getAsObject();
    if (!entry) {
      diag.report(at, "expected an object, got " + describeJson(value));
      return fail();
    }
    ObjectReader layer(*entry, at, diag);
    for (llvm::StringRef key :
         {kProfileLayerName, kProfileLayerSamples, kProfileLayerForwardS, kProfileLayerBackwardS})
      if (!layer.require(key))
        return fail();
    LayerProfile p;
    p.name = layer.string(kProfileLayerName).value_or("");
    // Samples are micro-batch sizes, times are seconds: both bounded far above any measurement,
    // so that interpolating and extending them stays finite.
    auto readList = [&](llvm::StringRef key, std::vector<double> &out, bool samples) {
      const llvm::json::Array *list = layer.array(key);
      if (!list)
        return;
      const double max = samples ? kMaxProfileSamples : kMaxProfileSeconds;
      for (auto [k, element] : llvm::enumerate(*list)) {
        std::optional<double> v = element.getAsNumber();
        if (!v || !(*v <= max) || *v < 0 || (samples && *v <= 0)) {
          diag.report(layer.elementPath(key, k),
                      std::string("expected a ") + (samples ? "positive" : "non-negative") +
                          " number up to " + describeJson(llvm::json::Value(max)) + ", got " +
                          describeJson(element));
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
