//===- PlanJson.cpp - a plan as readable JSON -----------------------------===//

#include "runtime/plan/PlanJson.h"

#include "runtime/plan/JsonWriter.h"

#include <iomanip>
#include <limits>

namespace conduit::runtime {

namespace {

template <typename T> void list(std::ostream &os, const std::vector<T> &values) {
  os << "[";
  for (size_t i = 0; i < values.size(); ++i)
    os << (i ? ", " : "") << values[i];
  os << "]";
}

const char *checkpointingName(Checkpointing c) {
  static const char *const kNames[] = {"none", "full", "selective", "blocks"};
  return kNames[static_cast<int>(c)];
}

const char *shardingName(Sharding s) {
  static const char *const kNames[] = {"none", "optimizer", "gradients", "full"};
  return kNames[static_cast<int>(s)];
}
const char *dataKindName(DataKind k) {
  static const char *const kNames[] = {"synthetic", "tokens", "text"};
  return kNames[static_cast<int>(k)];
}
const char *layerKindName(LayerKind k) {
  static const char *const kNames[] = {"embedding", "block", "head", "custom"};
  return kNames[static_cast<int>(k)];
}

void writeInstruction(std::ostream &os, const Instruction &i) {
  os << "{\"op\": \"" << opName(i.op) << "\", \"stream\": " << int(i.stream);
  switch (i.op) {
  case Op::Forward:
  case Op::Backward:
  case Op::BackwardInput:
  case Op::BackwardWeight:
    os << ", \"stage\": " << i.stage << ", \"mb\": " << i.microbatch;
    if (i.slot >= 0)
      os << ", \"slot\": " << i.slot;
    if (i.flags == Instruction::kPaired)
      os << ", \"paired\": true";
    break;
  case Op::Send:
  case Op::Recv:
    os << ", \"kind\": \"" << (i.kind == Transfer::Activation ? "activation" : "gradient")
       << "\", \"stage\": " << i.stage << ", \"mb\": " << i.microbatch << ", \"peer\": " << i.peer
       << ", \"peer_stage\": " << i.peerStage << ", \"peer_mb\": " << i.peerMicrobatch
       << ", \"samples\": [" << i.begin << ", " << i.end << "], \"bytes\": " << i.bytes;
    if (i.slot >= 0)
      os << ", \"slot\": " << i.slot;
    if (i.batch >= 0)
      os << ", \"batch\": " << i.batch;
    break;
  case Op::AllGather:
  case Op::ReduceScatter:
  case Op::AllReduce:
    os << ", \"stage\": " << i.stage << ", \"group\": " << i.group << ", \"bytes\": " << i.bytes;
    break;
  case Op::Free:
  case Op::OptimizerStep:
    os << ", \"stage\": " << i.stage;
    break;
  case Op::Signal:
  case Op::Wait:
    os << ", \"event\": " << i.event;
    break;
  case Op::TieGrads:
    os << ", \"stage\": " << i.stage << ", \"peer\": " << i.peer
       << ", \"peer_stage\": " << i.peerStage << ", \"bytes\": " << i.bytes;
    break;
  case Op::TensorAllReduce:
  case Op::TensorAllGather:
  case Op::TensorReduceScatter:
    os << ", \"stage\": " << i.stage << ", \"microbatch\": " << i.microbatch
       << ", \"bytes\": " << i.bytes;
    break;
  case Op::ExpertDispatch:
  case Op::ExpertCombine:
    os << ", \"stage\": " << i.stage << ", \"microbatch\": " << i.microbatch
       << ", \"group\": " << i.group << ", \"bytes\": " << i.bytes;
    // The compute it hides behind, the other half of a paired step.
    if (i.peerStage >= 0)
      os << ", \"peer_stage\": " << i.peerStage << ", \"peer_mb\": " << i.peerMicrobatch;
    break;
  }
  os << "}";
}

} // namespace

void writePlanJson(const Plan &plan, std::ostream &os) {
  os << std::setprecision(std::numeric_limits<double>::max_digits10);
  const Config &c = plan.config;
  os << "{\n  \"format_version\": " << plan.formatVersion
     << ",\n  \"features\": " << requiredFeatures(plan)
     << ",\n  \"name\": " << jsonString(plan.name) << ",\n  \"source\": " << jsonString(plan.source)
     << ",\n";
  os << "  \"config\": {\"pipeline\": " << c.pipeline << ", \"data\": " << c.data
     << ", \"tensor\": " << c.tensor << ", \"expert\": " << c.expert
     << ", \"sequence_parallel\": " << (c.sequenceParallel ? "true" : "false")
     << (c.tensorCommOverlap ? "" : ", \"tensor_comm_overlap\": false")
     << ", \"stages_per_device\": " << c.stagesPerDevice << ", \"schedule\": \""
     << scheduleName(c.schedule)
     << "\", \"split_backward\": " << (c.splitBackward ? "true" : "false")
     << ", \"group_size\": " << c.groupSize << ", \"microbatches\": " << c.microbatches
     << ", \"microbatch_size\": " << c.microbatchSize << ", \"sharding\": \""
     << shardingName(c.sharding) << "\", \"checkpointing\": \""
     << checkpointingName(c.checkpointing) << "\"";
  if (c.recomputeModules != kRecomputeCoreAttention)
    os << ", \"recompute_modules\": [" << quotedRecomputeModules(c.recomputeModules) << "]";
  os << ", \"fsdp_window\": " << c.fsdpWindow
     << (c.gradientReduction == GradientReduction::Run ? ", \"gradient_reduction\": \"run\"" : "")
     << (c.adamMoments == AdamMoments::BF16 ? ", \"adam_moments\": \"bf16\"" : "")
     << ", \"rank_order\": \"" << (c.pipelineInner ? "pipeline-inner" : "data-inner")
     << "\", \"element_bytes\": " << c.elementBytes() << ", \"seed\": " << c.seed
     << ", \"learning_rate\": " << c.learningRate << ", \"data_source\": \""
     << dataKindName(c.dataSource.kind) << "\"";
  if (c.dataSource.kind != DataKind::Synthetic)
    os << ", \"data_path\": " << jsonString(c.dataSource.path);
  if (c.dataSource.kind == DataKind::Tokens)
    os << ", \"token_bytes\": " << int(c.dataSource.tokenBytes);
  os << ", \"preset\": " << jsonString(c.preset) << "},\n";
  if (const std::optional<Transformer> &t = plan.transformer) {
    os << "  \"transformer\": {\"num_layers\": " << t->numLayers
       << ", \"hidden_size\": " << t->hiddenSize << ", \"num_heads\": " << t->numHeads
       << ", \"num_kv_heads\": " << t->numKvHeads << ", \"ffn_hidden_size\": " << t->ffnHiddenSize
       << ", \"seq_length\": " << t->seqLength << ", \"vocab_size\": " << t->vocabSize
       << ", \"mlp\": \"" << (t->mlp ? "swiglu" : "gelu") << "\", \"norm\": \""
       << (t->norm ? "rmsnorm" : "layernorm") << "\", \"position\": \""
       << (t->position ? "rotary" : "learned")
       << "\", \"tie_embeddings\": " << (t->tieEmbeddings ? "true" : "false") << ", \"bias\": \""
       << (t->bias == 0   ? "all"
           : t->bias == 1 ? "qkv"
                          : "none")
       << "\", \"rope_theta\": " << t->ropeTheta << ", \"norm_eps\": " << t->normEps;
    // The variants of format 5, when the model has them.
    if (t->headDim != 0)
      os << ", \"head_dim\": " << t->headDim;
    if (t->qkNorm)
      os << ", \"qk_norm\": true";
    if (t->mtpLayers > 0)
      os << ", \"mtp_layers\": " << t->mtpLayers
         << ", \"mtp_loss_coefficient\": " << t->mtpLossCoefficient;
    if (const RopeScaling &r = t->ropeScaling; r.scaled()) {
      os << ", \"rope_scaling\": {\"rope_type\": \"" << kRopeTypeNames[size_t(r.type)]
         << "\", \"factor\": " << r.factor;
      if (r.type != RopeType::Linear)
        os << ", \"original_max_position_embeddings\": " << r.originalPositions;
      if (r.type == RopeType::Llama3)
        os << ", \"low_freq_factor\": " << r.lowFreqFactor
           << ", \"high_freq_factor\": " << r.highFreqFactor;
      if (r.type == RopeType::Yarn)
        os << ", \"beta_fast\": " << r.betaFast << ", \"beta_slow\": " << r.betaSlow
           << ", \"truncate\": " << (r.truncate ? "true" : "false")
           << ", \"attention_factor\": " << r.attentionFactor
           << ", \"mscale_all_dim\": " << r.mscaleAllDim;
      os << "}";
    }
    if (t->usesLatentAttention())
      os << ", \"latent_attention\": {\"q_lora_rank\": " << t->qLoraRank
         << ", \"kv_lora_rank\": " << t->kvLoraRank
         << ", \"qk_nope_head_dim\": " << t->qkNopeHeadDim
         << ", \"qk_rope_head_dim\": " << t->qkRopeHeadDim << ", \"v_head_dim\": " << t->vHeadDim
         << (t->ropeInterleave ? ", \"rope_interleave\": true" : "") << "}";
    if (t->isMoe()) {
      os << ", \"moe\": {\"num_experts\": " << t->numExperts << ", \"top_k\": " << t->topK
         << ", \"expert_ffn_hidden_size\": " << t->expertFfnHiddenSize << ", \"router\": \""
         << (t->router ? "sigmoid" : "softmax")
         << "\", \"normalize_top_k\": " << (t->normalizeTopK ? "true" : "false")
         << ", \"aux_loss_coefficient\": " << t->auxLossCoefficient;
      if (t->zLossCoefficient > 0)
        os << ", \"z_loss_coefficient\": " << t->zLossCoefficient;
      if (t->dropByWeight)
        os << ", \"drop_by_weight\": true";
      os << ", \"shared_experts\": " << t->sharedExperts
         << ", \"shared_ffn_hidden_size\": " << t->sharedFfnHiddenSize
         << (t->sharedExpertGate ? ", \"shared_expert_gate\": true" : "")
         << ", \"dense_layers\": " << t->denseLayers
         << ", \"capacity_factor\": " << t->capacityFactor << ", \"imbalance\": " << t->imbalance
         << ", \"router_groups\": " << t->routerGroups
         << ", \"router_group_top_k\": " << t->routerGroupTopK << ", \"dispatch\": \""
         << (t->dispatch ? "per_node" : "per_expert")
         << "\", \"fp8_dispatch\": " << (t->fp8Dispatch ? "true" : "false")
         << ", \"bias_update_rate\": " << t->biasUpdateRate
         << ", \"routed_scaling_factor\": " << t->routedScalingFactor << "}";
    }
    os << "},\n";
  }
  os << "  \"layers\": [";
  for (size_t l = 0; l < plan.layers.size(); ++l) {
    const Layer &layer = plan.layers[l];
    os << (l ? ",\n    " : "\n    ") << "{\"name\": " << jsonString(layer.name) << ", \"kind\": \""
       << layerKindName(layer.kind) << "\", \"params\": " << layer.params;
    if (layer.expertParams != 0)
      os << ", \"expert_params\": " << layer.expertParams;
    os << "}";
  }
  os << "\n  ],\n  \"stages\": [";
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    const Stage &stage = plan.stages[s];
    os << (s ? ",\n    " : "\n    ") << "{\"index\": " << stage.index
       << ", \"rank\": " << stage.rank << ", \"layers\": [" << stage.firstLayer << ", "
       << stage.endLayer << "], \"params\": " << stage.params << ", \"samples\": ";
    list(os, stage.samples);
    os << "}";
  }
  os << "\n  ],\n  \"groups\": [";
  for (size_t g = 0; g < plan.groups.size(); ++g) {
    os << (g ? ", " : "");
    list(os, plan.groups[g].ranks);
  }
  os << "],\n  \"ranks\": [";
  for (size_t r = 0; r < plan.ranks.size(); ++r) {
    const RankProgram &program = plan.ranks[r];
    os << (r ? "," : "") << "\n    {\"rank\": " << program.rank
       << ", \"events\": " << program.events << ", \"peak_memory\": " << program.peakMemoryBytes
       << ", \"slots\": ";
    list(os, program.slots);
    os << ", \"instructions\": [";
    for (size_t k = 0; k < program.instructions.size(); ++k) {
      os << (k ? ",\n      " : "\n      ");
      writeInstruction(os, program.instructions[k]);
    }
    os << "\n    ]}";
  }
  os << "\n  ]\n}\n";
}

} // namespace conduit::runtime
