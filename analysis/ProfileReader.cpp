//===- ProfileReader.cpp - measured layer times for the cost model -------===//

#include "analysis/ProfileReader.h"

#include "analysis/JsonReader.h"
#include "runtime/plan/ProfileKeys.h"

#include <cmath>
#include <limits>

using namespace conduit;
using namespace conduit::runtime;

llvm::Expected<MeasuredProfile> conduit::readProfile(llvm::StringRef path) {
  Diagnostics diag(path.str());
  auto fail = [&]() { return llvm::createStringError(diag.getError()->str()); };
  std::optional<llvm::json::Value> root = loadJsonFile(path, diag);
  if (!root)
    return fail();
  const llvm::json::Object *object = root->getAsObject();
  if (!object) {
    diag.report("", "expected a JSON object, got " + describeJson(*root));
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
  profile.optimizerSPerParam =
      top.number(kProfileOptimizerSPerParam, 0, std::numeric_limits<double>::infinity());
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
    auto readList = [&](llvm::StringRef key, std::vector<double> &out, bool positive) {
      const llvm::json::Array *list = layer.array(key);
      if (!list)
        return;
      for (auto [k, element] : llvm::enumerate(*list)) {
        std::optional<double> v = element.getAsNumber();
        if (!v || !std::isfinite(*v) || *v < 0 || (positive && *v <= 0)) {
          diag.report(layer.elementPath(key, k), std::string("expected a ") +
                                                     (positive ? "positive" : "non-negative") +
                                                     " number, got " + describeJson(element));
          return;
        }
        out.push_back(*v);
      }
    };
    readList(kProfileLayerSamples, p.samples, true);
    readList(kProfileLayerForwardS, p.forwardS, false);
    readList(kProfileLayerBackwardS, p.backwardS, false);
    layer.rejectUnknownKeys();
    if (diag.failed())
      return fail();
    if (p.samples.empty() || p.forwardS.size() != p.samples.size() ||
        p.backwardS.size() != p.samples.size()) {
      diag.report(at, "needs as many forward_s and backward_s entries as samples (at least one)");
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
