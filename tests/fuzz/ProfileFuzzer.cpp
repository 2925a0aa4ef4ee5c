//===- ProfileFuzzer.cpp - libFuzzer target: measured profiles ------------===//
//
// A profile (what `conduit-run --profile` writes) is read by the cost model when a job names
// it. Any bytes end in a profile or one diagnostic; a profile the reader accepts must also
// price layers without failing (every number it returns is finite and non-negative).
//
//===----------------------------------------------------------------------===//

#include "analysis/CostModel.h"
#include "job/JsonReader.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

using namespace conduit;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view text(reinterpret_cast<const char *>(data), size);
  Diagnostics diag("fuzz/profile.json");
  std::optional<Json> root = parseJsonText(text, diag);
  if (!root)
    return 0;
  llvm::Expected<MeasuredProfile> profile = parseProfile(*root, "fuzz/profile.json");
  if (!profile) {
    llvm::consumeError(profile.takeError());
    return 0;
  }
  // Interpolate every layer's measurements at a few sizes, as the cost model does.
  for (const LayerProfile &layer : profile->layers)
    for (int64_t samples : {1, 3, 1 << 20}) {
      double f = profiledTime(layer.forwardS, layer, samples);
      double b = profiledTime(layer.backwardS, layer, samples);
      if (!std::isfinite(f) || !std::isfinite(b) || f < 0 || b < 0)
        std::abort();
    }
  return 0;
}
