//===- conduit-tune.cpp - the best configuration of a job -----------------===//
//
// `conduit-tune JOB.json --gpus N --global-batch B [options]`: searches every parallel
// configuration of the job for N GPUs and B samples per step and ranks them by what
// conduit-compile predicts (docs/tune.md). Exit codes: 0 success, 1 bad input or nothing that
// compiles and fits, 2 bad command line.
//
//===----------------------------------------------------------------------===//

#include "runtime/Heap.h"
#include "tune/TuneDriver.h"

#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"

int main(int argc, char **argv) {
  conduit::reserveHugePageHeap();
  llvm::InitLLVM init(argc, argv);
  int code = conduit::runTuner(argc, argv);
  llvm::outs().flush();
  return code;
}
