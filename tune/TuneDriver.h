//===- TuneDriver.h - the conduit-tune driver -------------------*- C++ -*-===//
//
// Command-line handling and the top-level flow of conduit-tune, kept out of main() so that
// tests can drive it.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_TUNE_TUNEDRIVER_H
#define CONDUIT_TUNE_TUNEDRIVER_H

namespace conduit {

/// Runs conduit-tune with the given command line; returns the process exit code.
int runTuner(int argc, char **argv);

} // namespace conduit

#endif // CONDUIT_TUNE_TUNEDRIVER_H
