// Linking an Execution Trace to a Kineto trace of the same run: every ET op node (ranges
// excluded, nested ops included) is matched to one Kineto CPU op, from which it takes its
// duration. Rules (docs/import-kineto.md, "Link rules"):
//  1. Same process: when the ET has a "pid" and the Kineto trace has CPU ops, the ET's pid
//     must be one of the Kineto ops' pids.
//  2. By record-function id, when the Kineto ops carry args["Record function id"] and the ET
//     nodes carry rf_id: an ET op links to the Kineto op with its rf_id and the same name.
//  3. Otherwise by execution order: the ET's ops of one thread (ET tid), in start (id) order,
//     are aligned with a contiguous run of one Kineto thread's ops in start order (ts, the
//     longer first, file order). The alignment with the fewest name differences wins (the
//     earliest on ties: a Kineto trace of many iterations repeats the ET's one). Each Kineto
//     thread serves one ET thread; ET threads are placed largest first.
//  Either way, at most kMismatchPercent % of the ET's ops (per thread in rule 3) may be
//  missing or differently named; beyond that the pair is refused as not from the same run.
//  Positions whose names differ are left unlinked.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "coopsim/base/error.hpp"
#include "et_detail.hpp"

namespace coopsim::et_detail {
namespace {

using kineto_detail::Collected;
using kineto_detail::OpRange;

// Work cap of the execution-order search (name comparisons), so that a hostile pair of huge
// traces fails in seconds instead of running for hours.
constexpr std::uint64_t kMaxCompares = 4'000'000'000ULL;

[[noreturn]] void refuse(const std::string& et_path, const std::string& kineto_path, const std::string& why) {
  throw Error(fmt::format("{}: not from the same run as {}: {}", et_path, kineto_path, why));
}

std::uint64_t allowed(std::uint64_t n) { return n * kMismatchPercent / 100; }

void link_by_rf_id(const std::string& et_path, const EtTrace& et, const std::string& kineto_path, const Collected& c,
                   const std::vector<std::uint32_t>& ops, Link& link) {
  std::unordered_map<std::int64_t, std::uint32_t> by_rf;
  for (std::uint32_t k = 0; k < c.ops.size(); ++k) {
    if (c.ops[k].rf_id >= 0) by_rf.try_emplace(c.ops[k].rf_id, k);
  }
  for (const std::uint32_t i : ops) {
    const EtNode& n = et.nodes[i];
    const auto it = n.rf_id < 0 ? by_rf.end() : by_rf.find(n.rf_id);
    if (it == by_rf.end()) {
      ++link.unmatched;
    } else if (c.names[c.ops[it->second].name] != et.names[n.name]) {
      ++link.name_mismatches;
    } else {
      link.kineto[i] = it->second;
      ++link.linked;
    }
  }
  const std::uint64_t bad = link.unmatched + link.name_mismatches;
  if (bad > allowed(ops.size())) {
    refuse(et_path, kineto_path,
           fmt::format("{} of the ET's {} ops have no Kineto op with the same Record function id and name ({} missing, "
                       "{} named differently; at most {}% may differ)",
                       bad, ops.size(), link.unmatched, link.name_mismatches, kMismatchPercent));
  }
}

void link_by_order(const std::string& et_path, const EtTrace& et, const std::string& kineto_path, const Collected& c,
                   const std::vector<std::uint32_t>& ops, Link& link) {
  // ET names in the Kineto trace's name table (kNone: a name the Kineto trace never uses).
  std::unordered_map<std::string, std::uint32_t> kineto_name;
  for (std::uint32_t k = 0; k < c.names.size(); ++k) kineto_name.emplace(c.names[k], k);
  std::vector<std::uint32_t> et_name(et.names.size(), kNone);
  for (std::uint32_t k = 0; k < et.names.size(); ++k) {
    if (const auto it = kineto_name.find(et.names[k]); it != kineto_name.end()) et_name[k] = it->second;
  }
  std::map<std::int64_t, std::vector<std::uint32_t>> et_threads;
  for (const std::uint32_t i : ops) et_threads[et.nodes[i].tid].push_back(i);
  std::vector<std::vector<std::uint32_t>> k_threads(c.threads.size());
  for (std::uint32_t k = 0; k < c.ops.size(); ++k) k_threads[c.ops[k].thread].push_back(k);
  for (auto& t : k_threads) {
    std::sort(t.begin(), t.end(), [&](std::uint32_t a, std::uint32_t b) {
      const OpRange &x = c.ops[a], &y = c.ops[b];
      return std::tuple(x.begin, y.end - y.begin, x.index) < std::tuple(y.begin, x.end - x.begin, y.index);
    });
  }
  std::vector<std::pair<std::int64_t, const std::vector<std::uint32_t>*>> order;
  for (const auto& [tid, list] : et_threads) order.emplace_back(tid, &list);
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.second->size() > b.second->size(); });

  std::vector<bool> used(k_threads.size(), false);
  std::uint64_t compares = 0;
  for (const auto& [tid, list_ptr] : order) {
    const std::vector<std::uint32_t>& e = *list_ptr;
    std::vector<std::uint32_t> names(e.size());
    for (std::size_t j = 0; j < e.size(); ++j) names[j] = et_name[et.nodes[e[j]].name];
    const std::uint64_t cap = allowed(e.size());
    std::uint64_t best = cap + 1, ties = 0;
    std::uint32_t best_thread = kNone;
    std::size_t best_offset = 0;
    for (std::uint32_t t = 0; t < k_threads.size(); ++t) {
      const std::vector<std::uint32_t>& k = k_threads[t];
      if (used[t] || k.size() < e.size()) continue;
      for (std::size_t off = 0; off + e.size() <= k.size(); ++off) {
        const std::uint64_t limit = std::min(best, cap);  // a candidate must do at least as well
        std::uint64_t mm = 0;
        std::size_t j = 0;
        for (; j < e.size() && mm <= limit; ++j) mm += names[j] != c.ops[k[off + j]].name ? 1 : 0;
        compares += j;
        if (compares > kMaxCompares) {
          throw Error(
              fmt::format("{}: aligning ET thread {} with {} by execution order needs more than {} name "
                          "comparisons; give traces that carry Record function ids",
                          et_path, tid, kineto_path, kMaxCompares));
        }
        if (mm > limit) continue;
        if (mm < best) {
          best = mm;
          best_thread = t;
          best_offset = off;
          ties = 0;
        } else {
          ++ties;
        }
      }
    }
    if (best_thread == kNone) {
      refuse(et_path, kineto_path,
             fmt::format("the {} ops of ET thread {} match no run of Kineto ops in execution order (more than {} "
                         "names differ at every position of every unused Kineto thread; at most {}% may differ)",
                         e.size(), tid, cap, kMismatchPercent));
    }
    used[best_thread] = true;
    link.ambiguous_offsets += ties;
    const std::vector<std::uint32_t>& k = k_threads[best_thread];
    for (std::size_t j = 0; j < e.size(); ++j) {
      const std::uint32_t kop = k[best_offset + j];
      if (names[j] == c.ops[kop].name) {
        link.kineto[e[j]] = kop;
        ++link.linked;
      } else {
        ++link.name_mismatches;
      }
    }
    link.threads += fmt::format(
        "{}ET tid {} ({} ops) -> Kineto {} from its op {} ({} names differ, {} equally good "
        "later alignments)",
        link.threads.empty() ? "" : "; ", tid, e.size(), c.threads[best_thread], best_offset, best, ties);
  }
}

}  // namespace

Link link_traces(const std::string& et_path, const EtTrace& et, const std::string& kineto_path, const Collected& c) {
  Link link;
  link.kineto.assign(et.nodes.size(), kNone);
  std::vector<std::uint32_t> ops;
  bool et_rf = false;
  for (std::uint32_t i = 0; i < et.nodes.size(); ++i) {
    if (is_range(et, et.nodes[i])) continue;
    ops.push_back(i);
    et_rf = et_rf || et.nodes[i].rf_id >= 0;
  }
  link.et_ops = ops.size();
  if (ops.empty()) throw Error(fmt::format("{}: the Execution Trace has no op nodes (only ranges)", et_path));
  if (c.ops.empty()) refuse(et_path, kineto_path, "the Kineto trace has no CPU ops (cpu_op / Operator events)");

  std::set<std::string> pids;
  for (const std::string& t : c.threads) pids.insert(t.substr(0, t.find('/')));
  if (et.pid && pids.count(std::to_string(*et.pid)) == 0) {
    std::string list;
    for (const std::string& p : pids) list += (list.empty() ? "" : ", ") + p;
    refuse(et_path, kineto_path,
           fmt::format("the ET's pid {} is not a process of the Kineto trace (pids: {})", *et.pid, list));
  }
  const bool kineto_rf = std::any_of(c.ops.begin(), c.ops.end(), [](const OpRange& o) { return o.rf_id >= 0; });
  if (kineto_rf && et_rf) {
    link.method = "rf_id (ET rf_id = Kineto args[\"Record function id\"], same name)";
    link_by_rf_id(et_path, et, kineto_path, c, ops, link);
  } else {
    link.method = "execution order (per thread, op names in start order)";
    link_by_order(et_path, et, kineto_path, c, ops, link);
  }
  return link;
}

}  // namespace coopsim::et_detail
