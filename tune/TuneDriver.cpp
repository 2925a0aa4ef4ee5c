//===- TuneDriver.cpp - the conduit-tune driver ---------------------------===//

#include "tune/TuneDriver.h"

#include "analysis/Units.h"
#include "compiler/ToolConsole.h"
#include "job/KeyEditor.h"
#include "runtime/ExitCodes.h"
#include "runtime/plan/PlanFile.h"
#include "tune/Tune.h"
#include "tune/TuneReport.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

using namespace conduit;
namespace cl = llvm::cl;

namespace {

enum class EmitKind { Table, Json, Svg };

struct Options {
  cl::OptionCategory category{"conduit-tune options"};
  cl::opt<std::string> input{cl::Positional, cl::desc("<job.json>"), cl::Required,
                             cl::cat(category)};
  cl::opt<int64_t> gpus{"gpus", cl::desc("GPUs to plan for (pipeline x data)"), cl::value_desc("N"),
                        cl::cat(category)};
  cl::opt<std::string> globalBatch{
      "global-batch",
      cl::desc("Samples per step over all replicas; a list searches each (for --emit=svg)"),
      cl::value_desc("B or B1,B2,..."), cl::cat(category)};
  cl::list<std::string> vary{"vary",
                             cl::desc("Search only these values of a job-file key (repeatable)"),
                             cl::value_desc("key.path=v1,v2,..."), cl::cat(category)};
  cl::list<std::string> fix{"fix", cl::desc("Hold a job-file key at one value (repeatable)"),
                            cl::value_desc("key.path=value"), cl::cat(category)};
  cl::opt<int64_t> top{"top", cl::desc("Configurations to rank (default 10)"), cl::init(10),
                       cl::value_desc("K"), cl::cat(category)};
  cl::opt<EmitKind> emit{
      "emit", cl::desc("What to write (default: table)"), cl::init(EmitKind::Table),
      cl::values(clEnumValN(EmitKind::Table, "table", "the ranked table, for people"),
                 clEnumValN(EmitKind::Json, "json", "the result with every entry's job, as JSON"),
                 clEnumValN(EmitKind::Svg, "svg",
                            "best tokens/s per schedule against the batch per GPU (needs a "
                            "list of global batches)")),
      cl::cat(category)};
  cl::opt<std::string> output{
      "o", cl::desc("Write what --emit names to this file ('-': standard output)"),
      cl::value_desc("file"), cl::cat(category)};
  cl::opt<std::string> bestJob{"best-job", cl::desc("Write the best configuration's job file"),
                               cl::value_desc("file"), cl::cat(category)};
  cl::opt<std::string> bestPlan{"best-plan",
                                cl::desc("Write the best configuration's verified plan file"),
                                cl::value_desc("file"), cl::cat(category)};
  cl::opt<double> budget{"budget", cl::desc("Seconds the search may take (0: no limit)"),
                         cl::init(0), cl::value_desc("seconds"), cl::cat(category)};
  cl::opt<TuneObjective> objective{
      "objective", cl::desc("What to rank by (default: throughput)"),
      cl::init(TuneObjective::Throughput),
      cl::values(clEnumValN(TuneObjective::Throughput, "throughput",
                            "shortest step, ties broken by lower peak memory"),
                 clEnumValN(TuneObjective::Memory, "memory",
                            "lowest peak memory, ties broken by shorter step")),
      cl::cat(category)};
  cl::opt<bool> microbatchSearch{
      "microbatch-search",
      cl::desc("Refine the best configuration the UMPIPE search covers with unequal "
               "micro-batches"),
      cl::cat(category)};
  cl::opt<bool> pareto{
      "pareto",
      cl::desc("Find the Pareto front of throughput against peak memory too (compiles more)"),
      cl::cat(category)};
  cl::opt<unsigned> threads{"threads", cl::desc("Worker threads (default: one per core)"),
                            cl::init(0), cl::cat(category)};
};

const ToolConsole console("conduit-tune");

/// "64" or "64,128,256": positive integers.
std::optional<std::vector<int64_t>> parseBatches(llvm::StringRef text, std::string &error) {
  llvm::SmallVector<llvm::StringRef> parts;
  text.split(parts, ',');
  std::vector<int64_t> out;
  for (llvm::StringRef part : parts) {
    int64_t n = 0;
    if (part.trim().getAsInteger(10, n) || n < 1) {
      error = "--global-batch expects positive sample counts (B or B1,B2,...), got \"" +
              text.str() + "\"";
      return std::nullopt;
    }
    out.push_back(n);
  }
  return out;
}

/// The job object as a file of its own: the paths it names made absolute, since the file may be
/// in another folder than the job it came from (the path keys of docs/job-file.md), and its
/// name kept, since a job without one is named after its file.
Json asJobFile(Json job, const std::string &jobPath) {
  if (job.is_object() && !job.contains("name"))
    job["name"] = llvm::sys::path::stem(jobPath).str();
  llvm::SmallString<256> folder(jobPath);
  llvm::sys::path::remove_filename(folder);
  for (const char *key : {"model.path", "cluster.profile"}) {
    const Json *value = findKey(job, key);
    if (!value || !value->is_string() ||
        llvm::sys::path::is_absolute(value->get_ref<const std::string &>()))
      continue;
    llvm::SmallString<256> absolute(folder);
    llvm::sys::path::append(absolute, value->get_ref<const std::string &>());
    llvm::sys::fs::make_absolute(absolute);
    llvm::sys::path::remove_dots(absolute, /*remove_dot_dot=*/true);
    setKey(job, key, std::string(absolute));
  }
  return job;
}

} // namespace

int conduit::runTuner(int argc, char **argv) {
  Options options;
  for (auto &[name, option] : cl::getRegisteredOptions()) {
    bool ours = llvm::is_contained(option->Categories, &options.category);
    if (!ours && name != "help" && name != "version")
      option->setHiddenFlag(cl::ReallyHidden);
  }
  if (!cl::ParseCommandLineOptions(
          argc, argv,
          "Conduit: find the best parallel configuration of a job for a GPU count and a global "
          "batch\n",
          &llvm::errs()))
    return kExitUsage;

  if (!options.gpus.getNumOccurrences())
    return console.usageError("--gpus is required: the number of GPUs to plan for");
  if (options.gpus < 1)
    return console.usageError("--gpus must be a positive GPU count, got " +
                              std::to_string(options.gpus));
  if (!options.globalBatch.getNumOccurrences())
    return console.usageError("--global-batch is required: samples per step over all replicas");
  std::string error;
  std::optional<std::vector<int64_t>> batches = parseBatches(options.globalBatch, error);
  if (!batches)
    return console.usageError(error);
  if (options.top < 1)
    return console.usageError("--top must be at least 1, got " + std::to_string(options.top));
  if (options.budget < 0)
    return console.usageError("--budget must be a number of seconds, 0 for no limit");
  if (options.emit == EmitKind::Svg && batches->size() < 2)
    return console.usageError(
        "--emit=svg charts the best tokens/s of each schedule against the batch "
        "per GPU: give --global-batch a list, e.g. --global-batch 64,128,256");
  if (batches->size() > 1 && (!options.bestJob.empty() || !options.bestPlan.empty()))
    return console.usageError("--best-job and --best-plan write one configuration: give one "
                              "--global-batch");
  std::vector<Restriction> restrictions;
  for (auto [list, name] : {std::pair{&options.vary, "--vary"}, std::pair{&options.fix, "--fix"}})
    for (const std::string &spec : *list) {
      std::optional<Restriction> r = parseRestriction(spec, name, error);
      if (!r)
        return console.usageError(error);
      if (llvm::any_of(restrictions, [&](const Restriction &o) { return o.key == r->key; }))
        return console.usageError(std::string(name) + " " + r->key +
                                  ": the key is already restricted; give it once");
      restrictions.push_back(std::move(*r));
    }

  Diagnostics diag(options.input);
  std::optional<Json> root = loadJsonFile(options.input, diag);
  if (!root)
    return console.fail(diag.getError()->str());

  TuneOptions tuneOptions;
  tuneOptions.gpus = options.gpus;
  tuneOptions.restrictions = restrictions;
  tuneOptions.top = options.top;
  tuneOptions.objective = options.objective;
  tuneOptions.budgetS = options.budget;
  tuneOptions.microbatchSearch = options.microbatchSearch;
  tuneOptions.threads = options.threads;
  tuneOptions.pareto = options.pareto;
  tuneOptions.progress = [](const std::string &line) { llvm::errs() << line << "\n"; };
  std::vector<TuneResult> results;
  for (int64_t batch : *batches) {
    tuneOptions.globalBatch = batch;
    llvm::Expected<TuneResult> result = tune(*root, options.input, tuneOptions);
    if (!result) {
      std::string message = llvm::toString(result.takeError());
      return console.fail(
          options.input + ": " +
          (batches->size() > 1 ? "--global-batch " + std::to_string(batch) + ": " : "") + message);
    }
    results.push_back(std::move(*result));
  }

  if (int code = console.writeOutput(options.output, [&](llvm::raw_ostream &os) {
        switch (options.emit) {
        case EmitKind::Table:
          for (auto [k, r] : llvm::enumerate(results)) {
            if (k)
              os << "\n";
            printTuneTable(options.input, r, os);
          }
          break;
        case EmitKind::Json:
          if (results.size() == 1) {
            os << writeJson(tuneToJson(results.front())) << "\n";
          } else {
            Json all = Json::array();
            for (const TuneResult &r : results)
              all.push_back(tuneToJson(r));
            os << writeJson(Json{{"results", std::move(all)}}) << "\n";
          }
          break;
        case EmitKind::Svg:
          writeTuneChart(llvm::sys::path::filename(options.input).str() + " on " +
                             std::to_string(options.gpus) + " GPUs",
                         results, os);
          break;
        }
      }))
    return code;
  const TuneResult &only = results.front();
  if (!options.bestJob.empty())
    if (int code = console.writeOutput(options.bestJob, [&](llvm::raw_ostream &os) {
          os << writeJson(asJobFile(only.best().job, options.input)) << "\n";
        }))
      return code;
  if (!options.bestPlan.empty())
    if (int code = console.writeOutput(options.bestPlan, [&](llvm::raw_ostream &os) {
          flatbuffers::DetachedBuffer bytes = runtime::planBytes(*only.bestPlan);
          os.write(reinterpret_cast<const char *>(bytes.data()), bytes.size());
        }))
      return code;
  return kExitOk;
}
