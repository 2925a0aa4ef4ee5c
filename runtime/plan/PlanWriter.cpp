//===- PlanWriter.cpp - writing plan files --------------------------------===//
//
// The Plan data model as plan file bytes (plan.fbs), and a file written through a temporary
// and a rename.
//
//===----------------------------------------------------------------------===//

#include "runtime/plan/PlanFile.h"

#include "runtime/Heap.h"
#include "runtime/plan/plan_generated.h"

#include "absl/strings/str_cat.h"

#include <cstdio>
#include <fstream>
#include <functional>

namespace conduit::runtime {

namespace fb = conduit::planfile;

namespace {

/// An upper bound of the plan file's size, so that the builder allocates once: growing it
/// copies the whole buffer each time, and the instructions are most of a plan's bytes.
size_t sizeBound(const Plan &plan) {
  size_t bytes = 4096 + plan.name.size() + plan.source.size() + plan.config.preset.size() +
                 plan.config.dataSource.path.size();
  for (const Layer &l : plan.layers)
    bytes += 96 + l.name.size();
  for (const Stage &s : plan.stages)
    bytes += 64 + 8 * s.samples.size();
  for (const Group &g : plan.groups)
    bytes += 32 + 4 * g.ranks.size();
  for (const RankProgram &r : plan.ranks)
    bytes += 96 + 8 * r.slots.size() + sizeof(fb::Instruction) * r.instructions.size();
  return bytes;
}

/// The bytes of `plan`; `written(r)` runs once rank r's instructions are in the buffer.
flatbuffers::DetachedBuffer buildPlan(const Plan &plan,
                                      const std::function<void(size_t)> &written) {
  flatbuffers::FlatBufferBuilder fbb(sizeBound(plan));

  std::vector<flatbuffers::Offset<fb::Layer>> layers;
  layers.reserve(plan.layers.size());
  for (const Layer &l : plan.layers)
    layers.push_back(fb::CreateLayer(fbb, fbb.CreateString(l.name), static_cast<uint8_t>(l.kind),
                                     l.params, l.fwdFlops, l.bwdFlops, l.bwdWeightFlops,
                                     l.activationBytes, l.checkpointBytes, l.outputBytes,
                                     l.expertParams));
  std::vector<flatbuffers::Offset<fb::Stage>> stages;
  for (const Stage &s : plan.stages)
    stages.push_back(fb::CreateStage(fbb, s.index, s.rank, s.firstLayer, s.endLayer, s.params,
                                     fbb.CreateVector(s.samples)));
  std::vector<flatbuffers::Offset<fb::Group>> groups;
  for (const Group &g : plan.groups)
    groups.push_back(fb::CreateGroup(fbb, fbb.CreateVector(g.ranks)));
  std::vector<flatbuffers::Offset<fb::RankProgram>> ranks;
  ranks.reserve(plan.ranks.size());
  for (const RankProgram &r : plan.ranks) {
    // Written in place in the builder's buffer, not through a copy.
    fb::Instruction *out = nullptr;
    auto instructions = fbb.CreateUninitializedVectorOfStructs(r.instructions.size(), &out);
    for (const Instruction &i : r.instructions)
      *out++ = fb::Instruction(static_cast<fb::Op>(i.op), i.stream,
                               static_cast<fb::TransferKind>(i.kind), i.flags, i.stage,
                               i.microbatch, i.peer, i.peerStage, i.peerMicrobatch, i.slot, i.group,
                               i.batch, i.event, i.begin, i.end, i.bytes);
    if (written)
      written(ranks.size());
    auto slots = fbb.CreateVector(r.slots);
    ranks.push_back(
        fb::CreateRankProgram(fbb, r.rank, r.events, slots, instructions, r.peakMemoryBytes));
  }

  const Config &c = plan.config;
  auto preset = fbb.CreateString(c.preset);
  auto dataPath = fbb.CreateString(c.dataSource.path);
  fb::ConfigBuilder config(fbb);
  config.add_pipeline(c.pipeline);
  config.add_data(c.data);
  config.add_stages_per_device(c.stagesPerDevice);
  config.add_schedule(static_cast<uint8_t>(c.schedule));
  config.add_group_size(c.groupSize);
  config.add_microbatches(c.microbatches);
  config.add_microbatch_size(c.microbatchSize);
  config.add_sharding(static_cast<uint8_t>(c.sharding));
  config.add_checkpointing(static_cast<uint8_t>(c.checkpointing));
  config.add_fsdp_window(c.fsdpWindow);
  config.add_gradient_reduction(static_cast<uint8_t>(c.gradientReduction));
  config.add_recompute_modules(c.recomputeModules);
  config.add_rank_order(c.pipelineInner ? 1 : 0);
  config.add_dtype(static_cast<uint8_t>(c.dtype));
  config.add_optimizer(static_cast<uint8_t>(c.optimizer));
  config.add_adam_moments(static_cast<uint8_t>(c.adamMoments));
  config.add_seed(c.seed);
  config.add_learning_rate(c.learningRate);
  config.add_tokens_per_sample(c.tokensPerSample);
  config.add_split_backward(c.splitBackward);
  config.add_data_kind(static_cast<uint8_t>(c.dataSource.kind));
  config.add_data_path(dataPath);
  config.add_token_bytes(c.dataSource.tokenBytes);
  config.add_preset(preset);
  config.add_peak_flops(c.peakFlops);
  config.add_efficiency(c.efficiency);
  config.add_memory_bytes(c.memoryBytes);
  config.add_gpus_per_node(c.gpusPerNode);
  config.add_intra_node_bandwidth(c.intraNodeBandwidth);
  config.add_inter_node_bandwidth(c.interNodeBandwidth);
  config.add_latency_s(c.latencyS);
  config.add_launch_overhead_s(c.launchOverheadS);
  config.add_tensor(c.tensor);
  config.add_sequence_parallel(c.sequenceParallel);
  config.add_expert(c.expert);
  config.add_tensor_comm_overlap(c.tensorCommOverlap);
  auto configOffset = config.Finish();

  flatbuffers::Offset<fb::Transformer> transformer;
  if (const std::optional<Transformer> &t = plan.transformer)
    transformer = fb::CreateTransformer(
        fbb, t->numLayers, t->hiddenSize, t->numHeads, t->numKvHeads, t->ffnHiddenSize,
        t->seqLength, t->vocabSize, t->mlp, t->norm, t->position, t->tieEmbeddings, t->bias,
        t->ropeTheta, t->normEps, t->headDim, t->qkNorm, t->qLoraRank, t->kvLoraRank,
        t->qkNopeHeadDim, t->qkRopeHeadDim, t->vHeadDim, t->numExperts, t->topK,
        t->expertFfnHiddenSize, t->router, t->normalizeTopK, t->auxLossCoefficient,
        t->sharedExperts, t->sharedFfnHiddenSize, t->denseLayers, t->capacityFactor, t->imbalance,
        t->routerGroups, t->routerGroupTopK, t->dispatch, t->fp8Dispatch, t->biasUpdateRate,
        t->mtpLayers, t->ropeInterleave, static_cast<uint8_t>(t->ropeScaling.type),
        t->ropeScaling.factor, t->ropeScaling.originalPositions, t->ropeScaling.lowFreqFactor,
        t->ropeScaling.highFreqFactor, t->ropeScaling.betaFast, t->ropeScaling.betaSlow,
        !t->ropeScaling.truncate, t->ropeScaling.attentionFactor, t->ropeScaling.mscaleAllDim,
        t->routedScalingFactor, t->sharedExpertGate, t->zLossCoefficient, t->dropByWeight,
        t->mtpLossCoefficient);
  const uint64_t features = requiredFeatures(plan);
  auto root = fb::CreatePlan(fbb, plan.formatVersion, features, fbb.CreateString(plan.name),
                             fbb.CreateString(plan.source), configOffset, transformer,
                             fbb.CreateVector(layers), fbb.CreateVector(stages),
                             fbb.CreateVector(groups), fbb.CreateVector(ranks));
  fb::FinishPlanBuffer(fbb, root);
  return fbb.Release();
}

} // namespace

flatbuffers::DetachedBuffer planBytes(const Plan &plan) { return buildPlan(plan, nullptr); }

flatbuffers::DetachedBuffer planBytes(Plan &&plan) {
  return buildPlan(plan, [&](size_t r) {
    std::vector<Instruction>().swap(plan.ranks[r].instructions);
    releaseFreedMemory();
  });
}

std::string writePlan(const Plan &plan) {
  flatbuffers::DetachedBuffer bytes = planBytes(plan);
  return std::string(reinterpret_cast<const char *>(bytes.data()), bytes.size());
}

absl::Status writePlanFile(const Plan &plan, const std::string &path) {
  flatbuffers::DetachedBuffer bytes = planBytes(plan);
  std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out)
      return absl::UnavailableError(absl::StrCat("cannot write ", temporary));
    out.write(reinterpret_cast<const char *>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      std::remove(temporary.c_str());
      return absl::UnavailableError(absl::StrCat("cannot write ", temporary));
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::remove(temporary.c_str());
    return absl::UnavailableError(absl::StrCat("cannot rename ", temporary, " to ", path));
  }
  return absl::OkStatus();
}

} // namespace conduit::runtime
