//===- LowerToPlan.cpp - conduit-lower-to-plan ----------------------------===//
//
// Turns a pipe.model in the communicating phase into a plan.program and erases the model.
// Each rank's ordered body becomes one instruction list on three streams (0 compute, 1
// point-to-point, 2 collectives); every dependency between streams becomes an event, and
// received data gets buffer slots from a liveness analysis. The list is produced as the plan
// file's data (runtime::Instruction) and becomes the ops of the rank's plan.rank, or, for a
// compile that only writes or reports on the plan, goes to conduit-verify-plan as data
// (LoweredInstructions, Passes.h) with the plan.rank left empty.
//
// Dependencies across streams: a send waits for its producer; a compute waits for the last
// receive of its input and for the all-gather of its stage's parameters; a receive into a
// reused slot waits for the previous occupant's consumer; an all-gather waits for the reshard
// that frees its place; a reduction waits for the stage's last backward or weight gradient (a
// weight gradient follows its input gradient on the compute stream), and a backward, input or
// weight gradient after a reduction of its stage (gradient_reduction "run") for that
// reduction, which reads the whole gradients they would add to, and for the reduction issued
// before the previous one of them (which bounds the whole gradients alive); an optimizer step
// for its reduction; a parameter all-gather for its optimizer step; a tie_grads (on the
// point-to-point stream) for the backwards of its stages and the release of their gathered
// parameters after them, and their reductions (or, with D = 1, optimizer steps) for it. A
// dependency already implied by an earlier wait on the same stream (tracked like a vector clock of
// the three streams) needs no new event.
//
// The memory plan counts the same receive slots (receiveSlotBytes, PeakMemory.h).
//
//===----------------------------------------------------------------------===//

#include "dialects/plan/PlanOps.h"
#include "passes/PassUtils.h"
#include "passes/Passes.h"
#include "passes/PeakMemory.h"
#include "passes/PlanExport.h"
#include "runtime/Heap.h"
#include "scheduling/Transfers.h"

#include "mlir/IR/Builders.h"

#include <array>
#include <cassert>

namespace conduit {
#define GEN_PASS_DEF_CONDUITLOWERTOPLAN
#include "passes/Passes.h.inc"
} // namespace conduit

using namespace conduit;
using namespace mlir;
using runtime::Instruction;

namespace {

constexpr int kStreams = 3;
enum Stream : int8_t { Compute = 0, P2P = 1, Collective = 2 };

enum class Kind : uint8_t {
  Forward,
  Backward,
  BackwardInput,
  BackwardWeight,
  Send,
  Recv,
  Unshard,
  Reshard,
  ReduceGrad,
  GatherParams,
  OptimizerStep,
  TieGrads
};

/// What the lowering needs of one pipe op, read once.
struct OpInfo {
  Kind kind;
  Stream stream;
  int32_t stage = -1, mb = -1;
  int8_t direction = 0; // transfers: 0 activation, 1 gradient
  int32_t batch = -1;
  int64_t bytes = 0;
  int32_t peerStage = -1; ///< tie_grads: the other copy's stage when this rank holds it too
};

OpInfo describeOp(Operation *op) {
  OpInfo info{Kind::Forward, Compute};
  if (auto f = dyn_cast<pipe::ForwardOp>(op)) {
    info = {Kind::Forward, Compute, f.getStage(), f.getMicrobatch()};
  } else if (auto b = dyn_cast<pipe::BackwardOp>(op)) {
    info = {Kind::Backward, Compute, b.getStage(), b.getMicrobatch(), 1};
  } else if (auto i = dyn_cast<pipe::BackwardInputOp>(op)) {
    info = {Kind::BackwardInput, Compute, i.getStage(), i.getMicrobatch(), 1};
  } else if (auto w = dyn_cast<pipe::BackwardWeightOp>(op)) {
    info = {Kind::BackwardWeight, Compute, w.getStage(), w.getMicrobatch(), 1};
  } else if (auto s = dyn_cast<pipe::SendOp>(op)) {
    info = {Kind::Send,          P2P,          s.getStage(), s.getMicrobatch(),
            int8_t(s.getKind()), s.getBatch(), s.getBytes()};
  } else if (auto r = dyn_cast<pipe::RecvOp>(op)) {
    info = {Kind::Recv,          P2P,          r.getStage(), r.getMicrobatch(),
            int8_t(r.getKind()), r.getBatch(), r.getBytes()};
  } else if (auto u = dyn_cast<pipe::UnshardOp>(op)) {
    info = {Kind::Unshard, Collective, u.getStage()};
  } else if (auto rs = dyn_cast<pipe::ReshardOp>(op)) {
    info = {Kind::Reshard, Compute, rs.getStage()};
  } else if (auto g = dyn_cast<pipe::ReduceGradOp>(op)) {
    info = {Kind::ReduceGrad, Collective, g.getStage()};
  } else if (auto g = dyn_cast<pipe::GatherParamsOp>(op)) {
    info = {Kind::GatherParams, Collective, g.getStage()};
  } else if (auto o = dyn_cast<pipe::OptimizerStepOp>(op)) {
    info = {Kind::OptimizerStep, Compute, o.getStage()};
  } else if (auto t = dyn_cast<pipe::TieGradsOp>(op)) {
    // On the point-to-point stream, after the rank's other transfers.
    info = {Kind::TieGrads, P2P, t.getStage()};
    info.bytes = t.getBytes();
    info.peerStage = t.getPeerStage();
  }
  return info;
}

/// Flat indices of (stage, micro-batch, direction) for the stages of one rank.
class LocalIndex {
public:
  LocalIndex(const std::vector<std::vector<int64_t>> &samples, const std::vector<int64_t> &rankOf,
             int64_t rank)
      : offset(samples.size(), -1) {
    for (size_t s = 0; s < samples.size(); ++s)
      if (rankOf[s] == rank) {
        offset[s] = total;
        total += static_cast<int64_t>(samples[s].size()) - 1;
      }
  }
  /// -1 for a stage of another rank (the verifiers guarantee it does not happen).
  int64_t operator()(int32_t stage, int32_t mb, int direction) const {
    return offset[stage] < 0 ? -1 : 2 * (offset[stage] + mb) + direction;
  }
  int64_t size() const { return 2 * total; }

private:
  std::vector<int64_t> offset;
  int64_t total = 0;
};

/// The lowering of one rank.
class RankLowering {
public:
  RankLowering(pipe::RankOp rank, const LocalIndex &index, int64_t numStages)
      : index(index), numStages(numStages) {
    for (Operation &op : rank.getBody().front()) {
      ops.push_back(&op);
      info.push_back(describeOp(&op));
    }
  }

  /// Decides slots, dependencies and events. Fails (with a diagnostic) when an op comes
  /// before what it depends on, which the communication passes never produce.
  LogicalResult analyze(int64_t dataParallel, bool reduceEachRun) {
    const int64_t n = static_cast<int64_t>(ops.size());
    known.assign(n, {-1, -1, -1});
    signalOf.assign(n, -1);
    waitsBefore.assign(n, {});
    slotOf.assign(n, -1);
    if (failed(assignSlots()))
      return failure();

    // Producers and receives by (stage, micro-batch, direction); stage bookkeeping.
    std::vector<int64_t> producer(index.size(), -1), lastRecv(index.size(), -1);
    std::vector<int64_t> gatheredBy(numStages, -1), lastBackward(numStages, -1),
        reduction(numStages, -1), tiedBy(numStages, -1), reshardOf(numStages, -1);
    int64_t lastReshard = -1;
    // Reducing each run: the last reduction, and the last before the previous gradient.
    int64_t lastReduction = -1, reductionBeforeGradient = -1;
    std::array<std::array<int64_t, kStreams>, kStreams> streamKnown;
    for (auto &k : streamKnown)
      k = {-1, -1, -1};

    for (int64_t i = 0; i < n; ++i) {
      const OpInfo &x = info[i];
      int64_t deps[6];
      int numDeps = 0;
      auto need = [&](int64_t dep, const char *what) -> LogicalResult {
        if (dep < 0)
          return ops[i]->emitOpError() << "comes before " << what;
        deps[numDeps++] = dep;
        return success();
      };
      // Reducing each run, a gradient also waits for the reduction issued before the previous
      // gradient: whole gradients of at most two runs exist at once, as the memory plan counts
      // them (a reduction's buffer lives beside the next backward or weight gradient).
      auto boundGradients = [&] {
        if (reductionBeforeGradient >= 0)
          deps[numDeps++] = reductionBeforeGradient;
        reductionBeforeGradient = lastReduction;
      };
      switch (x.kind) {
      case Kind::Forward:
      case Kind::Backward:
      case Kind::BackwardInput: {
        int64_t key = index(x.stage, x.mb, x.kind != Kind::Forward);
        if (lastRecv[key] >= 0)
          deps[numDeps++] = lastRecv[key];
        if (gatheredBy[x.stage] >= 0)
          deps[numDeps++] = gatheredBy[x.stage];
        // Reducing each run: a gradient after a reduction of its stage writes a buffer that
        // reduction no longer reads.
        if (x.kind != Kind::Forward && reduction[x.stage] >= 0)
          deps[numDeps++] = reduction[x.stage];
        if (x.kind != Kind::Forward && reduceEachRun)
          boundGradients();
        producer[key] = i;
        if (x.kind == Kind::Backward)
          lastBackward[x.stage] = i;
        break;
      }
      case Kind::BackwardWeight:
        // After its input gradient on the same stream; it receives nothing. It runs inside a
        // residency of its stage, as PyTorch runs it, so it waits for the all-gather too (a
        // residency may hold only weight gradients, and its free must follow the gather). The
        // stage's gradients are complete after its last one.
        if (gatheredBy[x.stage] >= 0)
          deps[numDeps++] = gatheredBy[x.stage];
        if (reduction[x.stage] >= 0)
          deps[numDeps++] = reduction[x.stage];
        if (reduceEachRun)
          boundGradients();
        lastBackward[x.stage] = i;
        break;
      case Kind::Send:
        if (failed(need(producer[index(x.stage, x.mb, x.direction)],
                        "the compute that produces its data")))
          return failure();
        break;
      case Kind::Recv:
        if (previousConsumer[i] >= 0)
          deps[numDeps++] = previousConsumer[i]; // the slot's last occupant is consumed
        lastRecv[index(x.stage, x.mb, x.direction)] = i;
        break;
      case Kind::Unshard:
        if (lastReshard >= 0)
          deps[numDeps++] = lastReshard;
        gatheredBy[x.stage] = i;
        break;
      case Kind::Reshard:
        lastReshard = i;
        reshardOf[x.stage] = i;
        break;
      case Kind::ReduceGrad:
        if (failed(need(lastBackward[x.stage], "the stage's backwards")))
          return failure();
        if (tiedBy[x.stage] >= 0)
          deps[numDeps++] = tiedBy[x.stage];
        reduction[x.stage] = i;
        lastReduction = i;
        break;
      case Kind::OptimizerStep:
        if (dataParallel > 1 && failed(need(reduction[x.stage], "the stage's reduction")))
          return failure();
        if (dataParallel == 1 && tiedBy[x.stage] >= 0)
          deps[numDeps++] = tiedBy[x.stage];
        break;
      case Kind::TieGrads: {
        // After the backwards of both copies this rank holds; the reductions and optimizer
        // steps of those stages come after it. And after the release of their gathered
        // parameters where it follows the backwards: the other copy's gradient then arrives in
        // a buffer allocated after them, as the memory plan counts it, not beside them.
        if (failed(need(lastBackward[x.stage], "the stage's backwards")))
          return failure();
        auto afterRelease = [&](int32_t stage) {
          if (reshardOf[stage] > lastBackward[stage])
            deps[numDeps++] = reshardOf[stage];
        };
        afterRelease(x.stage);
        tiedBy[x.stage] = i;
        if (x.peerStage != x.stage && x.peerStage < numStages && lastBackward[x.peerStage] >= 0 &&
            index(x.peerStage, 0, 0) >= 0) {
          deps[numDeps++] = lastBackward[x.peerStage];
          afterRelease(x.peerStage);
          tiedBy[x.peerStage] = i;
        }
        break;
      }
      case Kind::GatherParams:
        // The shards the previous step updated: the stage's computes wait for it.
        gatheredBy[x.stage] = i;
        break;
      }

      // A stream knows what its earlier instructions knew; events cover the rest.
      const Stream self = x.stream;
      known[i] = streamKnown[self];
      for (int d = 0; d < numDeps; ++d) {
        int64_t dep = deps[d];
        Stream other = info[dep].stream;
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

  /// Receive slots by the rule of sched::assignReceiveSlots (double buffering, slots free
  /// where a receive's batch is issued).
  LogicalResult assignSlots() {
    using SlotKind = sched::SlotItem::Kind;
    std::vector<sched::SlotItem> items(ops.size());
    for (size_t i = 0; i < ops.size(); ++i) {
      const OpInfo &x = info[i];
      sched::SlotItem &item = items[i];
      if (x.kind == Kind::Forward || x.kind == Kind::Backward || x.kind == Kind::BackwardInput) {
        item.kind = SlotKind::Compute;
        item.key = index(x.stage, x.mb, x.kind != Kind::Forward);
      } else if (x.kind == Kind::Recv) {
        item.kind = SlotKind::Receive;
        item.key = index(x.stage, x.mb, x.direction);
        item.bytes = x.bytes;
        item.batch = x.batch;
      } else if (x.kind == Kind::Send) {
        item.kind = SlotKind::OtherTransfer;
        item.batch = x.batch;
      }
    }
    sched::ReceiveSlots assigned = sched::assignReceiveSlots(items, index.size());
    if (assigned.error)
      return ops[assigned.error->first]->emitOpError(assigned.error->second);
    slotOf = std::move(assigned.slotOf);
    previousConsumer = std::move(assigned.previousConsumer);
    slots = std::move(assigned.slotBytes);
    return success();
  }
  /// The bytes of each slot (after assignSlots).
  const std::vector<int64_t> &slotBytes() const { return slots; }
  /// The events the rank's instructions signal (after analyze).
  int32_t eventCount() const { return events; }

  /// The rank's instructions, in order (after analyze()).
  std::vector<Instruction> emit(int32_t r, TensorLayout &tensor, bool overlapAllToAlls) {
    gatherBatches();
    // One allocation of the final size: a plan's instructions are most of its bytes. The
    // collectives each compute issues are listed once, for the count and for the emission.
    std::vector<const std::vector<runtime::TensorCollective> *> inner(tensor.active() ? ops.size()
                                                                                      : 0);
    size_t count = ops.size();
    for (size_t i = 0; i < ops.size(); ++i) {
      count += waitsBefore[i].size() + signalsAfter[i].size();
      if (!inner.empty() && isCompute(info[i].kind)) {
        inner[i] = &tensor.of(info[i].stage, info[i].mb, computeOp(info[i].kind));
        count += inner[i]->size();
      }
    }
    std::vector<Instruction> out;
    out.reserve(count);
    auto event = [&](runtime::Op op, int32_t e, int8_t stream) {
      Instruction &i = out.emplace_back();
      i.op = op;
      i.stream = static_cast<uint8_t>(stream);
      i.event = e;
    };
    // A paired step: the forward marked paired and the compute after it, each the other's
    // partner, behind whose computation its all-to-alls may hide.
    std::pair<int32_t, int32_t> pairedForward{-1, -1};
    for (size_t i = 0; i < ops.size(); ++i) {
      const int8_t stream = info[i].stream;
      for (int32_t e : waitsBefore[i])
        event(runtime::Op::Wait, e, stream);
      out.push_back(instructionOf(ops[i], slotOf[i], r));
      std::pair<int32_t, int32_t> partner{-1, -1};
      if (isCompute(info[i].kind)) {
        partner = pairedForward;
        pairedForward = {-1, -1};
        if (auto f = dyn_cast<pipe::ForwardOp>(ops[i]); f && f.getPaired()) {
          pairedForward = {f.getStage(), f.getMicrobatch()};
          for (size_t k = i + 1; k < ops.size(); ++k)
            if (isCompute(info[k].kind)) {
              partner = {info[k].stage, info[k].mb};
              break;
            }
        }
      }
      if (!overlapAllToAlls)
        partner = {-1, -1};
      if (!inner.empty() && inner[i])
        appendInnerCollectives(out, out.back(), *inner[i], r, partner);
      for (int32_t e : signalsAfter[i])
        event(runtime::Op::Signal, e, stream);
    }
    assert(out.size() == count && "the count above missed an instruction");
    return out;
  }

private:
  /// The transfers of a batch are issued together, so no signal or wait of their stream may sit
  /// between them: the waits of all members move before the first, the signals after the last.
  void gatherBatches() {
    signalsAfter.assign(ops.size(), {});
    for (size_t i = 0; i < ops.size(); ++i)
      if (signalOf[i] >= 0)
        signalsAfter[i].push_back(signalOf[i]);
    size_t first = ops.size(), last = 0;
    for (size_t i = 0; i < ops.size(); ++i) {
      if (info[i].stream != P2P)
        continue;
      int32_t batch = info[i].batch;
      if (first < ops.size() && batch >= 0 && batch == info[first].batch) {
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

  /// The instruction of pipe op `op`, with its receive slot and, for data-parallel
  /// collectives, its group (the rank's).
  static Instruction instructionOf(Operation *op, int32_t slot, int32_t group) {
    Instruction i;
    i.stream = static_cast<uint8_t>(describeOp(op).stream);
    auto compute = [&](runtime::Op kind, int32_t stage, int32_t mb, int32_t computeSlot) {
      i.op = kind;
      i.stage = stage;
      i.microbatch = mb;
      i.slot = computeSlot;
    };
    auto transfer = [&](runtime::Op kind, auto t) {
      i.op = kind;
      i.kind = t.getKind() == pipe::TransferKind::Activation ? runtime::Transfer::Activation
                                                             : runtime::Transfer::Gradient;
      i.stage = t.getStage();
      i.microbatch = t.getMicrobatch();
      i.peer = t.getPeer();
      i.peerStage = t.getPeerStage();
      i.peerMicrobatch = t.getPeerMicrobatch();
      i.begin = t.getBegin();
      i.end = t.getEnd();
      i.bytes = t.getBytes();
      i.batch = t.getBatch();
    };
    auto collective = [&](runtime::Op kind, int32_t stage, int64_t bytes) {
      i.op = kind;
      i.stage = stage;
      i.bytes = bytes;
      i.group = group;
    };
    if (auto f = dyn_cast<pipe::ForwardOp>(op)) {
      compute(runtime::Op::Forward, f.getStage(), f.getMicrobatch(), slot);
      if (f.getPaired())
        i.flags = Instruction::kPaired;
    } else if (auto k = dyn_cast<pipe::BackwardOp>(op)) {
      compute(runtime::Op::Backward, k.getStage(), k.getMicrobatch(), slot);
    } else if (auto k = dyn_cast<pipe::BackwardInputOp>(op)) {
      compute(runtime::Op::BackwardInput, k.getStage(), k.getMicrobatch(), slot);
    } else if (auto k = dyn_cast<pipe::BackwardWeightOp>(op)) {
      compute(runtime::Op::BackwardWeight, k.getStage(), k.getMicrobatch(), -1);
    } else if (auto s = dyn_cast<pipe::SendOp>(op)) {
      transfer(runtime::Op::Send, s);
    } else if (auto r = dyn_cast<pipe::RecvOp>(op)) {
      transfer(runtime::Op::Recv, r);
      i.slot = slot;
    } else if (auto u = dyn_cast<pipe::UnshardOp>(op)) {
      collective(runtime::Op::AllGather, u.getStage(), u.getBytes());
    } else if (auto g = dyn_cast<pipe::GatherParamsOp>(op)) {
      collective(runtime::Op::AllGather, g.getStage(), g.getBytes());
    } else if (auto g = dyn_cast<pipe::ReduceGradOp>(op)) {
      collective(g.getReduction() == pipe::GradReduction::ReduceScatter ? runtime::Op::ReduceScatter
                                                                        : runtime::Op::AllReduce,
                 g.getStage(), g.getBytes());
    } else if (auto rs = dyn_cast<pipe::ReshardOp>(op)) {
      i.op = runtime::Op::Free;
      i.stage = rs.getStage();
    } else if (auto o = dyn_cast<pipe::OptimizerStepOp>(op)) {
      i.op = runtime::Op::OptimizerStep;
      i.stage = o.getStage();
    } else if (auto t = dyn_cast<pipe::TieGradsOp>(op)) {
      i.op = runtime::Op::TieGrads;
      i.stage = t.getStage();
      i.peer = t.getPeer();
      i.peerStage = t.getPeerStage();
      i.bytes = t.getBytes();
    }
    return i;
  }

  static runtime::Op computeOp(Kind kind) {
    return kind == Kind::Forward         ? runtime::Op::Forward
           : kind == Kind::Backward      ? runtime::Op::Backward
           : kind == Kind::BackwardInput ? runtime::Op::BackwardInput
                                         : runtime::Op::BackwardWeight;
  }

  static bool isCompute(Kind kind) {
    return kind == Kind::Forward || kind == Kind::Backward || kind == Kind::BackwardInput ||
           kind == Kind::BackwardWeight;
  }

  /// After compute instruction `compute`: the tensor group's collectives and the expert
  /// all-to-alls it issues, `collectives` (TensorCollectives.h). The all-to-alls name the
  /// rank's group and hide behind `partner`.
  static void appendInnerCollectives(std::vector<Instruction> &out, Instruction compute,
                                     llvm::ArrayRef<runtime::TensorCollective> collectives,
                                     int32_t group, std::pair<int32_t, int32_t> partner) {
    for (const runtime::TensorCollective &c : collectives) {
      Instruction &i = out.emplace_back();
      i.op = c.op;
      i.stream = compute.stream;
      i.stage = compute.stage;
      i.microbatch = compute.microbatch;
      i.bytes = c.bytes;
      if (i.isExpertAllToAll()) {
        i.group = group;
        i.peerStage = partner.first;
        i.peerMicrobatch = partner.second;
      }
    }
  }

  const LocalIndex &index;
  int64_t numStages;
  std::vector<Operation *> ops;
  std::vector<OpInfo> info;
  std::vector<std::array<int64_t, kStreams>> known;
  std::vector<int32_t> signalOf;
  std::vector<std::vector<int32_t>> waitsBefore, signalsAfter;
  std::vector<int32_t> slotOf;
  std::vector<int64_t> previousConsumer;
  std::vector<int64_t> slots;
  int32_t events = 0;
};

/// Each stage's micro-batch boundaries and rank.
void stageLayout(pipe::ModelOp model, std::vector<std::vector<int64_t>> &samples,
                 std::vector<int64_t> &rankOf) {
  for (auto stage : model.getStages()) {
    samples.emplace_back(stage.getSamples()->begin(), stage.getSamples()->end());
    rankOf.push_back(*stage.getRank());
  }
}

/// Lowers `model` to a plan.program before it. Each rank's instructions become the ops of its
/// plan.rank, or, with `keep`, stay data there and the plan.rank ops stay empty.
FailureOr<plan::ProgramOp> lowerModel(pipe::ModelOp model, bool overlapAllToAlls,
                                      LoweredInstructions *keep) {
  OpBuilder builder(model);
  Location loc = model.getLoc();
  pipe::ParallelismAttr par = model.getParallelism();
  SmallVector<Attribute> groups;
  for (int64_t r = 0; r < par.getPipeline(); ++r)
    groups.push_back(builder.getDenseI64ArrayAttr({r}));
  auto program = plan::ProgramOp::create(builder, loc, model.getSymName(), par, model.getCluster(),
                                         model.getTraining(), builder.getArrayAttr(groups),
                                         model.getTokensPerSample(), model.getArchitectureAttr(),
                                         model.getSourceAttr());
  OpBuilder body = OpBuilder::atBlockEnd(builder.createBlock(&program.getBody()));
  for (pipe::LayerOp layer : model.getLayers())
    plan::LayerOp::create(body, loc, layer.getName(), layer.getKind(), layer.getParams(),
                          layer.getFwdFlops(), layer.getBwdFlops(), layer.getBwdWeightFlops(),
                          layer.getActivationBytes(), layer.getCheckpointBytes(),
                          layer.getOutputBytes(), layer.getWeightGradientBytes(),
                          layer.getReplicatedParams(), layer.getReplicatedActivationBytes(),
                          layer.getSelectiveBytes(), layer.getExpertParams());
  std::vector<int64_t> params = stageParams(model);
  for (auto [s, stage] : llvm::enumerate(model.getStages()))
    plan::StageOp::create(body, loc, stage.getIndex(), *stage.getRank(), stage.getFirstLayer(),
                          stage.getEndLayer(), params[s], stage.getSamplesAttr());
  std::vector<std::vector<int64_t>> samples;
  std::vector<int64_t> rankOf;
  stageLayout(model, samples, rankOf);
  TensorLayout tensor(model);
  std::vector<std::vector<Instruction>> kept;
  // About 100 bytes an op: the pages of every 4 MB of lowered ops go back to the system, not
  // those of every rank (each page given back costs a fault when it is used again).
  constexpr size_t kOpsToRelease = 40000;
  size_t cleared = 0;
  bool released = false;
  for (pipe::RankOp rank : model.getRanks()) {
    const int32_t r = static_cast<int32_t>(rank.getRank());
    LocalIndex index(samples, rankOf, r);
    RankLowering lowering(rank, index, static_cast<int64_t>(samples.size()));
    if (failed(lowering.analyze(par.getData(),
                                par.getGradientReduction() == pipe::GradientReduction::Run))) {
      program.erase();
      return failure();
    }
    std::vector<Instruction> instructions = lowering.emit(r, tensor, overlapAllToAlls);
    auto rankOp = plan::RankOp::create(body, loc, r, lowering.eventCount(),
                                       body.getDenseI64ArrayAttr(lowering.slotBytes()),
                                       rank.getPeakMemoryAttr());
    OpBuilder rankBody = OpBuilder::atBlockEnd(body.createBlock(&rankOp.getBody()));
    body.setInsertionPointAfter(rankOp);
    if (keep)
      kept.push_back(std::move(instructions));
    else
      importInstructions(rankBody, loc, instructions);
    // Its ops are lowered: the memory they held goes back to the allocator and, once there is
    // much of it, its pages to the system: it lies in blocks too small for the next ranks'
    // instructions, which would otherwise come on top of it.
    cleared += rank.getBody().front().getOperations().size();
    rank.getBody().front().clear();
    if (cleared >= kOpsToRelease) {
      cleared = 0;
      released = true;
      releaseFreedMemory();
    }
  }
  // The last ranks' too, before verification allocates its state; a small model (the tuner
  // compiles thousands) gives back nothing.
  if (released && cleared > 0)
    releaseFreedMemory();
  if (keep)
    keep->programs[program] = std::move(kept);
  return program;
}

struct LowerToPlan : conduit::impl::ConduitLowerToPlanBase<LowerToPlan> {
  using ConduitLowerToPlanBase::ConduitLowerToPlanBase;
  LowerToPlan(ConduitLowerToPlanOptions options, std::shared_ptr<LoweredInstructions> keep)
      : ConduitLowerToPlanBase(std::move(options)), keep(std::move(keep)) {}

  void runOnOperation() override {
    for (pipe::ModelOp model : llvm::make_early_inc_range(getOperation().getOps<pipe::ModelOp>())) {
      if (failed(requirePhase(model, pipe::Phase::Communicating, "conduit-lower-to-plan")))
        return signalPassFailure();
      if (failed(lowerModel(model, overlapAllToAlls, keep.get())))
        return signalPassFailure();
      model.erase();
    }
  }

  std::shared_ptr<LoweredInstructions> keep;
};

} // namespace

FailureOr<std::vector<int64_t>> conduit::receiveSlotBytes(pipe::ModelOp model, pipe::RankOp rank) {
  std::vector<std::vector<int64_t>> samples;
  std::vector<int64_t> rankOf;
  stageLayout(model, samples, rankOf);
  LocalIndex index(samples, rankOf, rank.getRank());
  RankLowering lowering(rank, index, static_cast<int64_t>(samples.size()));
  if (failed(lowering.assignSlots()))
    return failure();
  return lowering.slotBytes();
}

std::unique_ptr<Pass> conduit::createConduitLowerToPlan(ConduitLowerToPlanOptions options,
                                                        std::shared_ptr<LoweredInstructions> keep) {
  return std::make_unique<LowerToPlan>(std::move(options), std::move(keep));
}
