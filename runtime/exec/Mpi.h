//===- Mpi.h - MPI calls as Status ------------------------------*- C++ -*-===//
//
// Every MPI call of the runtime goes through CONDUIT_MPI, which turns a failure into an
// absl::Status naming the call, the file and the line (communicators are set to return errors
// instead of aborting). MpiWorld is this process's place in the job; MpiTransport
// (MpiTransport.h) and the session's MPI rank group (runtime/session/Session.cpp) build on it.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_EXEC_MPI_H
#define CONDUIT_RUNTIME_EXEC_MPI_H

#include "runtime/Status.h"

#include <mpi.h>

#include <string>

namespace conduit::runtime {

/// The status of an MPI return code.
absl::Status mpiStatus(int code, const char *call, const char *file, int line);

#define CONDUIT_MPI(call)                                                                          \
  CONDUIT_RETURN_IF_ERROR(::conduit::runtime::mpiStatus((call), #call, __FILE__, __LINE__))

/// The sum of `value` over every process of the job (blocking).
absl::StatusOr<double> sumOverWorld(double value);

/// This process in the world.
struct MpiWorld {
  int rank = 0, size = 1;
  /// Initialises MPI (once) and sets errors to return.
  static absl::StatusOr<MpiWorld> initialise(int *argc, char ***argv);
  static void finalise();
};

} // namespace conduit::runtime

#endif // CONDUIT_RUNTIME_EXEC_MPI_H
