//===- StageWork.cpp - what every backend computes the same way -----------===//

#include "runtime/exec/StageWork.h"

#include "runtime/model/Optimizer.h"
#include "runtime/model/Trainable.h"
#include "runtime/plan/Limits.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include <algorithm>
#include <unistd.h>

namespace conduit::runtime {

RankPosition RankPosition::of(const Config &c, int64_t globalRank) {
  RankPosition p;
  p.tensorRank = static_cast<int32_t>(globalRank % c.tensor);
  globalRank /= c.tensor;
  if (c.pipelineInner) {
    p.replica = static_cast<int32_t>(globalRank / c.pipeline);
    p.pipelineRank = static_cast<int32_t>(globalRank % c.pipeline);
  } else {
    p.pipelineRank = static_cast<int32_t>(globalRank / c.data);
    p.replica = static_cast<int32_t>(globalRank % c.data);
  }
  return p;
}

ExpertPlace expertPlaceOf(const Config &c, const RankPosition &where) {
  const int64_t e = std::max<int64_t>(c.expert, 1), perRank = int64_t(c.data) * c.tensor;
  const int64_t i = int64_t(where.replica) * c.tensor + where.tensorRank;
  return {int64_t(where.pipelineRank) * (perRank / e) + i / e, i % e};
}

ExpertPlace expertDataPlaceOf(const Config &c, const RankPosition &where) {
  const int64_t e = std::max<int64_t>(c.expert, 1);
  const int64_t i = int64_t(where.replica) * c.tensor + where.tensorRank;
  return {i % e, i / e};
}

bool isSharded(const Config &c) { return c.data > 1 && c.sharding != Sharding::None; }

absl::Status validateModel(const Plan &p, const char *backend) {
  CONDUIT_RETURN_IF_ERROR(model::checkTrainable(p, absl::StrCat("the ", backend, " backend")));
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
  return model::makeTokenSource(p.config, shape.vocab, shape.seq).status();
}

absl::StatusOr<int64_t> rankMemoryBytes(const Plan &p, const model::GptShape &shape,
                                        int32_t pipelineRank, int64_t gradBytes) {
  using limits::checkedAdd;
  using limits::checkedMul;
  const Config &c = p.config;
  const bool sharded = isSharded(c);
  const int64_t width = model::OptimizerConfig::fromPlan(c).stateWidth();
  std::optional<int64_t> total = 0;
  auto add = [&](std::optional<int64_t> bytes) {
    total = total && bytes ? checkedAdd(*total, *bytes) : std::nullopt;
  };
  for (int64_t bytes : p.ranks[pipelineRank].slots)
    add(bytes);
  for (const Stage &stage : p.stages) {
    if (stage.rank != pipelineRank)
      continue;
    // Each tensor rank holds about 1/T of the stage (replicated norms and biases aside), and
    // each expert rank 1/E of its routed experts.
    int64_t experts = 0;
    for (int32_t l = stage.firstLayer; l < stage.endLayer; ++l)
      experts += p.layers[l].expertParams;
    model::StageLayout params;
    params.dense = (stage.params - experts + c.tensor - 1) / c.tensor;
    params.experts = experts / c.expert;
    params.expertsAt = model::StageLayout::expertsStart(params.dense, params.experts, c.data);
    const ShardLayout layout = ShardLayout::of(params, c, sharded, RankPosition());
    // The whole parameters and their gradients; the shard's optimizer state, and with
    // sharding its master copy and reduced gradients.
    add(checkedMul(layout.padded, int64_t(sizeof(float)) + gradBytes));
    add(checkedMul(layout.updatedLen, width * int64_t(sizeof(float))));
    if (sharded)
      add(checkedMul(layout.shardLen, int64_t(sizeof(float)) + gradBytes));
    int64_t largest = 0, blocks = 0;
    for (int64_t mb = 0; mb < stage.numMicrobatches(); ++mb)
      largest = std::max(largest, stage.samples[mb + 1] - stage.samples[mb]);
    for (int32_t l = stage.firstLayer; l < stage.endLayer; ++l)
      blocks += p.layers[l].kind == LayerKind::Block;
    const bool head = p.layers[stage.endLayer - 1].kind == LayerKind::Head;
    std::optional<int64_t> activations = shape.activationElements(largest, blocks, head);
    add(activations ? checkedMul(*activations, int64_t(sizeof(float))) : std::nullopt);
  }
  if (!total)
    return absl::FailedPreconditionError(absl::StrCat(
        "pipeline rank ", pipelineRank,
        " would need more than 2^63 bytes for its parameters, gradients, optimizer state and "
        "the activations of one micro-batch"));
  return *total;
}

int64_t hostMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && size > 0 ? int64_t(pages) * size : 0;
}

std::string formatBytes(double bytes) {
  const char *units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 6) {
    bytes /= 1024;
    ++unit;
  }
  return unit == 0 ? absl::StrCat(static_cast<int64_t>(bytes), " bytes")
                   : absl::StrFormat("%.1f %s", bytes, units[unit]);
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

ShardLayout ShardLayout::of(const model::StageLayout &layout, const Config &c, bool sharded,
                            const RankPosition &where) {
  ShardLayout s;
  s.n = layout.size();
  // A segment of `n` elements from `at`, shared by `members` ranks of which this is `position`.
  auto segment = [&](int64_t at, int64_t n, int64_t members, int64_t position) {
    ShardSegment g;
    g.at = at;
    g.n = n;
    g.padded = (n + members - 1) / members * members;
    g.inPlace = sharded && members == 1;
    g.apart = g.inPlace && n > 0 && c.sharding != Sharding::Optimizer;
    g.shardLen = sharded && !g.inPlace ? g.padded / members : n;
    g.shardOffset = sharded && !g.inPlace ? position * g.shardLen : 0;
    g.shardAt = sharded ? 0 : at;
    return g;
  };
  const bool experts = layout.experts > 0;
  s.dense = segment(0, experts ? layout.dense : s.n, c.data, where.replica);
  if (experts) {
    const ExpertPlace place = expertDataPlaceOf(c, where);
    s.experts = segment(layout.expertsAt, layout.experts, int64_t(c.data) * c.tensor / c.expert,
                        place.position);
  } else {
    s.experts = segment(s.dense.padded, 0, 1, 0);
  }
  s.padded = s.dense.padded + s.experts.padded;
  if (!sharded) {
    s.shardLen = s.updatedLen = s.n;
    return s;
  }
  // The kept shards first, then what is updated in place.
  for (ShardSegment *g : {&s.dense, &s.experts})
    if (!g->inPlace) {
      g->shardAt = s.shardLen;
      s.shardLen += g->shardLen;
    }
  s.updatedLen = s.shardLen;
  for (ShardSegment *g : {&s.dense, &s.experts})
    if (g->inPlace) {
      g->shardAt = s.updatedLen;
      s.updatedLen += g->n;
    }
  return s;
}

int64_t ShardLayout::updatedIndex(int64_t at, bool sharded) const {
  if (!sharded)
    return at;
  for (const ShardSegment *g : {&dense, &experts}) {
    if (at < g->at || at >= g->at + g->n)
      continue;
    if (g->inPlace)
      return g->shardAt + (at - g->at);
    const int64_t from = g->at + g->shardOffset;
    return at >= from && at < from + g->shardLen ? g->shardAt + (at - from) : -1;
  }
  return -1;
}

absl::StatusOr<model::StageLayout> rankStageLayout(const Plan &plan, int32_t stage,
                                                   const RankPosition &where) {
  CONDUIT_ASSIGN_OR_RETURN(model::GptShape shape, model::GptShape::fromPlan(plan));
  shape.tensorRank = where.tensorRank;
  shape.expertRank = expertPlaceOf(plan.config, where).position;
  const Stage &s = plan.stages[stage];
  return model::StageLayout::of(plan, shape, s.firstLayer, s.endLayer,
                                ShardLayout::align(plan.config));
}

model::Tokens microbatchTokens(const Config &c, const model::TokenSource &data,
                               const model::GptShape &shape, const Stage &stage, int64_t mb,
                               int32_t replica, int64_t step, std::vector<int32_t> &tokens,
                               std::vector<int32_t> &targets) {
  const int64_t samples = stage.samples[mb + 1] - stage.samples[mb];
  data.batch(step, replica * c.batchSamples() + stage.samples[mb], samples, tokens, targets);
  model::Tokens batch;
  batch.tokens = tokens.data();
  batch.targets = targets.data();
  batch.samples = samples;
  batch.lossScale = 1.0 / c.stepTokens(shape.seq);
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
                        Op op) {
  for (size_t i = 0; i < seconds.size(); ++i) {
    const int64_t layer = firstLayer + static_cast<int64_t>(i);
    layerSeconds += seconds[i];
    LayerTiming &t = byLayer[{layer, samples}];
    t.layer = layer;
    t.samples = samples;
    switch (op) {
    case Op::Forward:
      t.forwardS += seconds[i];
      ++t.forwardCount;
      break;
    case Op::BackwardInput:
      t.inputS += seconds[i];
      ++t.inputCount;
      break;
    case Op::BackwardWeight:
      t.weightS += seconds[i];
      ++t.weightCount;
      break;
    default:
      t.backwardS += seconds[i];
      ++t.backwardCount;
      break;
    }
  }
}

void LayerTimer::recordOptimizer(int64_t params, double seconds) {
  LayerTiming &t = byLayer[{kOptimizerTiming, params}];
  t.layer = kOptimizerTiming;
  t.samples = params;
  t.forwardS += seconds;
  ++t.forwardCount;
}

void LayerTimer::recordOverhead(Op op, double seconds) {
  const int64_t kind = static_cast<int64_t>(op);
  LayerTiming &t = byLayer[{kOverheadTiming, kind}];
  t.layer = kOverheadTiming;
  t.samples = kind;
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
