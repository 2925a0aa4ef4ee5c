//===- JobCosts.h - what the cost model reads of a job ----------*- C++ -*-===//
//
// The bridge from the job model (job/JobSpec.h) to the cost model's inputs: a job's cluster,
// its layers' FLOPs and its transformer's shape, for tools that price a job without building
// its IR (the tuner's bounds, the GEMM efficiency table). The passes take the same figures
// from the IR (passes/CostModelBuilder.h).
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_ANALYSIS_JOBCOSTS_H
#define CONDUIT_ANALYSIS_JOBCOSTS_H

#include "analysis/CostModel.h"
#include "analysis/Roofline.h"
#include "job/JobSpec.h"

namespace conduit {

/// The figures of `shape` the cost model's roofline prices its layers by.
TransformerShape transformerShape(const TransformerSpec &shape, int64_t elementBytes);

/// What the cost model reads of `job` itself: its cluster, its transformer's shape (for the
/// roofline) and each layer's name and FLOPs. The parallel configuration is left to the caller.
CostInputs jobCostInputs(const Job &job);

/// The imbalance a job's mixture of experts is planned and priced with: `model.moe.imbalance`;
/// else the one `cluster.profile` measured, where it profiled a run with the job's expert size
/// E (ProfileReader.h, RoutedLoadProfile: its peak); else the default for E and one tensor
/// rank's tokens of a micro-batch (job/TransformerCosts.h). A profile that cannot be read
/// leaves the default here; the cost model reports it. 1 without experts.
struct MoeImbalance {
  double value = 1;
  enum class Source { Stated, Measured, Default } source = Source::Default;
};
MoeImbalance moeImbalance(const Job &job);

} // namespace conduit

#endif // CONDUIT_ANALYSIS_JOBCOSTS_H
