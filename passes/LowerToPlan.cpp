//===- LowerToPlan.cpp - conduit-lower-to-plan ----------------------------===//
//
// Turns a pipe.model in the communicating phase into a plan.program and erases the model.
// Each rank's ordered body becomes one instruction list on three streams (0 compute, 1
// point-to-point, 2 collectives); every dependency between streams becomes an event, and
// received data gets buffer slots from a liveness analysis.
//
// Dependencies across streams: a send waits for its producer; a compute waits for the last
// receive of its input and for the all-gather of its stage's parameters; a receive into a
// reused slot waits for the previous occupant's consumer; an all-gather waits for the reshard
// that frees its place; a reduction waits for the stage's last backward; an optimizer step
// for its reduction; a parameter all-gather for its optimizer step. A dependency already
// implied by an earlier wait on the same stream (tracked like a vector clock of the three
// streams) needs no new event.
//
//===----------------------------------------------------------------------===//

#include "dialects/plan/PlanOps.h"
#include "passes/PassUtils.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

#include <array>
#include <map>

namespace conduit {
#define GEN_PASS_DEF_CONDUITLOWERTOPLAN
#include "passes/Passes.h.inc"
} // namespace conduit

using namespace conduit;
using namespace mlir;

namespace {

constexpr int kStreams = 3;
enum Stream : int { Compute = 0, P2P = 1, Collective = 2 };

Stream streamOf(Operation *op) {
  if (isa<pipe::SendOp, pipe::RecvOp>(op))
    return P2P;
  if (isa<pipe::UnshardOp, pipe::ReduceGradOp, pipe::GatherParamsOp>(op))
    return Collective;
  return Compute;
}

using Key = std::tuple<int32_t, int32_t, int>; // (stage, micro-batch, transfer kind)

/// The lowering of one rank.
class RankLowering {
public:
  explicit RankLowering(pipe::RankOp rank) {
    for (Operation &op : rank.getBody().front())
      ops.push_back(&op);
  }

  /// Decides slots, dependencies and events. Fails (with a diagnostic) when an op comes
  /// before what it depends on, which the communication passes never produce.
  LogicalResult analyze(int64_t dataParallel) {
    const size_t n = ops.size();
    known.assign(n, {-1, -1, -1});
    signalOf.assign(n, -1);
    waitsBefore.assign(n, {});
    slotOf.assign(n, -1);
    if (failed(assignSlots()))
      return failure();

    // Producers, consumers and stage bookkeeping, by list position.
    std::map<Key, int64_t> producer;        // compute op producing (stage, mb, kind)
    std::map<Key, int64_t> lastRecv;        // last receive feeding (stage, mb, kind)
    std::map<int32_t, int64_t> gatheredBy;  // stage -> its latest unshard
    std::map<int32_t, int64_t> lastBackward, reduction, optimizerStep;
    int64_t lastReshard = -1;
    auto lookup = [&](const auto &map, const auto &key, Operation *op,
                      const char *what) -> FailureOr<int64_t> {
      auto it = map.find(key);
      if (it == map.end())
        return op->emitOpError() << "comes before " << what;
      return it->second;
    };

    for (int64_t i = 0; i < static_cast<int64_t>(n); ++i) {
      Operation *op = ops[i];
      Stream self = streamOf(op);
      std::vector<int64_t> deps;
      if (auto f = dyn_cast<pipe::ForwardOp>(op)) {
        addInputs(deps, lastRecv, {f.getStage(), f.getMicrobatch(), 0}, gatheredBy, f.getStage());
        producer[{f.getStage(), f.getMicrobatch(), 0}] = i;
      } else if (auto b = dyn_cast<pipe::BackwardOp>(op)) {
        addInputs(deps, lastRecv, {b.getStage(), b.getMicrobatch(), 1}, gatheredBy, b.getStage());
        producer[{b.getStage(), b.getMicrobatch(), 1}] = i;
        lastBackward[b.getStage()] = i;
      } else if (auto s = dyn_cast<pipe::SendOp>(op)) {
        FailureOr<int64_t> from = lookup(producer, Key{s.getStage(), s.getMicrobatch(), int(s.getKind())},
                                         op, "the compute that produces its data");
        if (failed(from))
          return failure();
        deps.push_back(*from);
      } else if (auto r = dyn_cast<pipe::RecvOp>(op)) {
        if (int64_t previous = previousConsumer[i]; previous >= 0)
          deps.push_back(previous); // the slot's last occupant is consumed
        lastRecv[{r.getStage(), r.getMicrobatch(), int(r.getKind())}] = i;
      } else if (auto u = dyn_cast<pipe::UnshardOp>(op)) {
        if (lastReshard >= 0)
          deps.push_back(lastReshard);
        gatheredBy[u.getStage()] = i;
      } else if (isa<pipe::ReshardOp>(op)) {
        lastReshard = i;
      } else if (auto g = dyn_cast<pipe::ReduceGradOp>(op)) {
        FailureOr<int64_t> from = lookup(lastBackward, g.getStage(), op, "the stage's backwards");
        if (failed(from))
          return failure();
        deps.push_back(*from);
        reduction[g.getStage()] = i;
      } else if (auto o = dyn_cast<pipe::OptimizerStepOp>(op)) {
        if (dataParallel > 1) {
          FailureOr<int64_t> from = lookup(reduction, o.getStage(), op, "the stage's reduction");
          if (failed(from))
            return failure();
          deps.push_back(*from);
        }
        optimizerStep[o.getStage()] = i;
      } else if (auto g = dyn_cast<pipe::GatherParamsOp>(op)) {
        FailureOr<int64_t> from =
            lookup(optimizerStep, g.getStage(), op, "the stage's optimizer step");
        if (failed(from))
          return failure();
        deps.push_back(*from);
      }

      // A stream knows what its earlier instructions knew; events cover the rest.
      known[i] = streamKnown[self];
      for (int64_t dep : deps) {
        Stream other = streamOf(ops[dep]);
        if (other == self || known[i][other] >= dep)
          continue;
        if (signalOf[dep] < 0)
          signalOf[dep] = events++;
        waitsBefore[i].push_back(signalOf[dep]);
        // Waiting on the event teaches this stream what the other stream knew at that point.
        for (int s = 0; s < kStreams; ++s)
          known[i][s] = std::max(known[i][s], known[dep][s]);
      }
      known[i][self] = i;
      streamKnown[self] = known[i];
    }
    return success();
  }

  /// Emits the plan.rank.
  void emit(OpBuilder &builder, Location loc, int64_t r) {
    gatherBatches();
    auto rank = plan::RankOp::create(builder, loc, r, events, builder.getDenseI64ArrayAttr(slots));
    OpBuilder body = OpBuilder::atBlockEnd(builder.createBlock(&rank.getBody()));
    for (size_t i = 0; i < ops.size(); ++i) {
      Operation *op = ops[i];
      int32_t stream = streamOf(op);
      for (int32_t e : waitsBefore[i])
        plan::WaitOp::create(body, loc, e, stream);
      emitInstruction(body, loc, op, slotOf[i], static_cast<int32_t>(r));
      for (int32_t e : signalsAfter[i])
        plan::SignalOp::create(body, loc, e, stream);
    }
    builder.setInsertionPointAfter(rank);
  }

private:
  /// The transfers of a batch are issued together, so no signal or wait of their stream may sit
  /// between them: the waits of all members move before the first, the signals after the last.
  void gatherBatches() {
    signalsAfter.assign(ops.size(), {});
    for (size_t i = 0; i < ops.size(); ++i)
      if (signalOf[i] >= 0)
        signalsAfter[i].push_back(signalOf[i]);
    auto batchOf = [&](size_t i) -> int32_t {
      if (auto s = dyn_cast<pipe::SendOp>(ops[i]))
        return s.getBatch();
      if (auto r = dyn_cast<pipe::RecvOp>(ops[i]))
        return r.getBatch();
      return -1;
    };
    size_t first = ops.size();
    for (size_t i = 0; i < ops.size(); ++i) {
      if (streamOf(ops[i]) != P2P)
        continue;
      int32_t batch = batchOf(i);
      if (first < ops.size() && batch >= 0 && batch == batchOf(first)) {
        // A later member: its waits go to the first, the group's signals to here.
        waitsBefore[first].insert(waitsBefore[first].end(), waitsBefore[i].begin(),
                                  waitsBefore[i].end());
        waitsBefore[i].clear();
        signalsAfter[i].insert(signalsAfter[i].begin(), signalsAfter[last].begin(),
                               signalsAfter[last].end());
        signalsAfter[last].clear();
        last = i;
        continue;
      }
      first = batch >= 0 ? i : ops.size();
      last = i;
    }
  }

  /// A compute op waits for the last receive of its input and for its stage's all-gather.
  void addInputs(std::vector<int64_t> &deps, const std::map<Key, int64_t> &lastRecv, Key input,
                 const std::map<int32_t, int64_t> &gatheredBy, int32_t stage) {
    if (auto it = lastRecv.find(input); it != lastRecv.end())
      deps.push_back(it->second);
    if (auto it = gatheredBy.find(stage); it != gatheredBy.end())
      deps.push_back(it->second);
  }

  /// Every consumer that receives data gets one slot for all its pieces, live from its first
  /// receive to itself. Slots are reused once free (best fit by size, growing if needed).
  LogicalResult assignSlots() {
    const int64_t n = static_cast<int64_t>(ops.size());
    previousConsumer.assign(n, -1);
    std::map<Key, int64_t> slotFor, need, consumerAt;
    // The consumer of each received key, and the bytes it needs.
    for (int64_t i = 0; i < n; ++i) {
      if (auto r = dyn_cast<pipe::RecvOp>(ops[i]))
        need[{r.getStage(), r.getMicrobatch(), int(r.getKind())}] += r.getBytes();
      else if (auto f = dyn_cast<pipe::ForwardOp>(ops[i]))
        consumerAt[{f.getStage(), f.getMicrobatch(), 0}] = i;
      else if (auto b = dyn_cast<pipe::BackwardOp>(ops[i]))
        consumerAt[{b.getStage(), b.getMicrobatch(), 1}] = i;
    }
    std::vector<int64_t> freeAt; // per slot: position after which it is free
    std::vector<int64_t> lastConsumer;
    for (int64_t i = 0; i < n; ++i) {
      if (auto r = dyn_cast<pipe::RecvOp>(ops[i])) {
        Key key{r.getStage(), r.getMicrobatch(), int(r.getKind())};
        auto it = slotFor.find(key);
        if (it == slotFor.end()) {
          int64_t bytes = need[key], best = -1;
          // A free slot: the smallest that fits, else the largest (which grows).
          for (int64_t k = 0; k < static_cast<int64_t>(slots.size()); ++k) {
            if (freeAt[k] >= i)
              continue;
            if (best < 0) {
              best = k;
              continue;
            }
            bool fits = slots[k] >= bytes, bestFits = slots[best] >= bytes;
            if (fits != bestFits ? fits : (fits ? slots[k] < slots[best] : slots[k] > slots[best]))
              best = k;
          }
          if (best < 0) {
            best = static_cast<int64_t>(slots.size());
            slots.push_back(0);
            freeAt.push_back(-1);
            lastConsumer.push_back(-1);
          }
          slots[best] = std::max(slots[best], bytes);
          previousConsumer[i] = lastConsumer[best];
          auto consumer = consumerAt.find(key);
          if (consumer == consumerAt.end())
            return ops[i]->emitOpError("receives data that no compute on this rank consumes");
          if (consumer->second < i)
            return ops[i]->emitOpError("receives data for a compute that runs before it");
          freeAt[best] = consumer->second;
          lastConsumer[best] = consumer->second;
          it = slotFor.emplace(key, best).first;
        }
        slotOf[i] = static_cast<int32_t>(it->second);
      }
    }
    for (int64_t i = 0; i < n; ++i) {
      if (auto f = dyn_cast<pipe::ForwardOp>(ops[i])) {
        if (auto it = slotFor.find({f.getStage(), f.getMicrobatch(), 0}); it != slotFor.end())
          slotOf[i] = static_cast<int32_t>(it->second);
      } else if (auto b = dyn_cast<pipe::BackwardOp>(ops[i])) {
        if (auto it = slotFor.find({b.getStage(), b.getMicrobatch(), 1}); it != slotFor.end())
          slotOf[i] = static_cast<int32_t>(it->second);
      }
    }
    return success();
  }

  void emitInstruction(OpBuilder &b, Location loc, Operation *op, int32_t slot, int32_t group) {
    int32_t stream = streamOf(op);
    if (auto f = dyn_cast<pipe::ForwardOp>(op)) {
      plan::ForwardOp::create(b, loc, f.getStage(), f.getMicrobatch(), slot, stream);
    } else if (auto k = dyn_cast<pipe::BackwardOp>(op)) {
      plan::BackwardOp::create(b, loc, k.getStage(), k.getMicrobatch(), slot, stream);
    } else if (auto s = dyn_cast<pipe::SendOp>(op)) {
      plan::SendOp::create(b, loc, s.getKind(), s.getStage(), s.getMicrobatch(), s.getPeer(),
                           s.getPeerStage(), s.getPeerMicrobatch(), s.getBegin(), s.getEnd(),
                           s.getBytes(), -1, s.getBatch(), stream);
    } else if (auto r = dyn_cast<pipe::RecvOp>(op)) {
      plan::RecvOp::create(b, loc, r.getKind(), r.getStage(), r.getMicrobatch(), r.getPeer(),
                           r.getPeerStage(), r.getPeerMicrobatch(), r.getBegin(), r.getEnd(),
                           r.getBytes(), slot, r.getBatch(), stream);
    } else if (auto u = dyn_cast<pipe::UnshardOp>(op)) {
      plan::AllGatherOp::create(b, loc, u.getStage(), u.getBytes(), group, stream);
    } else if (auto g = dyn_cast<pipe::GatherParamsOp>(op)) {
      plan::AllGatherOp::create(b, loc, g.getStage(), g.getBytes(), group, stream);
    } else if (auto rs = dyn_cast<pipe::ReshardOp>(op)) {
      plan::FreeOp::create(b, loc, rs.getStage(), stream);
    } else if (auto g = dyn_cast<pipe::ReduceGradOp>(op)) {
      if (g.getReduction() == pipe::GradReduction::ReduceScatter)
        plan::ReduceScatterOp::create(b, loc, g.getStage(), g.getBytes(), group, stream);
      else
        plan::AllReduceOp::create(b, loc, g.getStage(), g.getBytes(), group, stream);
    } else if (auto o = dyn_cast<pipe::OptimizerStepOp>(op)) {
      plan::OptimizerStepOp::create(b, loc, o.getStage(), stream);
    }
  }

  std::vector<Operation *> ops;
  std::vector<std::array<int64_t, kStreams>> known;
  std::array<std::array<int64_t, kStreams>, kStreams> streamKnown = {
      {{-1, -1, -1}, {-1, -1, -1}, {-1, -1, -1}}};
  std::vector<int32_t> signalOf;
  std::vector<std::vector<int32_t>> waitsBefore, signalsAfter;
  size_t last = 0;
  std::vector<int32_t> slotOf;
  std::vector<int64_t> previousConsumer;
  std::vector<int64_t> slots;
  int32_t events = 0;
};

FailureOr<plan::ProgramOp> lowerModel(pipe::ModelOp model) {
  OpBuilder builder(model);
  Location loc = model.getLoc();
  pipe::ParallelismAttr par = model.getParallelism();
  SmallVector<Attribute> groups;
  for (int64_t r = 0; r < par.getPipeline(); ++r)
    groups.push_back(builder.getDenseI64ArrayAttr({r}));
  auto program = plan::ProgramOp::create(
      builder, loc, model.getSymName(), par, model.getCluster(), model.getTraining(),
      builder.getArrayAttr(groups), model.getTokensPerSample(), model.getArchitectureAttr(),
      model.getSourceAttr());
  OpBuilder body = OpBuilder::atBlockEnd(builder.createBlock(&program.getBody()));
  for (pipe::LayerOp layer : model.getLayers())
    plan::LayerOp::create(body, loc, layer.getName(), layer.getKind(), layer.getParams(),
                          layer.getFwdFlops(), layer.getBwdFlops(), layer.getActivationBytes(),
                          layer.getCheckpointBytes(), layer.getOutputBytes());
  std::vector<int64_t> params = stageParams(model);
  for (auto [s, stage] : llvm::enumerate(model.getStages()))
    plan::StageOp::create(body, loc, stage.getIndex(), *stage.getRank(), stage.getFirstLayer(),
                          stage.getEndLayer(), params[s], stage.getSamplesAttr());
  for (pipe::RankOp rank : model.getRanks()) {
    RankLowering lowering(rank);
    if (failed(lowering.analyze(par.getData()))) {
      program.erase();
      return failure();
    }
    lowering.emit(body, loc, rank.getRank());
  }
  return program;
}

struct LowerToPlan : conduit::impl::ConduitLowerToPlanBase<LowerToPlan> {
  void runOnOperation() override {
    for (pipe::ModelOp model : llvm::make_early_inc_range(getOperation().getOps<pipe::ModelOp>())) {
      if (failed(requirePhase(model, pipe::Phase::Communicating, "conduit-lower-to-plan")))
        return signalPassFailure();
      if (failed(lowerModel(model)))
        return signalPassFailure();
      model.erase();
    }
  }
};

} // namespace
