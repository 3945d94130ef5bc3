// A sweep's run list (docs/sweep.md): the cartesian product in a fixed order, ratio budgets
// resolved against each trace's peak, the sweep hash that ties shards and resumed output to one
// config, and shard slices.
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "coopsim/alloc/allocator.hpp"
#include "coopsim/base/error.hpp"
#include "coopsim/base/hash.hpp"
#include "coopsim/sweep/sweep.hpp"
#include "coopsim_config.h"

namespace coopsim::sweep {
namespace {

void fnv(std::uint64_t& h, std::string_view s) {
  h = fnv1a(h, s);
  h = fnv1a(h, "\xff");  // separator, so ("ab","c") and ("a","bc") differ
}

bool applies(const std::vector<std::string>& only, const std::string& name) {
  return only.empty() || std::find(only.begin(), only.end(), name) != only.end();
}

}  // namespace

SweepGrid make_grid(const SweepConfig& cfg, const std::vector<Trace>& traces) {
  SweepGrid grid;
  std::uint64_t h = 0xcbf29ce484222325ULL;
  fnv(h, COOPSIM_VERSION);
  fnv(h, cfg.canonical);
  for (const Trace& t : traces) fnv(h, fmt::format("{:016x}", t.content_hash));
  grid.hash = h;

  for (std::size_t ti = 0; ti < traces.size(); ++ti) {
    const Trace& trace = traces[ti];
    // A recorded state simulated as requests (initial_state "empty", in base or every variant
    // that runs the allocator) needs no seeding.
    auto seeds = [&](const std::string& allocator) {
      for (const Variant& v : cfg.variants) {
        if (applies(v.allocators, allocator) && v.config.doc.value("initial_state", "recorded") != "empty") return true;
      }
      return false;
    };
    if (!trace.initial_segments.empty()) {
      for (const auto& a : cfg.allocators) {
        if (!seeds(a)) continue;
        if (!allocator_can_seed(a)) {
          throw ConfigError(cfg.source + ": traces[" + std::to_string(ti) + "]",
                            "'" + cfg.traces[ti] + "' starts from a recorded allocator state that allocator '" + a +
                                "' cannot install");
        }
      }
    }
    const Bytes peak = summarize(trace).peak_live;
    std::vector<Bytes> budgets;
    for (const BudgetSpec& b : cfg.budgets) {
      if (!b.ratio) {
        budgets.push_back(b.size);
        continue;
      }
      // The same rule as a "N%" budget of run, bench and advise (scale_bytes: floor of the
      // fraction of the peak, refused below one byte or past 2^64 - 1).
      const std::optional<Bytes> bytes = scale_bytes(*b.ratio, peak);
      if (!bytes) {
        throw ConfigError(cfg.source + ": budgets",
                          fmt::format("ratio {} of '{}' (peak live {} bytes) is a budget of {}", *b.ratio, cfg.traces[ti],
                                      peak.value, *b.ratio >= 1 ? "more than 2^64 - 1 bytes" : "0 bytes"));
      }
      budgets.push_back(*bytes);
    }
    const Bytes largest = *std::max_element(budgets.begin(), budgets.end());
    for (const auto& a : cfg.allocators) {
      for (const auto& p : cfg.policies) {
        for (std::size_t vi = 0; vi < cfg.variants.size(); ++vi) {
          const Variant& v = cfg.variants[vi];
          if (!applies(v.allocators, a) || !applies(v.policies, p)) continue;
          for (std::size_t bi = 0; bi < budgets.size(); ++bi) {
            GridRun r;
            r.index = grid.runs.size();
            r.trace = ti;
            r.variant = vi;
            r.allocator = a;
            r.policy = p;
            r.budget = budgets[bi];
            r.ratio = cfg.budgets[bi].ratio;
            r.sweep_largest_budget = largest;
            grid.runs.push_back(std::move(r));
          }
          if (cfg.minbudget.enabled) grid.searches.push_back({grid.searches.size(), ti, vi, a, p});
        }
      }
    }
  }
  return grid;
}

SimConfig run_config(const SweepConfig& cfg, std::size_t variant, const std::string& allocator,
                     const std::string& policy, std::optional<Bytes> budget) {
  SimConfig c = cfg.variants.at(variant).config;
  c.source.clear();
  c.doc["allocator"] = allocator;
  c.doc["policy"] = policy;
  if (budget) c.doc["budget"] = std::to_string(budget->value);
  return c;
}

Shard parse_shard(const std::string& text) {
  const auto bad = [&] { return UsageError("--shard", quote_excerpt(text) + " is not K/N with 1 <= K <= N (e.g. 2/8)"); };
  const auto slash = text.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == text.size()) throw bad();
  auto number = [&](const std::string& s) -> std::uint32_t {
    if (s.size() > 6 || !std::all_of(s.begin(), s.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) throw bad();
    return static_cast<std::uint32_t>(std::stoul(s));
  };
  Shard s{number(text.substr(0, slash)), number(text.substr(slash + 1))};
  if (s.index < 1 || s.count < 1 || s.index > s.count) throw bad();
  return s;
}

std::size_t shard_size(std::size_t total, Shard s) {
  const std::size_t first = s.index - 1U;
  return first >= total ? 0 : (total - first + s.count - 1) / s.count;
}

}  // namespace coopsim::sweep
