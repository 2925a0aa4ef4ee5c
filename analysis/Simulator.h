//===- Simulator.h - discrete-event execution of a plan ---------*- C++ -*-===//
//
// Executes a plan the way the runtime does, with durations from the cost model: each rank's
// streams run concurrently, each in its own order; `wait` holds a stream until its event was
// signalled; a send and its receive (matched per (sender, receiver) pair in program order) run
// once both sides reached them (and, where the runtime moves messages only between computes,
// PlanCosts::progressBetweenComputes, end no earlier than the end of the compute the receiving
// rank runs at that time: see simulatePlan), and the transfers of a batch are posted together; a
// collective runs once every member of its group reached it. One data-parallel replica stands for
// all: replicas run the same program, and collectives are costed over the whole group.
//
// The same run verifies the plan (ARCHITECTURE.md §7): it checks, through events and stream
// order only (not through lucky timing), that every compute finds its inputs received and its
// parameters gathered, that no receive overwrites a slot still in use, that gradients are
// reduced once after a stage's last backward and the optimizer steps once after that, that
// collectives match across their group, that every compute issues the expert all-to-alls
// TensorCollectives.h lists and that one hides only behind the other half of a paired step,
// and that the simulation terminates. A failure names
// the instruction (and, for a deadlock, every blocked stream).
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_ANALYSIS_SIMULATOR_H
#define CONDUIT_ANALYSIS_SIMULATOR_H

#include "analysis/PlanCosts.h"
#include "runtime/plan/Plan.h"
#include "runtime/plan/Trace.h"

#include <optional>
#include <string>
#include <vector>

namespace conduit {

/// A problem found while simulating: where, and what.
struct SimulationError {
  int32_t rank = -1;
  int64_t instruction = -1;
  std::string message;
};

using runtime::InstructionTime;

struct SimulationResult {
  std::optional<SimulationError> error;
  double makespan = 0;
  /// Turns of the discrete-event loop (a stream advanced until it had to wait): the
  /// simulator's work, the same on every machine.
  int64_t events = 0;
  /// Per rank, per instruction (empty unless SimulationOptions::times).
  std::vector<std::vector<InstructionTime>> times;
  /// Per rank, per instruction: for a send or receive, the index of the matching instruction
  /// on its peer rank (the instruction's `peer`); -1 for everything else. Empty unless
  /// SimulationOptions::times.
  std::vector<std::vector<int32_t>> matched;
  /// Per rank: the expert all-to-alls' whole time, as if nothing hid them (their simulated
  /// durations are what stayed exposed).
  std::vector<double> allToAllS;
};

struct SimulationOptions {
  /// Whether the result keeps every instruction's times and the matching of transfers, which
  /// the reports, traces and charts read. Without them (a compile that only writes the plan
  /// file), the verification and the makespan are the same and the simulation holds about a
  /// third of the memory (docs/performance.md).
  bool times = true;
};

/// Runs the plan (which must pass checkPlanSemantics). Where transfers wait for computes, the
/// run is repeated, each pass holding the transfers by the computes of the pass before, until
/// the step stops changing (at most eight passes): the result is the last pass's.
SimulationResult simulatePlan(const runtime::Plan &plan, const PlanCosts &costs,
                              SimulationOptions options = {});

} // namespace conduit

#endif // CONDUIT_ANALYSIS_SIMULATOR_H
