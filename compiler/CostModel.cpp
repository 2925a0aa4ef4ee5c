//===- CostModel.cpp - time of compute and communication ------------------===//

#include "compiler/CostModel.h"

#include "compiler/JsonReader.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace conduit;

llvm::Expected<CostModel> CostModel::build(const CostInputs &in) {
  CostModel cost;
  pipe::ClusterAttr cluster = in.cluster;
  cost.flopRate = cluster.getPeakFlops() * cluster.getEfficiency();
  cost.launchOverheadS = cluster.getLaunchOverheadS();
  cost.latencyS = cluster.getLatencyS();
  cost.intraBandwidth = cluster.getIntraNodeBandwidth();
  cost.interBandwidth = cluster.getInterNodeBandwidth();
  cost.gpusPerNode = cluster.getGpusPerNode();
  cost.pipeline = in.pipeline;
  cost.data = in.data;
  cost.pipelineInner = in.pipelineInner;
  cost.recompute = in.recompute;
  for (size_t l = 0; l < in.fwdFlops.size(); ++l)
    cost.layers.push_back({in.fwdFlops[l], in.bwdFlops[l]});

  if (!cluster.getProfile().empty()) {
    std::string path = cluster.getProfile().str();
    llvm::Expected<Profile> profile = readProfile(path);
    if (!profile)
      return profile.takeError();
    cost.profiles = std::move(profile->layers);
    cost.optimizerSPerParam = profile->optimizerSPerParam;
    cost.profiledAdam = profile->optimizerAdam;
    if (cost.profiles.size() != cost.layers.size())
      return llvm::createStringError(path + ": the profile has " +
                                     std::to_string(cost.profiles.size()) +
                                     " layers but the model has " +
                                     std::to_string(cost.layers.size()));
    for (size_t l = 0; l < cost.layers.size(); ++l) {
      if (cost.profiles[l].name != in.names[l])
        return llvm::createStringError(
            path + ": layers[" + std::to_string(l) + "] is '" + cost.profiles[l].name +
            "' but the model's layer " + std::to_string(l) + " is '" + in.names[l] +
            "'; the profile was measured on another model");
    }
  }
  return cost;
}

llvm::Expected<CostModel> CostModel::build(pipe::ModelOp model) {
  pipe::ParallelismAttr par = model.getParallelism();
  CostInputs in;
  in.cluster = model.getCluster();
  in.pipeline = par.getPipeline();
  in.data = par.getData();
  in.pipelineInner = par.getRankOrder() == pipe::RankOrder::PipelineInner;
  in.recompute = par.getCheckpointing() == pipe::Checkpointing::Full;
  for (pipe::LayerOp layer : model.getLayers()) {
    in.names.push_back(layer.getName().str());
    in.fwdFlops.push_back(layer.getFwdFlops());
    in.bwdFlops.push_back(layer.getBwdFlops());
  }
  return build(in);
}

namespace {
/// FLOPs per parameter of one optimizer update (Adam: moments, bias correction, update).
double optimizerFlopsPerParam(bool adam) { return adam ? 10 : 2; }
} // namespace

double CostModel::optimizerStepTime(bool adam, int64_t params) const {
  const double n = static_cast<double>(params);
  if (optimizerSPerParam)
    return n * *optimizerSPerParam * optimizerFlopsPerParam(adam) /
           optimizerFlopsPerParam(profiledAdam);
  return n * optimizerFlopsPerParam(adam) / flopRate;
}

double CostModel::profiled(const std::vector<double> &times, const LayerProfile &p,
                           int64_t samples) const {
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

double CostModel::forwardTime(int64_t layer, int64_t samples) const {
  if (!profiles.empty())
    return profiled(profiles[layer].forwardS, profiles[layer], samples);
  return launchOverheadS + layers[layer].fwdFlops * static_cast<double>(samples) / flopRate;
}

double CostModel::backwardTime(int64_t layer, int64_t samples) const {
  double time = !profiles.empty()
                    ? profiled(profiles[layer].backwardS, profiles[layer], samples)
                    : launchOverheadS + layers[layer].bwdFlops * static_cast<double>(samples) / flopRate;
  return recompute ? time + forwardTime(layer, samples) : time;
}

double CostModel::stageForwardTime(int64_t first, int64_t end, int64_t samples) const {
  double time = 0;
  for (int64_t l = first; l < end; ++l)
    time += forwardTime(l, samples);
  return time;
}

double CostModel::stageBackwardTime(int64_t first, int64_t end, int64_t samples) const {
  double time = 0;
  for (int64_t l = first; l < end; ++l)
    time += backwardTime(l, samples);
  return time;
}

int64_t CostModel::globalRank(int64_t pipelineRank, int64_t replica) const {
  return pipelineInner ? replica * pipeline + pipelineRank : pipelineRank * data + replica;
}

Link CostModel::linkBetween(int64_t a, int64_t b) const {
  return a / gpusPerNode == b / gpusPerNode ? Link::IntraNode : Link::InterNode;
}

Link CostModel::dataParallelLink(int64_t pipelineRank) const {
  int64_t first = globalRank(pipelineRank, 0);
  for (int64_t d = 1; d < data; ++d)
    if (linkBetween(first, globalRank(pipelineRank, d)) == Link::InterNode)
      return Link::InterNode;
  return Link::IntraNode;
}

Link CostModel::pipelineLink(int64_t fromRank, int64_t toRank) const {
  for (int64_t d = 0; d < data; ++d)
    if (linkBetween(globalRank(fromRank, d), globalRank(toRank, d)) == Link::InterNode)
      return Link::InterNode;
  return Link::IntraNode;
}

double CostModel::bandwidth(Link link) const {
  return link == Link::IntraNode ? intraBandwidth : interBandwidth;
}

double CostModel::transferTime(int64_t bytes, Link link) const {
  return latencyS + static_cast<double>(bytes) / bandwidth(link);
}

double CostModel::collectiveTime(Collective kind, int64_t bytes, int64_t members,
                                 Link link) const {
  if (members <= 1)
    return 0;
  const double n = static_cast<double>(members);
  const double steps = kind == Collective::AllReduce ? 2 * (n - 1) : n - 1;
  return steps * (latencyS + static_cast<double>(bytes) / n / bandwidth(link));
}

llvm::Expected<Profile> conduit::readProfile(llvm::StringRef path) {
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
  for (llvm::StringRef key : {"conduit_profile", "layers"})
    if (!top.require(key))
      return fail();
  if (std::optional<int64_t> version =
          top.integer("conduit_profile", 1, 1000);
      version && *version != 1)
    diag.report(top.keyPath("conduit_profile"),
                "format version " + std::to_string(*version) +
                    " is newer than this compiler reads (1); compile with the Conduit that "
                    "wrote the profile");
  top.string("backend");
  top.string("job");
  const llvm::json::Array *layers = top.array("layers");
  Profile profile;
  if (std::optional<size_t> kind = top.choice("optimizer", {"adam", "sgd"}))
    profile.optimizerAdam = *kind == 0;
  profile.optimizerSPerParam =
      top.number("optimizer_s_per_param", 0, std::numeric_limits<double>::infinity());
  top.rejectUnknownKeys();
  if (diag.failed())
    return fail();

  std::vector<LayerProfile> &profiles = profile.layers;
  for (auto [i, value] : llvm::enumerate(*layers)) {
    std::string at = top.elementPath("layers", i);
    const llvm::json::Object *entry = value.getAsObject();
    if (!entry) {
      diag.report(at, "expected an object, got " + describeJson(value));
      return fail();
    }
    ObjectReader layer(*entry, at, diag);
    for (llvm::StringRef key : {"name", "samples", "forward_s", "backward_s"})
      if (!layer.require(key))
        return fail();
    LayerProfile p;
    p.name = layer.string("name").value_or("");
    auto readList = [&](llvm::StringRef key, std::vector<double> &out, bool positive) {
      const llvm::json::Array *list = layer.array(key);
      if (!list)
        return;
      for (auto [k, element] : llvm::enumerate(*list)) {
        std::optional<double> v = element.getAsNumber();
        if (!v || !std::isfinite(*v) || *v < 0 || (positive && *v <= 0)) {
          diag.report(layer.elementPath(key, k),
                      std::string("expected a ") + (positive ? "positive" : "non-negative") +
                          " number, got " + describeJson(element));
          return;
        }
        out.push_back(*v);
      }
    };
    readList("samples", p.samples, true);
    readList("forward_s", p.forwardS, false);
    readList("backward_s", p.backwardS, false);
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
        diag.report(layer.keyPath("samples"), "must increase strictly");
        return fail();
      }
    profiles.push_back(std::move(p));
  }
  return profile;
}
