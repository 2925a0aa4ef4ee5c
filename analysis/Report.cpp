//===- Report.cpp - what a simulated step predicts ------------------------===//
//
// Idle attribution walks each rank's compute stream. Before every instruction that starts
// after the previous one ended, the stream was held by a wait; the wait that released it last
// names an event, and the instruction the event's signal follows (through any chain of waits
// and signals on other streams) is the cause: a receive, an all-gather, a reduction. A
// receive's wait is split at the moment its peer reached the matching send: before it, the
// peer had not produced the data (fill, drain, imbalance); after it, the transfer was in
// flight. After the last compute, collectives and transfers still running are charged to
// their kind and the rest of the step to waiting for the slowest rank.
//
//===----------------------------------------------------------------------===//

#include "analysis/Report.h"

#include "analysis/Units.h"
#include "llvm/Support/Format.h"

#include <algorithm>
#include <numeric>

using namespace conduit;
using runtime::Instruction;
using runtime::Op;

double IdleAttribution::p2pTotal() const { return std::accumulate(p2p.begin(), p2p.end(), 0.0); }

namespace {

bool isWork(Op op) { return op != Op::Signal && op != Op::Wait; }

class RankAnalysis {
public:
  RankAnalysis(const runtime::Plan &plan, const SimulationResult &simulation, int32_t rank)
      : plan(plan), simulation(simulation), rank(rank), program(plan.ranks[rank].instructions),
        times(simulation.times[rank]) {
    const size_t n = program.size();
    previous.assign(n, -1);
    signalOf.assign(plan.ranks[rank].events, -1);
    std::vector<int64_t> last(runtime::kMaxStreams, -1);
    for (size_t i = 0; i < n; ++i) {
      const Instruction &x = program[i];
      previous[i] = last[x.stream];
      last[x.stream] = static_cast<int64_t>(i);
      if (x.op == Op::Signal)
        signalOf[x.event] = static_cast<int64_t>(i);
    }
  }

  RankReport run(double step) {
    RankReport report;
    report.rank = rank;
    report.peakMemoryBytes = plan.ranks[rank].peakMemoryBytes;
    result.p2p.assign(plan.ranks.size(), 0);
    countInstructions(report);

    double cursor = 0;    // end of the compute stream's last instruction so far
    int64_t release = -1; // the wait since then that ended last
    for (size_t i = 0; i < program.size(); ++i) {
      const Instruction &x = program[i];
      if (x.stream != runtime::kComputeStream)
        continue;
      if (x.op == Op::Wait) {
        // The binding wait is the one whose event was signalled last; a later wait on an
        // event signalled long ago ends at the same moment but held nothing.
        if (release < 0 || signalled(i) > signalled(release))
          release = static_cast<int64_t>(i);
        continue;
      }
      if (!isWork(x.op))
        continue;
      if (times[i].start > cursor)
        attribute(cursor, times[i].start, release >= 0 ? cause(release) : -1);
      if (x.isCompute() || x.op == Op::OptimizerStep)
        report.busyS += times[i].end - times[i].start;
      if (x.op == Op::BackwardWeight)
        report.weightGradientS += times[i].end - times[i].start;
      if (x.isTensorCollective())
        result.tensor += times[i].end - times[i].start;
      if (x.isExpertAllToAll())
        result.allToAll += times[i].end - times[i].start;
      cursor = std::max(cursor, times[i].end);
      release = -1;
    }
    attributeTail(cursor, step);
    report.idleS = std::max(0.0, step - report.busyS);
    report.idle = std::move(result);
    return report;
  }

private:
  void countInstructions(RankReport &report) const {
    for (const Instruction &x : program) {
      report.allGathers += x.op == Op::AllGather;
      report.reduceScatters += x.op == Op::ReduceScatter;
      report.allReduces += x.op == Op::AllReduce;
      report.sends += x.op == Op::Send;
      report.recvs += x.op == Op::Recv;
      report.ties += x.op == Op::TieGrads;
      report.tensorAllReduces += x.op == Op::TensorAllReduce;
      report.tensorAllGathers += x.op == Op::TensorAllGather;
      report.tensorReduceScatters += x.op == Op::TensorReduceScatter;
      report.allToAlls += x.isExpertAllToAll();
    }
  }

  /// When the event of wait `i` was signalled (-1 if never).
  double signalled(int64_t i) const {
    int64_t signal = signalOf[program[i].event];
    return signal >= 0 ? times[signal].end : -1;
  }

  /// The instruction whose completion released wait `i`, following chains of events; -1 if
  /// there is none.
  int64_t cause(int64_t i) const {
    for (size_t hops = 0; hops <= program.size(); ++hops) {
      int64_t signal = signalOf[program[i].event];
      if (signal < 0)
        return -1;
      int64_t k = previous[signal];
      while (k >= 0 && program[k].op == Op::Signal)
        k = previous[k];
      if (k < 0)
        return -1;
      if (program[k].op != Op::Wait)
        return lastOfBatch(k);
      i = k;
    }
    return -1;
  }

  /// Transfers of one batch complete together; the one that finished last is the cause.
  int64_t lastOfBatch(int64_t k) const {
    const Instruction &x = program[k];
    if (!x.isTransfer() || x.batch < 0)
      return k;
    int64_t best = k;
    for (int64_t j = previous[k]; j >= 0 && program[j].isTransfer() && program[j].batch == x.batch;
         j = previous[j])
      if (times[j].end > times[best].end ||
          (times[j].end == times[best].end && program[j].op == Op::Recv))
        best = j;
    return best;
  }

  /// Charges the idle interval [from, to] to instruction `k` (or to "other" when k < 0).
  void attribute(double from, double to, int64_t k) {
    const double length = to - from;
    if (k < 0) {
      result.other += length;
      return;
    }
    const Instruction &x = program[k];
    switch (x.op) {
    case Op::Recv: {
      // Before the peer reached its send the data did not exist yet.
      const int64_t send = simulation.matched[rank][k];
      const double posted = send >= 0 ? simulation.times[x.peer][send].posted : from;
      const double split = std::clamp(posted, from, to);
      result.fillDrain += split - from;
      result.p2p[x.peer] += to - split;
      return;
    }
    case Op::Send:
      result.p2p[x.peer] += length;
      return;
    case Op::AllGather:
      result.allGather += length;
      return;
    case Op::ReduceScatter:
    case Op::AllReduce: {
      // A reduction held back by a wait on its stream (a tied stage's, behind its tie_grads):
      // the time before it started is the wait's cause's.
      const double start = std::clamp(times[k].start, from, to);
      const int64_t before = previous[k];
      if (start > from && before >= 0 && program[before].op == Op::Wait) {
        attribute(from, start, cause(before));
        from = start;
      }
      result.reductionTail += to - from;
      return;
    }
    case Op::TieGrads:
      result.tiedGradients += length;
      return;
    default:
      result.other += length;
      return;
    }
  }

  /// After the last compute: communication still running, then waiting for the slowest rank.
  void attributeTail(double cursor, double step) {
    std::vector<int64_t> running;
    for (size_t i = 0; i < program.size(); ++i)
      if (program[i].stream != runtime::kComputeStream && isWork(program[i].op) &&
          times[i].end > cursor)
        running.push_back(static_cast<int64_t>(i));
    std::sort(running.begin(), running.end(),
              [&](int64_t a, int64_t b) { return times[a].end < times[b].end; });
    double covered = cursor;
    for (int64_t i : running) {
      if (times[i].end <= covered)
        continue;
      const Instruction &x = program[i];
      // Transfers and collectives charge the whole interval to their kind.
      if (x.op == Op::Recv)
        result.p2p[x.peer] += times[i].end - covered;
      else
        attribute(covered, times[i].end, i);
      covered = times[i].end;
    }
    if (step > covered)
      result.fillDrain += step - covered;
  }

  const runtime::Plan &plan;
  const SimulationResult &simulation;
  const int32_t rank;
  const std::vector<Instruction> &program;
  const std::vector<InstructionTime> &times;
  std::vector<int64_t> previous; // the previous instruction on the same stream
  std::vector<int64_t> signalOf; // per event
  IdleAttribution result;
};

} // namespace

PlanReport conduit::analyzeStep(const runtime::Plan &plan, const SimulationResult &simulation) {
  PlanReport report;
  const runtime::Config &c = plan.config;
  report.stepTimeS = simulation.makespan;
  report.globalBatchSamples = c.batchSamples() * c.data;
  double flopsPerSample = 0;
  for (const runtime::Layer &layer : plan.layers)
    flopsPerSample += layer.fwdFlops + layer.bwdFlops;
  const double step = report.stepTimeS;
  double idle = 0, exposed = 0;
  for (int32_t r = 0; r < static_cast<int32_t>(plan.ranks.size()); ++r) {
    RankReport rank = RankAnalysis(plan, simulation, r).run(step);
    if (static_cast<size_t>(r) < simulation.allToAllS.size())
      rank.allToAllS = simulation.allToAllS[r];
    idle += rank.idleS;
    exposed += rank.idle.exposedComm();
    report.exposedAllToAllS += rank.idle.allToAll;
    report.allToAllS += rank.allToAllS;
    report.peakMemoryBytes = std::max(report.peakMemoryBytes, rank.peakMemoryBytes);
    report.ranks.push_back(std::move(rank));
  }
  const double ranks = static_cast<double>(plan.ranks.size());
  if (step > 0) {
    report.tokensPerS = static_cast<double>(report.globalBatchSamples * c.tokensPerSample) / step;
    // A replica's batch runs on the P x T devices of one replica.
    report.tflopsPerGpu = flopsPerSample * static_cast<double>(c.batchSamples()) / step /
                          static_cast<double>(int64_t(c.pipeline) * c.tensor) / 1e12;
    report.bubbleFraction = idle / (ranks * step);
  }
  report.exposedCommS = ranks > 0 ? exposed / ranks : 0;
  if (ranks > 0) {
    report.exposedAllToAllS /= ranks;
    report.allToAllS /= ranks;
  }
  for (const runtime::Stage &stage : plan.stages) {
    std::vector<int64_t> &sizes = report.stageMicrobatches.emplace_back();
    for (size_t m = 0; m + 1 < stage.samples.size(); ++m)
      sizes.push_back(stage.samples[m + 1] - stage.samples[m]);
  }
  return report;
}

llvm::json::Value conduit::reportToJson(const PlanReport &report) {
  llvm::json::Array ranks;
  for (const RankReport &r : report.ranks) {
    llvm::json::Object p2p;
    for (size_t peer = 0; peer < r.idle.p2p.size(); ++peer)
      if (r.idle.p2p[peer] > 0)
        p2p[std::to_string(peer)] = r.idle.p2p[peer];
    ranks.push_back(llvm::json::Object{
        {"rank", r.rank},
        {"busy_s", r.busyS},
        {"weight_gradient_s", r.weightGradientS},
        {"idle_s", r.idleS},
        {"idle", llvm::json::Object{{"fill_drain_s", r.idle.fillDrain},
                                    {"p2p_s", r.idle.p2pTotal()},
                                    {"p2p_by_peer_s", std::move(p2p)},
                                    {"all_gather_s", r.idle.allGather},
                                    {"reduction_tail_s", r.idle.reductionTail},
                                    {"tied_gradients_s", r.idle.tiedGradients},
                                    {"tensor_s", r.idle.tensor},
                                    {"all_to_all_s", r.idle.allToAll},
                                    {"other_s", r.idle.other}}},
        {"exposed_comm_s", r.idle.exposedComm()},
        {"peak_memory_bytes", r.peakMemoryBytes},
        {"all_gathers", r.allGathers},
        {"reduce_scatters", r.reduceScatters},
        {"all_reduces", r.allReduces},
        {"sends", r.sends},
        {"recvs", r.recvs},
        {"tie_grads", r.ties},
        {"tensor_all_reduces", r.tensorAllReduces},
        {"tensor_all_gathers", r.tensorAllGathers},
        {"tensor_reduce_scatters", r.tensorReduceScatters},
        {"all_to_alls", r.allToAlls},
        {"all_to_all_s", r.allToAllS},
        {"all_to_all_exposed_s", r.idle.allToAll},
    });
  }
  llvm::json::Array stages;
  for (const std::vector<int64_t> &sizes : report.stageMicrobatches)
    stages.push_back(llvm::json::Object{{"microbatch_sizes", llvm::json::Array(sizes)}});
  return llvm::json::Object{
      {"stages", std::move(stages)},
      {"step_time_s", report.stepTimeS},
      {"global_batch_samples", report.globalBatchSamples},
      {"tokens_per_s", report.tokensPerS},
      {"tflops_per_gpu", report.tflopsPerGpu},
      {"bubble_fraction", report.bubbleFraction},
      {"exposed_comm_s", report.exposedCommS},
      {"all_to_all_s", report.allToAllS},
      {"all_to_all_exposed_s", report.exposedAllToAllS},
      {"ranks", std::move(ranks)},
  };
}

void conduit::printReport(const PlanReport &report, const runtime::Plan &plan,
                          llvm::raw_ostream &os) {
  const runtime::Config &c = plan.config;
  const double peak = c.peakFlops > 0 ? report.tflopsPerGpu * 1e12 / c.peakFlops : 0;
  os << "  " << llvm::left_justify("prediction", 12) << " step " << formatSeconds(report.stepTimeS)
     << ", " << formatCount(report.tokensPerS) << " tokens/s, "
     << formatRate(report.tflopsPerGpu * 1e12, "FLOP/s") << " per GPU ("
     << llvm::format("%.0f", 100 * peak) << "% of peak), bubble "
     << llvm::format("%.1f", 100 * report.bubbleFraction) << "%, exposed communication "
     << formatSeconds(report.exposedCommS) << " per rank";
  if (report.allToAllS > 0)
    os << " (of it expert all-to-alls " << formatSeconds(report.exposedAllToAllS) << ", "
       << formatSeconds(report.allToAllS) << " without pairing)";
  os << "\n";
  os << "\n  " << llvm::right_justify("rank", 4) << llvm::right_justify("busy", 10)
     << llvm::right_justify("idle", 10) << llvm::right_justify("fill/drain", 11)
     << llvm::right_justify("p2p", 10) << llvm::right_justify("all-gather", 11)
     << llvm::right_justify("reductions", 11) << llvm::right_justify("peak memory", 12)
     << llvm::right_justify("AG", 6) << llvm::right_justify("RS", 5) << llvm::right_justify("AR", 5)
     << llvm::right_justify("send", 7) << llvm::right_justify("recv", 7) << "\n";
  for (const RankReport &r : report.ranks) {
    os << "  " << llvm::right_justify(std::to_string(r.rank), 4)
       << llvm::right_justify(formatSeconds(r.busyS), 10)
       << llvm::right_justify(formatSeconds(r.idleS), 10)
       << llvm::right_justify(formatSeconds(r.idle.fillDrain), 11)
       << llvm::right_justify(formatSeconds(r.idle.p2pTotal()), 10)
       << llvm::right_justify(formatSeconds(r.idle.allGather), 11)
       << llvm::right_justify(formatSeconds(r.idle.reductionTail), 11)
       << llvm::right_justify(r.peakMemoryBytes ? formatBytes(double(r.peakMemoryBytes)) : "-", 12)
       << llvm::right_justify(std::to_string(r.allGathers), 6)
       << llvm::right_justify(std::to_string(r.reduceScatters), 5)
       << llvm::right_justify(std::to_string(r.allReduces), 5)
       << llvm::right_justify(std::to_string(r.sends), 7)
       << llvm::right_justify(std::to_string(r.recvs), 7) << "\n";
  }
  if (plan.transformer && plan.transformer->sharesTokenTable()) {
    // Tied embeddings (or the multi-token prediction modules' copy of the token table): the
    // exchange of the two copies' gradients at the end of the step.
    os << "\n  idle for the tied embeddings' gradients (tie_grads) per rank:";
    for (const RankReport &r : report.ranks)
      os << " " << (r.ties ? formatSeconds(r.idle.tiedGradients) : "-");
    os << "\n";
  }
  if (c.tensor > 1) {
    // Tensor parallelism: the group's collectives inside each compute, on the compute stream.
    os << "\n  tensor-parallel collectives per rank (T = " << c.tensor
       << (c.sequenceParallel ? ", sequence parallel" : "") << "): all-reduces";
    for (const RankReport &r : report.ranks)
      os << " " << r.tensorAllReduces;
    if (c.sequenceParallel) {
      os << "; all-gathers";
      for (const RankReport &r : report.ranks)
        os << " " << r.tensorAllGathers;
      os << "; reduce-scatters";
      for (const RankReport &r : report.ranks)
        os << " " << r.tensorReduceScatters;
    }
    os << "\n  exposed tensor-parallel communication per rank:";
    for (const RankReport &r : report.ranks)
      os << " " << formatSeconds(r.idle.tensor);
    os << "\n";
  }
  if (c.expert > 1 && plan.transformer && plan.transformer->isMoe()) {
    // Expert parallelism: the dispatch and combine all-to-alls inside each compute, and what
    // of them the paired steps hid.
    os << "\n  expert all-to-alls per rank (E = " << c.expert << "):";
    for (const RankReport &r : report.ranks)
      os << " " << r.allToAlls;
    os << "\n  all-to-all time per rank, exposed / without pairing:";
    for (const RankReport &r : report.ranks)
      os << " " << formatSeconds(r.idle.allToAll) << " / " << formatSeconds(r.allToAllS);
    os << "\n";
  }
  if (!c.splitBackward)
    return;
  // Split backward: how much of each rank's busy time is weight gradients, the work the
  // schedule moved into time the rank would otherwise spend waiting.
  os << "\n  weight gradients (W) per rank:";
  for (const RankReport &r : report.ranks)
    os << " " << formatSeconds(r.weightGradientS);
  os << "\n";
}
