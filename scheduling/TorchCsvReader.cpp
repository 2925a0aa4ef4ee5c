//===- TorchCsvReader.cpp - PyTorch compute-only CSVs ---------------------===//

#include "scheduling/TorchCsvReader.h"

#include "llvm/ADT/SmallVector.h"

#include <set>

using namespace conduit;

namespace {

/// Parses "12F3" into (stage 12, forward, micro-batch 3).
bool parseAction(llvm::StringRef cell, sched::Action &action, std::string &problem) {
  size_t digits = cell.find_first_not_of("0123456789");
  if (digits == 0 || digits == llvm::StringRef::npos || digits + 1 >= cell.size()) {
    problem = "expected an action like 0F3 or 1B2";
    return false;
  }
  char kind = cell[digits];
  llvm::StringRef stage = cell.take_front(digits), mb = cell.drop_front(digits + 1);
  if (kind == 'I' || kind == 'W') {
    problem = "split backwards (I and W) are not supported; use full backwards (B)";
    return false;
  }
  unsigned s = 0, m = 0;
  if ((kind != 'F' && kind != 'B') || stage.getAsInteger(10, s) || mb.getAsInteger(10, m) ||
      s > (1u << 26) || m > (1u << 26)) {
    problem = "expected a compute action like 0F3 or 1B2 (a compute-only schedule)";
    return false;
  }
  action = {kind == 'F' ? sched::ActionKind::Forward : sched::ActionKind::Backward,
            static_cast<int32_t>(s), static_cast<int32_t>(m)};
  return true;
}

} // namespace

llvm::Expected<ImportedSchedule> conduit::readTorchCsv(llvm::StringRef text, int64_t numStages) {
  ImportedSchedule result;
  result.stageRank.assign(numStages, -1);
  std::vector<std::set<int32_t>> forwards(numStages), backwards(numStages);
  llvm::SmallVector<llvm::StringRef> rows;
  text.rtrim("\r\n").split(rows, '\n');
  for (size_t r = 0; r < rows.size(); ++r) {
    std::vector<sched::Action> &order = result.schedule.ranks.emplace_back();
    llvm::SmallVector<llvm::StringRef> cells;
    rows[r].rtrim('\r').split(cells, ',');
    for (size_t c = 0; c < cells.size(); ++c) {
      llvm::StringRef cell = cells[c].trim();
      if (cell.empty())
        continue; // an idle step
      auto where = [&] {
        return "row " + std::to_string(r + 1) + ", column " + std::to_string(c + 1) + " (\"" +
               cell.str() + "\"): ";
      };
      sched::Action action;
      std::string problem;
      if (!parseAction(cell, action, problem))
        return llvm::createStringError(where() + problem);
      if (action.stage >= numStages)
        return llvm::createStringError(where() + "stage " + std::to_string(action.stage) +
                                       " does not exist; the job has " + std::to_string(numStages) +
                                       " stages");
      int64_t &rank = result.stageRank[action.stage];
      if (rank >= 0 && rank != static_cast<int64_t>(r))
        return llvm::createStringError(where() + "stage " + std::to_string(action.stage) +
                                       " also appears on row " + std::to_string(rank + 1) +
                                       "; a stage lives on one rank");
      rank = static_cast<int64_t>(r);
      std::set<int32_t> &seen = action.kind == sched::ActionKind::Forward ? forwards[action.stage]
                                                                          : backwards[action.stage];
      if (!seen.insert(action.mb).second)
        return llvm::createStringError(where() + "appears twice");
      order.push_back(action);
    }
  }
  for (int64_t s = 0; s < numStages; ++s) {
    if (result.stageRank[s] < 0)
      return llvm::createStringError("stage " + std::to_string(s) + " has no action");
    if (s == 0)
      result.numMicrobatches = static_cast<int64_t>(forwards[0].size());
    auto complete = [&](const std::set<int32_t> &mbs) {
      return static_cast<int64_t>(mbs.size()) == result.numMicrobatches &&
             (mbs.empty() || *mbs.rbegin() == result.numMicrobatches - 1);
    };
    if (!complete(forwards[s]) || !complete(backwards[s]))
      return llvm::createStringError("stage " + std::to_string(s) +
                                     " does not have one forward and one backward for each "
                                     "of the micro-batches 0.." +
                                     std::to_string(result.numMicrobatches - 1));
  }
  return result;
}
