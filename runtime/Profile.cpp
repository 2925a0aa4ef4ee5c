//===- Profile.cpp - measured layer times for the cost model --------------===//

#include "runtime/Profile.h"

#include "absl/strings/str_cat.h"

#include <cstdio>
#include <map>

namespace conduit::runtime {

namespace {
std::string number(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.9g", value);
  return buffer;
}

std::string quoted(const std::string &text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + "\"";
}
} // namespace

absl::Status writeProfile(const Plan &plan, const std::string &backend,
                          const std::vector<LayerTiming> &timings, std::ostream &os) {
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
    m.forwardCount += t.forwardCount;
    m.backwardCount += t.backwardCount;
  }
  os << "{\"conduit_profile\": 1, \"backend\": " << quoted(backend)
     << ", \"job\": " << quoted(plan.name);
  if (optimizerParams > 0)
    os << ", \"optimizer\": "
       << quoted(plan.config.optimizer == Optimizer::Adam ? "adam" : "sgd")
       << ", \"optimizer_s_per_param\": " << number(optimizerS / optimizerParams);
  os << ", \"layers\": [";
  for (size_t l = 0; l < plan.layers.size(); ++l) {
    if (byLayer[l].empty())
      return absl::FailedPreconditionError(
          absl::StrCat("layer ", plan.layers[l].name, " never ran: nothing to profile"));
    std::string samples, forward, backward;
    for (const auto &[n, t] : byLayer[l]) {
      if (t.forwardCount == 0 || t.backwardCount == 0)
        continue;
      const char *sep = samples.empty() ? "" : ", ";
      absl::StrAppend(&samples, sep, n);
      absl::StrAppend(&forward, sep, number(t.forwardS / t.forwardCount));
      absl::StrAppend(&backward, sep, number(t.backwardS / t.backwardCount));
    }
    os << (l ? ",\n  " : "\n  ") << "{\"name\": " << quoted(plan.layers[l].name)
       << ", \"samples\": [" << samples << "], \"forward_s\": [" << forward
       << "], \"backward_s\": [" << backward << "]}";
  }
  os << "\n]}\n";
  return absl::OkStatus();
}

} // namespace conduit::runtime
