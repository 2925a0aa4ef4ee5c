//===- PlanChecks.cpp - the semantic rules of a plan ----------------------===//
//
// Every rule a runtime relies on, checked on the Plan data model in order: the configuration
// and the transformer's shape in bounds, the layer chain and the stages that cut it, the
// groups, then each rank's program (references resolve, compute in order, transfers where
// their peers are, tensor collectives and expert all-to-alls after the compute that issues
// them, an all-to-all hidden only behind its pair's other compute), the tied embeddings'
// exchanges, and last that every send meets its receive in per-pair order.
//
//===----------------------------------------------------------------------===//

#include "runtime/plan/PlanChecks.h"

#include "runtime/plan/Limits.h"
#include "runtime/plan/TensorCollectives.h"

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace conduit::runtime {

namespace {

class SemanticChecker {
public:
  explicit SemanticChecker(const Plan &plan) : plan(plan) {}

  PlanLocation location;

  absl::Status run() {
    CONDUIT_RETURN_IF_ERROR(checkConfig());
    CONDUIT_RETURN_IF_ERROR(checkLayers());
    CONDUIT_RETURN_IF_ERROR(checkTransformer());
    CONDUIT_RETURN_IF_ERROR(checkStages());
    CONDUIT_RETURN_IF_ERROR(checkGroups());
    if (static_cast<int64_t>(plan.ranks.size()) != plan.config.pipeline)
      return bad(absl::StrCat("the plan has ", plan.ranks.size(), " rank programs for ",
                              plan.config.pipeline, " pipeline ranks"));
    for (size_t r = 0; r < plan.ranks.size(); ++r)
      CONDUIT_RETURN_IF_ERROR(checkRank(static_cast<int32_t>(r)));
    CONDUIT_RETURN_IF_ERROR(checkTies());
    return checkMatching();
  }

private:
  static absl::Status bad(const std::string &what) {
    return absl::InvalidArgumentError(absl::StrCat("invalid plan: ", what));
  }
  absl::Status badInstruction(int32_t r, size_t index, const std::string &what) {
    location = {r, static_cast<int64_t>(index)};
    return bad(absl::StrCat("rank ", r, " instruction ", index, " (",
                            describe(plan.ranks[r].instructions[index]), "): ", what));
  }

  /// `field` (its name in plan.fbs) lies in [least, most].
  static absl::Status inRange(const std::string &field, int64_t value, int64_t least,
                              int64_t most) {
    if (value >= least && value <= most)
      return absl::OkStatus();
    return bad(absl::StrCat(field, " is ", value, "; it must lie between ", least, " and ", most));
  }
  /// `field` is a finite number in [least, most].
  static absl::Status inRange(const std::string &field, double value, double least, double most) {
    if (std::isfinite(value) && value >= least && value <= most)
      return absl::OkStatus();
    return bad(absl::StrCat(field, " is ", value, "; it must lie between ", least, " and ", most));
  }

  absl::Status checkConfig() {
    using namespace limits;
    const Config &c = plan.config;
    CONDUIT_RETURN_IF_ERROR(inRange("config.pipeline", c.pipeline, 1, kMaxPipeline));
    CONDUIT_RETURN_IF_ERROR(inRange("config.data", c.data, 1, kMaxData));
    CONDUIT_RETURN_IF_ERROR(inRange("config.tensor", c.tensor, 1, kMaxTensor));
    if (c.sequenceParallel && c.tensor == 1)
      return bad("config.sequence_parallel is set without tensor parallelism (config.tensor 1)");
    if (c.gradientReduction == GradientReduction::Run && !shardsGradients(c.sharding))
      return bad("config.gradient_reduction \"run\" needs sharded gradients (config.sharding "
                 "\"gradients\" or \"full\")");
    if (c.adamMoments == AdamMoments::BF16 && c.optimizer != Optimizer::Adam)
      return bad("config.adam_moments \"bf16\" needs the Adam optimizer (config.optimizer "
                 "\"adam\"): SGD keeps no moments");
    if (c.recomputeModules == 0)
      return bad("config.recompute_modules names no module; selective checkpointing recomputes "
                 "at least one (1: the attention core)");
    CONDUIT_RETURN_IF_ERROR(inRange("config.expert", c.expert, 1, kMaxData * kMaxTensor));
    if ((int64_t(c.data) * c.tensor) % c.expert != 0)
      return bad(absl::StrCat("config.expert ", c.expert, " does not divide the ",
                              int64_t(c.data) * c.tensor,
                              " data-parallel and tensor ranks of a pipeline rank"));
    CONDUIT_RETURN_IF_ERROR(
        inRange("config.stages_per_device", c.stagesPerDevice, 1, kMaxStagesPerDevice));
    CONDUIT_RETURN_IF_ERROR(inRange("config.microbatches", c.microbatches, 1, kMaxMicrobatches));
    CONDUIT_RETURN_IF_ERROR(
        inRange("config.microbatch_size", c.microbatchSize, 1, kMaxMicrobatchSize));
    CONDUIT_RETURN_IF_ERROR(inRange("config.group_size", c.groupSize, 1, kMaxMicrobatches));
    CONDUIT_RETURN_IF_ERROR(inRange("config.fsdp_window", c.fsdpWindow, 1, kMaxStagesPerDevice));
    CONDUIT_RETURN_IF_ERROR(inRange("config.seed", c.seed, 0, kMaxExact));
    CONDUIT_RETURN_IF_ERROR(
        inRange("config.tokens_per_sample", c.tokensPerSample, 1, kMaxSeqLength));
    CONDUIT_RETURN_IF_ERROR(inRange("config.memory_bytes", c.memoryBytes, 0, kMaxExact));
    CONDUIT_RETURN_IF_ERROR(inRange("config.gpus_per_node", c.gpusPerNode, 1, kMaxGpusPerNode));
    if (!(c.learningRate > 0))
      return bad(absl::StrCat("config.learning_rate is ", c.learningRate, "; it must be positive"));
    CONDUIT_RETURN_IF_ERROR(inRange("config.learning_rate", c.learningRate, 0, kMaxLearningRate));
    // The cluster figures feed predictions and traces only; they must still be numbers.
    const double kHuge = 1e300;
    CONDUIT_RETURN_IF_ERROR(inRange("config.peak_flops", c.peakFlops, 0, kHuge));
    CONDUIT_RETURN_IF_ERROR(inRange("config.efficiency", c.efficiency, 0, 1));
    CONDUIT_RETURN_IF_ERROR(inRange("config.intra_node_bandwidth", c.intraNodeBandwidth, 0, kHuge));
    CONDUIT_RETURN_IF_ERROR(inRange("config.inter_node_bandwidth", c.interNodeBandwidth, 0, kHuge));
    CONDUIT_RETURN_IF_ERROR(inRange("config.latency_s", c.latencyS, 0, kHuge));
    CONDUIT_RETURN_IF_ERROR(inRange("config.launch_overhead_s", c.launchOverheadS, 0, kHuge));
    if ((c.dataSource.kind == DataKind::Synthetic) != c.dataSource.path.empty())
      return bad(c.dataSource.path.empty()
                     ? "config.data_path is empty; token and text data need a file"
                     : "config.data_path is set for synthetic data");
    if (c.dataSource.tokenBytes != 2 && c.dataSource.tokenBytes != 4)
      return bad(absl::StrCat("config.token_bytes is ", int(c.dataSource.tokenBytes),
                              "; it must be 2 or 4"));
    if (c.worldSize() > kMaxWorld)
      return bad(absl::StrCat("the world of ", c.worldSize(), " ranks (config.pipeline x ",
                              "config.data x config.tensor) is too large; at most ", kMaxWorld,
                              " are supported"));
    if (plan.layers.empty())
      return bad("the plan has no layers");
    return absl::OkStatus();
  }

  /// The transformer's shape is in bounds and is the shape of the layer chain: an embedding,
  /// num_layers blocks, a head.
  absl::Status checkTransformer() {
    if (!plan.transformer)
      return absl::OkStatus();
    using namespace limits;
    const Transformer &t = *plan.transformer;
    CONDUIT_RETURN_IF_ERROR(inRange("transformer.num_layers", t.numLayers, 1, kMaxLayers));
    CONDUIT_RETURN_IF_ERROR(inRange("transformer.hidden_size", t.hiddenSize, 1, kMaxHidden));
    CONDUIT_RETURN_IF_ERROR(inRange("transformer.num_heads", t.numHeads, 1, kMaxHeads));
    CONDUIT_RETURN_IF_ERROR(inRange("transformer.num_kv_heads", t.numKvHeads, 1, t.numHeads));
    CONDUIT_RETURN_IF_ERROR(inRange("transformer.ffn_hidden_size", t.ffnHiddenSize, 1, kMaxFfn));
    CONDUIT_RETURN_IF_ERROR(inRange("transformer.seq_length", t.seqLength, 1, kMaxSeqLength));
    CONDUIT_RETURN_IF_ERROR(inRange("transformer.vocab_size", t.vocabSize, 1, kMaxVocab));
    if (t.hiddenSize % t.numHeads != 0)
      return bad(absl::StrCat("transformer.hidden_size ", t.hiddenSize,
                              " is not a multiple of transformer.num_heads ", t.numHeads));
    if (t.numHeads % t.numKvHeads != 0)
      return bad(absl::StrCat("transformer.num_heads ", t.numHeads,
                              " is not a multiple of transformer.num_kv_heads ", t.numKvHeads));
    CONDUIT_RETURN_IF_ERROR(inRange("transformer.rope_theta", t.ropeTheta, 1, 1e12));
    CONDUIT_RETURN_IF_ERROR(inRange("transformer.norm_eps", t.normEps, 0, 0.1));
    if (!(t.normEps > 0) || !(t.ropeTheta > 1))
      return bad("transformer.rope_theta must exceed 1 and transformer.norm_eps 0");
    if (t.isMoe()) {
      CONDUIT_RETURN_IF_ERROR(inRange("transformer.num_experts", t.numExperts, 1, kMaxExperts));
      CONDUIT_RETURN_IF_ERROR(inRange("transformer.top_k", t.topK, 1, t.numExperts));
      CONDUIT_RETURN_IF_ERROR(
          inRange("transformer.expert_ffn_hidden_size", t.expertFfnHiddenSize, 1, kMaxFfn));
      CONDUIT_RETURN_IF_ERROR(inRange("transformer.imbalance", t.imbalance, 1, 1e6));
      CONDUIT_RETURN_IF_ERROR(inRange("transformer.dense_layers", t.denseLayers, 0, t.numLayers));
      if (t.numExperts % plan.config.expert != 0)
        return bad(absl::StrCat("config.expert ", plan.config.expert,
                                " does not divide transformer.num_experts ", t.numExperts));
    } else if (plan.config.expert > 1) {
      return bad(absl::StrCat("config.expert is ", plan.config.expert,
                              " but the transformer has no experts (transformer.num_experts 0)"));
    }
    if (plan.config.tokensPerSample != t.seqLength)
      return bad(absl::StrCat("config.tokens_per_sample is ", plan.config.tokensPerSample,
                              "; the transformer's samples are transformer.seq_length ",
                              t.seqLength, " tokens"));
    const int64_t layers = static_cast<int64_t>(plan.layers.size());
    if (layers != t.numLayers + t.mtpLayers + 2)
      return bad(absl::StrCat("transformer.num_layers is ", t.numLayers, " and mtp_layers ",
                              t.mtpLayers, "; the plan's chain has ", layers, " layers, which is ",
                              layers - 2, " blocks between an embedding and a head"));
    for (int64_t l = 0; l < layers; ++l) {
      const LayerKind expected = l == 0            ? LayerKind::Embedding
                                 : l == layers - 1 ? LayerKind::Head
                                                   : LayerKind::Block;
      if (plan.layers[l].kind != expected)
        return bad(absl::StrCat("layer ", l, " (", plan.layers[l].name,
                                ") is not where a transformer's chain has it"));
    }
    return absl::OkStatus();
  }

  absl::Status checkLayers() {
    using limits::kMaxExact;
    int64_t total = 0;
    for (size_t l = 0; l < plan.layers.size(); ++l) {
      const Layer &layer = plan.layers[l];
      const std::string at = absl::StrCat("layers[", l, "] (", layer.name, ").");
      CONDUIT_RETURN_IF_ERROR(inRange(at + "params", layer.params, 0, kMaxExact));
      CONDUIT_RETURN_IF_ERROR(
          inRange(at + "activation_bytes", layer.activationBytes, 0, kMaxExact));
      CONDUIT_RETURN_IF_ERROR(
          inRange(at + "checkpoint_bytes", layer.checkpointBytes, 0, kMaxExact));
      CONDUIT_RETURN_IF_ERROR(inRange(at + "output_bytes", layer.outputBytes, 0, kMaxExact));
      CONDUIT_RETURN_IF_ERROR(inRange(at + "fwd_flops", layer.fwdFlops, 0, 1e300));
      CONDUIT_RETURN_IF_ERROR(inRange(at + "bwd_flops", layer.bwdFlops, 0, 1e300));
      CONDUIT_RETURN_IF_ERROR(
          inRange(at + "bwd_weight_flops", layer.bwdWeightFlops, 0, layer.bwdFlops));
      total += layer.params; // at most 2^17 terms below 2^53: no overflow
    }
    return inRange("the parameters of all layers", total, 0, kMaxExact);
  }

  absl::Status checkStages() {
    const Config &c = plan.config;
    const int64_t expected = int64_t(c.pipeline) * c.stagesPerDevice;
    if (static_cast<int64_t>(plan.stages.size()) != expected)
      return bad(absl::StrCat("the plan has ", plan.stages.size(),
                              " stages; pipeline x "
                              "stages_per_device is ",
                              expected));
    if (c.batchSamples() > limits::kMaxBatchSamples)
      return bad(absl::StrCat("a replica's batch of ", c.batchSamples(),
                              " samples (config.microbatches x config.microbatch_size) is too "
                              "large; at most ",
                              limits::kMaxBatchSamples, " are supported"));
    int64_t previousEnd = 0, pairs = 0;
    for (size_t s = 0; s < plan.stages.size(); ++s) {
      const Stage &stage = plan.stages[s];
      if (stage.index != static_cast<int32_t>(s))
        return bad(absl::StrCat("stage ", s, " has index ", stage.index));
      if (stage.rank < 0 || stage.rank >= c.pipeline)
        return bad(absl::StrCat("stage ", s, " is placed on rank ", stage.rank));
      if (stage.firstLayer != previousEnd || stage.endLayer <= stage.firstLayer ||
          stage.endLayer > static_cast<int64_t>(plan.layers.size()))
        return bad(absl::StrCat("stage ", s, " has layers [", stage.firstLayer, ", ",
                                stage.endLayer, "), which do not continue the chain"));
      previousEnd = stage.endLayer;
      int64_t params = 0;
      for (int32_t l = stage.firstLayer; l < stage.endLayer; ++l)
        params += plan.layers[l].params; // bounded by checkLayers
      if (stage.params != params)
        return bad(
            absl::StrCat("stages[", s, "].params is ", stage.params, "; its layers have ", params));
      if (stage.samples.size() < 2 || stage.samples.front() != 0 ||
          stage.samples.back() != c.batchSamples())
        return bad(
            absl::StrCat("stage ", s, " does not cut the batch of ", c.batchSamples(), " samples"));
      for (size_t j = 1; j < stage.samples.size(); ++j)
        if (stage.samples[j] <= stage.samples[j - 1])
          return bad(absl::StrCat("stage ", s,
                                  " has micro-batch boundaries that do not "
                                  "increase"));
      pairs += stage.numMicrobatches();
      if (pairs > limits::kMaxStageMicrobatches)
        return bad(absl::StrCat("the stages hold more than ", limits::kMaxStageMicrobatches,
                                " (stage, micro-batch) pairs"));
    }
    if (previousEnd != static_cast<int64_t>(plan.layers.size()))
      return bad("the stages do not cover every layer");
    // Checked after checkTransformer: the modules are layers numLayers + 1 on.
    if (plan.transformer && plan.transformer->mtpLayers > 0 &&
        plan.stages.back().firstLayer > plan.transformer->numLayers + 1)
      return bad(absl::StrCat("the last stage starts at layer ", plan.stages.back().firstLayer,
                              "; the multi-token prediction modules (from layer ",
                              plan.transformer->numLayers + 1,
                              ") stay on it with the head, whose tables they share"));
    return absl::OkStatus();
  }

  absl::Status checkGroups() {
    for (size_t g = 0; g < plan.groups.size(); ++g) {
      const std::vector<int32_t> &ranks = plan.groups[g].ranks;
      if (ranks.empty())
        return bad(absl::StrCat("group ", g, " has no member"));
      for (size_t i = 0; i < ranks.size(); ++i)
        if (ranks[i] < 0 || ranks[i] >= plan.config.pipeline || (i > 0 && ranks[i] <= ranks[i - 1]))
          return bad(absl::StrCat("group ", g, " lists ranks out of range or out of order"));
    }
    return absl::OkStatus();
  }

  /// The inner collectives a compute instruction issues (TensorCollectives.h: the tensor
  /// group's collectives and the expert all-to-alls), which must follow it in its program, in
  /// order, on its stream.
  class TensorCalls {
  public:
    /// Compute instruction `index` of rank `r`: what it issues. `pairedWith` is the (stage,
    /// micro-batch) of the paired forward it follows, if any (else -1, -1).
    void expect(SemanticChecker &checker, int32_t r, size_t index,
                std::pair<int32_t, int32_t> pairedWith) {
      const std::vector<Instruction> &program = checker.plan.ranks[r].instructions;
      const Instruction &compute = program[index];
      const Stage &stage = checker.plan.stages[compute.stage];
      expected = &checker.issued.of(stage.firstLayer, stage.endLayer, compute.op,
                                    stage.samples[compute.microbatch + 1] -
                                        stage.samples[compute.microbatch]);
      owner = index;
      next = 0;
      partner = pairedWith;
      // A paired forward's partner is the next compute of the program.
      if (compute.flags == Instruction::kPaired)
        for (size_t k = index + 1; k < program.size(); ++k)
          if (program[k].isCompute()) {
            partner = {program[k].stage, program[k].microbatch};
            break;
          }
    }
    bool pending() const { return next < list().size(); }
    /// Tensor collective `index` of rank `r`: the next the last compute issues.
    absl::Status take(SemanticChecker &checker, int32_t r, size_t index) {
      const Plan &plan = checker.plan;
      const Instruction &i = plan.ranks[r].instructions[index];
      const bool allToAll = i.isExpertAllToAll();
      if (!allToAll && plan.config.tensor == 1)
        return checker.badInstruction(r, index,
                                      "a tensor collective, but the plan has no tensor "
                                      "parallelism (config.tensor is 1)");
      if (allToAll && (plan.config.expert == 1 || !plan.transformer || !plan.transformer->isMoe()))
        return checker.badInstruction(r, index,
                                      "an expert all-to-all, but the plan has no expert "
                                      "parallelism (config.expert is 1 or the model has no "
                                      "experts)");
      if (!pending())
        return checker.badInstruction(
            r, index,
            list().empty() && next == 0
                ? absl::StrCat(allToAll ? "an expert all-to-all" : "a tensor collective",
                               " must directly follow the compute that issues it")
                : absl::StrCat("the compute at instruction ", owner, " issues ", list().size(),
                               " collectives, and this one is extra"));
      const Instruction &compute = plan.ranks[r].instructions[owner];
      const TensorCollective &want = list()[next];
      if (i.op != want.op || i.bytes != want.bytes || i.stage != compute.stage ||
          i.microbatch != compute.microbatch || i.stream != compute.stream)
        return checker.badInstruction(
            r, index,
            absl::StrCat("collective ", next + 1, " of ", list().size(), " issued by ",
                         describe(compute), " (instruction ", owner, ") is ", opName(want.op), " s",
                         compute.stage, " mb", compute.microbatch, " ", want.bytes,
                         " bytes for layer ", want.layer, " on stream ", int(compute.stream)));
      if (allToAll) {
        const std::vector<Group> &groups = plan.groups;
        if (i.group < 0 || i.group >= static_cast<int32_t>(groups.size()) ||
            std::find(groups[i.group].ranks.begin(), groups[i.group].ranks.end(), r) ==
                groups[i.group].ranks.end())
          return checker.badInstruction(
              r, index,
              absl::StrCat("names group ", i.group,
                           "; an expert all-to-all names a group of its own pipeline rank ", r));
        const std::pair<int32_t, int32_t> hides{i.peerStage, i.peerMicrobatch};
        if (hides != std::pair<int32_t, int32_t>{-1, -1} && hides != partner)
          return checker.badInstruction(
              r, index,
              partner.first < 0
                  ? absl::StrCat("hides behind s", i.peerStage, " mb", i.peerMicrobatch, ", but ",
                                 describe(compute), " (instruction ", owner,
                                 ") is not paired: nothing computes while its all-to-alls run")
                  : absl::StrCat("hides behind s", i.peerStage, " mb", i.peerMicrobatch,
                                 "; only the compute paired with ", describe(compute),
                                 " (instruction ", owner, "), s", partner.first, " mb",
                                 partner.second,
                                 ", can run while it does (its own compute reads its result)"));
      }
      ++next;
      return absl::OkStatus();
    }
    /// Instruction `index` of rank `r` comes where the last compute's next collective should.
    absl::Status missing(SemanticChecker &checker, int32_t r, size_t index) {
      const Instruction &compute = checker.plan.ranks[r].instructions[owner];
      const TensorCollective &want = list()[next];
      std::string what =
          absl::StrCat(describe(compute), " (instruction ", owner, ") issues ", list().size(),
                       " collectives and only ", next, " follow it; the next is ", opName(want.op),
                       " of ", want.bytes, " bytes for layer ", want.layer);
      if (index >= checker.plan.ranks[r].instructions.size())
        return bad(absl::StrCat("rank ", r, " ends where ", what));
      return checker.badInstruction(r, index, what);
    }

  private:
    /// The last compute's collectives (none before the first compute).
    const std::vector<TensorCollective> &list() const {
      static const std::vector<TensorCollective> none;
      return expected ? *expected : none;
    }
    const std::vector<TensorCollective> *expected = nullptr;
    size_t owner = 0, next = 0;
    std::pair<int32_t, int32_t> partner{-1, -1}; ///< the compute paired with the owner
  };

  bool stageOn(int32_t stage, int32_t r) const {
    return stage >= 0 && stage < static_cast<int32_t>(plan.stages.size()) &&
           plan.stages[stage].rank == r;
  }
  bool microbatchOf(int32_t stage, int32_t mb) const {
    return mb >= 0 && mb < plan.stages[stage].numMicrobatches();
  }

  absl::Status checkRank(int32_t r) {
    const RankProgram &program = plan.ranks[r];
    if (program.rank != r)
      return bad(absl::StrCat("the rank program at position ", r, " is for rank ", program.rank));
    // Each event is signalled by an instruction of its own: there are at most as many.
    CONDUIT_RETURN_IF_ERROR(inRange(absl::StrCat("ranks[", r, "].events"), program.events, 0,
                                    static_cast<int64_t>(program.instructions.size())));
    int64_t slotBytes = 0;
    for (size_t k = 0; k < program.slots.size(); ++k) {
      CONDUIT_RETURN_IF_ERROR(inRange(absl::StrCat("ranks[", r, "].slots[", k, "]"),
                                      program.slots[k], 0, limits::kMaxExact));
      slotBytes += program.slots[k]; // at most 2^25 terms below 2^53
    }
    CONDUIT_RETURN_IF_ERROR(inRange(absl::StrCat("the slots of rank ", r, " in bytes"), slotBytes,
                                    0, limits::kMaxExact));
    CONDUIT_RETURN_IF_ERROR(inRange(absl::StrCat("ranks[", r, "].peak_memory"),
                                    program.peakMemoryBytes, 0, limits::kMaxExact));
    std::vector<int8_t> signalStream(program.events, -1);
    std::vector<uint8_t> waited(program.events, 0);
    // By (stage, micro-batch): its compute in program order, and where its I is.
    std::map<std::pair<int32_t, int32_t>, ComputeProgress> computed;
    std::map<std::pair<int32_t, int32_t>, size_t> inputAt;
    const int32_t slots = static_cast<int32_t>(program.slots.size());
    bool pairOpen = false; // a paired forward waits for its backward
    std::pair<int32_t, int32_t> pairedForward{-1, -1};
    TensorCalls calls; // the inner collectives the last compute issues
    for (size_t index = 0; index < program.instructions.size(); ++index) {
      const Instruction &i = program.instructions[index];
      auto fail = [&](const std::string &what) { return badInstruction(r, index, what); };
      if (i.isInnerCollective()) {
        CONDUIT_RETURN_IF_ERROR(calls.take(*this, r, index));
        continue;
      }
      if (calls.pending())
        return calls.missing(*this, r, index);
      if (i.stream >= kMaxStreams)
        return fail(absl::StrCat("stream ", int(i.stream), " is not below ", kMaxStreams));
      if (i.flags != 0 && (i.flags != Instruction::kPaired || i.op != Op::Forward))
        return fail("only a forward may be paired, and no other flag exists");
      std::pair<int32_t, int32_t> pairedWith{-1, -1};
      if (i.isCompute()) {
        if (pairOpen && i.op != Op::Backward && i.op != Op::BackwardInput)
          return fail("follows a paired forward but is not a backward or input gradient");
        if (pairOpen)
          pairedWith = pairedForward;
        pairOpen = i.flags == Instruction::kPaired;
        pairedForward = {i.stage, i.microbatch};
      }
      switch (i.op) {
      case Op::Forward:
      case Op::Backward:
      case Op::BackwardInput:
      case Op::BackwardWeight:
        if (!stageOn(i.stage, r) || !microbatchOf(i.stage, i.microbatch))
          return fail("the stage is not on this rank or the micro-batch does not exist");
        if (i.slot < -1 || i.slot >= slots)
          return fail("the slot does not exist");
        if (const char *misplaced = computed[{i.stage, i.microbatch}].take(i.op))
          return fail(misplaced);
        if (i.op == Op::BackwardInput)
          inputAt[{i.stage, i.microbatch}] = index;
        calls.expect(*this, r, index, pairedWith);
        break;
      case Op::Send:
      case Op::Recv: {
        if (!stageOn(i.stage, r) || !microbatchOf(i.stage, i.microbatch))
          return fail("the stage is not on this rank or the micro-batch does not exist");
        bool downstream = (i.kind == Transfer::Activation) == (i.op == Op::Send);
        if (i.peer < 0 || i.peer >= plan.config.pipeline || i.peer == r)
          return fail("the peer rank is invalid");
        if (i.peerStage != i.stage + (downstream ? 1 : -1) || !stageOn(i.peerStage, i.peer) ||
            !microbatchOf(i.peerStage, i.peerMicrobatch))
          return fail("the peer stage or micro-batch is not where the transfer says");
        const Stage &local = plan.stages[i.stage], &other = plan.stages[i.peerStage];
        if (i.begin >= i.end || i.begin < local.samples[i.microbatch] ||
            i.end > local.samples[i.microbatch + 1] || i.begin < other.samples[i.peerMicrobatch] ||
            i.end > other.samples[i.peerMicrobatch + 1])
          return fail("the sample range is empty or outside the micro-batches");
        if (i.bytes < 0 || i.bytes > limits::kMaxExact)
          return fail("the byte count is negative or too large");
        if (i.op == Op::Recv && (i.slot < 0 || i.slot >= slots || i.bytes > program.slots[i.slot]))
          return fail("the receive slot does not exist or is too small");
        break;
      }
      case Op::AllGather:
      case Op::ReduceScatter:
      case Op::AllReduce: {
        if (!stageOn(i.stage, r))
          return fail("the stage is not on this rank");
        if (i.group < 0 || i.group >= static_cast<int32_t>(plan.groups.size()))
          return fail("the group does not exist");
        const std::vector<int32_t> &members = plan.groups[i.group].ranks;
        if (std::find(members.begin(), members.end(), r) == members.end())
          return fail(absl::StrCat("rank ", r, " is not a member of group ", i.group));
        if (i.bytes < 0 || i.bytes > limits::kMaxExact)
          return fail("the byte count is negative or too large");
        break;
      }
      case Op::Free:
      case Op::OptimizerStep:
        if (!stageOn(i.stage, r))
          return fail("the stage is not on this rank");
        break;
      case Op::TieGrads: {
        const int32_t last = static_cast<int32_t>(plan.stages.size()) - 1;
        if (!plan.transformer || !plan.transformer->sharesTokenTable())
          return fail("ties gradients, but the model's embeddings are not tied and it has no "
                      "multi-token prediction module");
        if (i.peer < 0 || i.peer >= plan.config.pipeline || !stageOn(i.stage, r) ||
            !stageOn(i.peerStage, i.peer))
          return fail("the stage is not on this rank or the peer stage not on the peer rank");
        if (std::min(i.stage, i.peerStage) != 0 || std::max(i.stage, i.peerStage) != last)
          return fail(absl::StrCat("ties stages ", i.stage, " and ", i.peerStage,
                                   "; the tied copies are in the first and the last stage (0 and ",
                                   last, ")"));
        // Vocabulary-parallel with tensor parallelism: each tensor rank ties its slice.
        const int64_t tied =
            plan.transformer->vocabSize / plan.config.tensor * plan.transformer->hiddenSize;
        if (i.bytes != tied * 4)
          return fail(
              absl::StrCat("moves ", i.bytes, " bytes; the tied weight's gradient has ", tied * 4));
        break;
      }
      case Op::Signal:
      case Op::Wait:
        if (i.event < 0 || i.event >= program.events)
          return fail("the event does not exist");
        if (i.op == Op::Signal) {
          if (signalStream[i.event] >= 0)
            return fail("the event is signalled twice");
          signalStream[i.event] = static_cast<int8_t>(i.stream);
        } else {
          waited[i.event] = 1;
        }
        break;
      case Op::TensorAllReduce:
      case Op::TensorAllGather:
      case Op::TensorReduceScatter:
      case Op::ExpertDispatch:
      case Op::ExpertCombine:
        break; // checked with their compute, above
      }
    }
    if (calls.pending())
      return calls.missing(*this, r, program.instructions.size());
    if (pairOpen)
      return bad(absl::StrCat("rank ", r, " ends with a paired forward and no backward after it"));
    for (int32_t e = 0; e < program.events; ++e)
      if (signalStream[e] < 0 && waited[e])
        return bad(absl::StrCat("rank ", r, " waits for event ", e, ", which is never signalled"));
    for (const auto &[key, progress] : computed)
      if (progress.weightPending())
        return badInstruction(r, inputAt[key],
                              "no backward_weight of this micro-batch comes after it; its weight "
                              "gradient would never be computed");
    return absl::OkStatus();
  }

  /// With tied embeddings (or multi-token prediction modules, whose stage keeps a copy of the
  /// token table), each rank that holds a tied copy sums the copies' gradients once per step,
  /// and a rank that exchanges them with another meets that rank's tie_grads.
  absl::Status checkTies() {
    const bool tied = plan.transformer && plan.transformer->sharesTokenTable();
    const int32_t first = plan.stages.front().rank, last = plan.stages.back().rank;
    std::vector<std::vector<size_t>> ties(plan.ranks.size());
    for (const RankProgram &program : plan.ranks)
      for (size_t k = 0; k < program.instructions.size(); ++k)
        if (program.instructions[k].op == Op::TieGrads)
          ties[program.rank].push_back(k);
    for (const RankProgram &program : plan.ranks) {
      const int32_t r = program.rank;
      const bool holds = tied && (r == first || r == last);
      if (ties[r].size() > 1)
        return badInstruction(r, ties[r][1], "sums the tied gradients a second time this step");
      if (!holds && !ties[r].empty())
        return badInstruction(r, ties[r][0], "ties gradients on a rank without a tied copy");
      if (holds && ties[r].empty())
        return bad(absl::StrCat("rank ", r,
                                " holds a copy of the token table but never sums its "
                                "gradients with the other copy's (no tie_grads; a plan with "
                                "multi-token prediction modules from an older compiler: "
                                "recompile the job)"));
      if (!holds)
        continue;
      const Instruction &mine = program.instructions[ties[r][0]];
      if (first == last && mine.peer != r)
        return badInstruction(r, ties[r][0],
                              "exchanges with another rank, but this rank holds "
                              "both tied copies");
      if (mine.peer == r)
        continue;
      if (ties[mine.peer].empty())
        return badInstruction(r, ties[r][0],
                              absl::StrCat("rank ", mine.peer, " never ties its copy with it"));
      const Instruction &theirs = plan.ranks[mine.peer].instructions[ties[mine.peer][0]];
      if (theirs.peer != r || theirs.stage != mine.peerStage || theirs.peerStage != mine.stage)
        return badInstruction(r, ties[r][0],
                              absl::StrCat("rank ", mine.peer, " ties as ", describe(theirs)));
    }
    return absl::OkStatus();
  }

  /// Sends and receives of one (sender, receiver) pair match in program order.
  absl::Status checkMatching() {
    using Key = std::pair<int32_t, int32_t>;
    std::map<Key, std::vector<size_t>> sends, recvs; // instruction indices
    for (const RankProgram &program : plan.ranks)
      for (size_t k = 0; k < program.instructions.size(); ++k) {
        const Instruction &i = program.instructions[k];
        if (i.op == Op::Send)
          sends[{program.rank, i.peer}].push_back(k);
        else if (i.op == Op::Recv)
          recvs[{i.peer, program.rank}].push_back(k);
      }
    std::set<Key> pairs;
    for (const auto &[pair, list] : sends)
      pairs.insert(pair);
    for (const auto &[pair, list] : recvs)
      pairs.insert(pair);
    for (const Key &pair : pairs) {
      const std::vector<size_t> &sent = sends[pair], &received = recvs[pair];
      const RankProgram &from = plan.ranks[pair.first], &to = plan.ranks[pair.second];
      for (size_t k = 0; k < std::max(sent.size(), received.size()); ++k) {
        if (k >= received.size())
          return badInstruction(
              pair.first, sent[k],
              absl::StrCat("message ", k, " to rank ", pair.second, " has no matching receive"));
        if (k >= sent.size())
          return badInstruction(
              pair.second, received[k],
              absl::StrCat("message ", k, " from rank ", pair.first, " has no matching send"));
        const Instruction &s = from.instructions[sent[k]], &v = to.instructions[received[k]];
        if (s.kind != v.kind || s.stage != v.peerStage || s.microbatch != v.peerMicrobatch ||
            s.peerStage != v.stage || s.peerMicrobatch != v.microbatch || s.begin != v.begin ||
            s.end != v.end || s.bytes != v.bytes)
          return badInstruction(pair.second, received[k],
                                absl::StrCat("message ", k, " from rank ", pair.first,
                                             " is sent as ", describe(s), " (instruction ", sent[k],
                                             ")"));
      }
    }
    return absl::OkStatus();
  }

  const Plan &plan;
  /// What each compute issues, per stage, pass and micro-batch size (TensorCalls::expect).
  TensorCollectiveCache issued{plan.config, plan.layers,
                               plan.transformer ? &*plan.transformer : nullptr};
};

} // namespace

absl::Status checkPlanSemantics(const Plan &plan, PlanLocation *where) {
  SemanticChecker checker(plan);
  absl::Status status = checker.run();
  if (where)
    *where = checker.location;
  return status;
}

} // namespace conduit::runtime
