// The memory map's data and axes (see memory_map.hpp): block lifetimes and transfer windows
// from the event log, the address axis with collapsed gaps, tick steps and XML text escaping.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "memory_map.hpp"

namespace coopsim::memory_map {

Data collect(const Trace& trace, const RunLog& log, const Report& report) {
  Data d;
  std::map<std::uint64_t, std::size_t> live;  // log address -> interval
  SimTime end = report.time.simulated;
  auto at = [&](std::uint64_t addr) -> Interval* {
    const auto it = live.find(addr);
    return it == live.end() ? nullptr : &d.intervals[it->second];
  };
  for (std::uint32_t i = 0; i < log.records.size(); ++i) {
    const LogRecord& r = log.records[i];
    end = std::max({end, r.start, r.end});
    switch (r.kind) {
      case LogKind::Alloc: {
        const LogRef& ref = log.ref(r);
        Interval v;
        v.addr = ref.addr;
        v.size = ref.size.value;
        v.t0 = v.t1 = r.start;
        v.storage = index_of(ref.storage);
        v.record = i;
        live[ref.addr] = d.intervals.size();
        d.intervals.push_back(v);
        break;
      }
      case LogKind::Free:
        if (Interval* v = at(log.ref(r).addr); v != nullptr) {
          v->t1 = r.start;
          v->free_record = i;
          live.erase(log.ref(r).addr);
        }
        break;
      case LogKind::Compute:
      case LogKind::Recompute: {
        const SimTime cost = index_of(r.op) < trace.ops.size() ? trace.op(r.op).duration : SimTime{0};
        for (std::uint32_t k = r.reads; k < std::uint32_t{r.reads} + r.writes; ++k) {
          if (Interval* v = at(log.refs[r.first + k].addr); v != nullptr) {
            v->cost = cost;
            v->evicted = v->swapped_out = false;  // a new content: the block lives on in place
          }
        }
        break;
      }
      case LogKind::Evict:
        if (Interval* v = at(log.ref(r).addr); v != nullptr) v->evicted = true;
        break;
      case LogKind::SwapOut:
      case LogKind::SwapIn: {
        const LogRef& ref = log.ref(r);
        d.transfers.push_back({ref.addr, ref.size.value, r.start, r.end, r.kind == LogKind::SwapOut});
        if (Interval* v = at(ref.addr); v != nullptr) {
          if (r.kind == LogKind::SwapOut) {
            v->swapped_out = true;
          } else {
            v->swapped_in = true;
          }
        }
        break;
      }
      case LogKind::Access:
      case LogKind::Stall:
      case LogKind::Memory: break;
    }
  }
  d.end = std::max(end, SimTime{1});
  for (const auto& [addr, k] : live) d.intervals[k].t1 = d.end;
  return d;
}

AddressAxis::AddressAxis(const std::vector<Interval>& intervals) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  for (const Interval& v : intervals) ranges.emplace_back(v.addr, v.addr + std::max<std::uint64_t>(v.size, 1));
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<std::uint64_t, std::uint64_t>> merged;
  for (const auto& r : ranges) {
    if (merged.empty() || r.first > merged.back().second) {
      merged.push_back(r);
    } else {
      merged.back().second = std::max(merged.back().second, r.second);
    }
  }
  if (merged.empty()) return;
  double used = 0.0;
  for (const auto& r : merged) used += static_cast<double>(r.second - r.first);
  // A gap wider than 5% of the used bytes is drawn as a band of 3% of them.
  const double keep = 0.05 * used, band = 0.03 * used;
  double d = 0.0;
  Piece cur{merged[0].first, merged[0].second, 0.0};
  for (std::size_t i = 1; i < merged.size(); ++i) {
    const std::uint64_t gap = merged[i].first - cur.hi;
    if (static_cast<double>(gap) <= keep) {
      cur.hi = merged[i].second;
      continue;
    }
    pieces_.push_back(cur);
    d = cur.d0 + static_cast<double>(cur.hi - cur.lo);
    gaps_.push_back({d, d + band, gap});
    cur = Piece{merged[i].first, merged[i].second, d + band};
  }
  pieces_.push_back(cur);
  total_ = std::max(1.0, cur.d0 + static_cast<double>(cur.hi - cur.lo));
}

double AddressAxis::at(std::uint64_t addr) const {
  if (pieces_.empty()) return 0.0;
  auto it =
      std::upper_bound(pieces_.begin(), pieces_.end(), addr, [](std::uint64_t a, const Piece& p) { return a < p.lo; });
  if (it == pieces_.begin()) return 0.0;
  --it;
  return it->d0 + static_cast<double>(std::min(addr, it->hi) - it->lo);
}

double nice_step(double span, int target_ticks) {
  if (!(span > 0.0)) return 1.0;
  const double raw = span / target_ticks;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double m : {1.0, 2.0, 5.0}) {
    if (m * p >= raw) return m * p;
  }
  return 10.0 * p;
}

std::string tick_label(double value, double step) {
  const int decimals = std::max(0, static_cast<int>(-std::floor(std::log10(step) + 1e-9)));
  const std::string text = fmt::format("{:.{}f}", value, decimals);
  return text.find_first_not_of("-0.") == std::string::npos ? text.substr(text[0] == '-' ? 1 : 0) : text;  // no "-0"
}

std::string xml_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '&': out += "&amp;"; continue;
      case '<': out += "&lt;"; continue;
      case '>': out += "&gt;"; continue;
      case '"': out += "&quot;"; continue;
      case '\'': out += "&apos;"; continue;
      default: break;
    }
    if (c < 0x80) {
      // Control characters are not allowed in XML 1.0 text.
      out += c < 0x20 && c != '\t' && c != '\n' && c != '\r' ? ' ' : static_cast<char>(c);
      continue;
    }
    // Well-formed UTF-8 sequences pass; any other byte becomes '?'.
    const std::size_t n = c >= 0xf0 && c < 0xf5 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
    bool ok = n > 0 && i + n <= s.size();
    for (std::size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
    if (ok && n >= 3) {
      // No overlong forms, no surrogates, nothing above U+10FFFF.
      const auto c1 = static_cast<unsigned char>(s[i + 1]);
      ok = !(c == 0xe0 && c1 < 0xa0) && !(c == 0xed && c1 >= 0xa0) && !(c == 0xf0 && c1 < 0x90) &&
           !(c == 0xf4 && c1 >= 0x90);
    }
    if (!ok) {
      out += '?';
      continue;
    }
    out.append(s.substr(i, n));
    i += n - 1;
  }
  return out;
}

}  // namespace coopsim::memory_map
