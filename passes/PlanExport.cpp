//===- PlanExport.cpp - plan.program -> the plan file's data --------------===//

#include "passes/PlanExport.h"
#include "passes/CostModelBuilder.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace conduit;
using namespace mlir;
using runtime::Instruction;
using ROp = runtime::Op;

namespace {

static_assert(static_cast<int>(runtime::Schedule::DualPipeV) ==
                      static_cast<int>(pipe::ScheduleKind::DualPipeV) &&
                  runtime::kNumSchedules == 8,
              "the plan file's schedule ids follow pipe::ScheduleKind");
static_assert(static_cast<int>(runtime::DataKind::Text) == static_cast<int>(pipe::DataKind::Text),
              "the plan file's data kinds follow pipe::DataKind");
static_assert(
    static_cast<uint32_t>(pipe::RecomputeModule::CoreAttn) == runtime::kRecomputeCoreAttention &&
        static_cast<uint32_t>(pipe::RecomputeModule::LayerNorm) == runtime::kRecomputeLayerNorm &&
        static_cast<uint32_t>(pipe::RecomputeModule::Mlp) == runtime::kRecomputeMlp &&
        static_cast<uint32_t>(pipe::RecomputeModule::MoeAct) == runtime::kRecomputeMoeActivation &&
        static_cast<uint32_t>(pipe::RecomputeModule::MlaUpProj) ==
            runtime::kRecomputeLatentUpProjection &&
        static_cast<uint32_t>(pipe::RecomputeModule::Op) == runtime::kRecomputeOp,
    "the plan's recompute-module bits are the pipe dialect's");
static_assert(static_cast<int>(pipe::RouterKind::Sigmoid) == 1,
              "the plan file's routers follow pipe::RouterKind (0 softmax, 1 sigmoid)");
static_assert(static_cast<int>(pipe::DispatchKind::PerNode) == 1,
              "the plan file's dispatches follow pipe::DispatchKind (0 per expert, 1 per node)");

runtime::Config exportConfig(plan::ProgramOp program) {
  pipe::ParallelismAttr par = program.getParallelism();
  pipe::TrainingAttr training = program.getTraining();
  runtime::Config c;
  c.pipeline = static_cast<int32_t>(par.getPipeline());
  c.data = static_cast<int32_t>(par.getData());
  c.stagesPerDevice = static_cast<int32_t>(par.getStagesPerDevice());
  // The plan file numbers schedules as the pipe dialect does (static_asserts below).
  c.schedule = static_cast<runtime::Schedule>(par.getSchedule());
  c.splitBackward = par.getSplitBackward();
  c.groupSize = par.getGroupSize();
  c.microbatches = par.getMicrobatches();
  c.microbatchSize = par.getMicrobatchSize();
  c.sharding = static_cast<runtime::Sharding>(par.getSharding());
  c.checkpointing = static_cast<runtime::Checkpointing>(par.getCheckpointing());
  c.tensor = static_cast<int32_t>(par.getTensor());
  c.sequenceParallel = par.getSequenceParallel();
  c.tensorCommOverlap = par.getTensorCommOverlap();
  c.expert = static_cast<int32_t>(par.getExpert());
  c.fsdpWindow = static_cast<int32_t>(par.getFsdpWindow());
  c.gradientReduction = static_cast<runtime::GradientReduction>(par.getGradientReduction());
  // What selective checkpointing recomputes; the default when it is not selective.
  c.recomputeModules = c.checkpointing == runtime::Checkpointing::Selective
                           ? static_cast<uint32_t>(par.getRecomputeModules())
                           : runtime::kRecomputeCoreAttention;
  c.pipelineInner = par.getRankOrder() == pipe::RankOrder::PipelineInner;
  c.dtype = static_cast<runtime::DType>(training.getDtype());
  c.optimizer = static_cast<runtime::Optimizer>(training.getOptimizer());
  c.adamMoments = static_cast<runtime::AdamMoments>(training.getAdamMoments());
  c.seed = training.getSeed();
  c.learningRate = training.getLearningRate();
  c.dataSource.kind = static_cast<runtime::DataKind>(training.getData());
  c.dataSource.path = training.getDataPath().str();
  c.dataSource.tokenBytes = training.getDataDtype() == pipe::TokenType::UInt32 ? 4 : 2;
  c.tokensPerSample = program.getTokensPerSample();
  // The cluster attribute is read in one place (clusterFromAttr); the plan keeps what the
  // runtime and the simulator of a plan file need of it.
  const Cluster machine = clusterFromAttr(program.getCluster());
  c.preset = machine.preset;
  c.peakFlops = machine.peakFlops;
  c.efficiency = machine.efficiency;
  c.memoryBytes = machine.memoryBytes;
  c.gpusPerNode = machine.gpusPerNode;
  c.intraNodeBandwidth = machine.intraNodeBandwidth;
  c.interNodeBandwidth = machine.interNodeBandwidth;
  c.latencyS = machine.latencyS;
  c.launchOverheadS = machine.launchOverheadS;
  return c;
}

Instruction exportInstruction(Operation &op) {
  Instruction i;
  llvm::TypeSwitch<Operation *>(&op)
      .Case<plan::ForwardOp, plan::BackwardOp, plan::BackwardInputOp, plan::BackwardWeightOp>(
          [&](auto compute) {
            i.op = isa<plan::ForwardOp>(op)         ? ROp::Forward
                   : isa<plan::BackwardOp>(op)      ? ROp::Backward
                   : isa<plan::BackwardInputOp>(op) ? ROp::BackwardInput
                                                    : ROp::BackwardWeight;
            i.stream = static_cast<uint8_t>(compute.getStream());
            i.stage = compute.getStage();
            i.microbatch = compute.getMicrobatch();
            i.slot = compute.getSlot();
            if (auto forward = dyn_cast<plan::ForwardOp>(op); forward && forward.getPaired())
              i.flags = Instruction::kPaired;
          })
      .Case<plan::SendOp, plan::RecvOp>([&](auto transfer) {
        i.op = isa<plan::SendOp>(op) ? ROp::Send : ROp::Recv;
        i.stream = static_cast<uint8_t>(transfer.getStream());
        i.kind = transfer.getKind() == pipe::TransferKind::Activation
                     ? runtime::Transfer::Activation
                     : runtime::Transfer::Gradient;
        i.stage = transfer.getStage();
        i.microbatch = transfer.getMicrobatch();
        i.peer = transfer.getPeer();
        i.peerStage = transfer.getPeerStage();
        i.peerMicrobatch = transfer.getPeerMicrobatch();
        i.begin = transfer.getBegin();
        i.end = transfer.getEnd();
        i.bytes = transfer.getBytes();
        i.slot = transfer.getSlot();
        i.batch = transfer.getBatch();
      })
      .Case<plan::AllGatherOp, plan::ReduceScatterOp, plan::AllReduceOp>([&](auto collective) {
        i.op = isa<plan::AllGatherOp>(op)       ? ROp::AllGather
               : isa<plan::ReduceScatterOp>(op) ? ROp::ReduceScatter
                                                : ROp::AllReduce;
        i.stream = static_cast<uint8_t>(collective.getStream());
        i.stage = collective.getStage();
        i.bytes = collective.getBytes();
        i.group = collective.getGroup();
      })
      .Case<plan::FreeOp, plan::OptimizerStepOp>([&](auto stageOp) {
        i.op = isa<plan::FreeOp>(op) ? ROp::Free : ROp::OptimizerStep;
        i.stream = static_cast<uint8_t>(stageOp.getStream());
        i.stage = stageOp.getStage();
      })
      .Case<plan::SignalOp, plan::WaitOp>([&](auto event) {
        i.op = isa<plan::SignalOp>(op) ? ROp::Signal : ROp::Wait;
        i.stream = static_cast<uint8_t>(event.getStream());
        i.event = event.getEvent();
      })
      .Case<plan::TensorAllReduceOp, plan::TensorAllGatherOp, plan::TensorReduceScatterOp>(
          [&](auto collective) {
            i.op = isa<plan::TensorAllReduceOp>(op)   ? ROp::TensorAllReduce
                   : isa<plan::TensorAllGatherOp>(op) ? ROp::TensorAllGather
                                                      : ROp::TensorReduceScatter;
            i.stream = static_cast<uint8_t>(collective.getStream());
            i.stage = collective.getStage();
            i.microbatch = collective.getMicrobatch();
            i.bytes = collective.getBytes();
          })
      .Case<plan::ExpertDispatchOp, plan::ExpertCombineOp>([&](auto allToAll) {
        i.op = isa<plan::ExpertDispatchOp>(op) ? ROp::ExpertDispatch : ROp::ExpertCombine;
        i.stream = static_cast<uint8_t>(allToAll.getStream());
        i.stage = allToAll.getStage();
        i.microbatch = allToAll.getMicrobatch();
        i.bytes = allToAll.getBytes();
        i.group = allToAll.getGroup();
        i.peerStage = allToAll.getPeerStage();
        i.peerMicrobatch = allToAll.getPeerMicrobatch();
      })
      .Case<plan::TieGradsOp>([&](plan::TieGradsOp tie) {
        i.op = ROp::TieGrads;
        i.stream = static_cast<uint8_t>(tie.getStream());
        i.stage = tie.getStage();
        i.peer = tie.getPeer();
        i.peerStage = tie.getPeerStage();
        i.bytes = tie.getBytes();
      });
  return i;
}

} // namespace

runtime::Transformer conduit::exportTransformer(pipe::TransformerAttr t) {
  runtime::Transformer x;
  x.numLayers = t.getNumLayers();
  x.hiddenSize = t.getHiddenSize();
  x.numHeads = t.getNumHeads();
  x.numKvHeads = t.getNumKvHeads();
  x.ffnHiddenSize = t.getFfnHiddenSize();
  x.seqLength = t.getSeqLength();
  x.vocabSize = t.getVocabSize();
  x.mlp = static_cast<uint8_t>(t.getMlp());
  x.norm = static_cast<uint8_t>(t.getNorm());
  x.position = static_cast<uint8_t>(t.getPosition());
  x.tieEmbeddings = t.getTieEmbeddings();
  x.bias = static_cast<uint8_t>(t.getBias());
  x.ropeTheta = t.getRopeTheta();
  x.normEps = t.getNormEps();
  x.headDim = t.getHeadDim();
  x.qkNorm = t.getQkNorm();
  x.mtpLayers = t.getMtpLayers();
  // The modules' weight, which a plan states with modules only.
  x.mtpLossCoefficient = x.mtpLayers > 0 ? static_cast<double>(t.getMtpLossCoefficient()) : 0;
  if (pipe::LatentAttentionAttr mla = t.getLatentAttention()) {
    x.qLoraRank = mla.getQLoraRank();
    x.kvLoraRank = mla.getKvLoraRank();
    x.qkNopeHeadDim = mla.getQkNopeHeadDim();
    x.qkRopeHeadDim = mla.getQkRopeHeadDim();
    x.vHeadDim = mla.getVHeadDim();
    x.ropeInterleave = mla.getRopeInterleave();
  }
  if (pipe::MoeAttr moe = t.getMoe()) {
    x.numExperts = moe.getNumExperts();
    x.topK = moe.getTopK();
    x.expertFfnHiddenSize = moe.getExpertFfnHiddenSize();
    x.router = static_cast<uint8_t>(moe.getRouter());
    x.normalizeTopK = moe.getNormalizeTopK();
    x.auxLossCoefficient = moe.getAuxLossCoefficient();
    x.zLossCoefficient = moe.getZLossCoefficient();
    x.dropByWeight = moe.getDropPolicy() == pipe::DropPolicy::Probs;
    x.sharedExperts = moe.getSharedExperts();
    x.sharedFfnHiddenSize = moe.getSharedFfnHiddenSize();
    x.sharedExpertGate = moe.getSharedExpertGate();
    x.denseLayers = moe.getDenseLayers();
    x.capacityFactor = moe.getCapacityFactor();
    x.imbalance = moe.getImbalance();
    x.routerGroups = moe.getRouterGroups();
    x.routerGroupTopK = moe.getRouterGroupTopK();
    x.dispatch = static_cast<uint8_t>(moe.getDispatch());
    x.fp8Dispatch = moe.getFp8Dispatch();
    x.biasUpdateRate = moe.getBiasUpdateRate();
    x.routedScalingFactor = moe.getRoutedScalingFactor();
  }
  if (pipe::RopeScalingAttr rope = t.getRopeScaling()) {
    runtime::RopeScaling &r = x.ropeScaling;
    r.type = static_cast<runtime::RopeType>(rope.getRopeType());
    r.factor = rope.getFactor();
    r.originalPositions = rope.getOriginalMaxPositionEmbeddings();
    r.lowFreqFactor = rope.getLowFreqFactor();
    r.highFreqFactor = rope.getHighFreqFactor();
    r.betaFast = rope.getBetaFast();
    r.betaSlow = rope.getBetaSlow();
    r.truncate = rope.getTruncate();
    r.attentionFactor = rope.getAttentionFactor();
    r.mscaleAllDim = rope.getMscaleAllDim();
  }
  return x;
}

runtime::Plan conduit::exportPlan(plan::ProgramOp program) {
  runtime::Plan out;
  out.name = program.getSymName().str();
  out.source = program.getSource() ? program.getSource()->str() : "";
  out.config = exportConfig(program);
  if (std::optional<pipe::TransformerAttr> t = program.getArchitecture())
    out.transformer = exportTransformer(*t);
  for (plan::LayerOp layer : program.getLayers()) {
    runtime::Layer &l = out.layers.emplace_back();
    l.name = layer.getName().str();
    l.kind = static_cast<runtime::LayerKind>(layer.getKind());
    l.params = layer.getParams();
    l.fwdFlops = layer.getFwdFlops();
    l.bwdFlops = layer.getBwdFlops();
    l.bwdWeightFlops = layer.getBwdWeightFlops();
    l.activationBytes = layer.getActivationBytes();
    l.checkpointBytes = layer.getCheckpointBytes();
    l.outputBytes = layer.getOutputBytes();
    l.expertParams = layer.getExpertParams().value_or(0);
  }
  for (plan::StageOp stage : program.getStages()) {
    llvm::ArrayRef<int64_t> samples = stage.getSamples();
    out.stages.push_back(
        {static_cast<int32_t>(stage.getIndex()), static_cast<int32_t>(stage.getRank()),
         static_cast<int32_t>(stage.getFirstLayer()), static_cast<int32_t>(stage.getEndLayer()),
         stage.getParams(), std::vector<int64_t>(samples.begin(), samples.end())});
  }
  for (Attribute group : program.getGroups()) {
    llvm::ArrayRef<int64_t> ranks = cast<DenseI64ArrayAttr>(group).asArrayRef();
    out.groups.push_back({std::vector<int32_t>(ranks.begin(), ranks.end())});
  }
  for (plan::RankOp rank : program.getRanks()) {
    runtime::RankProgram r;
    r.rank = static_cast<int32_t>(rank.getRank());
    r.events = static_cast<int32_t>(rank.getEvents());
    r.slots.assign(rank.getSlots().begin(), rank.getSlots().end());
    r.peakMemoryBytes = rank.getPeakMemory().value_or(0);
    mlir::Block &body = rank.getBody().front();
    // One allocation of the final size: a plan's instructions are most of its bytes.
    r.instructions.reserve(body.getOperations().size());
    for (Operation &op : body)
      r.instructions.push_back(exportInstruction(op));
    out.ranks.push_back(std::move(r));
  }
  return out;
}

void conduit::importInstructions(OpBuilder &b, Location loc,
                                 llvm::ArrayRef<Instruction> instructions) {
  for (const Instruction &i : instructions) {
    const auto transfer = i.kind == runtime::Transfer::Activation ? pipe::TransferKind::Activation
                                                                  : pipe::TransferKind::Gradient;
    switch (i.op) {
    case ROp::Forward:
      plan::ForwardOp::create(b, loc, i.stage, i.microbatch, i.slot, i.stream,
                              (i.flags & Instruction::kPaired) != 0);
      break;
    case ROp::Backward:
      plan::BackwardOp::create(b, loc, i.stage, i.microbatch, i.slot, i.stream);
      break;
    case ROp::BackwardInput:
      plan::BackwardInputOp::create(b, loc, i.stage, i.microbatch, i.slot, i.stream);
      break;
    case ROp::BackwardWeight:
      plan::BackwardWeightOp::create(b, loc, i.stage, i.microbatch, i.slot, i.stream);
      break;
    case ROp::Send:
      plan::SendOp::create(b, loc, transfer, i.stage, i.microbatch, i.peer, i.peerStage,
                           i.peerMicrobatch, i.begin, i.end, i.bytes, i.slot, i.batch, i.stream);
      break;
    case ROp::Recv:
      plan::RecvOp::create(b, loc, transfer, i.stage, i.microbatch, i.peer, i.peerStage,
                           i.peerMicrobatch, i.begin, i.end, i.bytes, i.slot, i.batch, i.stream);
      break;
    case ROp::AllGather:
      plan::AllGatherOp::create(b, loc, i.stage, i.bytes, i.group, i.stream);
      break;
    case ROp::ReduceScatter:
      plan::ReduceScatterOp::create(b, loc, i.stage, i.bytes, i.group, i.stream);
      break;
    case ROp::AllReduce:
      plan::AllReduceOp::create(b, loc, i.stage, i.bytes, i.group, i.stream);
      break;
    case ROp::Free:
      plan::FreeOp::create(b, loc, i.stage, i.stream);
      break;
    case ROp::OptimizerStep:
      plan::OptimizerStepOp::create(b, loc, i.stage, i.stream);
      break;
    case ROp::Signal:
      plan::SignalOp::create(b, loc, i.event, i.stream);
      break;
    case ROp::Wait:
      plan::WaitOp::create(b, loc, i.event, i.stream);
      break;
    case ROp::TieGrads:
      plan::TieGradsOp::create(b, loc, i.stage, i.peer, i.peerStage, i.bytes, i.stream);
      break;
    case ROp::TensorAllReduce:
      plan::TensorAllReduceOp::create(b, loc, i.stage, i.microbatch, i.bytes, i.stream);
      break;
    case ROp::TensorAllGather:
      plan::TensorAllGatherOp::create(b, loc, i.stage, i.microbatch, i.bytes, i.stream);
      break;
    case ROp::TensorReduceScatter:
      plan::TensorReduceScatterOp::create(b, loc, i.stage, i.microbatch, i.bytes, i.stream);
      break;
    case ROp::ExpertDispatch:
      plan::ExpertDispatchOp::create(b, loc, i.stage, i.microbatch, i.bytes, i.group, i.peerStage,
                                     i.peerMicrobatch, i.stream);
      break;
    case ROp::ExpertCombine:
      plan::ExpertCombineOp::create(b, loc, i.stage, i.microbatch, i.bytes, i.group, i.peerStage,
                                    i.peerMicrobatch, i.stream);
      break;
    }
  }
}

std::vector<std::vector<Operation *>> conduit::planInstructionOps(plan::ProgramOp program) {
  std::vector<std::vector<Operation *>> ops;
  for (plan::RankOp rank : program.getRanks()) {
    std::vector<Operation *> &list = ops.emplace_back();
    for (Operation &op : rank.getBody().front())
      list.push_back(&op);
  }
  return ops;
}
