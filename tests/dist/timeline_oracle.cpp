#include "tests/dist/timeline_oracle.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <tuple>

namespace sb::test {

using nlohmann::json;

std::vector<std::pair<char, int64_t>> textbook_one_f_one_b(int64_t s, int64_t p, int64_t m) {
  std::vector<std::pair<char, int64_t>> order;
  const int64_t warmup = std::min(p - s - 1, m);
  int64_t f = 0, b = 0;
  for (; f < warmup; ++f) order.emplace_back('F', f);
  while (f < m) {
    order.emplace_back('F', f++);
    order.emplace_back('B', b++);
  }
  while (b < m) order.emplace_back('B', b++);
  return order;
}

namespace {

// (stage, 'F'|'B', micro-batch) -> duration, for the ranks of DP rank d.
std::map<std::tuple<int64_t, char, int64_t>, double> durations(const json& line, int64_t d) {
  std::map<std::tuple<int64_t, char, int64_t>, double> result;
  for (const json& rank : line.at("ranks")) {
    if (rank.at("dp_rank").get<int64_t>() != d) continue;
    for (const json& e : rank.at("events")) {
      const std::string kind = e.at(0).get<std::string>();
      if (kind != "forward" && kind != "backward") continue;
      result[{rank.at("stage").get<int64_t>(), kind == "forward" ? 'F' : 'B', e.at(1).get<int64_t>()}] =
          e.at(3).get<double>() - e.at(2).get<double>();
    }
  }
  return result;
}

}  // namespace

void expect_one_f_one_b_order(const json& line, int64_t pp, const std::vector<int64_t>& counts) {
  for (const json& rank : line.at("ranks")) {
    const int64_t s = rank.at("stage").get<int64_t>(), d = rank.at("dp_rank").get<int64_t>();
    std::vector<std::pair<char, int64_t>> seen;
    for (const json& e : rank.at("events")) {
      const std::string kind = e.at(0).get<std::string>();
      if (kind == "forward" || kind == "backward") seen.emplace_back(kind == "forward" ? 'F' : 'B', e.at(1).get<int64_t>());
    }
    EXPECT_EQ(seen, textbook_one_f_one_b(s, pp, counts.at(static_cast<size_t>(d))))
        << "iteration " << line.at("iteration") << " rank " << rank.at("rank");
  }
}

double replayed_bubble_fraction(const json& line, int64_t pp, const std::vector<int64_t>& counts) {
  double sum = 0, makespan = 0;
  std::vector<double> busy;
  for (size_t d = 0; d < counts.size(); ++d) {
    const auto dur = durations(line, static_cast<int64_t>(d));
    std::map<std::tuple<int64_t, char, int64_t>, double> end;
    std::vector<size_t> pos(static_cast<size_t>(pp), 0);
    std::vector<double> free_at(static_cast<size_t>(pp), 0.0);
    std::vector<std::vector<std::pair<char, int64_t>>> order;
    for (int64_t s = 0; s < pp; ++s) order.push_back(textbook_one_f_one_b(s, pp, counts[d]));
    bool progress = true;
    while (progress) {
      progress = false;
      for (int64_t s = 0; s < pp; ++s) {
        while (pos[s] < order[s].size()) {
          const auto [kind, j] = order[s][pos[s]];
          double start = free_at[s];
          const bool has_dep = kind == 'F' ? s > 0 : s < pp - 1;
          if (has_dep) {
            const auto dep = std::make_tuple(kind == 'F' ? s - 1 : s + 1, kind, j);
            if (!end.count(dep)) break;
            start = std::max(start, end[dep]);
          }
          end[{s, kind, j}] = free_at[s] = start + dur.at({s, kind, j});
          ++pos[s];
          progress = true;
        }
      }
    }
    for (int64_t s = 0; s < pp; ++s) {
      makespan = std::max(makespan, free_at[s]);
      double b = 0;
      for (const auto& [key, value] : dur) {
        if (std::get<0>(key) == s) b += value;
      }
      busy.push_back(b);
    }
  }
  for (double b : busy) sum += (makespan - b) / makespan;
  return sum / static_cast<double>(busy.size());
}

std::vector<int64_t> microbatch_counts(const json& record, int64_t dp) {
  std::vector<int64_t> counts(static_cast<size_t>(dp), 0);
  for (const json& d : record.at("microbatch_dp_rank")) ++counts.at(d.get<size_t>());
  return counts;
}

}  // namespace sb::test
