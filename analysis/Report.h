//===- Report.h - what a simulated step predicts ----------------*- C++ -*-===//
//
// Turns one simulated step of a plan into the figures users compare configurations by: step
// time, throughput, FLOP rate, bubble, exposed communication, and per rank where its idle
// time goes (docs/reports.md defines every figure).
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_ANALYSIS_REPORT_H
#define CONDUIT_ANALYSIS_REPORT_H

#include "analysis/Simulator.h"
#include "runtime/plan/Plan.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <vector>

namespace conduit {

/// Why a rank's compute stream was idle, in seconds; the parts sum to its idle time.
struct IdleAttribution {
  /// Waiting for a peer to reach the send of data this rank needs (pipeline fill and drain,
  /// imbalance between stages), and, after the rank's last instruction, for the slowest rank.
  double fillDrain = 0;
  /// Waiting while a point-to-point transfer with each peer rank is in flight ([peer]).
  std::vector<double> p2p;
  /// Waiting for parameter all-gathers.
  double allGather = 0;
  /// Waiting for gradient reductions (reduce-scatter, all-reduce) before the optimizer steps,
  /// and for the collectives still running after the last compute.
  double reductionTail = 0;
  /// Waiting for the exchange of tied embeddings' gradients (tie_grads) with the other copy's
  /// rank, which waits for that rank's last backward.
  double tiedGradients = 0;
  /// The tensor group's collectives, issued inside compute on the compute stream (what of them
  /// sequence parallelism does not overlap with the compute).
  double tensor = 0;
  /// The expert all-to-alls, issued inside compute on the compute stream: what of them a
  /// paired step did not hide behind the other half's compute (all of them elsewhere).
  double allToAll = 0;
  /// Anything else (none in plans from conduit-compile).
  double other = 0;

  double p2pTotal() const;
  /// Idle time caused by communication: p2p + all-gathers + reduction tail + tied gradients +
  /// tensor-parallel collectives + expert all-to-alls.
  double exposedComm() const {
    return p2pTotal() + allGather + reductionTail + tiedGradients + tensor + allToAll;
  }
};

struct RankReport {
  int32_t rank = 0;
  double busyS = 0; ///< compute stream: forwards, backwards, optimizer steps
  /// Of busyS: split backwards' weight gradients, which the schedule placed where the rank
  /// would otherwise wait (0 without split backward).
  double weightGradientS = 0;
  double idleS = 0; ///< step time - busy
  IdleAttribution idle;
  int64_t peakMemoryBytes = 0;
  int64_t allGathers = 0, reduceScatters = 0, allReduces = 0, sends = 0, recvs = 0;
  int64_t ties = 0; ///< tie_grads: 1 on a rank with a tied embedding copy, else 0
  /// Tensor-parallel collectives per step (0 without tensor parallelism).
  int64_t tensorAllReduces = 0, tensorAllGathers = 0, tensorReduceScatters = 0;
  /// Expert all-to-alls per step (dispatch and combine, forward and backward; 0 without
  /// expert parallelism), and their whole time as if no paired step hid any (idle.allToAll is
  /// what stayed exposed).
  int64_t allToAlls = 0;
  double allToAllS = 0;
};

/// The figures configurations are compared by: what the report leads with, what a sweep's
/// rows show and what the tuner ranks. One struct, so that each is computed once and held
/// (not copied field by field) by whatever passes it on.
struct StepFigures {
  double stepTimeS = 0;
  double tokensPerS = 0;
  /// Model FLOPs (forward and backward, no recomputation) per second per GPU, in TFLOP/s.
  double tflopsPerGpu = 0;
  /// Idle compute time over all ranks / (ranks x step time).
  double bubbleFraction = 0;
  /// Mean over ranks of the idle time caused by communication.
  double exposedCommS = 0;
  /// Mean over ranks of the expert all-to-alls' exposed time (part of exposedCommS), and of
  /// their whole time, what would be exposed if no paired step hid them.
  double exposedAllToAllS = 0, allToAllS = 0;
  /// The plan's predicted peak memory of its fullest rank.
  int64_t peakMemoryBytes = 0;
};

/// A step's figures and where they come from.
struct PlanReport : StepFigures {
  int64_t globalBatchSamples = 0;
  std::vector<RankReport> ranks;
  /// Per stage, its micro-batch sizes.
  std::vector<std::vector<int64_t>> stageMicrobatches;
};

/// Analyses a successful simulation of `plan`.
PlanReport analyzeStep(const runtime::Plan &plan, const SimulationResult &simulation);

/// The report as JSON (the `--emit=report` format; docs/reports.md).
llvm::json::Value reportToJson(const PlanReport &report);

/// The readable prediction and per-rank table that follows every compile's summary.
void printReport(const PlanReport &report, const runtime::Plan &plan, llvm::raw_ostream &os);

} // namespace conduit

#endif // CONDUIT_ANALYSIS_REPORT_H
