//===- PlanCosts.h - the duration of every instruction of a plan -*- C++ -*-===//
//
// What the simulator (analysis/Simulator.h) charges for each instruction: computes per stage
// and micro-batch from the cost model (or unit costs, for comparing schedules with their
// textbook definitions), transfers and collectives over their links, and the share of the
// tensor group's collectives that a compute does not hide.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_ANALYSIS_PLANCOSTS_H
#define CONDUIT_ANALYSIS_PLANCOSTS_H

#include "analysis/CostModel.h"
#include "runtime/plan/Plan.h"

#include <array>
#include <vector>

namespace conduit {

/// Durations of every kind of instruction of one plan.
class PlanCosts {
public:
  /// Durations from the cost model.
  static PlanCosts fromCostModel(const runtime::Plan &plan, const CostModel &cost);
  /// Unit costs: a forward, an input gradient and a weight gradient take their samples' count,
  /// a whole backward twice that, everything else 0.
  static PlanCosts unit(const runtime::Plan &plan);

  double of(const runtime::Plan &plan, int32_t rank, const runtime::Instruction &inst) const;
  /// A tensor collective `inst` issued by a compute `pass` (Forward, Backward, BackwardInput,
  /// BackwardWeight) of its stage and micro-batch: the time it adds to the compute stream.
  /// Without sequence parallelism, all of it; with it, the collectives are pipelined with the
  /// compute's GEMMs (as Megatron-LM's communication overlap does), so that a compute and its
  /// collectives take the longer of the two, and each collective adds its share of the excess.
  double tensorCollective(const runtime::Instruction &inst, runtime::Op pass) const;

private:
  /// Tensor parallelism with sequence parallelism: per stage, micro-batch and pass (forward,
  /// backward, input, weight), the fraction of the collectives' time the compute does not hide.
  std::vector<std::vector<std::array<double, 4>>> exposed;
  std::vector<std::vector<double>> forward, backward, input, weight; // [stage][micro-batch]
  std::vector<double> optimizer;                                     // [stage]
  const CostModel *cost = nullptr;
  std::vector<Link> dpLink;               // [group]
  std::vector<int64_t> groupMembers;      // [group]: ranks x replicas
  std::vector<std::vector<Link>> p2pLink; // [rank][peer]
};

} // namespace conduit

#endif // CONDUIT_ANALYSIS_PLANCOSTS_H
