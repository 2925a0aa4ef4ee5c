//===- Mpi.cpp - MPI calls as Status --------------------------------------===//

#include "runtime/exec/Mpi.h"

#include "absl/strings/str_cat.h"

#include <cstdlib>

namespace conduit::runtime {

namespace {
/// Whether a launcher (mpirun, srun) started this process: it then tells the process its
/// place through the environment.
bool launched() {
  for (const char *name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"})
    if (std::getenv(name))
      return true;
  return false;
}
} // namespace

absl::Status mpiStatus(int code, const char *call, const char *file, int line) {
  if (code == MPI_SUCCESS)
    return absl::OkStatus();
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return absl::UnavailableError(
      absl::StrCat(call, " failed at ", file, ":", line, ": ", std::string(text, length)));
}

absl::StatusOr<double> sumOverWorld(double value) {
  double total = 0;
  CONDUIT_MPI(MPI_Allreduce(&value, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
  return total;
}

absl::StatusOr<MpiWorld> MpiWorld::initialise(int *argc, char ***argv) {
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (!initialised) {
    // A process started without a launcher is a world of one (--reference, --dump,
    // --ranks-per-process). OpenMPI would start a daemon for it, in case it spawned processes
    // later (a few tenths of a second a start); it never does. The user's own setting wins.
    if (!launched())
      setenv("OMPI_MCA_ess_singleton_isolated", "1", /*overwrite=*/0);
    int provided = 0;
    CONDUIT_MPI(MPI_Init_thread(argc, argv, MPI_THREAD_SINGLE, &provided));
  }
  CONDUIT_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  MpiWorld world;
  CONDUIT_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &world.rank));
  CONDUIT_MPI(MPI_Comm_size(MPI_COMM_WORLD, &world.size));
  return world;
}

void MpiWorld::finalise() {
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (!finalised)
    MPI_Finalize();
}

} // namespace conduit::runtime
