//===- PeakMemory.cpp - peak memory of every rank over a step -------------===//
//
// One walk per rank: the static state first (parameters, gradients, optimizer state, receive
// slots), then every event's change, recording the total during each compute and after each
// event. Outputs for other ranks are indexed by the rank's own (stage, micro-batch, kind).
//
//===----------------------------------------------------------------------===//

#include "analysis/PeakMemory.h"

#include <algorithm>
#include <cmath>

using namespace conduit;

namespace {

using runtime::kGradientBytes;
using runtime::Sharding;
using Kind = MemoryEvent::Kind;

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

std::string str(int64_t value) { return std::to_string(value); }

bool isCompute(Kind kind) {
  return kind == Kind::Forward || kind == Kind::Backward || kind == Kind::BackwardInput ||
         kind == Kind::BackwardWeight;
}

/// Bytes of what a rank holds all step for stage s, by kind.
void addStatic(const MemoryProblem &p, const MemoryStage &stage,
               std::array<int64_t, kNumMemoryKinds> &bytes) {
  auto add = [&](MemoryKind kind, int64_t b) { bytes[static_cast<int>(kind)] += b; };
  const Sharding sharding = p.replicas > 1 ? p.sharding : Sharding::None;
  const bool shardParams = sharding == Sharding::Full;
  const bool shardState = sharding != Sharding::None;
  // The dense parameters over the D replicas, the routed experts over their expert-data group.
  const int64_t experts = stage.expertParams;
  const std::pair<int64_t, int64_t> parts[] = {
      {stage.params - experts, p.replicas},
      {experts, p.expertReplicas > 0 ? p.expertReplicas : p.replicas}};
  for (auto [params, data] : parts) {
    // Moments (Adam), and the fp32 master copy where the parameters the optimizer updates are
    // not themselves fp32 values of their own. Sharding over one rank (an expert-data group
    // of one) keeps no shard beside the whole: the optimizer updates the parameters where they
    // lie, as without sharding.
    const bool inPlace = shardState && data == 1;
    const bool master =
        !p.parametersAreMaster && (p.elementBytes != 4 || (shardState && !shardParams && !inPlace));
    const int64_t state = (p.adam ? 2 * p.momentBytes : 0) + (master ? 4 : 0);
    const int64_t stored = p.parametersAreMaster ? 4 : p.elementBytes;
    add(MemoryKind::Parameters, (shardParams ? ceilDiv(params, data) : params) * stored);
    add(MemoryKind::OptimizerState, (shardState ? ceilDiv(params, data) : params) * state);
    // ZeRO-1 reduce-scatters in place: the whole buffer holds the reduced shard.
    add(MemoryKind::Gradients,
        (runtime::shardsGradients(sharding) ? ceilDiv(params, data) : params) * kGradientBytes);
  }
}

class RankWalker {
public:
  explicit RankWalker(const MemoryProblem &problem)
      : p(problem), stagesOf(problem.orders.size()),
        sharding(problem.replicas > 1 ? problem.sharding : Sharding::None) {
    for (size_t s = 0; s < p.stages.size(); ++s)
      stagesOf[p.stages[s].rank].push_back(static_cast<int32_t>(s));
    localOffset.assign(p.stages.size(), 0);
  }

  MemoryPeak walk(int64_t r) {
    current.fill(0);
    leaving = 0;
    reducing = 0;
    inFlight = 0;
    result = MemoryPeak();
    result.peak = -1;
    // The rank's (stage, micro-batch) pairs, each with its activation and its gradient output.
    int64_t pairs = 0;
    for (int32_t s : stagesOf[r]) {
      localOffset[s] = pairs;
      pairs += static_cast<int64_t>(p.stages[s].samples.size()) - 1;
    }
    sendsLeft.assign(2 * pairs, 0);
    outputWaiting.assign(2 * pairs, 0);

    for (int32_t s : stagesOf[r])
      addStatic(p, p.stages[s], current);
    for (int64_t slot : p.receiveSlots[r])
      add(MemoryKind::ReceiveBuffers, scaled(slot));
    record(-1);

    const std::vector<MemoryEvent> &order = p.orders[r];
    for (const MemoryEvent &e : order)
      if (e.kind == Kind::Send)
        ++sendsLeft[output(e.stage, e.mb, e.gradient)];

    std::vector<uint8_t> holdsGradients(p.stages.size(), 0);
    for (size_t i = 0; i < order.size(); ++i) {
      const MemoryEvent &e = order[i];
      const int64_t event = static_cast<int64_t>(i);
      const int64_t params = e.kind == Kind::Tie ? 0 : allocated(p.stages[e.stage]);
      const int64_t cast = e.kind == Kind::Tie ? 0 : gathered(p.stages[e.stage]);
      switch (e.kind) {
      case Kind::Forward:
      case Kind::Backward:
      case Kind::BackwardInput:
      case Kind::BackwardWeight:
        // The full gradient buffer exists from the stage's first gradient to its reduction
        // (each run's, reducing each run).
        if (e.kind != Kind::Forward && fullGradientBuffers() && !holdsGradients[e.stage]) {
          holdsGradients[e.stage] = 1;
          add(MemoryKind::Gradients, params * kGradientBytes);
        }
        compute(event, e);
        break;
      case Kind::Send: {
        // The transfer runs beside the rank's next compute; the output is free after it.
        const int64_t key = output(e.stage, e.mb, e.gradient);
        if (--sendsLeft[key] == 0)
          leaving += outputWaiting[key];
        break;
      }
      case Kind::Gather:
        // The stage's parameters under the problem's own tensor share, as the reshard frees
        // them (not the all-gather's bytes: a variant with another tensor degree gathers less).
        add(MemoryKind::GatheredParameters, cast * p.elementBytes);
        break;
      case Kind::Reshard:
        add(MemoryKind::GatheredParameters, -cast * p.elementBytes);
        break;
      case Kind::Reduce:
        // The reduce-scatter reads the buffer until it completes, beside the rank's next
        // backward or weight gradient (which a reduction overlaps, as FSDP's does).
        if (fullGradientBuffers() && holdsGradients[e.stage]) {
          holdsGradients[e.stage] = 0;
          reducing += params * kGradientBytes;
        }
        break;
      case Kind::Tie:
        // The other copy's gradient arrives in a buffer of its own while it is added.
        add(MemoryKind::ReceiveBuffers, e.bytes);
        record(event);
        add(MemoryKind::ReceiveBuffers, -e.bytes);
        continue;
      }
      record(event);
    }
    return result;
  }

private:
  bool fullGradientBuffers() const { return runtime::shardsGradients(sharding); }
  /// Of a stage's parameters, those whose gathered copy (full sharding) and whole gradients
  /// (ZeRO-2 and full sharding) a step allocates and frees: all but the routed experts of an
  /// expert-data group of one, which it keeps whole all step, once (runtime::ShardSegment's
  /// `apart`; their static state is addStatic's).
  int64_t allocated(const MemoryStage &stage) const {
    const bool apart = p.expertReplicas == 1 && runtime::shardsGradients(sharding);
    return apart ? stage.params - stage.expertParams : stage.params;
  }
  /// Of a stage's parameters, those a residency gathers: allocated()'s, or all of them where
  /// every use casts the fp32 parameters (parametersAreMaster).
  int64_t gathered(const MemoryStage &stage) const {
    return p.parametersAreMaster ? stage.params : allocated(stage);
  }

  int64_t scaled(int64_t b) const {
    return static_cast<int64_t>(std::llround(static_cast<double>(b) * p.sampleScale));
  }

  /// The index of the output of (stage s, micro-batch mb) of the walked rank: its activation
  /// or its input gradient.
  int64_t output(int32_t s, int32_t mb, bool gradient) const {
    return 2 * (localOffset[s] + mb) + (gradient ? 1 : 0);
  }

  void compute(int64_t event, const MemoryEvent &e) {
    const MemoryStage &stage = p.stages[e.stage];
    const int64_t n = stage.samples[e.mb + 1] - stage.samples[e.mb];
    const StageActivations &a = stage.activations;
    const int64_t weightInputs = scaled(a.weightGradient * n);
    if (e.kind == Kind::BackwardWeight) {
      add(MemoryKind::WeightGradientInputs, -weightInputs);
      release(/*gradients=*/true);
      return;
    }
    const bool forward = e.kind == Kind::Forward;
    // What it produces for another rank exists while it runs (the compute writes it next to
    // the activations it reads) and waits until the last send leaves.
    const int64_t produced = output(e.stage, e.mb, !forward);
    if (sendsLeft[produced] > 0) {
      const int64_t out =
          scaled((forward ? stage.outputBytes : p.stages[e.stage - 1].outputBytes) * n);
      outputWaiting[produced] = out;
      add(MemoryKind::SendBuffers, out);
    }
    // Transient: what a recomputation materialises while the compute runs (and, in a
    // checkpointed forward, the inputs kept by then).
    const int64_t working = scaled((forward                         ? a.forwardWorking
                                    : e.kind == Kind::BackwardInput ? a.inputWorking
                                                                    : a.backwardWorking) *
                                   n);
    const int64_t kept = forward ? scaled(a.forwardKept * n) : 0;
    add(MemoryKind::Working, working);
    add(MemoryKind::Activations, kept);
    inFlight += kept > 0; // the micro-batch's first inputs are stored already
    record(event);
    add(MemoryKind::Working, -working);
    add(MemoryKind::Activations, -kept);
    inFlight -= kept > 0;
    release(/*gradients=*/!forward);
    const int64_t stored = scaled(a.stored * n);
    add(MemoryKind::Activations, forward ? stored : -stored);
    if (e.kind == Kind::BackwardInput)
      add(MemoryKind::WeightGradientInputs, weightInputs);
    inFlight += forward ? 1 : -1;
  }

  void add(MemoryKind kind, int64_t delta) { current[static_cast<int>(kind)] += delta; }

  /// After a compute, what the transfers issued before it read, and after a backward or
  /// weight gradient, the whole gradients the reductions issued before it read.
  void release(bool gradients) {
    add(MemoryKind::SendBuffers, -leaving);
    leaving = 0;
    if (gradients) {
      add(MemoryKind::Gradients, -reducing);
      reducing = 0;
    }
  }

  /// Keeps the first moment of the highest total.
  void record(int64_t event) {
    int64_t total = 0;
    for (int64_t b : current)
      total += b;
    if (total > result.peak) {
      result.peak = total;
      result.atPeak = current;
      result.event = event;
      result.activationsInFlight = inFlight;
    }
  }

  const MemoryProblem &p;
  std::vector<std::vector<int32_t>> stagesOf; ///< per rank, its stages in order
  Sharding sharding;
  /// Per stage of the walked rank, the index of its first micro-batch among the rank's.
  std::vector<int64_t> localOffset;
  /// Per output of the walked rank: sends not yet issued, and the bytes waiting for them.
  std::vector<int64_t> sendsLeft, outputWaiting;
  std::array<int64_t, kNumMemoryKinds> current{};
  /// Outputs whose last send was issued: they leave during the next compute. Whole gradients
  /// whose reduction was: during the next backward or weight gradient.
  int64_t leaving = 0, reducing = 0;
  int64_t inFlight = 0;
  MemoryPeak result;
};

} // namespace

StageActivations conduit::stageActivations(llvm::ArrayRef<LayerBytes> layers,
                                           runtime::Checkpointing mode) {
  StageActivations a;
  for (const LayerBytes &layer : layers)
    a.weightGradient += layer.weightGradient;
  if (mode == runtime::Checkpointing::None) {
    for (const LayerBytes &layer : layers)
      a.stored += layer.activation;
    return a;
  }
  if (mode == runtime::Checkpointing::Selective) {
    for (const LayerBytes &layer : layers) {
      a.stored += layer.activation - layer.selective;
      a.forwardWorking = std::max(a.forwardWorking, layer.selective);
    }
    a.backwardWorking = a.inputWorking = a.forwardWorking;
    return a;
  }
  // Recomputed whole: a layer keeps its input and its activations are working memory while
  // it runs, in the forward and again in the backward. Others keep their activations.
  auto whole = [&](size_t i) { return runtime::recomputesWhole(mode, layers[i].kind); };
  auto keeps = [&](size_t i) { return whole(i) ? layers[i].checkpoint : layers[i].activation; };
  auto working = [&](size_t i) { return whole(i) ? layers[i].activation : 0; };
  // Forward: layer i beside what was kept so far and its output, the next layer's input.
  for (size_t i = 0; i < layers.size(); ++i) {
    a.stored += keeps(i);
    const int64_t kept = a.stored + (i + 1 < layers.size() ? layers[i + 1].checkpoint : 0);
    if (kept + working(i) > a.forwardKept + a.forwardWorking) {
      a.forwardKept = kept;
      a.forwardWorking = working(i);
    }
  }
  // Backward, from the last layer: what the layers done kept is released and, in an input
  // gradient, what their weight gradients need is held.
  int64_t released = 0, held = 0;
  for (size_t k = layers.size(); k-- > 0;) {
    if (whole(k)) {
      a.backwardWorking = std::max(a.backwardWorking, working(k) - released);
      a.inputWorking = std::max(a.inputWorking, working(k) - released + held);
    }
    released += keeps(k);
    held += layers[k].weightGradient;
  }
  return a;
}

sched::Violation MemoryProblem::check() const {
  if (stages.empty())
    return std::string("the problem has no stages");
  const int64_t numRanks = static_cast<int64_t>(orders.size());
  const int64_t numStages = static_cast<int64_t>(stages.size());
  if (static_cast<int64_t>(receiveSlots.size()) != numRanks)
    return str(static_cast<int64_t>(receiveSlots.size())) + " lists of receive slots for " +
           str(numRanks) + " ranks";
  if (elementBytes < 1)
    return "the element size must be positive, got " + str(elementBytes);
  if (replicas < 1)
    return "the number of replicas must be positive, got " + str(replicas);
  if (expertReplicas < 0)
    return "the number of expert replicas must not be negative, got " + str(expertReplicas);
  if (!std::isfinite(sampleScale) || sampleScale <= 0)
    return "the sample scale must be positive and finite, got " + std::to_string(sampleScale);
  for (int64_t s = 0; s < numStages; ++s) {
    const MemoryStage &stage = stages[s];
    auto name = [&] { return "stage " + str(s); };
    if (stage.rank < 0 || stage.rank >= numRanks)
      return name() + " is placed on rank " + str(stage.rank) + " but there are " + str(numRanks) +
             " ranks";
    const StageActivations &a = stage.activations;
    if (stage.params < 0 || stage.outputBytes < 0 || a.stored < 0 || a.weightGradient < 0 ||
        a.forwardKept < 0 || a.forwardWorking < 0 || a.backwardWorking < 0 || a.inputWorking < 0)
      return name() + " has a negative size";
    if (stage.expertParams < 0 || stage.expertParams > stage.params)
      return name() + " has " + str(stage.expertParams) + " routed experts' parameters of " +
             str(stage.params);
    if (stage.samples.size() < 2 || stage.samples.front() != 0)
      return name() + "'s micro-batch boundaries must start at 0 and hold a micro-batch";
    for (size_t m = 1; m < stage.samples.size(); ++m)
      if (stage.samples[m] <= stage.samples[m - 1])
        return name() + "'s micro-batch boundaries must increase strictly";
  }
  for (int64_t r = 0; r < numRanks; ++r) {
    for (int64_t slot : receiveSlots[r])
      if (slot < 0)
        return "rank " + str(r) + " has a receive slot of negative size";
    for (size_t i = 0; i < orders[r].size(); ++i) {
      const MemoryEvent &e = orders[r][i];
      auto name = [&] { return "event " + str(static_cast<int64_t>(i)) + " of rank " + str(r); };
      if (e.bytes < 0)
        return name() + " has a negative size";
      if (e.kind == Kind::Tie)
        continue;
      if (e.stage < 0 || e.stage >= numStages)
        return name() + " is on stage " + str(e.stage) + ", which does not exist";
      if (stages[e.stage].rank != r)
        return name() + " is on stage " + str(e.stage) + ", which is on rank " +
               str(stages[e.stage].rank);
      if (!isCompute(e.kind) && e.kind != Kind::Send)
        continue;
      const int64_t microbatches = static_cast<int64_t>(stages[e.stage].samples.size()) - 1;
      if (e.mb < 0 || e.mb >= microbatches)
        return name() + " is on micro-batch " + str(e.mb) + " but stage " + str(e.stage) + " has " +
               str(microbatches);
      if (e.kind == Kind::Send && e.gradient && e.stage == 0)
        return name() + " sends an input gradient from stage 0, which has no stage before it";
    }
  }
  return std::nullopt;
}

llvm::Expected<std::vector<MemoryPeak>> conduit::peakMemory(const MemoryProblem &problem) {
  if (sched::Violation v = problem.check())
    return llvm::createStringError(*v);
  RankWalker walker(problem);
  std::vector<MemoryPeak> peaks;
  for (size_t r = 0; r < problem.orders.size(); ++r)
    peaks.push_back(walker.walk(static_cast<int64_t>(r)));
  return peaks;
}

sched::Violation conduit::verifyPeakMemory(const MemoryProblem &problem,
                                           const std::vector<MemoryPeak> &peaks) {
  if (sched::Violation v = problem.check())
    return v;
  if (peaks.size() != problem.orders.size())
    return str(static_cast<int64_t>(peaks.size())) + " peaks for " +
           str(static_cast<int64_t>(problem.orders.size())) + " ranks";
  for (size_t r = 0; r < peaks.size(); ++r) {
    const MemoryPeak &m = peaks[r];
    const std::string rank = "rank " + str(static_cast<int64_t>(r));
    int64_t total = 0;
    for (int k = 0; k < kNumMemoryKinds; ++k) {
      if (m.atPeak[k] < 0)
        return rank + " holds a negative amount of " + memoryKindName(MemoryKind(k));
      total += m.atPeak[k];
    }
    if (total != m.peak)
      return rank + "'s parts add up to " + str(total) + " bytes, not its peak of " + str(m.peak);
    const std::vector<MemoryEvent> &order = problem.orders[r];
    if (m.event < -1 || m.event >= static_cast<int64_t>(order.size()))
      return rank + "'s peak is at event " + str(m.event) + " of " +
             str(static_cast<int64_t>(order.size()));
    // What the rank holds all step, and the activations any one forward stores beside it.
    std::array<int64_t, kNumMemoryKinds> always{};
    for (const MemoryStage &stage : problem.stages)
      if (stage.rank == static_cast<int64_t>(r))
        addStatic(problem, stage, always);
    for (MemoryKind kind : {MemoryKind::Parameters, MemoryKind::OptimizerState})
      if (m.atPeak[static_cast<int>(kind)] != always[static_cast<int>(kind)])
        return rank + " holds " + str(m.atPeak[static_cast<int>(kind)]) + " bytes of " +
               memoryKindName(kind) + " at its peak, not " + str(always[static_cast<int>(kind)]);
    int64_t floor = 0;
    for (int64_t b : always)
      floor += b;
    for (int64_t slot : problem.receiveSlots[r])
      floor += static_cast<int64_t>(std::llround(static_cast<double>(slot) * problem.sampleScale));
    int64_t forwards = 0, largestForward = 0;
    for (const MemoryEvent &e : order) {
      if (e.kind != Kind::Forward)
        continue;
      ++forwards;
      const MemoryStage &stage = problem.stages[e.stage];
      const int64_t n = stage.samples[e.mb + 1] - stage.samples[e.mb];
      largestForward = std::max<int64_t>(
          largestForward,
          std::llround(static_cast<double>(stage.activations.stored * n) * problem.sampleScale));
    }
    if (m.peak < floor + largestForward)
      return rank + "'s peak of " + str(m.peak) + " bytes is below the " +
             str(floor + largestForward) + " it holds after its largest forward";
    if (m.activationsInFlight < 0 || m.activationsInFlight > forwards)
      return rank + " has " + str(m.activationsInFlight) + " micro-batches in flight at its peak";
  }
  return std::nullopt;
}
