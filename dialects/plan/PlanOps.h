//===- PlanOps.h - plan operations ------------------------------*- C++ -*-===//
//
// Operations of the plan dialect; see PlanOps.td for their documentation.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_DIALECTS_PLAN_PLANOPS_H
#define CONDUIT_DIALECTS_PLAN_PLANOPS_H

#include "dialects/pipe/PipeAttrs.h"
#include "dialects/plan/PlanDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"

namespace conduit::plan {
using ::conduit::pipe::TransferKind;
} // namespace conduit::plan

#define GET_OP_CLASSES
#include "dialects/plan/PlanOps.h.inc"

#endif // CONDUIT_DIALECTS_PLAN_PLANOPS_H
