//===- JobChecks.cpp - the relations between a job's sections -------------===//
//
// What no section can check alone: token data against the model, stages against layers, the
// tensor-parallel degree against the shape, the schedule against the placement and the
// micro-batches, explicit layouts and partitions against the shape of the job, and the
// products of bounded factors against the limits the plan reader enforces too.
//
//===----------------------------------------------------------------------===//

#include "job/JobParser.h"
#include "runtime/plan/Limits.h"
#include "runtime/plan/ScheduleRules.h"

#include <numeric>

using namespace conduit;
using namespace conduit::detail;
using runtime::Schedule;

void JobParser::checkTraining(const Job &job) {
  if (job.training.dtype == runtime::DType::FP8) {
    if (!job.model.transformer)
      diag.report("training.dtype", "\"fp8\" runs a transformer's linear layers in FP8; this "
                                    "model is a layer list, whose layers state their own costs: "
                                    "use \"bf16\"");
    else if (!(job.cluster.kernels.fp8PeakFlops > 0))
      diag.report("training.dtype", "\"fp8\" needs FP8 tensor cores, which the preset \"" +
                                        job.cluster.preset +
                                        "\" does not have; use \"bf16\" or an H100 or H200 preset");
  }
  // The keys that say how an FP8 run does something, set with another data type.
  auto fp8Only = [&](bool set, const char *key, const char *what) {
    if (set && job.training.dtype != runtime::DType::FP8)
      diag.report(key, std::string("applies to training.dtype \"fp8\" (") + what +
                           "), and training.dtype is \"" +
                           std::string(enumName(job.training.dtype)) +
                           "\": remove the key, or set training.dtype to \"fp8\"");
  };
  fp8Only(job.training.fp8SavedInputs.has_value(), "training.fp8_saved_inputs",
          "how its linear layers keep their inputs for the weight gradients");
  fp8Only(job.training.fp8Scaling.has_value(), "training.fp8_scaling",
          "how its casts find their scales");
  const TransformerSpec *t = job.model.transformer ? &*job.model.transformer : nullptr;
  fp8Only(t && t->moe && t->moe->fp8Dispatch, "model.moe.fp8_dispatch",
          "its routed tokens travel to the experts cast to FP8");
  if (job.training.masterWeights == MasterWeights::Parameters &&
      job.training.dtype == runtime::DType::FP32)
    diag.report("training.master_weights",
                "\"parameters\" says that the fp32 parameter shards are what the optimizer "
                "updates, cast to a 16-bit training.dtype for each use; with training.dtype "
                "\"fp32\" there is no other copy either way: remove the key");
  if (job.training.adamMoments == runtime::AdamMoments::BF16 &&
      job.training.optimizer != runtime::Optimizer::Adam)
    diag.report("training.adam_moments",
                "\"bf16\" stores Adam's two moments in bf16; training.optimizer \"" +
                    std::string(enumName(job.training.optimizer)) +
                    "\" keeps no moments: remove the key, or set training.optimizer to \"adam\"");
  if (job.training.data == runtime::DataKind::Synthetic)
    return;
  if (!job.model.transformer) {
    diag.report("training.data.kind", "token data feeds a transformer; this model is a layer "
                                      "list, which trains on nothing: use \"synthetic\"");
    return;
  }
  if (job.training.data == runtime::DataKind::Text && job.model.transformer->vocabSize < 256)
    diag.report("model.vocab_size",
                "text data uses bytes as tokens, which needs a vocabulary of at least 256, "
                "got " +
                    std::to_string(job.model.transformer->vocabSize));
}

void JobParser::checkParallelism(const Job &job) {
  const ParallelismSpec &p = job.parallelism;
  // With the parallelism (conduit-tune checks each configuration's, and skips those whose
  // sharding is another): PyTorch FSDP's storage is full sharding's.
  if (job.training.masterWeights == MasterWeights::Parameters &&
      p.sharding != runtime::Sharding::Full)
    diag.report("parallelism.sharding",
                "\"" + std::string(enumName(p.sharding)) +
                    "\" with training.master_weights \"parameters\" (fp32 parameter shards cast "
                    "for each use, as PyTorch FSDP's mixed precision keeps them), which is full "
                    "sharding's storage: set \"full\", or remove training.master_weights");
  // Multi-token prediction modules stay on the last stage with the head.
  const int64_t mtp = job.model.transformer ? job.model.transformer->mtpLayers : 0;
  const int64_t layers = static_cast<int64_t>(job.model.layers.size()) - mtp;
  if (p.numStages() > layers) {
    std::string fix = "use at most " + std::to_string(layers) + " stages";
    if (p.stagesPerDevice > 1 && layers >= p.pipeline)
      fix += " (stages_per_device " + std::to_string(layers / p.pipeline) + ")";
    diag.report(p.stagesPerDevice > 1 ? "parallelism.stages_per_device" : "parallelism.pipeline",
                std::to_string(p.numStages()) + " stages (pipeline " + std::to_string(p.pipeline) +
                    " x stages_per_device " + std::to_string(p.stagesPerDevice) +
                    ") but the model has " + std::to_string(layers) + " layers" +
                    (mtp > 0 ? " to cut between (its multi-token prediction modules stay with "
                               "the head)"
                             : "") +
                    ", and every stage needs at least one; " + fix +
                    ", or more layers (model.num_layers)");
    return;
  }
  // Each factor is bounded (2^16 * 2^20 * 2^10): no overflow here.
  if (p.worldSize() > limits::kMaxWorld) {
    diag.report(p.tensor > 1 ? "parallelism.tensor" : "parallelism.data",
                "pipeline x data x tensor is " + std::to_string(p.worldSize()) +
                    " ranks; at most " + std::to_string(limits::kMaxWorld) + " are supported");
    return;
  }
  checkTensor(job);
  if (diag.failed())
    return;
  checkExpert(job);
  if (diag.failed())
    return;
  checkRecompute(job);
  if (diag.failed())
    return;
  // Both factors are bounded (2^16 * 2^10 stages, 2^20 micro-batches): no overflow here.
  const int64_t pairs = p.numStages() * p.microbatches;
  if (pairs > limits::kMaxStageMicrobatches) {
    diag.report("parallelism.microbatches",
                std::to_string(pairs) + " (stage, micro-batch) pairs per step; at most " +
                    std::to_string(limits::kMaxStageMicrobatches) + " are supported (use at most " +
                    std::to_string(limits::kMaxStageMicrobatches / p.numStages()) +
                    " micro-batches for " + std::to_string(p.numStages()) + " stages)");
    return;
  }
  if (p.batchSamples() > limits::kMaxBatchSamples) {
    diag.report("parallelism.microbatch_size",
                "microbatches x microbatch_size is " + std::to_string(p.batchSamples()) +
                    " samples; at most " + std::to_string(limits::kMaxBatchSamples) +
                    " are supported");
    return;
  }
  checkSchedule(p);
  if (diag.failed())
    return;
  checkStageLayers(job);
  checkPartitions(job);
}

void JobParser::checkTensor(const Job &job) {
  const ParallelismSpec &p = job.parallelism;
  if (p.sequenceParallel && p.tensor == 1) {
    diag.report("parallelism.sequence_parallel",
                "splits activations over the tensor-parallel ranks, and there are none "
                "(parallelism.tensor is 1); remove it or set tensor above 1");
    return;
  }
  if (p.tensor == 1 || !job.model.transformer)
    return;
  const TransformerSpec &t = *job.model.transformer;
  // Megatron-LM's partitioning: heads (and key/value heads), the FFN's columns and the
  // vocabulary are split evenly over the group.
  const std::pair<const char *, int64_t> split[] = {
      {"num_heads", t.numHeads},
      {"num_kv_heads", t.numKvHeads > 0 ? t.numKvHeads : t.numHeads},
      {"ffn_hidden_size", t.ffnHiddenSize},
      {"vocab_size", t.vocabSize}};
  // A model whose every block has experts has no dense MLP to split.
  const bool denseMlp = !t.moe || t.moe->denseLayers > 0;
  for (auto [key, value] : split)
    if (value % p.tensor != 0 && (denseMlp || std::string_view(key) != "ffn_hidden_size")) {
      diag.report("parallelism.tensor",
                  "tensor parallelism splits model." + std::string(key) + " (" +
                      std::to_string(value) + ") over the " + std::to_string(p.tensor) +
                      " ranks of a group, and it is not a multiple of " + std::to_string(p.tensor) +
                      "; choose a tensor size that divides it, or "
                      "change model." +
                      key);
      return;
    }
  if (t.moe && t.moe->sharedFfnHiddenSize % p.tensor != 0) {
    diag.report("parallelism.tensor",
                "tensor parallelism splits the shared experts as it splits a dense MLP, and "
                "model.moe.shared_ffn_hidden_size (" +
                    std::to_string(t.moe->sharedFfnHiddenSize) + ") is not a multiple of " +
                    std::to_string(p.tensor) +
                    "; choose a tensor size that divides it, or change "
                    "model.moe.shared_ffn_hidden_size");
    return;
  }
  if (t.moe && t.seqLength % p.tensor != 0) {
    diag.report("parallelism.tensor",
                "each of the " + std::to_string(p.tensor) +
                    " tensor-parallel ranks routes a contiguous slice of every sequence to the "
                    "experts, and model.seq_length (" +
                    std::to_string(t.seqLength) + ") is not a multiple of " +
                    std::to_string(p.tensor) + "; change model.seq_length or parallelism.tensor");
    return;
  }
  if (p.sequenceParallel && t.seqLength % p.tensor != 0)
    diag.report("parallelism.sequence_parallel",
                "splits each sequence over the " + std::to_string(p.tensor) +
                    " tensor-parallel ranks, and model.seq_length (" + std::to_string(t.seqLength) +
                    ") is not a multiple of " + std::to_string(p.tensor) +
                    "; change model.seq_length or parallelism.tensor");
}

void JobParser::checkExpert(const Job &job) {
  const ParallelismSpec &p = job.parallelism;
  const std::optional<TransformerSpec> &t = job.model.transformer;
  if (p.expert == 1 && !(t && t->moe))
    return;
  const std::string e = std::to_string(p.expert);
  if (!t || !t->moe) {
    diag.report("parallelism.expert",
                "divides a mixture of experts over " + e +
                    " ranks, and the model has none (no model.moe); remove it or set it to 1");
    return;
  }
  const MoeSpec &moe = *t->moe;
  if (moe.numExperts % p.expert != 0) {
    diag.report("parallelism.expert", e + " expert-parallel ranks do not divide the " +
                                          std::to_string(moe.numExperts) +
                                          " experts (model.moe.num_experts); use a divisor of " +
                                          std::to_string(moe.numExperts));
    return;
  }
  // Parallel folding: the expert groups are carved out of a pipeline rank's D x T ranks.
  const int64_t folded = p.data * p.tensor;
  if (folded % p.expert != 0) {
    diag.report("parallelism.expert",
                "expert groups of " + e +
                    " ranks are carved out of the data x tensor ranks of a "
                    "pipeline rank (" +
                    std::to_string(p.data) + " x " + std::to_string(p.tensor) + " = " +
                    std::to_string(folded) + "), and " + e +
                    " does not divide it; use a divisor of both " + std::to_string(folded) +
                    " and model.moe.num_experts (" + std::to_string(moe.numExperts) + ")");
    return;
  }
  // Each tensor rank routes its own tokens, so the D x T / E ranks holding an expert sum its
  // gradients in the data-parallel reductions, which one replica does not have.
  if (p.data == 1 && p.expert < p.tensor)
    diag.report("parallelism.expert",
                "with one replica (parallelism.data 1) the plan reduces no gradients, and each "
                "expert would be held by " +
                    std::to_string(p.tensor / p.expert) +
                    " tensor-parallel ranks, each routing its own tokens through it, whose "
                    "gradients for it nothing sums; use parallelism.expert " +
                    std::to_string(p.tensor) +
                    " (every expert on one rank of the tensor group) or parallelism.data "
                    "above 1");
}

void JobParser::checkRecompute(const Job &job) {
  const uint32_t modules = job.parallelism.recomputeModules;
  if (modules == runtime::kRecomputeCoreAttention)
    return;
  const std::optional<TransformerSpec> &t = job.model.transformer;
  if (!t) {
    diag.report("parallelism.recompute_modules",
                "names parts of a transformer's blocks, and model.kind \"layers\" has none (its "
                "layers state what they keep); remove recompute_modules");
    return;
  }
  // Each module must drop something of this model.
  const bool allExperts = t->moe && t->moe->denseLayers == 0;
  const std::pair<uint32_t, const char *> absent[] = {
      {runtime::kRecomputeMlp, allExperts ? "every block has experts (model.moe.dense_layers "
                                            "is 0), so there is no dense MLP"
                                          : nullptr},
      {runtime::kRecomputeMoeActivation,
       t->moe ? nullptr : "the model has no experts (no model.moe)"},
      {runtime::kRecomputeLatentUpProjection,
       t->latentAttention ? nullptr : "the model has no latent attention"},
  };
  for (auto [module, why] : absent)
    if ((modules & module) && why) {
      const std::string name(runtime::recomputeModuleNames(module).front());
      diag.report("parallelism.recompute_modules",
                  "\"" + name + "\" recomputes nothing: " + why + "; remove \"" + name + "\"");
      return;
    }
  if ((modules & runtime::kRecomputeOp) && (t->moe || t->latentAttention))
    diag.report("parallelism.recompute_modules",
                "\"op\" (torchtitan's op-level policy) is modelled for dense blocks without "
                "latent attention, and the model has " +
                    std::string(t->moe ? "experts (model.moe)" : "latent attention") +
                    "; name Megatron-Core's modules instead");
}

void JobParser::checkSchedule(const ParallelismSpec &p) {
  const std::string schedule = "\"" + std::string(enumName(p.schedule)) + "\"";
  const bool v = p.placement == Placement::V;
  switch (p.schedule) {
  case Schedule::GPipe:
  case Schedule::OneFOneB:
  case Schedule::ZeroBubbleH1:
    if (p.stagesPerDevice > 1) {
      const char *instead = p.schedule == Schedule::GPipe
                                ? "\"breadth-first\" (GPipe's order on looped stages)"
                            : p.schedule == Schedule::OneFOneB
                                ? "\"depth-first\" (interleaved 1F1B) or \"breadth-first\""
                                : "\"interleaved-zb\" or \"zbv\"";
      diag.report("parallelism.stages_per_device",
                  "schedule " + schedule + " runs one stage per device, got " +
                      std::to_string(p.stagesPerDevice) + "; use 1, or schedule " + instead);
      return;
    }
    break;
  case Schedule::DepthFirst:
  case Schedule::InterleavedZeroBubble:
    if (v) {
      diag.report("parallelism.placement",
                  "schedule " + schedule +
                      " runs on the looped placement; use \"loop\", or schedule \"zbv\" or "
                      "\"dualpipev\" for the V placement");
      return;
    }
    if (p.schedule == Schedule::InterleavedZeroBubble && p.stagesPerDevice < 2) {
      diag.report("parallelism.stages_per_device",
                  "schedule \"interleaved-zb\" loops at least 2 stages per device, got 1; use "
                  "2 or more, or schedule \"zb-h1\" for one stage per device");
      return;
    }
    break;
  case Schedule::ZeroBubbleV:
  case Schedule::DualPipeV:
    if (!v) {
      diag.report("parallelism.placement",
                  "schedule " + schedule +
                      " runs on the V placement (rank r holds stages r and 2P-1-r); use \"v\" "
                      "(the default for this schedule), or schedule \"interleaved-zb\" for the "
                      "looped placement");
      return;
    }
    break;
  case Schedule::BreadthFirst:
    break;
  }
  if (v && p.stagesPerDevice != 2) {
    diag.report("parallelism.stages_per_device",
                "the V placement holds exactly 2 stages per device, got " +
                    std::to_string(p.stagesPerDevice) +
                    "; use 2, or placement \"loop\" with schedule \"breadth-first\" or "
                    "\"interleaved-zb\"");
    return;
  }
  if (p.splitBackward && p.autoPartitions) {
    diag.report("parallelism.microbatch_partitions",
                "\"auto\" searches micro-batch cuts of whole-backward gpipe and 1f1b schedules; "
                "give explicit partitions, or drop split_backward");
    return;
  }
  // Depth-first's rules on the number of micro-batches per stage; explicit unequal partitions
  // are checked by the schedule itself.
  if (!isInterleaved(p.schedule) || !p.microbatchPartitions.empty() || p.autoPartitions)
    return;
  if (std::optional<runtime::GroupingViolation> violation =
          runtime::checkDepthFirstGrouping(p.microbatches, p.pipeline, p.groupSize))
    diag.report(violation->rule == runtime::GroupingViolation::TooFewMicrobatches
                    ? "parallelism.microbatches"
                    : "parallelism.group_size",
                violation->message);
}

void JobParser::checkStageLayers(const Job &job) {
  const ParallelismSpec &p = job.parallelism;
  if (p.stageLayers.empty())
    return;
  const int64_t layers = static_cast<int64_t>(job.model.layers.size());
  const int64_t sum = std::accumulate(p.stageLayers.begin(), p.stageLayers.end(), int64_t(0));
  if (static_cast<int64_t>(p.stageLayers.size()) != p.numStages())
    diag.report("parallelism.stage_layers",
                "lists " + std::to_string(p.stageLayers.size()) + " stages but the job has " +
                    std::to_string(p.numStages()) + " (pipeline x stages_per_device)");
  else if (sum != layers)
    diag.report("parallelism.stage_layers",
                "assigns " + std::to_string(sum) + " layers but the model has " +
                    std::to_string(layers) + " (embedding and head included)");
  else if (const int64_t mtp = job.model.transformer ? job.model.transformer->mtpLayers : 0;
           mtp > 0 && p.stageLayers.back() < mtp + 1)
    diag.report("parallelism.stage_layers",
                "needs at least " + std::to_string(mtp + 1) +
                    " layers on the last stage (the multi-token prediction modules of "
                    "model.mtp_layers stay there with the head, whose tables they share), got " +
                    std::to_string(p.stageLayers.back()));
}

void JobParser::checkPartitions(const Job &job) {
  const ParallelismSpec &p = job.parallelism;
  if (p.microbatchPartitions.empty())
    return;
  if (static_cast<int64_t>(p.microbatchPartitions.size()) != p.numStages()) {
    diag.report("parallelism.microbatch_partitions",
                "lists " + std::to_string(p.microbatchPartitions.size()) +
                    " stages but the job has " + std::to_string(p.numStages()));
    return;
  }
  for (size_t s = 0; s < p.microbatchPartitions.size(); ++s) {
    const std::vector<int64_t> &sizes = p.microbatchPartitions[s];
    const int64_t sum = std::accumulate(sizes.begin(), sizes.end(), int64_t(0));
    if (sum != p.batchSamples()) {
      diag.report("parallelism.microbatch_partitions[" + std::to_string(s) + "]",
                  "sizes add up to " + std::to_string(sum) + " samples but the batch has " +
                      std::to_string(p.batchSamples()) + " (microbatches x microbatch_size)");
      return;
    }
  }
}
