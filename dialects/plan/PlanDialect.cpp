//===- PlanDialect.cpp - the plan dialect ---------------------------------===//
//
// Registers the plan dialect's operations. Its configuration attributes belong to the pipe
// dialect, which is loaded with it.
//
//===----------------------------------------------------------------------===//

#include "dialects/plan/PlanDialect.h"

#include "dialects/pipe/PipeDialect.h"
#include "dialects/plan/PlanOps.h"

using namespace conduit::plan;

#include "dialects/plan/PlanDialect.cpp.inc"

void PlanDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/plan/PlanOps.cpp.inc"
      >();
}
