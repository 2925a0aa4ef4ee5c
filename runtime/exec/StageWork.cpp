//===- StageWork.cpp - what every backend computes the same way -----------===//

#include "runtime/exec/StageWork.h"

#include "absl/strings/str_cat.h"

#include <algorithm>

namespace conduit::runtime {

RankPosition RankPosition::of(const Config &c, int64_t globalRank) {
  RankPosition p;
  if (c.pipelineInner) {
    p.replica = static_cast<int32_t>(globalRank / c.pipeline);
    p.pipelineRank = static_cast<int32_t>(globalRank % c.pipeline);
  } else {
    p.pipelineRank = static_cast<int32_t>(globalRank / c.data);
    p.replica = static_cast<int32_t>(globalRank % c.data);
  }
  return p;
}

bool isSharded(const Config &c) { return c.data > 1 && c.sharding != Sharding::None; }

absl::Status validateModel(const Plan &p, const char *backend) {
  CONDUIT_ASSIGN_OR_RETURN(model::GptShape shape, model::GptShape::fromPlan(p));
  for (size_t g = 0; g < p.groups.size(); ++g)
    if (p.groups[g].ranks.size() != 1)
      return absl::FailedPreconditionError(
          absl::StrCat("group ", g, " spans several pipeline ranks; the ", backend,
                       " backend shards each stage over the replicas of its own rank only"));
  model::CpuOps<float> ops; // building a chain checks the layers; nothing is computed
  for (const Stage &stage : p.stages)
    CONDUIT_RETURN_IF_ERROR(
        model::LayerChain<float>::build(p, shape, stage.firstLayer, stage.endLayer, ops).status());
  return absl::OkStatus();
}

absl::StatusOr<int64_t> transferFloats(const Instruction &inst, const Config &c,
                                       int64_t rowFloats) {
  const int64_t floats = (inst.end - inst.begin) * rowFloats;
  if (floats != inst.bytes / c.elementBytes())
    return absl::FailedPreconditionError(absl::StrCat(
        describe(inst), ": the plan moves ", inst.bytes, " bytes, the model's activations of ",
        inst.end - inst.begin, " samples are ", floats * c.elementBytes()));
  return floats;
}

ShardLayout ShardLayout::of(int64_t params, const Config &c, bool sharded, int32_t replica) {
  ShardLayout s;
  s.n = params;
  s.padded = (params + c.data - 1) / c.data * c.data;
  s.shardLen = sharded ? s.padded / c.data : params;
  s.shardOffset = sharded ? replica * s.shardLen : 0;
  return s;
}

model::Tokens microbatchTokens(const Config &c, const model::SyntheticData &data,
                               const model::GptShape &shape, const Stage &stage, int64_t mb,
                               int32_t replica, int64_t step, std::vector<int32_t> &tokens,
                               std::vector<int32_t> &targets) {
  const int64_t samples = stage.samples[mb + 1] - stage.samples[mb];
  data.batch(step, replica * c.batchSamples() + stage.samples[mb], samples, tokens, targets);
  model::Tokens batch;
  batch.tokens = tokens.data();
  batch.targets = targets.data();
  batch.samples = samples;
  batch.lossScale = 1.0 / static_cast<double>(c.batchSamples() * c.data * shape.seq);
  return batch;
}

std::vector<Piece> piecesOf(int64_t begin, int64_t end, const std::vector<int64_t> &cuts) {
  std::vector<Piece> pieces;
  for (size_t m = 0; m + 1 < cuts.size(); ++m) {
    const int64_t lo = std::max(begin, cuts[m]), hi = std::min(end, cuts[m + 1]);
    if (lo < hi)
      pieces.push_back({static_cast<int64_t>(m), lo - cuts[m], lo - begin, hi - lo});
  }
  return pieces;
}

void LayerTimer::record(int64_t firstLayer, int64_t samples, const std::vector<double> &seconds,
                        bool forward) {
  for (size_t i = 0; i < seconds.size(); ++i) {
    const int64_t layer = firstLayer + static_cast<int64_t>(i);
    LayerTiming &t = byLayer[{layer, samples}];
    t.layer = layer;
    t.samples = samples;
    (forward ? t.forwardS : t.backwardS) += seconds[i];
    ++(forward ? t.forwardCount : t.backwardCount);
  }
}

void LayerTimer::recordOptimizer(int64_t params, double seconds) {
  LayerTiming &t = byLayer[{kOptimizerTiming, params}];
  t.layer = kOptimizerTiming;
  t.samples = params;
  t.forwardS += seconds;
  ++t.forwardCount;
}

std::vector<LayerTiming> LayerTimer::timings() const {
  std::vector<LayerTiming> out;
  for (const auto &[key, t] : byLayer)
    out.push_back(t);
  return out;
}

} // namespace conduit::runtime
