//===- PlanSweepTest.cpp - whole-pipeline plans over a sweep --------------===//
//
// Every schedule x sharding mode for P in 1..8, V in 1..4, M in 1..16, D in 1..4: the pipeline
// (with conduit-verify-plan) must accept every combination the schedule accepts, the
// collective counts must follow the placement rules, and checks written here, independent of
// the verifier, confirm per-pair FIFO matching of transfers and that every compute's inputs
// are received or produced locally.
//
//===----------------------------------------------------------------------===//

#include "compiler/ImportJob.h"
#include "compiler/Registration.h"
#include "dialects/plan/PlanOps.h"
#include "passes/PassUtils.h"
#include "passes/Pipeline.h"
#include "passes/PlanExport.h"
#include "scheduling/Schedulers.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

using namespace conduit;
using runtime::Instruction;
using runtime::Op;

namespace {

/// The job model's value for one of the dialect's: both spell their values as the job file does.
template <typename JobEnum, typename DialectEnum> JobEnum fromDialect(DialectEnum value) {
  return *parseEnum<JobEnum>(std::string_view(pipe::stringifyEnum(value)));
}

Job sweepJob(int64_t p, int64_t v, int64_t m, int64_t d, pipe::ScheduleKind schedule,
             pipe::Sharding sharding) {
  Job job;
  job.path = "sweep.json";
  job.name = "sweep";
  job.model.kind = "layers";
  for (int64_t l = 0; l < p * v; ++l) {
    LayerSpec &layer = job.model.layers.emplace_back();
    layer.name = "l" + std::to_string(l);
    layer.params = 1000 + 10 * l;
    layer.fwdFlops = 1e9;
    layer.bwdFlops = 2e9;
    layer.bwdWeightFlops = 1e9;
    layer.activationBytes = 4096;
    layer.checkpointBytes = 1024;
    layer.outputBytes = 1024;
  }
  ParallelismSpec &par = job.parallelism;
  par.pipeline = p;
  par.data = d;
  par.stagesPerDevice = v;
  par.schedule = fromDialect<runtime::Schedule>(schedule);
  par.groupSize = p;
  par.microbatches = m;
  par.microbatchSize = 1;
  par.sharding = fromDialect<runtime::Sharding>(sharding);
  job.cluster = {"a100-80gb", 312e12, 0.5, 2.039e12, 85899345920, 8, 300e9, 25e9, 1e-5, 0, "", {}};
  return job;
}

/// Whether the scheduling library accepts the combination (equal micro-batches).
bool scheduleAccepts(int64_t p, int64_t v, int64_t m, pipe::ScheduleKind kind,
                     sched::Placement placement = sched::Placement::Loop, bool split = false) {
  llvm::Expected<std::vector<int64_t>> ranks = sched::placeStages(p * v, p, placement);
  if (!ranks) {
    llvm::consumeError(ranks.takeError());
    return false;
  }
  sched::ScheduleProblem problem(
      p, *ranks, std::vector<std::vector<int64_t>>(p * v, sched::equalBoundaries(m, 1)));
  llvm::Expected<sched::Schedule> s = runScheduler(kind, problem, p, split);
  if (s)
    return true;
  llvm::consumeError(s.takeError());
  return false;
}

/// Fewest all-gathers for a sequence of stage runs with `window` residents (Belady), computed
/// here independently of the pass.
int64_t beladyGathers(const std::vector<int32_t> &runs, size_t window) {
  std::set<int32_t> resident;
  int64_t gathers = 0;
  for (size_t k = 0; k < runs.size(); ++k) {
    if (resident.count(runs[k]))
      continue;
    ++gathers;
    if (resident.size() == window) {
      int32_t victim = *resident.begin();
      size_t furthest = 0;
      for (int32_t stage : resident) {
        size_t next = k + 1;
        while (next < runs.size() && runs[next] != stage)
          ++next;
        if (next >= furthest)
          furthest = next, victim = stage;
      }
      resident.erase(victim);
    }
    resident.insert(runs[k]);
  }
  return gathers;
}

/// Independent checks of a plan: per-pair FIFO matching and input completeness.
void checkPlan(const runtime::Plan &plan, const std::string &where) {
  // Matching: the k-th send from a to b and the k-th receive on b from a agree.
  std::map<std::pair<int32_t, int32_t>, std::vector<const Instruction *>> sends, recvs;
  for (const runtime::RankProgram &rank : plan.ranks)
    for (const Instruction &i : rank.instructions) {
      if (i.op == Op::Send)
        sends[{rank.rank, i.peer}].push_back(&i);
      if (i.op == Op::Recv)
        recvs[{i.peer, rank.rank}].push_back(&i);
    }
  ASSERT_EQ(sends.size(), recvs.size()) << where;
  for (auto &[pair, list] : sends) {
    const std::vector<const Instruction *> &other = recvs[pair];
    ASSERT_EQ(list.size(), other.size()) << where;
    for (size_t k = 0; k < list.size(); ++k) {
      EXPECT_EQ(list[k]->kind, other[k]->kind) << where;
      EXPECT_EQ(list[k]->stage, other[k]->peerStage) << where;
      EXPECT_EQ(list[k]->microbatch, other[k]->peerMicrobatch) << where;
      EXPECT_EQ(list[k]->begin, other[k]->begin) << where;
      EXPECT_EQ(list[k]->bytes, other[k]->bytes) << where;
    }
  }
  // Completeness: one forward and one backward (whole, or an input gradient and then a weight
  // gradient) per (stage, micro-batch); inputs from another rank are received, as pieces that
  // exactly cover the micro-batch, before the compute.
  enum { kForward = 1, kBackward = 0, kWeight = 2 }; // kBackward: a whole or input gradient
  for (const runtime::RankProgram &rank : plan.ranks) {
    std::map<std::tuple<int32_t, int32_t, int>, int64_t> covered;
    std::set<std::tuple<int32_t, int32_t, int>> computed;
    std::set<std::pair<int32_t, int32_t>> split;
    for (const Instruction &i : rank.instructions) {
      if (i.op == Op::Recv)
        covered[{i.stage, i.microbatch, int(i.kind)}] += i.end - i.begin;
      if (!i.isCompute())
        continue;
      if (i.op == Op::BackwardWeight) {
        EXPECT_TRUE(split.erase({i.stage, i.microbatch})) << where << ": a W without its I";
        EXPECT_TRUE(computed.insert({i.stage, i.microbatch, kWeight}).second) << where;
        continue;
      }
      if (i.op == Op::BackwardInput)
        split.insert({i.stage, i.microbatch});
      bool forward = i.op == Op::Forward;
      EXPECT_TRUE(computed.insert({i.stage, i.microbatch, forward ? kForward : kBackward}).second)
          << where;
      int32_t from = forward ? i.stage - 1 : i.stage + 1;
      if (from < 0 || from >= static_cast<int32_t>(plan.stages.size()) ||
          plan.stages[from].rank == rank.rank)
        continue;
      const runtime::Stage &stage = plan.stages[i.stage];
      int64_t samples = stage.samples[i.microbatch + 1] - stage.samples[i.microbatch];
      EXPECT_EQ((covered[{i.stage, i.microbatch, forward ? 0 : 1}]), samples)
          << where << ": rank " << rank.rank << " " << runtime::describe(i);
    }
    EXPECT_TRUE(split.empty()) << where << ": an I without its W";
    for (const runtime::Stage &stage : plan.stages) {
      if (stage.rank != rank.rank)
        continue;
      for (int32_t m = 0; m < stage.numMicrobatches(); ++m) {
        EXPECT_TRUE(computed.count({stage.index, m, kForward})) << where << ": no forward";
        EXPECT_TRUE(computed.count({stage.index, m, kBackward})) << where << ": no backward";
      }
    }
  }
}

/// A context with Conduit's dialects whose diagnostics are kept, the last one in lastError.
struct Compiler {
  Compiler()
      : context(registry()), handler(&context, [this](mlir::Diagnostic &diag) {
          lastError = diag.str();
          return mlir::success();
        }) {}
  static mlir::DialectRegistry registry() {
    mlir::DialectRegistry r;
    registerDialects(r);
    return r;
  }
  /// `job` through the whole pipeline into `out`; false, with the diagnostic in lastError, if
  /// it fails.
  bool compile(const Job &job, runtime::Plan &out) {
    mlir::OwningOpRef<mlir::ModuleOp> module = importJob(job, context);
    mlir::PassManager pm(&context);
    buildConduitPipeline(pm, {});
    if (mlir::failed(pm.run(*module)))
      return false;
    out = exportPlan(*module->getOps<plan::ProgramOp>().begin());
    return true;
  }
  mlir::MLIRContext context;
  std::string lastError;
  mlir::ScopedDiagnosticHandler handler;
};

/// Sanitizer builds run the compiler about ten times slower: they compile every fifth
/// configuration of the grid (all its shapes still appear, in other combinations), so that
/// `scripts/test --sanitize` finishes; the Release build compiles all of it.
#if defined(__SANITIZE_ADDRESS__)
constexpr int64_t kSweepStride = 5;
#else
constexpr int64_t kSweepStride = 1;
#endif

TEST(PlanSweep, EveryScheduleAndShardingVerifies) {
  Compiler compiler;
  mlir::MLIRContext &context = compiler.context;
  const std::string &lastError = compiler.lastError;
  int64_t compiled = 0, configuration = 0;
  for (int64_t p = 1; p <= 8; ++p)
    for (int64_t v = 1; v <= 4; ++v)
      for (int64_t m = 1; m <= 16; ++m)
        for (int64_t d = 1; d <= 4; ++d)
          for (pipe::ScheduleKind kind :
               {pipe::ScheduleKind::GPipe, pipe::ScheduleKind::OneFOneB,
                pipe::ScheduleKind::DepthFirst, pipe::ScheduleKind::BreadthFirst}) {
            if (!scheduleAccepts(p, v, m, kind))
              continue;
            for (pipe::Sharding sharding : {pipe::Sharding::None, pipe::Sharding::Optimizer,
                                            pipe::Sharding::Gradients, pipe::Sharding::Full}) {
              if (configuration++ % kSweepStride != 0)
                continue;
              std::string where = stringifyScheduleKind(kind).str() + " " +
                                  stringifySharding(sharding).str() + " P=" + std::to_string(p) +
                                  " V=" + std::to_string(v) + " M=" + std::to_string(m) +
                                  " D=" + std::to_string(d);
              mlir::OwningOpRef<mlir::ModuleOp> module =
                  importJob(sweepJob(p, v, m, d, kind, sharding), context);
              mlir::PassManager pm(&context);
              buildConduitPipeline(pm, {});
              ASSERT_TRUE(mlir::succeeded(pm.run(*module))) << where << ": " << lastError;
              ++compiled;
              plan::ProgramOp program = *module->getOps<plan::ProgramOp>().begin();
              runtime::Plan plan = exportPlan(program);
              checkPlan(plan, where);

              // Collective counts per rank.
              for (const runtime::RankProgram &rank : plan.ranks) {
                int64_t gathers = 0, reduceScatters = 0, allReduces = 0;
                std::vector<int32_t> runs;
                for (const Instruction &i : rank.instructions) {
                  gathers += i.op == Op::AllGather;
                  reduceScatters += i.op == Op::ReduceScatter;
                  allReduces += i.op == Op::AllReduce;
                  if (i.isCompute() && (runs.empty() || runs.back() != i.stage))
                    runs.push_back(i.stage);
                }
                if (d == 1) {
                  EXPECT_EQ(gathers + reduceScatters + allReduces, 0) << where;
                  continue;
                }
                EXPECT_EQ(allReduces, sharding == pipe::Sharding::None ? v : 0) << where;
                EXPECT_EQ(reduceScatters, sharding == pipe::Sharding::None ? 0 : v) << where;
                if (sharding == pipe::Sharding::Full) {
                  EXPECT_EQ(gathers, beladyGathers(runs, 2)) << where;
                  if (kind == pipe::ScheduleKind::BreadthFirst) {
                    EXPECT_EQ(gathers, v == 1 ? 1 : 2 * v - 2) << where; // independent of M
                  }
                } else if (sharding == pipe::Sharding::None) {
                  EXPECT_EQ(gathers, 0) << where;
                } else {
                  EXPECT_EQ(gathers, v) << where; // the updated parameters, once per stage
                }
              }
            }
          }
  EXPECT_GT(compiled, 10000 / kSweepStride);
}

} // namespace

namespace {

TEST(PlanSweep, SplitBackwardSchedulesVerify) {
  // The zero-bubble schedules, and the classic ones with split_backward, on both placements
  // where they allow it: the pipeline must accept every combination the schedule accepts, with
  // one reduction per stage after its last weight gradient.
  struct Variant {
    pipe::ScheduleKind kind;
    pipe::Placement placement;
    std::vector<int64_t> stagesPerDevice;
  };
  using K = pipe::ScheduleKind;
  const pipe::Placement loop = pipe::Placement::Loop, vShape = pipe::Placement::V;
  const Variant variants[] = {
      {K::ZeroBubbleH1, loop, {1}},   {K::InterleavedZeroBubble, loop, {2, 3, 4}},
      {K::ZeroBubbleV, vShape, {2}},  {K::DualPipeV, vShape, {2}},
      {K::GPipe, loop, {1}},          {K::OneFOneB, loop, {1}},
      {K::DepthFirst, loop, {2, 4}},  {K::BreadthFirst, loop, {1, 2, 4}},
      {K::BreadthFirst, vShape, {2}},
  };
  Compiler compiler;
  const std::string &lastError = compiler.lastError;
  int64_t compiled = 0, configuration = 0;
  for (const Variant &variant : variants)
    for (int64_t v : variant.stagesPerDevice)
      for (int64_t p = 1; p <= 8; ++p)
        for (int64_t m = 1; m <= 16; ++m) {
          sched::Placement placement =
              variant.placement == vShape ? sched::Placement::V : sched::Placement::Loop;
          if (!scheduleAccepts(p, v, m, variant.kind, placement, /*split=*/true))
            continue;
          for (int64_t d : {1, 2})
            for (pipe::Sharding sharding : {pipe::Sharding::None, pipe::Sharding::Optimizer,
                                            pipe::Sharding::Gradients, pipe::Sharding::Full}) {
              if (configuration++ % kSweepStride != 0)
                continue;
              std::string where = stringifyScheduleKind(variant.kind).str() + " " +
                                  stringifyPlacement(variant.placement).str() + " split " +
                                  stringifySharding(sharding).str() + " P=" + std::to_string(p) +
                                  " V=" + std::to_string(v) + " M=" + std::to_string(m) +
                                  " D=" + std::to_string(d);
              Job job = sweepJob(p, v, m, d, variant.kind, sharding);
              job.parallelism.placement = fromDialect<Placement>(variant.placement);
              job.parallelism.splitBackward = true;
              runtime::Plan plan;
              ASSERT_TRUE(compiler.compile(job, plan)) << where << ": " << lastError;
              ++compiled;
              EXPECT_TRUE(plan.config.splitBackward) << where;
              checkPlan(plan, where);
              for (const runtime::RankProgram &rank : plan.ranks) {
                int64_t reductions = 0, weights = 0, wholes = 0;
                for (const Instruction &i : rank.instructions) {
                  reductions += i.op == Op::ReduceScatter || i.op == Op::AllReduce;
                  weights += i.op == Op::BackwardWeight;
                  wholes += i.op == Op::Backward;
                }
                EXPECT_EQ(wholes, 0) << where;
                EXPECT_EQ(weights, v * m) << where;
                EXPECT_EQ(reductions, d > 1 ? v : 0) << where;
              }
            }
        }
  EXPECT_GT(compiled, 5000 / kSweepStride);
}

TEST(PlanSweep, ReducingEachRunVerifies) {
  // Sharded gradients reduced after each run of a stage's backwards, whole and split, on every
  // schedule family: the pipeline (placement verifier, lowering, simulator) accepts them all,
  // with one reduce-scatter per run of a rank's gradients on one stage holding a backward or
  // weight gradient, counted here independently of the pass.
  using K = pipe::ScheduleKind;
  struct Variant {
    K kind;
    pipe::Placement placement;
    int64_t v;
    bool split;
  };
  const pipe::Placement loop = pipe::Placement::Loop, vShape = pipe::Placement::V;
  const Variant variants[] = {{K::GPipe, loop, 1, false},
                              {K::OneFOneB, loop, 1, false},
                              {K::DepthFirst, loop, 2, false},
                              {K::DepthFirst, loop, 3, false},
                              {K::BreadthFirst, loop, 2, false},
                              {K::DepthFirst, loop, 2, true},
                              {K::InterleavedZeroBubble, loop, 2, true},
                              {K::ZeroBubbleV, vShape, 2, true},
                              {K::DualPipeV, vShape, 2, true},
                              {K::ZeroBubbleH1, loop, 1, true}};
  Compiler compiler;
  const std::string &lastError = compiler.lastError;
  int64_t compiled = 0, configuration = 0, moreThanV = 0;
  for (const Variant &variant : variants)
    for (int64_t p = 1; p <= 4; ++p)
      for (int64_t m = 1; m <= 8; ++m) {
        sched::Placement placement =
            variant.placement == vShape ? sched::Placement::V : sched::Placement::Loop;
        if (!scheduleAccepts(p, variant.v, m, variant.kind, placement, variant.split))
          continue;
        for (pipe::Sharding sharding : {pipe::Sharding::Gradients, pipe::Sharding::Full}) {
          if (configuration++ % kSweepStride != 0)
            continue;
          std::string where = stringifyScheduleKind(variant.kind).str() +
                              (variant.split ? " split " : " ") +
                              stringifySharding(sharding).str() + " P=" + std::to_string(p) +
                              " V=" + std::to_string(variant.v) + " M=" + std::to_string(m);
          Job job = sweepJob(p, variant.v, m, 2, variant.kind, sharding);
          job.parallelism.placement = fromDialect<Placement>(variant.placement);
          job.parallelism.splitBackward = variant.split;
          job.parallelism.gradientReduction = runtime::GradientReduction::Run;
          runtime::Plan plan;
          ASSERT_TRUE(compiler.compile(job, plan)) << where << ": " << lastError;
          ++compiled;
          EXPECT_EQ(plan.config.gradientReduction, runtime::GradientReduction::Run) << where;
          checkPlan(plan, where);
          for (const runtime::RankProgram &rank : plan.ranks) {
            int64_t reductions = 0, runs = 0;
            int32_t stage = -1;
            bool completes = false;
            for (const Instruction &i : rank.instructions) {
              reductions += i.op == Op::ReduceScatter;
              if (!i.isCompute() || i.op == Op::Forward)
                continue;
              if (i.stage != stage) {
                runs += completes;
                stage = i.stage;
                completes = false;
              }
              completes |= i.op == Op::Backward || i.op == Op::BackwardWeight;
            }
            runs += completes;
            EXPECT_EQ(reductions, runs) << where;
            EXPECT_GE(reductions, variant.v) << where;
            moreThanV += reductions > variant.v;
          }
        }
      }
  EXPECT_GT(compiled, 200 / kSweepStride);
  EXPECT_GT(moreThanV, 0);
}

TEST(PlanSweep, UnequalPartitionsVerify) {
  Compiler compiler;
  mlir::MLIRContext &context = compiler.context;
  const std::string &lastError = compiler.lastError;
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    int64_t p = 1 + rng() % 4, v = 1 + rng() % 3, d = 1 + rng() % 3, batch = 2 + rng() % 10;
    pipe::ScheduleKind kind =
        v == 1 ? (rng() % 2 ? pipe::ScheduleKind::GPipe : pipe::ScheduleKind::OneFOneB)
               : pipe::ScheduleKind::BreadthFirst;
    pipe::Sharding sharding = static_cast<pipe::Sharding>(rng() % 4);
    Job job = sweepJob(p, v, batch, d, kind, sharding);
    for (int64_t s = 0; s < p * v; ++s) {
      std::vector<int64_t> sizes;
      for (int64_t left = batch; left > 0;) {
        int64_t size = std::min<int64_t>(left, 1 + rng() % 4);
        sizes.push_back(size);
        left -= size;
      }
      job.parallelism.microbatchPartitions.push_back(sizes);
    }
    std::string where = "trial " + std::to_string(trial);
    mlir::OwningOpRef<mlir::ModuleOp> module = importJob(job, context);
    mlir::PassManager pm(&context);
    buildConduitPipeline(pm, {});
    ASSERT_TRUE(mlir::succeeded(pm.run(*module))) << where << ": " << lastError;
    checkPlan(exportPlan(*module->getOps<plan::ProgramOp>().begin()), where);
  }
}

} // namespace
