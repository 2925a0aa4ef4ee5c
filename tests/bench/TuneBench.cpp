//===- TuneBench.cpp - conduit-tune's search on the 52B job ---------------===//
//
// The whole search of conduit-tune (enumeration, bounds, compiles of what the bounds cannot
// rule out, the re-check of the top 10) for the 52B GPT of testdata/jobs/gpt-52b-bfs.json on
// A100-80GB: 64 GPUs at a global batch of 128 samples, and 512 GPUs at 1024 (two samples per
// GPU, the small-batch regime of the breadth-first paper). Counters: configurations in the
// space, configurations decided per second, and the compiles the search made.
//
//===----------------------------------------------------------------------===//

#include "tune/Tune.h"

#include <benchmark/benchmark.h>

using namespace conduit;

namespace {

void BM_Tune52B(benchmark::State &state) {
  const std::string path = std::string(CONDUIT_TESTDATA) + "/jobs/gpt-52b-bfs.json";
  Diagnostics diag(path);
  std::optional<Json> root = loadJsonFile(path, diag);
  if (!root) {
    state.SkipWithError(diag.getError()->str().c_str());
    return;
  }
  TuneOptions options;
  options.gpus = state.range(0);
  options.globalBatch = state.range(1);
  TuneCounts counts;
  for (auto _ : state) {
    llvm::Expected<TuneResult> result = tune(*root, path, options);
    if (!result) {
      state.SkipWithError(llvm::toString(result.takeError()).c_str());
      return;
    }
    counts = result->counts;
  }
  const int64_t decided = counts.configurations - counts.undecided;
  state.counters["configurations"] = static_cast<double>(counts.configurations);
  state.counters["per_s"] = static_cast<double>(decided) / counts.seconds;
  state.counters["compiled"] =
      static_cast<double>(counts.evaluated + counts.infeasibleCompiled + counts.failed);
}

BENCHMARK(BM_Tune52B)
    ->Args({64, 128})
    ->Args({512, 1024})
    ->Unit(benchmark::kSecond)
    ->Iterations(1)
    ->UseRealTime();

} // namespace

BENCHMARK_MAIN();
