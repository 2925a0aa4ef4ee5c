//===- CheckpointFuzzer.cpp - libFuzzer target: the checkpoint reader -----===//
//
// A checkpoint is untrusted input to conduit-run --resume: its checksums catch corruption, not
// a file written to be wrong. The first byte chooses the format, the rest is the content:
// even, a manifest for parseCheckpointManifest; odd, a rank file for parseRankState as global
// rank (selector >> 1) mod 4, checked against a committed plan (CONDUIT_FUZZ_PLAN:
// testdata/fuzz/plan-file/tiny-zero1.plan, 2 pipeline ranks x 2 replicas, ZeRO-1, Adam) under
// the manifest of the seed checkpoints. Both must refuse any bytes with a message and never
// crash, overflow or allocate more than the input holds; what they accept must be what the
// plan's stages keep.
//
// The seeds (testdata/fuzz/checkpoint) are what `conduit-run tiny-zero1.plan
// --ranks-per-process=4 --steps=2 --checkpoint=DIR` writes, the selector byte prepended; the
// plan is `conduit-compile` of a 2-block GPT (hidden 8, 2 heads, seq 4, vocab 16) with
// pipeline 2, data 2, 1F1B, 2 micro-batches of 1, sharding "optimizer", fp32, Adam, seed 7.
//
//===----------------------------------------------------------------------===//

#include "runtime/plan/PlanFile.h"
#include "runtime/weights/Checkpoint.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

using namespace conduit;

namespace {

/// The step the seed checkpoints under testdata/fuzz/checkpoint were written after.
constexpr int64_t kSeedStep = 2;

const runtime::Plan &plan() {
  static const runtime::Plan loaded = [] {
    absl::StatusOr<runtime::Plan> p = runtime::readPlanFile(CONDUIT_FUZZ_PLAN);
    if (!p.ok()) { // the committed plan itself: not a finding
      std::fprintf(stderr, "fuzz-checkpoint: %s\n", std::string(p.status().message()).c_str());
      std::abort();
    }
    return *p;
  }();
  return loaded;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  const std::string_view content(reinterpret_cast<const char *>(data) + 1, size - 1);
  if ((data[0] & 1) == 0) {
    absl::StatusOr<runtime::CheckpointManifest> manifest =
        runtime::parseCheckpointManifest(content, "manifest");
    if (manifest.ok() && static_cast<int64_t>(manifest->files.size()) != manifest->worldSize)
      std::abort();
    return 0;
  }
  const runtime::Plan &p = plan();
  runtime::CheckpointManifest manifest;
  manifest.step = kSeedStep;
  manifest.worldSize = p.config.worldSize();
  manifest.layout = runtime::layoutFingerprint(p);
  manifest.directory = "step-00000002";
  const int64_t rank = (data[0] >> 1) % manifest.worldSize;
  absl::StatusOr<std::vector<runtime::StageState>> states =
      runtime::parseRankState(content, manifest, p, rank, "rank.ckpt");
  if (!states.ok())
    return 0;
  for (const runtime::StageState &s : *states)
    if (s.optimizerSteps < 0 || s.optimizerSteps > kSeedStep ||
        s.params.size() > content.size() / sizeof(float))
      std::abort();
  return 0;
}
