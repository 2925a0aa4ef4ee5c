//===- PlanRuns.cpp - small plans trained on the real backends ---------------===//

#include "tests/unit/runtime/exec/PlanRuns.h"

#include "runtime/backend/cpu/CpuBackend.h"
#include "runtime/exec/Executor.h"
#include "tests/unit/runtime/GptPlan.h"

#include <thread>

namespace conduit::runtime::testing {

model::GptShape pipelineShape() {
  model::GptShape s;
  s.blocks = 2;
  s.hidden = 8;
  s.heads = 2;
  s.ffn = 16;
  s.seq = 4;
  s.vocab = 16;
  return s;
}

Instruction onStage(Op op, int32_t stage, int32_t mb, int32_t slot) {
  Instruction i;
  i.op = op;
  i.stream = kComputeStream;
  i.stage = stage;
  i.microbatch = mb;
  i.slot = slot;
  return i;
}

namespace {

/// A send or receive of micro-batch `mb` between stage 0 (rank 0) and stage 1 (rank 1), on
/// the compute stream (the programs below are sequential), in transfer batch `batch`.
Instruction between(Op op, Transfer kind, int32_t rank, int32_t mb, int32_t batch = -1) {
  Instruction i = onStage(op, rank, mb, -1);
  i.kind = kind;
  i.peer = 1 - rank;
  i.peerStage = 1 - rank;
  i.peerMicrobatch = mb;
  i.begin = mb * kSamples;
  i.end = (mb + 1) * kSamples;
  i.bytes = kSamples * pipelineShape().seq * pipelineShape().hidden * int64_t(sizeof(float));
  i.batch = batch;
  if (op == Op::Recv)
    i.slot = 0;
  return i;
}

} // namespace

Plan tinyPlan(const std::vector<std::pair<int32_t, int32_t>> &stages, int64_t microbatches) {
  Plan plan = model::planFor(pipelineShape());
  plan.name = "split";
  Config &c = plan.config;
  c.pipeline = static_cast<int32_t>(stages.size());
  c.microbatches = microbatches;
  c.microbatchSize = kSamples;
  c.tokensPerSample = pipelineShape().seq;
  c.dtype = DType::FP32;
  c.seed = 5;
  c.learningRate = 1e-2;
  std::vector<int64_t> cuts;
  for (int64_t mb = 0; mb <= microbatches; ++mb)
    cuts.push_back(mb * kSamples);
  for (size_t r = 0; r < stages.size(); ++r) {
    Stage stage{static_cast<int32_t>(r),
                static_cast<int32_t>(r),
                stages[r].first,
                stages[r].second,
                0,
                cuts};
    for (int32_t l = stage.firstLayer; l < stage.endLayer; ++l)
      stage.params += plan.layers[l].params;
    plan.stages.push_back(stage);
    plan.groups.push_back({{static_cast<int32_t>(r)}});
    plan.ranks.push_back({static_cast<int32_t>(r), 0, {}, {}});
  }
  return plan;
}

Plan pipelinePlan(bool split, const std::vector<int32_t> &lastWeights) {
  Plan plan = tinyPlan({{0, 2}, {2, 4}}, 3);
  const int64_t slot = between(Op::Recv, Transfer::Activation, 0, 0).bytes;
  const Op backward = split ? Op::BackwardInput : Op::Backward;
  auto weights = [&](std::vector<Instruction> &program, int32_t stage, std::vector<int32_t> mbs) {
    if (split)
      for (int32_t mb : mbs)
        program.push_back(onStage(Op::BackwardWeight, stage, mb));
  };
  auto act = [](Op op, int32_t rank, int32_t mb, int32_t batch = -1) {
    return between(op, Transfer::Activation, rank, mb, batch);
  };
  auto grad = [](Op op, int32_t rank, int32_t mb, int32_t batch = -1) {
    return between(op, Transfer::Gradient, rank, mb, batch);
  };
  std::vector<Instruction> &r0 = plan.ranks[0].instructions;
  plan.ranks[0].slots = {slot};
  r0 = {onStage(Op::Forward, 0, 0), act(Op::Send, 0, 0),     onStage(Op::Forward, 0, 1),
        act(Op::Send, 0, 1, 0),     grad(Op::Recv, 0, 0, 0), onStage(backward, 0, 0, 0),
        onStage(Op::Forward, 0, 2), act(Op::Send, 0, 2, 1),  grad(Op::Recv, 0, 1, 1)};
  weights(r0, 0, {0});
  r0.push_back(onStage(backward, 0, 1, 0));
  r0.push_back(grad(Op::Recv, 0, 2));
  r0.push_back(onStage(backward, 0, 2, 0));
  weights(r0, 0, lastWeights);
  r0.push_back(onStage(Op::OptimizerStep, 0));

  std::vector<Instruction> &r1 = plan.ranks[1].instructions;
  plan.ranks[1].slots = {slot};
  r1 = {act(Op::Recv, 1, 0),     onStage(Op::Forward, 1, 0, 0), onStage(backward, 1, 0),
        grad(Op::Send, 1, 0, 0), act(Op::Recv, 1, 1, 0),        onStage(Op::Forward, 1, 1, 0)};
  weights(r1, 1, {0});
  r1.push_back(onStage(backward, 1, 1));
  r1.push_back(grad(Op::Send, 1, 1, 1));
  r1.push_back(act(Op::Recv, 1, 2, 1));
  r1.push_back(onStage(Op::Forward, 1, 2, 0));
  r1.push_back(onStage(backward, 1, 2));
  r1.push_back(grad(Op::Send, 1, 2));
  weights(r1, 1, lastWeights);
  r1.push_back(onStage(Op::OptimizerStep, 1));
  return plan;
}

Plan moePlan(bool split, const std::vector<int32_t> &lastWeights) {
  Plan plan = pipelinePlan(split, lastWeights);
  model::GptShape s = pipelineShape();
  s.experts = 4;
  s.topK = 2;
  s.expertFfn = 6;
  s.sharedFfn = 4;
  s.denseBlocks = 1;
  s.normalizeTopK = true;
  s.auxLossCoefficient = 0.01;
  s.zLossCoefficient = 0.001;
  const Plan moe = model::planFor(s);
  plan.transformer = moe.transformer;
  plan.layers = moe.layers;
  for (Stage &stage : plan.stages) {
    stage.params = 0;
    for (int32_t l = stage.firstLayer; l < stage.endLayer; ++l)
      stage.params += plan.layers[l].params;
  }
  return plan;
}

void PrintTo(const BackendKind &kind, std::ostream *out) { *out << kind.name; }

BackendKind cpuBackend() {
  return {
      "cpu", [] { return std::make_unique<HostLoopbackMemory>(); },
      [](int64_t rank, int64_t ranks, bool measure, LoopbackHub &hub) -> std::unique_ptr<Backend> {
        return std::make_unique<CpuBackend>(
            rank, ranks, measure, [&hub, rank](const Plan &) { return hub.transport(rank); });
      },
      [] { return std::string(); }};
}

std::vector<RankRun> train(const BackendKind &kind, const Plan &plan, int64_t first, int64_t steps,
                           const std::vector<std::vector<StageState>> *resume, bool measure) {
  const int64_t ranks = plan.config.worldSize();
  LoopbackHub hub(plan, /*timeoutS=*/30, kind.memory());
  std::vector<RankRun> runs(ranks);
  std::vector<std::thread> threads;
  for (int64_t rank = 0; rank < ranks; ++rank)
    threads.emplace_back([&, rank] {
      RankRun &run = runs[rank];
      std::unique_ptr<Backend> backend = kind.make(rank, ranks, measure, hub);
      run.status = [&]() -> absl::Status {
        CONDUIT_RETURN_IF_ERROR(backend->validate(plan));
        CONDUIT_RETURN_IF_ERROR(backend->initialise(plan));
        if (resume)
          CONDUIT_RETURN_IF_ERROR(backend->restore((*resume)[rank]));
        ExecutorOptions options;
        options.peerTimeoutS = 30;
        options.record = true;
        const RankPosition where = RankPosition::of(plan.config, rank);
        Executor executor(plan, where.pipelineRank, where.replica, *backend, options);
        for (int64_t step = first; step < first + steps; ++step) {
          CONDUIT_ASSIGN_OR_RETURN(StepOutcome outcome, executor.runStep(step));
          run.losses.push_back(outcome.loss);
          run.auxLosses.push_back(outcome.auxLoss);
          run.zLosses.push_back(outcome.zLoss);
        }
        CONDUIT_ASSIGN_OR_RETURN(run.params, backend->stageParameters());
        CONDUIT_ASSIGN_OR_RETURN(run.state, backend->snapshot());
        run.timings = backend->layerTimings();
        run.events = executor.events();
        return absl::OkStatus();
      }();
      if (!run.status.ok())
        backend->abort(); // the other ranks' next call fails instead of waiting
    });
  for (std::thread &t : threads)
    t.join();
  return runs;
}

std::vector<int32_t> lastWeights(const BackendKind &kind) {
  return kind.name == "cpu" ? std::vector<int32_t>{2, 1} : std::vector<int32_t>{1, 2};
}

} // namespace conduit::runtime::testing
