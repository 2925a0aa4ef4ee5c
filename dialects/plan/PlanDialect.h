//===- PlanDialect.h - the plan dialect -------------------------*- C++ -*-===//
//
// Declares the plan dialect; PlanOps.h has its operations.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_DIALECTS_PLAN_PLANDIALECT_H
#define CONDUIT_DIALECTS_PLAN_PLANDIALECT_H

#include "mlir/IR/Dialect.h"

#include "dialects/plan/PlanDialect.h.inc"

#endif // CONDUIT_DIALECTS_PLAN_PLANDIALECT_H
