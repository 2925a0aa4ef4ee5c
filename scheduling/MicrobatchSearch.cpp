//===- MicrobatchSearch.cpp - searching unequal micro-batch partitions ----===//

#include "scheduling/MicrobatchSearch.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

using namespace conduit::sched;

namespace {
constexpr double kInfinity = std::numeric_limits<double>::infinity();
} // namespace

const char *conduit::sched::searchMethodName(SearchMethod method) {
  switch (method) {
  case SearchMethod::Greedy:
    return "greedy";
  case SearchMethod::DP:
    return "dp";
  case SearchMethod::Genetic:
    return "genetic";
  case SearchMethod::Descent:
    return "descent";
  }
  return "unknown";
}

namespace {

/// `total` samples in `count` micro-batches whose sizes differ by at most one (larger first).
std::vector<int64_t> equalCut(int64_t total, int64_t count) {
  std::vector<int64_t> sizes(count, total / count);
  for (int64_t j = 0; j < total % count; ++j)
    ++sizes[j];
  return sizes;
}

/// `total` samples in micro-batches proportional to `weights` (largest remainders), each at
/// least one sample.
std::vector<int64_t> apportion(int64_t total, const std::vector<double> &weights) {
  const int64_t count = static_cast<int64_t>(weights.size());
  const double sum = std::accumulate(weights.begin(), weights.end(), 0.0);
  std::vector<int64_t> sizes(count, 1);
  const int64_t spare = total - count;
  std::vector<std::pair<double, int64_t>> remainders;
  int64_t given = 0;
  for (int64_t j = 0; j < count; ++j) {
    const double share = spare * weights[j] / sum;
    const int64_t whole = static_cast<int64_t>(std::floor(share));
    sizes[j] += whole;
    given += whole;
    remainders.push_back({share - static_cast<double>(whole), -j});
  }
  std::sort(remainders.rbegin(), remainders.rend());
  for (int64_t k = 0; given < spare; ++k, ++given)
    ++sizes[-remainders[k % count].second];
  return sizes;
}

/// The cuts a stage may try as a whole: equal cuts of every count, and cuts that ramp up
/// (small first micro-batches start the pipeline sooner) or down (small last ones drain it).
std::vector<std::vector<int64_t>> cutFamily(int64_t total, int64_t maxCount) {
  // Every count up to 16, then steps of about a quarter: the family stays small for large
  // batches.
  std::vector<int64_t> counts;
  for (int64_t m = 1; m <= maxCount; m = m < 16 ? m + 1 : m + std::max<int64_t>(1, m / 4))
    counts.push_back(m);
  std::vector<std::vector<int64_t>> family;
  for (int64_t m : counts) {
    family.push_back(equalCut(total, m));
    if (m < 3)
      continue;
    std::vector<double> up(m), down(m);
    for (int64_t j = 0; j < m; ++j) {
      up[j] = std::min<double>(j + 1, 3);
      down[j] = std::min<double>(m - j, 3);
    }
    family.push_back(apportion(total, up));
    family.push_back(apportion(total, down));
  }
  std::sort(family.begin(), family.end());
  family.erase(std::unique(family.begin(), family.end()), family.end());
  return family;
}

class Search {
public:
  Search(StepTimeEvaluator &evaluator, const SearchOptions &options)
      : evaluator(evaluator), options(options), started(std::chrono::steady_clock::now()),
        lastProgress(started) {
    const int64_t batch = evaluator.batchSamples();
    maxCount = options.maxMicrobatches > 0 ? std::min(options.maxMicrobatches, batch) : batch;
  }

  SearchResult run() {
    const int64_t stages = evaluator.numStages();
    Partitions baseline(stages, options.baseline.empty() ? equalCut(evaluator.batchSamples(), 1)
                                                         : options.baseline);
    result.baselineStepTime = consider(baseline);
    switch (options.method) {
    case SearchMethod::Greedy:
      greedy(baseline);
      break;
    case SearchMethod::DP:
      dynamicProgramming(baseline);
      break;
    case SearchMethod::Genetic:
      genetic(baseline);
      break;
    case SearchMethod::Descent:
      descent();
      break;
    }
    result.evaluated = evaluator.evaluations() - startCount;
    result.seconds = elapsed();
    return result;
  }

private:
  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  }
  bool outOfTime() const { return options.timeBudgetS > 0 && elapsed() > options.timeBudgetS; }

  /// Evaluates a candidate, keeps it if it is the best so far, reports progress.
  double consider(const Partitions &candidate) {
    const double time = evaluator.stepTime(candidate);
    if (result.best.empty() || time < result.stepTime) {
      result.best = candidate;
      result.stepTime = time;
    }
    if (options.progress) {
      auto now = std::chrono::steady_clock::now();
      if (now - lastProgress > std::chrono::seconds(1)) {
        lastProgress = now;
        options.progress(evaluator.evaluations() - startCount, result.stepTime);
      }
    }
    return time;
  }

  /// Evaluates candidates together (over the machine's cores), keeps the best, reports progress.
  void considerAll(const std::vector<Partitions> &candidates, std::vector<double> &times) {
    evaluator.stepTimes(candidates, times);
    for (size_t i = 0; i < candidates.size(); ++i)
      if (result.best.empty() || times[i] < result.stepTime) {
        result.best = candidates[i];
        result.stepTime = times[i];
      }
    if (options.progress &&
        std::chrono::steady_clock::now() - lastProgress > std::chrono::seconds(1)) {
      lastProgress = std::chrono::steady_clock::now();
      options.progress(evaluator.evaluations() - startCount, result.stepTime);
    }
  }

  /// Local greedy: move one sample between neighbouring micro-batches of a stage while it helps.
  void greedy(Partitions current) {
    double best = evaluator.stepTime(current);
    bool improved = true;
    while (improved && !outOfTime()) {
      improved = false;
      for (size_t s = 0; s < current.size(); ++s)
        for (size_t j = 0; j + 1 < current[s].size(); ++j)
          for (int direction : {1, -1}) {
            Partitions next = current;
            std::vector<int64_t> &cut = next[s];
            cut[j] += direction;
            cut[j + 1] -= direction;
            if (cut[j] < 1 || cut[j + 1] < 1)
              continue;
            const double time = consider(next);
            if (time < best) {
              best = time;
              current = std::move(next);
              improved = true;
            }
          }
    }
  }

  /// Greedy dynamic programming: stage by stage, the best cut of the family given the stages
  /// already chosen (and the baseline for the rest).
  Partitions dynamicProgramming(Partitions current) {
    const std::vector<std::vector<int64_t>> family = cutFamily(evaluator.batchSamples(), maxCount);
    double best = evaluator.stepTime(current);
    std::vector<Partitions> candidates;
    std::vector<double> times;
    for (size_t s = 0; s < current.size() && !outOfTime(); ++s) {
      candidates.assign(family.size(), current);
      for (size_t k = 0; k < family.size(); ++k)
        candidates[k][s] = family[k];
      considerAll(candidates, times);
      const size_t k = std::min_element(times.begin(), times.end()) - times.begin();
      if (times[k] < best) {
        best = times[k];
        current = candidates[k];
      }
    }
    return current;
  }

  /// A dual-chromosome genetic algorithm in the manner of UMPIPE's DGAP: one chromosome holds
  /// each stage's micro-batch count, the other the relative sizes; selection by tournament,
  /// uniform crossover on each chromosome separately, mutation of counts by ±1 and of sizes by
  /// log-normal factors, elitism.
  void genetic(const Partitions &baseline) {
    struct Individual {
      std::vector<int64_t> counts;
      std::vector<std::vector<double>> weights; // [stage][maxCount]
      double fitness = kInfinity;
    };
    const int64_t stages = evaluator.numStages(), batch = evaluator.batchSamples();
    std::mt19937_64 random(options.seed);
    std::uniform_real_distribution<double> unit(0, 1);
    std::normal_distribution<double> noise(0, 0.35);
    auto decode = [&](const Individual &x) {
      Partitions p(stages);
      for (int64_t s = 0; s < stages; ++s)
        p[s] = apportion(
            batch, std::vector<double>(x.weights[s].begin(), x.weights[s].begin() + x.counts[s]));
      return p;
    };
    auto encode = [&](const Partitions &p) {
      Individual x;
      for (const std::vector<int64_t> &cut : p) {
        x.counts.push_back(static_cast<int64_t>(cut.size()));
        std::vector<double> w(maxCount, 1.0);
        for (size_t j = 0; j < cut.size(); ++j)
          w[j] = static_cast<double>(cut[j]);
        x.weights.push_back(std::move(w));
      }
      return x;
    };
    constexpr int kPopulation = 64, kElite = 2, kTournament = 3, kMaxGenerations = 300,
                  kPatience = 60;
    std::vector<Individual> population;
    population.push_back(encode(baseline));
    for (int64_t m : {int64_t(1), int64_t(2), maxCount / 4, maxCount / 2, maxCount})
      if (m >= 1 && m <= maxCount)
        population.push_back(encode(Partitions(stages, equalCut(batch, m))));
    while (static_cast<int>(population.size()) < kPopulation) {
      Individual x;
      for (int64_t s = 0; s < stages; ++s) {
        x.counts.push_back(1 + static_cast<int64_t>(unit(random) * maxCount) % maxCount);
        std::vector<double> w(maxCount);
        for (double &v : w)
          v = std::exp(noise(random));
        x.weights.push_back(std::move(w));
      }
      population.push_back(std::move(x));
    }
    auto evaluate = [&](std::vector<Individual> &group) {
      std::vector<Partitions> decoded;
      for (Individual &x : group)
        decoded.push_back(decode(x));
      std::vector<double> times;
      evaluator.stepTimes(decoded, times);
      for (size_t i = 0; i < group.size(); ++i) {
        group[i].fitness = times[i];
        if (times[i] < result.stepTime) {
          result.stepTime = times[i];
          result.best = decoded[i];
        }
      }
      if (options.progress &&
          std::chrono::steady_clock::now() - lastProgress > std::chrono::seconds(1)) {
        lastProgress = std::chrono::steady_clock::now();
        options.progress(evaluator.evaluations() - startCount, result.stepTime);
      }
    };
    evaluate(population);
    double bestSeen = result.stepTime;
    int stale = 0;
    for (int generation = 0; generation < kMaxGenerations && stale < kPatience && !outOfTime();
         ++generation) {
      std::sort(population.begin(), population.end(),
                [](const Individual &a, const Individual &b) { return a.fitness < b.fitness; });
      auto pick = [&]() -> const Individual & {
        size_t best = random() % population.size();
        for (int k = 1; k < kTournament; ++k)
          best = std::min<size_t>(best, random() % population.size());
        return population[best]; // sorted: the smaller index is the fitter
      };
      std::vector<Individual> next(population.begin(), population.begin() + kElite);
      std::vector<Individual> children;
      while (static_cast<int>(next.size() + children.size()) < kPopulation) {
        const Individual &a = pick(), &b = pick();
        Individual child = a;
        for (int64_t s = 0; s < stages; ++s) {
          if (unit(random) < 0.5)
            child.counts[s] = b.counts[s];
          for (int64_t j = 0; j < maxCount; ++j)
            if (unit(random) < 0.5)
              child.weights[s][j] = b.weights[s][j];
          if (unit(random) < 0.15)
            child.counts[s] =
                std::clamp<int64_t>(child.counts[s] + (unit(random) < 0.5 ? -1 : 1), 1, maxCount);
          for (int64_t j = 0; j < maxCount; ++j)
            if (unit(random) < 0.2)
              child.weights[s][j] *= std::exp(noise(random));
        }
        children.push_back(std::move(child));
      }
      evaluate(children);
      for (Individual &child : children)
        next.push_back(std::move(child));
      population = std::move(next);
      if (result.stepTime < bestSeen) {
        bestSeen = result.stepTime;
        stale = 0;
      } else {
        ++stale;
      }
    }
  }

  /// Ours: iterated coordinate descent. Start from the best common equal cut improved by the
  /// greedy DP; descend (below); then kick the result out of its local optimum a few times
  /// (one stage takes another stage's cut, or a cut of the family, or splits its largest
  /// micro-batch) and descend again, keeping the best. Deterministic given the seed.
  void descent() {
    const int64_t stages = evaluator.numStages(), batch = evaluator.batchSamples();
    std::vector<Partitions> seeds;
    for (int64_t m = 1; m <= maxCount; ++m)
      seeds.push_back(Partitions(stages, equalCut(batch, m)));
    std::vector<double> times;
    considerAll(seeds, times);
    dynamicProgramming(result.best);
    const std::vector<std::vector<int64_t>> family = cutFamily(batch, maxCount);
    Partitions current = localSearch(result.best, family);
    double best = result.stepTime;
    // Kicks: one stage takes another stage's cut, a cut of the family, or splits its largest
    // micro-batch; descend again and keep what improves. At most S kicks, and none after two
    // failed in a row.
    std::mt19937_64 random(options.seed);
    for (int64_t kick = 0, failed = 0; kick < stages && failed < 2 && !outOfTime(); ++kick) {
      Partitions next = current;
      const int64_t s = kick % stages;
      switch (random() % 3) {
      case 0:
        next[s] = next[random() % stages];
        break;
      case 1:
        next[s] = family[random() % family.size()];
        break;
      default: {
        std::vector<int64_t> &cut = next[s];
        auto largest = std::max_element(cut.begin(), cut.end());
        if (*largest >= 2 && static_cast<int64_t>(cut.size()) < maxCount) {
          const int64_t half = *largest / 2;
          *largest -= half;
          cut.insert(largest + 1, half);
        }
      }
      }
      next = localSearch(std::move(next), {});
      const double time = evaluator.stepTime(next);
      if (time < best) {
        best = time;
        current = std::move(next);
        failed = 0;
      } else {
        ++failed;
      }
    }
  }

  /// Descent by stages: each round visits every stage and moves it to the first improving cut
  /// of its neighbourhood (the cuts of the other stages and of `family` first, then
  /// neighbours()), judged in chunks evaluated together: the best of the first chunk that
  /// holds an improvement wins. Rounds repeat until no stage moves.
  Partitions localSearch(Partitions current, const std::vector<std::vector<int64_t>> &family) {
    constexpr size_t kChunk = 32;
    const int64_t stages = evaluator.numStages();
    double best = consider(current);
    std::vector<Partitions> candidates;
    std::vector<double> times;
    bool improved = true;
    while (improved && !outOfTime()) {
      improved = false;
      for (int64_t s = 0; s < stages && !outOfTime(); ++s) {
        std::vector<std::vector<int64_t>> moves;
        for (int64_t other = 0; other < stages; ++other)
          moves.push_back(current[other]);
        moves.insert(moves.end(), family.begin(), family.end());
        std::vector<std::vector<int64_t>> small = neighbours(current[s]);
        moves.insert(moves.end(), small.begin(), small.end());
        // Unique, in the order above.
        std::vector<std::vector<int64_t>> seen;
        std::vector<std::vector<int64_t>> unique;
        for (std::vector<int64_t> &cut : moves) {
          if (cut == current[s])
            continue;
          auto at = std::lower_bound(seen.begin(), seen.end(), cut);
          if (at != seen.end() && *at == cut)
            continue;
          seen.insert(at, cut);
          unique.push_back(std::move(cut));
        }
        for (size_t first = 0; first < unique.size(); first += kChunk) {
          const size_t last = std::min(unique.size(), first + kChunk);
          candidates.assign(last - first, current);
          for (size_t k = first; k < last; ++k)
            candidates[k - first][s] = unique[k];
          considerAll(candidates, times);
          const size_t k = std::min_element(times.begin(), times.end()) - times.begin();
          if (times[k] < best) {
            best = times[k];
            current = std::move(candidates[k]);
            improved = true;
            break;
          }
        }
      }
    }
    return current;
  }

  /// Cuts one small step from `cut`: a sample to a neighbouring micro-batch, a split in
  /// halves, a merge of neighbours.
  std::vector<std::vector<int64_t>> neighbours(const std::vector<int64_t> &cut) const {
    std::vector<std::vector<int64_t>> out;
    const size_t m = cut.size();
    for (size_t j = 0; j + 1 < m; ++j)
      for (int direction : {1, -1}) {
        std::vector<int64_t> next = cut;
        next[j] += direction;
        next[j + 1] -= direction;
        if (next[j] >= 1 && next[j + 1] >= 1)
          out.push_back(std::move(next));
      }
    for (size_t j = 0; j < m; ++j) {
      if (cut[j] >= 2 && static_cast<int64_t>(m) < maxCount) {
        std::vector<int64_t> next = cut;
        next[j] = cut[j] / 2;
        next.insert(next.begin() + j + 1, cut[j] - cut[j] / 2);
        out.push_back(std::move(next));
      }
      if (j + 1 < m) {
        std::vector<int64_t> next = cut;
        next[j] += next[j + 1];
        next.erase(next.begin() + j + 1);
        out.push_back(std::move(next));
      }
    }
    return out;
  }

  StepTimeEvaluator &evaluator;
  const SearchOptions &options;
  std::chrono::steady_clock::time_point started, lastProgress;
  int64_t maxCount = 1;
  int64_t startCount = evaluator.evaluations();
  SearchResult result;
};

} // namespace

SearchResult conduit::sched::searchPartitions(StepTimeEvaluator &evaluator,
                                              const SearchOptions &options) {
  return Search(evaluator, options).run();
}
