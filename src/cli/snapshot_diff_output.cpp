// `coopsim snapshot diff` as text, JSON and an SVG figure (snapshot_commands.hpp). Byte counts
// are exact integers in JSON; text shows them as sizes and exact bytes.
#include <fmt/format.h>

#include <algorithm>

#include "coopsim/base/schema_version.hpp"
#include "coopsim/output/chrome_trace.hpp"
#include "snapshot_commands.hpp"

namespace coopsim::snapshot_cli {
namespace {

std::string signed_bytes(std::int64_t d) {
  const Bytes mag{static_cast<std::uint64_t>(d < 0 ? -d : d)};
  return fmt::format("{}{} ({}{} bytes)", d < 0 ? "-" : "+", format_bytes(mag), d < 0 ? "-" : "+", mag.value);
}

std::int64_t minus(Bytes b, Bytes a) { return static_cast<std::int64_t>(b.value) - static_cast<std::int64_t>(a.value); }

// A figure of one side: a field of the sample at one of its peaks, or the free bytes there.
struct Figure {
  const char* name;
  MemorySample PeakFigures::*at;
  Bytes MemorySample::*field;  // nullptr: reserved - allocated
  [[nodiscard]] Bytes of(const PeakFigures& f) const {
    const MemorySample& s = f.*at;
    return field == nullptr ? s.reserved - s.allocated : s.*field;
  }
};
constexpr Figure kFigures[] = {
    {"peak allocated", &PeakFigures::at_allocated_peak, &MemorySample::allocated},
    {"peak reserved", &PeakFigures::at_reserved_peak, &MemorySample::reserved},
    {"live at the allocated peak", &PeakFigures::at_allocated_peak, &MemorySample::live},
    {"reserved at the allocated peak", &PeakFigures::at_allocated_peak, &MemorySample::reserved},
    {"fragmentation at the allocated peak", &PeakFigures::at_allocated_peak, nullptr},
    {"live at the reserved peak", &PeakFigures::at_reserved_peak, &MemorySample::live},
    {"allocated at the reserved peak", &PeakFigures::at_reserved_peak, &MemorySample::allocated},
    {"fragmentation at the reserved peak", &PeakFigures::at_reserved_peak, nullptr},
};

std::string key_of(const char* name) {
  std::string k(name);
  std::replace(k.begin(), k.end(), ' ', '_');
  return k + "_bytes";
}

nlohmann::ordered_json side_json(const PeakFigures& f) {
  nlohmann::ordered_json j;
  j["path"] = f.path;
  j["model"] = f.model;
  j["events"] = f.events;
  j["allocs"] = f.allocs;
  for (const Figure& fig : kFigures) j[key_of(fig.name)] = fig.of(f).value;
  j["allocated_peak_event"] = f.at_allocated_peak.event;
  j["reserved_peak_event"] = f.at_reserved_peak.event;
  j["allocator_settings"] = f.settings;
  return j;
}

nlohmann::ordered_json rows_json(const std::vector<DiffRow>& rows) {
  nlohmann::ordered_json arr = nlohmann::ordered_json::array();
  for (const DiffRow& r : rows) {
    arr.push_back({{"key", r.key}, {"a_bytes", r.a.value}, {"b_bytes", r.b.value}, {"delta_bytes", r.delta()}});
  }
  return arr;
}

void rows_text(std::string& out, const char* title, const std::vector<DiffRow>& rows, std::size_t limit) {
  out += fmt::format("{} ({} differ{}):\n", title, rows.size(),
                     rows.size() > limit ? fmt::format(", largest {} shown", limit) : std::string());
  for (std::size_t i = 0; i < std::min(limit, rows.size()); ++i) {
    const DiffRow& r = rows[i];
    out += fmt::format("  {:>34}  {} -> {}  {}\n", signed_bytes(r.delta()), format_bytes(r.a), format_bytes(r.b), r.key);
  }
}

}  // namespace

std::string diff_text(const SnapshotDiff& d, std::size_t rows) {
  std::string out = fmt::format("A: {} ({}, {} events, {} allocations)\nB: {} ({}, {} events, {} allocations)\n",
                                d.a.path, d.a.model, d.a.events, d.a.allocs, d.b.path, d.b.model, d.b.events,
                                d.b.allocs);
  for (const Figure& fig : kFigures) {
    const Bytes a = fig.of(d.a), b = fig.of(d.b);
    out += fmt::format("{:<36} {:>12} {:>12}  {}\n", fig.name, format_bytes(a), format_bytes(b),
                       signed_bytes(minus(b, a)));
  }
  rows_text(out, "live bytes at the allocated peak by frame", d.frames, rows);
  rows_text(out, "live bytes at the allocated peak by allocation size", d.sizes, rows);
  if (d.a.settings.empty() != d.b.settings.empty()) {
    out += fmt::format("allocator settings: not compared, {} records none\n", d.a.settings.empty() ? "A" : "B");
    return out;
  }
  out += fmt::format("allocator settings ({} differ):\n", d.settings.size());
  for (const auto& [key, values] : d.settings) out += fmt::format("  {}: {} -> {}\n", key, values.first, values.second);
  return out;
}

nlohmann::ordered_json diff_json(const SnapshotDiff& d) {
  nlohmann::ordered_json j;
  j["schema_version"] = schema_version::kSnapshotDiff;
  j["a"] = side_json(d.a);
  j["b"] = side_json(d.b);
  nlohmann::ordered_json delta;
  for (const Figure& fig : kFigures) delta[key_of(fig.name)] = minus(fig.of(d.b), fig.of(d.a));
  j["delta"] = delta;
  j["frames"] = rows_json(d.frames);
  j["sizes"] = rows_json(d.sizes);
  nlohmann::ordered_json settings = nlohmann::ordered_json::array();
  for (const auto& [key, values] : d.settings) settings.push_back({{"key", key}, {"a", values.first}, {"b", values.second}});
  j["allocator_settings"] = settings;
  return j;
}

std::string diff_svg(const SnapshotDiff& d, std::size_t rows) {
  // Two panels: the peak figures of A and B side by side, then the largest frame differences
  // (green: B smaller, red: B larger), each bar scaled to its panel's largest value.
  constexpr int kWidth = 900, kRow = 22, kLabel = 330, kBar = 440;
  const std::size_t n_frames = std::min(rows, d.frames.size());
  const int height = 60 + static_cast<int>(std::size(kFigures)) * 2 * kRow + 40 + static_cast<int>(n_frames) * kRow;
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" "
      "font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      kWidth, height);
  auto text = [&](int x, int y, const std::string& t, const char* anchor = "start") {
    std::string esc;
    for (const char c : t) {
      if (c == '<') esc += "&lt;";
      else if (c == '>') esc += "&gt;";
      else if (c == '&') esc += "&amp;";
      else esc += c;
    }
    s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"{}\">{}</text>\n", x, y, anchor, esc);
  };
  text(10, 20, fmt::format("coopsim snapshot diff: A = {} (blue), B = {} (orange)", d.a.path, d.b.path));
  std::uint64_t top = 1;
  for (const Figure& fig : kFigures) top = std::max({top, fig.of(d.a).value, fig.of(d.b).value});
  int y = 40;
  for (const Figure& fig : kFigures) {
    for (const auto& [side, colour] : {std::pair{&d.a, "#4c78a8"}, std::pair{&d.b, "#f58518"}}) {
      const Bytes v = fig.of(*side);
      const double w = static_cast<double>(kBar) * static_cast<double>(v.value) / static_cast<double>(top);
      if (side == &d.a) text(kLabel - 6, y + 14, fig.name, "end");
      s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\"/>\n", kLabel, y + 3, w,
                       kRow - 6, colour);
      text(kLabel + static_cast<int>(w) + 4, y + 14, format_bytes(v));
      y += kRow;
    }
  }
  y += 20;
  text(10, y, "live bytes at the allocated peak by frame, B - A");
  y += 8;
  std::uint64_t big = 1;
  for (std::size_t i = 0; i < n_frames; ++i) {
    const auto dl = d.frames[i].delta();
    big = std::max(big, static_cast<std::uint64_t>(dl < 0 ? -dl : dl));
  }
  for (std::size_t i = 0; i < n_frames; ++i) {
    const DiffRow& r = d.frames[i];
    const auto dl = r.delta();
    const double w = static_cast<double>(kBar) * static_cast<double>(dl < 0 ? -dl : dl) / static_cast<double>(big);
    std::string label = r.key.size() > 48 ? r.key.substr(0, 45) + "..." : r.key;
    text(kLabel - 6, y + 14, label, "end");
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\"/>\n", kLabel, y + 3, w,
                     kRow - 6, dl < 0 ? "#54a24b" : "#e45756");
    text(kLabel + static_cast<int>(w) + 4, y + 14, signed_bytes(dl));
    y += kRow;
  }
  s += "</svg>\n";
  return s;
}

}  // namespace coopsim::snapshot_cli
