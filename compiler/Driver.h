//===- Driver.h - the conduit-compile driver --------------------*- C++ -*-===//
//
// Command-line handling and the top-level flow of conduit-compile, kept out of main() so that
// tests can drive it.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_COMPILER_DRIVER_H
#define CONDUIT_COMPILER_DRIVER_H

namespace conduit {

/// Runs conduit-compile with the given command line; returns the process exit code.
int runCompiler(int argc, char **argv);

} // namespace conduit

#endif // CONDUIT_COMPILER_DRIVER_H
