//===- PeakMemory.cpp - peak memory of every rank over a step -------------===//
//
// Conventions (docs/cost-model.md): parameters and activations in the training data type;
// gradients accumulate in fp32; Adam keeps fp32 moments plus an fp32 master copy when the
// parameters are 16-bit; sharded state is split evenly over the D replicas (rounded up). With
// sharded optimizer state but replicated parameters (ZeRO-1 and 2) the optimizer updates an
// fp32 copy of its shard (the master, at any precision) and the reduce-scatter writes the
// reduced gradients to a shard buffer of their own, as DeepSpeed's ZeRO-1/2 optimizer and
// conduit-run do.
//
//===----------------------------------------------------------------------===//

#include "passes/PeakMemory.h"

#include "passes/PassUtils.h"

#include <algorithm>
#include <cmath>
#include <map>

using namespace conduit;
using namespace mlir;

namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

struct StageBytes {
  int64_t params = 0;
  int64_t output = 0; // per sample, the stage output
  StageActivations activations;
};

class RankWalker {
public:
  RankWalker(pipe::ModelOp model, const MemoryVariant &variant)
      : par(variant.tensor ? withTensor(model.getParallelism(), *variant.tensor)
                           : model.getParallelism()),
        variant(variant) {
    llvm::SmallVector<pipe::LayerOp> layers = llvm::to_vector(model.getLayers());
    // Per rank of a tensor group: its share of each layer (TensorShare).
    std::vector<int64_t> params = rankStageParams(model, par);
    tieScale = static_cast<double>(model.getParallelism().getTensor()) /
               static_cast<double>(par.getTensor());
    const pipe::Checkpointing mode = variant.checkpointing.value_or(par.getCheckpointing());
    for (auto [s, stage] : llvm::enumerate(model.getStages())) {
      StageBytes b;
      b.params = params[s];
      std::vector<LayerBytes> stageLayers;
      for (int64_t l = stage.getFirstLayer(); l < stage.getEndLayer(); ++l) {
        const TensorShare share = tensorShare(par, layers[l]);
        LayerBytes layer;
        layer.activation = share.activationBytes;
        layer.checkpoint = share.checkpointBytes;
        layer.weightGradient = share.weightGradientBytes;
        layer.attentionCore = share.attentionCoreBytes;
        stageLayers.push_back(layer);
      }
      b.activations = stageActivations(stageLayers, mode);
      b.output = tensorShare(par, layers[stage.getEndLayer() - 1]).outputBytes;
      bytes.push_back(b);
      samples.push_back(*stage.getSamples());
      rankOf.push_back(*stage.getRank());
    }
    elementBytes = model.getTraining().getElementBytes();
    adam = model.getTraining().getOptimizer() == pipe::Optimizer::Adam;
    data = par.getData();
    sharding = data > 1 ? par.getSharding() : pipe::Sharding::None;
  }

  RankMemory walk(pipe::RankOp rank, const std::vector<int64_t> &slots) {
    current.fill(0);
    outputWaiting.clear();
    leaving = 0;
    inFlight = 0;
    result = RankMemory();
    result.peak = -1;
    const int64_t r = rank.getRank();
    for (size_t s = 0; s < bytes.size(); ++s)
      if (rankOf[s] == r)
        addStatic(static_cast<int64_t>(s));
    for (int64_t slot : slots)
      add(MemoryKind::ReceiveBuffers, scaled(slot));
    record(nullptr);

    std::map<std::tuple<int32_t, int32_t, int>, int64_t> sendsLeft;
    for (Operation &op : rank.getBody().front())
      if (auto send = dyn_cast<pipe::SendOp>(op))
        ++sendsLeft[{send.getStage(), send.getMicrobatch(), int(send.getKind())}];

    std::vector<uint8_t> seenBackward(bytes.size(), 0);
    for (Operation &op : rank.getBody().front()) {
      if (pipe::isCompute(&op)) {
        auto [s, mb] = pipe::computeStageAndMicrobatch(&op);
        Step step = isa<pipe::ForwardOp>(op)         ? Step::Forward
                    : isa<pipe::BackwardOp>(op)      ? Step::Backward
                    : isa<pipe::BackwardInputOp>(op) ? Step::Input
                                                     : Step::Weight;
        // The full gradient buffer exists from the stage's first gradient to its reduction.
        if (step != Step::Forward && fullGradientBuffers() && !seenBackward[s]) {
          seenBackward[s] = 1;
          add(MemoryKind::Gradients, bytes[s].params * kGradientBytes);
        }
        compute(&op, s, mb, step, sendsLeft);
      } else if (auto send = dyn_cast<pipe::SendOp>(op)) {
        auto key = std::make_tuple(send.getStage(), send.getMicrobatch(), int(send.getKind()));
        // The transfer runs beside the rank's next compute; the output is free after it.
        if (--sendsLeft[key] == 0)
          leaving += outputWaiting[key];
      } else if (auto u = dyn_cast<pipe::UnshardOp>(op)) {
        add(MemoryKind::GatheredParameters, u.getBytes());
      } else if (auto rs = dyn_cast<pipe::ReshardOp>(op)) {
        add(MemoryKind::GatheredParameters, -bytes[rs.getStage()].params * elementBytes);
      } else if (auto reduce = dyn_cast<pipe::ReduceGradOp>(op)) {
        if (fullGradientBuffers())
          add(MemoryKind::Gradients, -bytes[reduce.getStage()].params * kGradientBytes);
      } else if (auto tie = dyn_cast<pipe::TieGradsOp>(op)) {
        // The other copy's gradient arrives in a buffer of its own while it is added.
        const int64_t incoming =
            tie.getPeer() == r
                ? 0
                : static_cast<int64_t>(static_cast<double>(tie.getBytes()) * tieScale);
        add(MemoryKind::ReceiveBuffers, incoming);
        record(&op);
        add(MemoryKind::ReceiveBuffers, -incoming);
        continue;
      }
      record(&op);
    }
    return result;
  }

private:
  bool fullGradientBuffers() const {
    return sharding == pipe::Sharding::Gradients || sharding == pipe::Sharding::Full;
  }

  int64_t scaled(int64_t b) const {
    return static_cast<int64_t>(std::llround(static_cast<double>(b) * variant.sampleScale));
  }

  void addStatic(int64_t s) {
    const int64_t p = bytes[s].params;
    bool shardParams = sharding == pipe::Sharding::Full;
    bool shardState = sharding != pipe::Sharding::None;
    add(MemoryKind::Parameters, (shardParams ? ceilDiv(p, data) : p) * elementBytes);
    // Moments (Adam), and the fp32 master copy where the parameters the optimizer updates are
    // not themselves fp32 values of their own.
    const bool master = elementBytes != 4 || (shardState && !shardParams);
    int64_t statePerParam = (adam ? 8 : 0) + (master ? 4 : 0);
    add(MemoryKind::OptimizerState, (shardState ? ceilDiv(p, data) : p) * statePerParam);
    add(MemoryKind::Gradients, (fullGradientBuffers() ? ceilDiv(p, data) : p) * kGradientBytes);
    // ZeRO-1: the reduced shard beside the full buffer.
    if (sharding == pipe::Sharding::Optimizer)
      add(MemoryKind::Gradients, ceilDiv(p, data) * kGradientBytes);
  }

  enum class Step { Forward, Backward, Input, Weight };

  void compute(Operation *op, int32_t s, int32_t mb, Step step,
               std::map<std::tuple<int32_t, int32_t, int>, int64_t> &sendsLeft) {
    const int64_t n = samples[s][mb + 1] - samples[s][mb];
    const StageActivations &a = bytes[s].activations;
    const int64_t weightInputs = scaled(a.weightGradient * n);
    if (step == Step::Weight) {
      add(MemoryKind::WeightGradientInputs, -weightInputs);
      add(MemoryKind::SendBuffers, -leaving);
      leaving = 0;
      return;
    }
    const bool forward = step == Step::Forward;
    // What it produces for another rank exists while it runs (the compute writes it next to
    // the activations it reads) and waits until the last send leaves.
    auto produced = std::make_tuple(
        s, mb, forward ? int(pipe::TransferKind::Activation) : int(pipe::TransferKind::Gradient));
    if (sendsLeft.count(produced) && sendsLeft[produced] > 0) {
      int64_t out = scaled((forward ? bytes[s].output : bytes[s - 1].output) * n);
      outputWaiting[produced] = out;
      add(MemoryKind::SendBuffers, out);
    }
    // Transient: what a recomputation materialises while the compute runs (and, in a
    // checkpointed forward, the inputs kept by then).
    const int64_t working = scaled((forward               ? a.forwardWorking
                                    : step == Step::Input ? a.inputWorking
                                                          : a.backwardWorking) *
                                   n);
    const int64_t kept = forward ? scaled(a.forwardKept * n) : 0;
    add(MemoryKind::Working, working);
    add(MemoryKind::Activations, kept);
    inFlight += kept > 0; // the micro-batch's first inputs are stored already
    record(op);
    add(MemoryKind::Working, -working);
    add(MemoryKind::Activations, -kept);
    inFlight -= kept > 0;
    add(MemoryKind::SendBuffers, -leaving);
    leaving = 0;
    const int64_t stored = scaled(a.stored * n);
    add(MemoryKind::Activations, forward ? stored : -stored);
    if (step == Step::Input)
      add(MemoryKind::WeightGradientInputs, weightInputs);
    inFlight += forward ? 1 : -1;
  }

  void add(MemoryKind kind, int64_t delta) { current[static_cast<int>(kind)] += delta; }

  /// Keeps the first moment of the highest total.
  void record(Operation *op) {
    int64_t total = 0;
    for (int64_t b : current)
      total += b;
    if (total > result.peak) {
      result.peak = total;
      result.atPeak = current;
      result.peakOp = op;
      result.activationsInFlight = inFlight;
    }
  }

  pipe::ParallelismAttr par;
  MemoryVariant variant;
  double tieScale = 1; ///< a tie's bytes under the variant's tensor degree, per the plan's
  std::vector<StageBytes> bytes;
  std::vector<ArrayRef<int64_t>> samples;
  std::vector<int64_t> rankOf;
  int64_t elementBytes = 2, data = 1;
  bool adam = true;
  pipe::Sharding sharding = pipe::Sharding::None;
  std::array<int64_t, kNumMemoryKinds> current{};
  std::map<std::tuple<int32_t, int32_t, int>, int64_t> outputWaiting;
  /// Outputs whose last send was issued: they leave during the next compute.
  int64_t leaving = 0;
  int64_t inFlight = 0;
  RankMemory result;
};

} // namespace

StageActivations conduit::stageActivations(ArrayRef<LayerBytes> layers, pipe::Checkpointing mode) {
  StageActivations a;
  for (const LayerBytes &layer : layers)
    a.weightGradient += layer.weightGradient;
  if (mode == pipe::Checkpointing::None) {
    for (const LayerBytes &layer : layers)
      a.stored += layer.activation;
    return a;
  }
  if (mode == pipe::Checkpointing::Selective) {
    for (const LayerBytes &layer : layers) {
      a.stored += layer.activation - layer.attentionCore;
      a.forwardWorking = std::max(a.forwardWorking, layer.attentionCore);
    }
    a.backwardWorking = a.inputWorking = a.forwardWorking;
    return a;
  }
  // Forward: layer i beside the inputs kept so far and its output, the next layer's input.
  for (size_t i = 0; i < layers.size(); ++i) {
    a.stored += layers[i].checkpoint;
    const int64_t kept = a.stored + (i + 1 < layers.size() ? layers[i + 1].checkpoint : 0);
    if (kept + layers[i].activation > a.forwardKept + a.forwardWorking) {
      a.forwardKept = kept;
      a.forwardWorking = layers[i].activation;
    }
  }
  // Backward, from the last layer: the inputs of the layers done are released and, in an input
  // gradient, what their weight gradients need is held.
  int64_t released = 0, held = 0;
  for (size_t k = layers.size(); k-- > 0;) {
    a.backwardWorking = std::max(a.backwardWorking, layers[k].activation - released);
    a.inputWorking = std::max(a.inputWorking, layers[k].activation - released + held);
    released += layers[k].checkpoint;
    held += layers[k].weightGradient;
  }
  return a;
}

FailureOr<std::vector<RankMemory>> conduit::analyzeMemory(pipe::ModelOp model,
                                                          const MemoryVariant &variant) {
  RankWalker walker(model, variant);
  std::vector<RankMemory> ranks;
  for (pipe::RankOp rank : model.getRanks()) {
    FailureOr<std::vector<int64_t>> slots = receiveSlotBytes(model, rank);
    if (failed(slots))
      return failure();
    ranks.push_back(walker.walk(rank, *slots));
  }
  return ranks;
}
