//===- Status.h - error propagation in the runtime --------------*- C++ -*-===//
//
// The runtime reports errors as absl::Status and never aborts in library code. One small macro
// pair propagates them, in the manner of IREE's status.h.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_STATUS_H
#define CONDUIT_RUNTIME_STATUS_H

#include "absl/status/status.h"
#include "absl/status/statusor.h"

/// Returns the status of `expr` from the enclosing function unless it is OK.
#define CONDUIT_RETURN_IF_ERROR(expr)                                                              \
  do {                                                                                             \
    ::absl::Status conduit_status_ = (expr);                                                       \
    if (!conduit_status_.ok())                                                                     \
      return conduit_status_;                                                                      \
  } while (false)

#define CONDUIT_STATUS_CONCAT_INNER(a, b) a##b
#define CONDUIT_STATUS_CONCAT(a, b) CONDUIT_STATUS_CONCAT_INNER(a, b)

/// Evaluates `expr` (an absl::StatusOr), returns its status on error, else assigns its value
/// to `lhs` (which may be a declaration).
#define CONDUIT_ASSIGN_OR_RETURN(lhs, expr)                                                        \
  auto CONDUIT_STATUS_CONCAT(conduit_statusor_, __LINE__) = (expr);                                \
  if (!CONDUIT_STATUS_CONCAT(conduit_statusor_, __LINE__).ok())                                    \
    return CONDUIT_STATUS_CONCAT(conduit_statusor_, __LINE__).status();                            \
  lhs = std::move(*CONDUIT_STATUS_CONCAT(conduit_statusor_, __LINE__))

#endif // CONDUIT_RUNTIME_STATUS_H
