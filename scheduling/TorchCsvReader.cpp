//===- TorchCsvReader.cpp - PyTorch compute-only CSVs ---------------------===//

#include "scheduling/TorchCsvReader.h"

#include "llvm/ADT/SmallVector.h"

#include <set>

using namespace conduit;

namespace {

/// Parses "12F3" into (stage 12, forward, micro-batch 3); I, W and B are the input gradient,
/// weight gradient and whole backward.
bool parseAction(llvm::StringRef cell, sched::Action &action, std::string &problem) {
  size_t digits = cell.find_first_not_of("0123456789");
  unsigned s = 0, m = 0;
  // The letters in the order of sched::ActionKind.
  const llvm::StringRef kinds = "FBIW";
  size_t kind = digits == 0 || digits == llvm::StringRef::npos || digits + 1 >= cell.size()
                    ? llvm::StringRef::npos
                    : kinds.find(cell[digits]);
  if (kind == llvm::StringRef::npos || cell.take_front(digits).getAsInteger(10, s) ||
      cell.drop_front(digits + 1).getAsInteger(10, m) || s > (1u << 26) || m > (1u << 26)) {
    problem = "expected a compute action like 0F3, 1B2, 1I2, 1W2 or (0F3;1B2)OVERLAP_F_B (a "
              "compute-only schedule)";
    return false;
  }
  action = {static_cast<sched::ActionKind>(kind), static_cast<int32_t>(s), static_cast<int32_t>(m)};
  return true;
}

/// Parses a cell: one action, or "(aFm;bBn)OVERLAP_F_B", a forward and a backward (or input
/// gradient) run as one overlapped pair.
bool parseCell(llvm::StringRef cell, llvm::SmallVectorImpl<sched::Action> &actions,
               std::string &problem) {
  if (!cell.starts_with("("))
    return parseAction(cell, actions.emplace_back(), problem);
  auto [inside, rest] = cell.drop_front().split(')');
  auto [first, second] = inside.split(';');
  if (rest != "OVERLAP_F_B" || !parseAction(first.trim(), actions.emplace_back(), problem) ||
      !parseAction(second.trim(), actions.emplace_back(), problem) ||
      actions[0].kind != sched::ActionKind::Forward ||
      !sched::producesInputGradient(actions[1].kind)) {
    problem = "expected an overlapped pair like (0F3;1B2)OVERLAP_F_B: a forward, then a "
              "backward or input gradient";
    return false;
  }
  return true;
}

} // namespace

llvm::Expected<ImportedSchedule> conduit::readTorchCsv(llvm::StringRef text, int64_t numStages) {
  ImportedSchedule result;
  result.stageRank.assign(numStages, -1);
  // Per stage: the micro-batches of its forwards, of its backwards (whole or input gradient)
  // and of its weight gradients.
  std::vector<std::set<int32_t>> forwards(numStages), backwards(numStages), weights(numStages);
  llvm::SmallVector<llvm::StringRef> rows;
  text.rtrim("\r\n").split(rows, '\n');
  for (size_t r = 0; r < rows.size(); ++r) {
    std::vector<sched::Action> &order = result.schedule.ranks.emplace_back();
    std::vector<int32_t> &pairs = result.schedule.pairs.emplace_back();
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
      llvm::SmallVector<sched::Action, 2> actions;
      std::string problem;
      if (!parseCell(cell, actions, problem))
        return llvm::createStringError(where() + problem);
      if (actions.size() == 2)
        pairs.push_back(static_cast<int32_t>(order.size()));
      for (const sched::Action &action : actions) {
        if (action.stage >= numStages)
          return llvm::createStringError(where() + "stage " + std::to_string(action.stage) +
                                         " does not exist; the job has " +
                                         std::to_string(numStages) + " stages");
        int64_t &rank = result.stageRank[action.stage];
        if (rank >= 0 && rank != static_cast<int64_t>(r))
          return llvm::createStringError(where() + "stage " + std::to_string(action.stage) +
                                         " also appears on row " + std::to_string(rank + 1) +
                                         "; a stage lives on one rank");
        rank = static_cast<int64_t>(r);
        std::set<int32_t> &seen = action.kind == sched::ActionKind::Forward ? forwards[action.stage]
                                  : action.kind == sched::ActionKind::BackwardWeight
                                      ? weights[action.stage]
                                      : backwards[action.stage];
        if (!seen.insert(action.mb).second)
          return llvm::createStringError(where() + sched::describe(action) + " appears twice");
        order.push_back(action);
      }
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
    if (!complete(forwards[s]) || !complete(backwards[s]) ||
        (!weights[s].empty() && !complete(weights[s])))
      return llvm::createStringError("stage " + std::to_string(s) +
                                     " does not have one forward and one backward (or input and "
                                     "weight gradient) for each of the micro-batches 0.." +
                                     std::to_string(result.numMicrobatches - 1));
  }
  return result;
}
