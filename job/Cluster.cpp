//===- Cluster.cpp - the cluster presets ----------------------------------===//
//
// NVIDIA datasheets (dense BF16 tensor-core peak; HBM bandwidth; NVLink and one NIC per GPU,
// per direction); the defaults for efficiency, latency and launch overhead are discussed in
// docs/cost-model.md.
//
//===----------------------------------------------------------------------===//

#include "job/Cluster.h"

#include <vector>

using namespace conduit;

namespace {

const Cluster kPresets[] = {
    {"a100-80gb", 312e12, 0.5, 2.039e12, int64_t(80) << 30, 8, 300e9, 25e9, 10e-6, 0.0, ""},
    {"h100-80gb", 989e12, 0.5, 3.35e12, int64_t(80) << 30, 8, 450e9, 50e9, 10e-6, 0.0, ""},
    {"h200-141gb", 989e12, 0.5, 4.8e12, int64_t(141) << 30, 8, 450e9, 50e9, 10e-6, 0.0, ""},
};

} // namespace

absl::Span<const Cluster> conduit::clusterPresets() { return kPresets; }

absl::Span<const std::string_view> conduit::clusterPresetNames() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> out;
    for (const Cluster &preset : kPresets)
      out.push_back(preset.preset);
    return out;
  }();
  return names;
}
