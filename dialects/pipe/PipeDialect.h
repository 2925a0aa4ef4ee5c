//===- PipeDialect.h - the pipe dialect -------------------------*- C++ -*-===//
//
// Declares the pipe dialect. Include PipeOps.h for its operations and PipeAttrs.h for its
// enums and attributes.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_DIALECTS_PIPE_PIPEDIALECT_H
#define CONDUIT_DIALECTS_PIPE_PIPEDIALECT_H

#include "mlir/IR/Dialect.h"

#include "dialects/pipe/PipeDialect.h.inc"

#endif // CONDUIT_DIALECTS_PIPE_PIPEDIALECT_H
