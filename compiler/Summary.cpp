//===- Summary.cpp - the readable report of a compilation -----------------===//

#include "compiler/Summary.h"

#include "analysis/JobCosts.h"
#include "analysis/Units.h"
#include "dialects/plan/PlanOps.h"
#include "job/TransformerCosts.h"
#include "passes/CostModelBuilder.h"
#include "passes/PlanExport.h"
#include "scheduling/Schedulers.h"
#include "llvm/Support/Format.h"

#include <cstdio>

using namespace conduit;

int64_t conduit::modelParameters(const Job &job) {
  if (job.model.transformer)
    return transformerParameters(*job.model.transformer);
  int64_t total = 0;
  for (const LayerSpec &layer : job.model.layers)
    total += layer.params;
  return total;
}

namespace {

void row(llvm::raw_ostream &os, llvm::StringRef label, const std::string &text) {
  os << "  " << llvm::left_justify(label, 12) << " " << text << "\n";
}

/// A factor or rate as printf's %g writes it (0.001, 2.5, 40).
std::string shortest(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

std::string describeModel(const Job &job) {
  const ModelSpec &m = job.model;
  std::string text = m.kind + ", " + std::to_string(m.layers.size()) + " layers";
  if (const std::optional<TransformerSpec> &t = m.transformer) {
    text += " (embedding, " + std::to_string(t->numLayers) + " blocks, " +
            (t->mtpLayers > 0 ? std::to_string(t->mtpLayers) + " multi-token prediction, " : "") +
            "head): hidden " + std::to_string(t->hiddenSize) + ", " + std::to_string(t->numHeads) +
            " heads";
    if (t->numKvHeads != t->numHeads)
      text += " (" + std::to_string(t->numKvHeads) + " key/value)";
    if (t->headDim && *t->headDim * t->numHeads != t->hiddenSize)
      text += " of " + std::to_string(*t->headDim);
    if (t->qkNorm)
      text += " with query/key norms";
    text += ", ffn " + std::to_string(t->ffnHiddenSize) + ", seq " + std::to_string(t->seqLength) +
            ", vocab " + std::to_string(t->vocabSize) + ", " + std::string(enumName(t->mlp)) + "/" +
            std::string(enumName(t->norm)) + "/" + std::string(enumName(t->position));
    if (const runtime::RopeScaling &rope = t->ropeScaling; rope.scaled()) {
      text +=
          " extended by " + std::string(enumName(rope.type)) + " (factor " + shortest(rope.factor);
      if (rope.type != runtime::RopeType::Linear)
        text += " over " + std::to_string(rope.originalPositions) + " positions";
      text += ")";
    }
    if (t->mtpLayers > 0)
      text += ", the prediction modules' loss weighted " + shortest(t->mtpLossCoefficient);
    if (const std::optional<LatentAttentionSpec> &mla = t->latentAttention)
      text += ", latent attention (kv rank " + std::to_string(mla->kvLoraRank) + ", q rank " +
              std::to_string(mla->qLoraRank) +
              (mla->ropeInterleave ? ", its weights' rotary pairs interleaved" : "") + ")";
    if (t->elementwise != ElementwiseKind::Fused)
      text += t->elementwise == ElementwiseKind::Eager
                  ? ", element-wise operations in PyTorch's eager mode"
                  : ", element-wise operations in PyTorch's eager mode but the fused RMSNorm";
    if (const std::optional<MoeSpec> &moe = t->moe) {
      text += "; experts: " + std::to_string(moe->numExperts) + " routed, top " +
              std::to_string(moe->topK) + " (" + std::string(enumName(moe->router));
      if (moe->routerGroupTopK < moe->routerGroups)
        text += ", from the best " + std::to_string(moe->routerGroupTopK) + " of " +
                std::to_string(moe->routerGroups) + " groups";
      if (moe->biasUpdateRate > 0)
        text += ", its bias moved by the load at " + shortest(moe->biasUpdateRate) + " a step";
      if (moe->routedScalingFactor != 1)
        text += ", weights x" + shortest(moe->routedScalingFactor);
      if (moe->zLossCoefficient > 0)
        text += ", z-loss x" + shortest(moe->zLossCoefficient);
      text += "), ffn " + std::to_string(moe->expertFfnHiddenSize);
      if (moe->sharedExperts > 0)
        text += ", " + std::to_string(moe->sharedExperts) + " shared (ffn " +
                std::to_string(moe->sharedFfnHiddenSize) +
                (moe->sharedExpertGate ? ", gated" : "") + ")";
      if (moe->denseLayers > 0)
        text += ", first " + std::to_string(moe->denseLayers) + " block(s) dense";
      if (moe->capacityFactor)
        text += ", capacity x" + shortest(*moe->capacityFactor) + " a sample (dropping " +
                (moe->dropPolicy == DropPolicy::Probs ? "the lowest weights" : "the later tokens") +
                ")";
      if (moe->kernels == ExpertKernels::Megatron)
        text += ", priced as Megatron-LM's MoE layer";
      if (job.parallelism.expert > 1) {
        const MoeImbalance imbalance = moeImbalance(job);
        const char *source = imbalance.source == MoeImbalance::Source::Stated ? "stated"
                             : imbalance.source == MoeImbalance::Source::Measured
                                 ? "measured in cluster.profile"
                                 : "uniform routing's";
        char bound[32];
        std::snprintf(bound, sizeof bound, "%.2f", imbalance.value);
        text +=
            "; routed tokens up to " + std::string(bound) + "x the balanced share (" + source + ")";
        if (moe->dispatch == DispatchKind::PerNode)
          text += ", sent once per node";
        if (moe->fp8Dispatch)
          text += ", to the experts in fp8";
      }
    }
  }
  return text;
}

std::string describeCompute(const Job &job) {
  double fwd = 0, bwd = 0, activation = 0;
  for (const LayerSpec &layer : job.model.layers) {
    fwd += layer.fwdFlops;
    bwd += layer.bwdFlops;
    activation += static_cast<double>(layer.activationBytes);
  }
  std::string active;
  if (job.model.transformer && job.model.transformer->moe)
    active = " (" +
             formatCount(static_cast<double>(transformerActiveParameters(*job.model.transformer))) +
             " active per token)";
  return formatCount(static_cast<double>(modelParameters(job))) + " parameters" + active +
         "; per sample " + formatCount(fwd) + "FLOP forward, " + formatCount(bwd) +
         "FLOP backward, " + formatBytes(activation) + " of activations";
}

/// `deferLimit`: the most weight gradients a rank defers in the compiled schedule, where it is
/// limited (by the job, or by the compiler so that the plan fits); `moe`: whether the model
/// has routed experts.
std::string describeParallelism(const ParallelismSpec &p, std::optional<int64_t> deferLimit,
                                bool moe) {
  std::string text =
      "pipeline " + std::to_string(p.pipeline) + " x data " + std::to_string(p.data) +
      (p.tensor > 1
           ? " x tensor " + std::to_string(p.tensor) +
                 (!p.sequenceParallel   ? ""
                  : p.tensorCommOverlap ? " (sequence parallel)"
                                        : " (sequence parallel, collectives not overlapped)")
           : std::string()) +
      (p.expert > 1
           ? ", experts over groups of " + std::to_string(p.expert) + " (each expert's state on " +
                 std::to_string(p.data * p.tensor / p.expert) + " rank(s))"
       : moe && p.tensor > 1 ? ", all experts on each rank (each expert's state on " +
                                   std::to_string(p.data * p.tensor) + " rank(s))"
                             : std::string()) +
      ", " + std::to_string(p.stagesPerDevice) + " stage(s) per device (" +
      std::to_string(p.numStages()) + " stages), " + std::string(enumName(p.schedule));
  if (isInterleaved(p.schedule))
    text += " (group " + std::to_string(p.groupSize) + ")";
  if (p.splitBackward && !isZeroBubble(p.schedule))
    text += " with split backward";
  if (p.placement == Placement::V)
    text += " on the V placement";
  if (deferLimit)
    text += ", at most " + std::to_string(*deferLimit) + " weight gradient(s) deferred per rank" +
            (p.maxDeferredWeightGradients ? "" : " (so that the plan fits)");
  text += ", " + std::to_string(p.microbatches) + " micro-batches of " +
          std::to_string(p.microbatchSize) + " sample(s), sharding " +
          std::string(enumName(p.sharding));
  if (p.gradientReduction == runtime::GradientReduction::Run)
    text += " (gradients reduced after each run)";
  text += ", checkpointing " + std::string(enumName(p.checkpointing));
  if (p.autoPartitions)
    text += ", micro-batch partitions searched";
  else if (!p.microbatchPartitions.empty())
    text += ", explicit micro-batch partitions";
  return text;
}

std::string describeCluster(const Cluster &c) {
  std::string text =
      c.preset + ": " + formatRate(c.peakFlops, "FLOP/s") + " peak x " +
      std::to_string(c.efficiency).substr(0, 4) + ", " +
      formatBytes(static_cast<double>(c.memoryBytes)) + ", " + std::to_string(c.gpusPerNode) +
      " GPUs/node, " + formatRate(c.intraNodeBandwidth, "B/s") + " intra-node, " +
      formatRate(c.interNodeBandwidth, "B/s") + " inter-node, latency " + formatSeconds(c.latencyS);
  if (c.launchOverheadS > 0)
    text += ", " + formatSeconds(c.launchOverheadS) + " per layer launch";
  if (!c.profile.empty())
    text += ", profile " + c.profile;
  return text;
}

std::string describeTraining(const TrainingSpec &t) {
  std::string lr;
  llvm::raw_string_ostream(lr) << llvm::format("%g", t.learningRate);
  return std::string(enumName(t.dtype)) + ", " + std::string(enumName(t.optimizer)) +
         (t.masterWeights == MasterWeights::Parameters ? " on fp32 parameter shards" : "") +
         (t.adamMoments == runtime::AdamMoments::BF16 ? " with bf16 moments" : "") +
         (t.optimizerKernels == OptimizerKernels::Foreach ? ", its update a kernel per operation"
          : t.optimizerKernels == OptimizerKernels::PerTensor ? ", its update one tensor at a time"
                                                              : "") +
         ", learning rate " + lr + ", seed " + std::to_string(t.seed);
}

/// "64 stages of 2, 1 x62, 2 layers; slowest stage 1.49 x the mean (132 ms per micro-batch)"
std::string describeStages(const std::vector<std::pair<int64_t, int64_t>> &stages,
                           llvm::Expected<CostModel> cost, int64_t samples) {
  // Layers per stage, with runs of equal counts written "count xN".
  std::string layers;
  for (size_t i = 0; i < stages.size();) {
    int64_t n = stages[i].second - stages[i].first;
    size_t j = i;
    while (j < stages.size() && stages[j].second - stages[j].first == n)
      ++j;
    layers += (i ? ", " : "") + std::to_string(n) + (j - i > 1 ? " x" + std::to_string(j - i) : "");
    i = j;
  }
  std::string text = std::to_string(stages.size()) + " stages of " + layers + " layers";
  if (!cost) {
    llvm::consumeError(cost.takeError());
    return text;
  }
  double total = 0, slowest = 0;
  for (auto [first, end] : stages) {
    double t =
        cost->stageForwardTime(first, end, samples) + cost->stageBackwardTime(first, end, samples);
    total += t;
    slowest = std::max(slowest, t);
  }
  char ratio[32];
  std::snprintf(ratio, sizeof(ratio), "%.2f", slowest * stages.size() / total);
  return text + "; slowest stage " + ratio + " x the mean (" + formatSeconds(slowest) +
         " per micro-batch)";
}

/// "; 32-64 expert all-to-alls in groups of 8, 12-20 of them hidden in paired steps" (a range
/// where ranks differ), or nothing without expert parallelism.
std::string describeAllToAlls(const runtime::Plan &plan) {
  int64_t least = INT64_MAX, most = 0, leastHidden = INT64_MAX, mostHidden = 0;
  for (const runtime::RankProgram &rank : plan.ranks) {
    int64_t count = 0, hidden = 0;
    for (const runtime::Instruction &inst : rank.instructions)
      if (inst.isExpertAllToAll()) {
        ++count;
        hidden += inst.peerStage >= 0;
      }
    least = std::min(least, count);
    most = std::max(most, count);
    leastHidden = std::min(leastHidden, hidden);
    mostHidden = std::max(mostHidden, hidden);
  }
  if (most == 0)
    return "";
  auto range = [](int64_t a, int64_t b) {
    return std::to_string(a) + (a != b ? "-" + std::to_string(b) : "");
  };
  std::string text = range(least, most) +
                     " expert all-to-alls (dispatch and combine) in groups of " +
                     std::to_string(plan.config.expert);
  if (mostHidden > 0)
    text += ", " + range(leastHidden, mostHidden) +
            " of them hidden behind the other half of a paired step";
  else
    text += ", none hidden";
  return text;
}

/// How dualpipev ordered a plan whose all-to-alls hide in paired steps: " in DualPipe's own
/// order" where sched::withoutDualPipeOrder allows it, else " by the list rule" (the schedule
/// pass warned why); nothing for other plans.
std::string dualPipeOrder(const runtime::Plan &plan) {
  if (plan.config.schedule != runtime::Schedule::DualPipeV)
    return "";
  const bool paired = llvm::any_of(plan.ranks, [](const runtime::RankProgram &rank) {
    return llvm::any_of(rank.instructions, [](const runtime::Instruction &inst) {
      return inst.isExpertAllToAll() && inst.peerStage >= 0;
    });
  });
  if (!paired)
    return "";
  std::vector<int64_t> ranks;
  std::vector<std::vector<int64_t>> boundaries;
  for (const runtime::Stage &stage : plan.stages) {
    ranks.push_back(stage.rank);
    boundaries.push_back(stage.samples);
  }
  const sched::ScheduleProblem problem(plan.config.pipeline, std::move(ranks),
                                       std::move(boundaries));
  return sched::withoutDualPipeOrder(problem) ? " by the list rule" : " in DualPipe's own order";
}

/// "per rank and step: 14 all-gathers, 8 reduce-scatters" (a range where ranks differ).
std::string describeCollectives(const runtime::Plan &plan) {
  const std::string allToAlls = describeAllToAlls(plan);
  if (plan.config.data == 1)
    return "none (one data-parallel replica)" +
           (allToAlls.empty() ? std::string() : "; per rank and step " + allToAlls);
  struct Kind {
    const char *name;
    runtime::Op op;
    int64_t least = INT64_MAX, most = 0;
  };
  Kind kinds[] = {{"all-gather", runtime::Op::AllGather},
                  {"reduce-scatter", runtime::Op::ReduceScatter},
                  {"all-reduce", runtime::Op::AllReduce}};
  for (const runtime::RankProgram &rank : plan.ranks)
    for (Kind &kind : kinds) {
      const int64_t count = llvm::count_if(
          rank.instructions, [&](const runtime::Instruction &i) { return i.op == kind.op; });
      kind.least = std::min(kind.least, count);
      kind.most = std::max(kind.most, count);
    }
  std::string text = "per rank and step:";
  for (const Kind &kind : kinds) {
    if (kind.most == 0)
      continue;
    text += text.back() == ':' ? " " : ", ";
    text += std::to_string(kind.least);
    if (kind.most != kind.least)
      text += "-" + std::to_string(kind.most);
    text += std::string(" ") + kind.name + (kind.most == 1 ? "" : "s");
  }
  if (!allToAlls.empty())
    text += (text.back() == ':' ? " " : "; ") + allToAlls;
  return text;
}

} // namespace

void conduit::printSummary(const Job &job, mlir::ModuleOp module, const runtime::Plan *plan,
                           llvm::raw_ostream &os) {
  os << "job " << job.name << " (" << job.path << ")\n";
  row(os, "model", describeModel(job));
  row(os, "size", describeCompute(job));
  std::optional<int64_t> deferLimit;
  for (pipe::ModelOp model : module.getOps<pipe::ModelOp>())
    deferLimit = model.getParallelism().getDeferLimit();
  for (plan::ProgramOp program : module.getOps<plan::ProgramOp>())
    deferLimit = program.getParallelism().getDeferLimit();
  row(os, "parallelism",
      describeParallelism(job.parallelism, deferLimit,
                          job.model.transformer && job.model.transformer->moe));
  row(os, "cluster", describeCluster(job.cluster));
  row(os, "training", describeTraining(job.training));
  const int64_t samples = job.parallelism.microbatchSize;
  for (pipe::ModelOp model : module.getOps<pipe::ModelOp>()) {
    std::vector<std::pair<int64_t, int64_t>> stages;
    for (pipe::StageOp stage : model.getStages())
      stages.push_back({stage.getFirstLayer(), stage.getEndLayer()});
    if (model.reached(pipe::Phase::Partitioned))
      row(os, "stages", describeStages(stages, buildCostModel(model), samples));
    if (model.reached(pipe::Phase::Scheduled))
      row(os, "schedule",
          stringifyScheduleKind(model.getParallelism().getSchedule()).str() + ", verified");
  }
  for (plan::ProgramOp program : module.getOps<plan::ProgramOp>()) {
    std::vector<std::pair<int64_t, int64_t>> stages;
    for (plan::StageOp stage : program.getStages())
      stages.push_back({stage.getFirstLayer(), stage.getEndLayer()});
    row(os, "stages", describeStages(stages, buildCostModel(program), samples));
    // The verified plan's instructions (its plan.rank ops may be empty: Pipeline.h's
    // planOps), or those of a program not yet verified.
    std::optional<runtime::Plan> exported;
    if (!plan)
      exported = exportPlan(program);
    const runtime::Plan &instructions = plan ? *plan : *exported;
    int64_t count = 0;
    for (const runtime::RankProgram &rank : instructions.ranks)
      count += static_cast<int64_t>(rank.instructions.size());
    row(os, "plan",
        stringifyScheduleKind(program.getParallelism().getSchedule()).str() +
            dualPipeOrder(instructions) + ", " + std::to_string(count) + " instructions on " +
            std::to_string(program.getParallelism().getPipeline()) + " ranks" +
            (plan ? ", verified" : ", not yet verified"));
    row(os, "collectives", describeCollectives(instructions));
  }
}
