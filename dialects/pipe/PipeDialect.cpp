//===- PipeDialect.cpp - the pipe dialect ---------------------------------===//
//
// Registers the pipe dialect's operations and attributes.
//
//===----------------------------------------------------------------------===//

#include "dialects/pipe/PipeDialect.h"

#include "dialects/pipe/PipeAttrs.h"
#include "dialects/pipe/PipeOps.h"

using namespace conduit::pipe;

#include "dialects/pipe/PipeDialect.cpp.inc"

void PipeDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/pipe/PipeOps.cpp.inc"
      >();
  registerAttributes();
}
