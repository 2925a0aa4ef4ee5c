//===- CostModelBuilder.h - the cost model of IR modules --------*- C++ -*-===//
//
// The cost model (analysis/CostModel.h) knows no IR; these read what it needs from a
// pipe.model or a plan.program: the cluster attribute as a plain Cluster, the layers' FLOPs
// and names, and the parallelism that decides links and recomputation.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_PASSES_COSTMODELBUILDER_H
#define CONDUIT_PASSES_COSTMODELBUILDER_H

#include "analysis/CostModel.h"
#include "dialects/pipe/PipeOps.h"
#include "dialects/plan/PlanOps.h"

namespace conduit {

/// The #pipe.cluster attribute's figures.
Cluster clusterFromAttr(pipe::ClusterAttr cluster);

/// The cost model of a pipe.model (its cluster, layers and parallelism).
llvm::Expected<CostModel> buildCostModel(pipe::ModelOp model);

/// The cost model of a plan.program (its cluster, layers and parallelism).
llvm::Expected<CostModel> buildCostModel(plan::ProgramOp program);

} // namespace conduit

#endif // CONDUIT_PASSES_COSTMODELBUILDER_H
