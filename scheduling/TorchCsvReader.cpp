//===- TorchCsvReader.cpp - PyTorch compute-only CSVs ---------------------===//
//
// One pass over the rows collects every action with the cell it came from; the checks that
// follow name that cell. A stage's backward of one micro-batch is whole (B) or split into an
// input gradient (I) and a weight gradient (W), and one stage may mix the two over its
// micro-batches, as PyTorch's own DualPipeV does.
//
//===----------------------------------------------------------------------===//

#include "scheduling/TorchCsvReader.h"

#include "llvm/ADT/SmallVector.h"

#include <array>
#include <map>

using namespace conduit;

namespace {

using sched::Action;
using sched::ActionKind;

/// The letters in the order of sched::ActionKind.
constexpr llvm::StringRef kKindLetters = "FBIW";

/// An action in PyTorch's spelling: "0F3", "1B2".
std::string cellOf(const Action &action) {
  return std::to_string(action.stage) + kKindLetters[static_cast<int>(action.kind)] +
         std::to_string(action.mb);
}

/// Parses "12F3" into (stage 12, forward, micro-batch 3); I, W and B are the input gradient,
/// weight gradient and whole backward.
bool parseAction(llvm::StringRef cell, Action &action, std::string &problem) {
  size_t digits = cell.find_first_not_of("0123456789");
  unsigned s = 0, m = 0;
  size_t kind = digits == 0 || digits == llvm::StringRef::npos || digits + 1 >= cell.size()
                    ? llvm::StringRef::npos
                    : kKindLetters.find(cell[digits]);
  if (kind == llvm::StringRef::npos || cell.take_front(digits).getAsInteger(10, s) ||
      cell.drop_front(digits + 1).getAsInteger(10, m) || s > (1u << 26) || m > (1u << 26)) {
    problem = "expected a compute action like 0F3, 1B2, 1I2, 1W2 or (0F3;1B2)OVERLAP_F_B (a "
              "compute-only schedule)";
    return false;
  }
  action = {static_cast<ActionKind>(kind), static_cast<int32_t>(s), static_cast<int32_t>(m)};
  return true;
}

/// Parses a cell: one action, or "(aFm;bBn)OVERLAP_F_B", a forward and a backward (whole or
/// input gradient) of another micro-batch run as one overlapped pair.
bool parseCell(llvm::StringRef cell, llvm::SmallVectorImpl<Action> &actions, std::string &problem) {
  if (!cell.starts_with("("))
    return parseAction(cell, actions.emplace_back(), problem);
  auto [inside, rest] = cell.drop_front().split(')');
  if (rest != "OVERLAP_F_B") {
    problem = "expected an overlapped pair like (0F3;1B2)OVERLAP_F_B";
    return false;
  }
  llvm::SmallVector<llvm::StringRef> parts;
  inside.split(parts, ';');
  if (parts.size() != 2) {
    problem = "an OVERLAP_F_B pair holds two actions, a forward and then a backward or input "
              "gradient; this one holds " +
              std::to_string(parts.size());
    return false;
  }
  for (llvm::StringRef part : parts)
    if (!parseAction(part.trim(), actions.emplace_back(), problem))
      return false;
  if (actions[0].kind != ActionKind::Forward || !sched::producesInputGradient(actions[1].kind)) {
    problem = "pairs " + cellOf(actions[0]) + " with " + cellOf(actions[1]) +
              "; an OVERLAP_F_B pair is a forward and then a backward (B) or input gradient (I)";
    return false;
  }
  return true;
}

/// Where an action was read: its row and column (1-based; both actions of a pair share one).
struct Cell {
  size_t row = 0, column = 0;
};

std::string at(const Cell &cell) {
  return "row " + std::to_string(cell.row) + ", column " + std::to_string(cell.column);
}

} // namespace

llvm::Expected<ImportedSchedule> conduit::readTorchCsv(llvm::StringRef text, int64_t numStages) {
  ImportedSchedule result;
  result.stageRank.assign(numStages, -1);
  // Per stage and kind (sched::ActionKind), the cell of each micro-batch's action.
  std::vector<std::array<std::map<int32_t, Cell>, 4>> seen(numStages);
  llvm::SmallVector<llvm::StringRef> rows;
  text.rtrim("\r\n").split(rows, '\n');
  for (size_t r = 0; r < rows.size(); ++r) {
    std::vector<Action> &order = result.schedule.ranks.emplace_back();
    std::vector<int32_t> &pairs = result.schedule.pairs.emplace_back();
    llvm::SmallVector<llvm::StringRef> cells;
    rows[r].rtrim('\r').split(cells, ',');
    for (size_t c = 0; c < cells.size(); ++c) {
      llvm::StringRef cell = cells[c].trim();
      if (cell.empty())
        continue; // an idle step
      const Cell here{r + 1, c + 1};
      auto where = [&] { return at(here) + " (\"" + cell.str() + "\"): "; };
      llvm::SmallVector<Action, 2> actions;
      std::string problem;
      if (!parseCell(cell, actions, problem))
        return llvm::createStringError(where() + problem);
      if (actions.size() == 2)
        pairs.push_back(static_cast<int32_t>(order.size()));
      for (const Action &action : actions) {
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
        auto &ofKind = seen[action.stage][static_cast<int>(action.kind)];
        auto [previous, inserted] = ofKind.try_emplace(action.mb, here);
        if (!inserted)
          return llvm::createStringError(where() + cellOf(action) + " appears twice (also at " +
                                         at(previous->second) + ")");
        order.push_back(action);
      }
    }
  }

  // Every stage has the forwards of micro-batches 0..M-1, M being stage 0's count, and for
  // each of them one backward: whole, or an input gradient and then a weight gradient.
  for (int32_t s = 0; s < numStages; ++s) {
    if (result.stageRank[s] < 0)
      return llvm::createStringError("stage " + std::to_string(s) + " has no action");
    const auto &forwards = seen[s][static_cast<int>(ActionKind::Forward)];
    if (s == 0)
      result.numMicrobatches = static_cast<int64_t>(forwards.size());
    if (result.numMicrobatches == 0)
      return llvm::createStringError("stage 0 has no forward; its forwards give the "
                                     "micro-batches 0..M-1 that every stage runs");
    const int64_t m = result.numMicrobatches;
    const std::string range = "micro-batches 0.." + std::to_string(m - 1);
    auto cellAt = [&](ActionKind kind, int32_t mb) -> const Cell * {
      const auto &ofKind = seen[s][static_cast<int>(kind)];
      auto it = ofKind.find(mb);
      return it == ofKind.end() ? nullptr : &it->second;
    };
    auto name = [&](ActionKind kind, int32_t mb) { return cellOf({kind, s, mb}); };
    for (int32_t mb = 0; mb < m; ++mb) {
      const Cell *whole = cellAt(ActionKind::Backward, mb);
      const Cell *input = cellAt(ActionKind::BackwardInput, mb);
      const Cell *weight = cellAt(ActionKind::BackwardWeight, mb);
      std::string of = "stage " + std::to_string(s) + " micro-batch " + std::to_string(mb);
      if (!cellAt(ActionKind::Forward, mb))
        return llvm::createStringError(
            of + " has no forward (" + name(ActionKind::Forward, mb) +
            "); every stage has one forward and one backward (B, or I and W) for each of the " +
            range);
      if (whole && (input || weight)) {
        ActionKind half = input ? ActionKind::BackwardInput : ActionKind::BackwardWeight;
        return llvm::createStringError(
            of + " has both a whole backward (" + name(ActionKind::Backward, mb) + ", " +
            at(*whole) + ") and " + (input ? "an input" : "a weight") + " gradient (" +
            name(half, mb) + ", " + at(input ? *input : *weight) +
            "); a micro-batch's backward is whole or split into I and W, not both");
      }
      if (!whole && !input && !weight)
        return llvm::createStringError(
            of + " has no backward (" + name(ActionKind::Backward, mb) + ", or " +
            name(ActionKind::BackwardInput, mb) + " and " + name(ActionKind::BackwardWeight, mb) +
            "); every stage has one forward and one backward for each of the " + range);
      if (weight && !input)
        return llvm::createStringError(
            of + " has a weight gradient (" + name(ActionKind::BackwardWeight, mb) + ", " +
            at(*weight) + ") but no input gradient (" + name(ActionKind::BackwardInput, mb) + ")");
      if (input && !weight)
        return llvm::createStringError(
            of + " has an input gradient (" + name(ActionKind::BackwardInput, mb) + ", " +
            at(*input) + ") but no weight gradient (" + name(ActionKind::BackwardWeight, mb) + ")");
      if (input && weight->column < input->column)
        return llvm::createStringError(
            at(*weight) + " (\"" + name(ActionKind::BackwardWeight, mb) +
            "\"): the weight gradient comes before its input gradient (" +
            name(ActionKind::BackwardInput, mb) + ", " + at(*input) + ")");
    }
    // Actions of micro-batches outside 0..M-1 (the loop above found every one inside).
    for (const auto &ofKind : seen[s])
      if (!ofKind.empty() && ofKind.rbegin()->first >= m) {
        int32_t mb = ofKind.rbegin()->first;
        ActionKind kind = static_cast<ActionKind>(&ofKind - seen[s].data());
        return llvm::createStringError(at(ofKind.rbegin()->second) + " (\"" + name(kind, mb) +
                                       "\"): stage 0 has the forwards of the " + range +
                                       ", so micro-batch " + std::to_string(mb) +
                                       " does not exist");
      }
  }
  return result;
}
