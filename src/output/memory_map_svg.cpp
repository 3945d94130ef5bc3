// The memory map: an SVG picture of the address space over a run (x = simulated time, y =
// address), one rectangle per block lifetime, coloured by tensor role or by eviction cost, with
// evicted and swapped-out blocks outlined and transfer windows hatched. Address-blind logs get
// stacked bars of live bytes by role instead. Layout and data: memory_map_layout.cpp; what the
// colours mean: docs/timeline.md.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>
#include <tuple>

#include "coopsim/output/oom_verdict.hpp"
#include "memory_map.hpp"

namespace coopsim {
namespace {

using memory_map::AddressAxis;
using memory_map::Interval;
using memory_map::xml_escape;

constexpr double kWidth = 1280, kHeight = 760;
constexpr double kX0 = 90, kY0 = 70, kPW = 900, kPH = 600, kLegendX = 1020;
constexpr double kCell = 4.0;  // merged small blocks: grid cell size in px
constexpr double kMiB = 1024.0 * 1024.0;

struct RoleStyle {
  TensorRole role;
  const char* css;
  const char* colour;
};
constexpr std::array<RoleStyle, 7> kRoles{{
    {TensorRole::Parameter, "parameter", "#4e79a7"},
    {TensorRole::Input, "input", "#76b7b2"},
    {TensorRole::Activation, "activation", "#f28e2b"},
    {TensorRole::Gradient, "gradient", "#e15759"},
    {TensorRole::OptimizerState, "optimizer_state", "#59a14f"},
    {TensorRole::Workspace, "workspace", "#edc948"},
    {TensorRole::Other, "other", "#bab0ac"},
}};
constexpr std::array<std::array<int, 3>, 5> kViridis{
    {{68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}}};

std::size_t role_index(const Trace& trace, std::uint32_t storage) {
  const TensorRole r = storage < trace.tensors.size() ? trace.tensors[storage].role : TensorRole::Other;
  for (std::size_t i = 0; i < kRoles.size(); ++i) {
    if (kRoles[i].role == r) return i;
  }
  return kRoles.size() - 1;
}

std::string viridis(double t) {
  t = std::clamp(t, 0.0, 1.0) * static_cast<double>(kViridis.size() - 1);
  const auto i = std::min(static_cast<std::size_t>(t), kViridis.size() - 2);
  const double f = t - static_cast<double>(i);
  std::array<int, 3> c{};
  for (int k = 0; k < 3; ++k)
    c[k] = static_cast<int>(std::lround(kViridis[i][k] + f * (kViridis[i + 1][k] - kViridis[i][k])));
  return fmt::format("#{:02x}{:02x}{:02x}", c[0], c[1], c[2]);
}

struct Box {
  double x0, y0, w, h;
};

class Svg {
 public:
  Svg(const Trace& trace, const RunLog& log, const Report& report, const MemoryMapOptions& opt)
      : trace_(trace), log_(log), report_(report), opt_(opt), data_(memory_map::collect(trace, log, report)) {}

  std::string run() {
    out_ += fmt::format(R"svg(<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="{0}" height="{1}" viewBox="0 0 {0} {1}">
<style>
text{{font-family:sans-serif;font-size:12px;fill:#222}}
.title{{font-size:16px;font-weight:bold}} .sub{{font-size:11px;fill:#555}}
.axis{{stroke:#333;stroke-width:1}} .grid{{stroke:#e4e4e4;stroke-width:0.5}}
.evicted{{stroke:#b00000;stroke-width:0.8}} .swapped{{stroke:#1f3fbf;stroke-width:0.8}}
.merged{{fill:#777}} .transfer{{fill:url(#hatch)}} .gap{{fill:#f2f2f2;stroke:#999;stroke-dasharray:4 3}}
.budget{{stroke:#b00000;stroke-width:1;stroke-dasharray:6 4}}
)svg",
                        kWidth, kHeight);
    for (const RoleStyle& r : kRoles) out_ += fmt::format(".role-{}{{fill:{}}}\n", r.css, r.colour);
    out_ += R"svg(</style>
<defs><pattern id="hatch" width="5" height="5" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><line x1="0" y1="0" x2="0" y2="5" stroke="#000" stroke-width="2" stroke-opacity="0.5"/></pattern>
<linearGradient id="cost" x1="0" y1="1" x2="0" y2="0">)svg";
    for (std::size_t i = 0; i < kViridis.size(); ++i) {
      out_ += fmt::format(R"(<stop offset="{}" stop-color="{}"/>)", static_cast<double>(i) / (kViridis.size() - 1),
                          viridis(static_cast<double>(i) / (kViridis.size() - 1)));
    }
    out_ += "</linearGradient></defs>\n<rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n";
    const std::string title =
        fmt::format("coopsim memory map: {} - {} / {}, budget {}, {}", report_.model, report_.allocator, report_.policy,
                    format_bytes(report_.budget), to_string(report_.status));
    text(kX0, 24, "title", title);
    if (log_.address_aware) {
      address_map();
    } else {
      stacked_bars();
    }
    time_axis();
    if (report_.oom) oom_marker();
    out_ += "</svg>\n";
    return std::move(out_);
  }

 private:
  [[nodiscard]] double x(SimTime t) const {
    return kX0 + kPW * static_cast<double>(t.count()) / static_cast<double>(data_.end.count());
  }
  void text(double x0, double y0, const char* cls, const std::string& s, const char* anchor = nullptr) {
    out_ += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\"{}{}>{}</text>\n", x0, y0,
                        cls != nullptr ? fmt::format(" class=\"{}\"", cls) : std::string(),
                        anchor != nullptr ? fmt::format(" text-anchor=\"{}\"", anchor) : std::string(), xml_escape(s));
  }
  void rect(double x0, double y0, double w, double h, const std::string& attrs) {
    out_ +=
        fmt::format("<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" {}/>\n", x0, y0, w, h, attrs);
  }
  void hline(double y0, const char* cls) {
    out_ += fmt::format("<line class=\"{}\" x1=\"{:.1f}\" y1=\"{:.2f}\" x2=\"{:.1f}\" y2=\"{:.2f}\"/>\n", cls, kX0, y0,
                        kX0 + kPW, y0);
  }
  void y_tick(double y0, const std::string& label) {
    hline(y0, "grid");
    text(kX0 - 6, y0 + 4, nullptr, label, "end");
  }
  // Where the run ran out of memory: a red line at that time, the failed request as a red box to the
  // scale of the budget (its height), and the verdict line.
  void oom_marker() {
    const SimTime at = std::min(report_.time.simulated, data_.end);
    const double xv = data_.end.count() > 0 ? x(at) : kX0 + kPW;
    const double budget = std::max<double>(1.0, static_cast<double>(report_.budget.value));
    const double h = std::min(kPH, kPH * static_cast<double>(report_.oom->requested.value) / budget);
    out_ += fmt::format("<line class=\"budget\" x1=\"{0:.2f}\" y1=\"{1:.1f}\" x2=\"{0:.2f}\" y2=\"{2:.1f}\"/>\n", xv, kY0,
                        kY0 + kPH);
    rect(xv - 4, kY0, 8, std::max(1.0, h), "fill=\"#b00000\" fill-opacity=\"0.35\" stroke=\"#b00000\"");
    text(std::max(kX0, xv - 8), kY0 - 6, "sub",
         fmt::format("OOM: request of {} failed; {}", format_bytes(report_.oom->requested),
                     oom_verdict(*report_.oom, report_.budget).line),
         "end");
  }
  void time_axis() {
    const double end_ms = static_cast<double>(data_.end.count()) / 1e6;
    const double step = memory_map::nice_step(end_ms, 10);
    for (int k = 0; k * step <= end_ms * (1 + 1e-9); ++k) {
      const double xv = kX0 + kPW * (k * step) / end_ms;
      out_ += fmt::format("<line class=\"grid\" x1=\"{0:.2f}\" y1=\"{1:.1f}\" x2=\"{0:.2f}\" y2=\"{2:.1f}\"/>\n", xv,
                          kY0, kY0 + kPH);
      text(xv, kY0 + kPH + 16, nullptr, memory_map::tick_label(k * step, step), "middle");
    }
    out_ += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" class=\"axis\"/>\n", kX0, kY0,
                        kPW, kPH);
    text(kX0 + kPW / 2, kY0 + kPH + 36, nullptr, "simulated time (ms)", "middle");
  }
  void swatch(double& y0, const std::string& attrs, const std::string& label) {
    rect(kLegendX, y0 - 10, 14, 12, attrs);
    text(kLegendX + 20, y0, nullptr, label);
    y0 += 18;
  }

  // --- address-aware: one rectangle per block lifetime ---------------------------------------
  void address_map() {
    const AddressAxis axis(data_.intervals);
    auto y_of = [&](std::uint64_t addr) { return kY0 + kPH * (1.0 - axis.at(addr) / axis.total()); };
    const auto& iv = data_.intervals;
    std::vector<Box> boxes;
    boxes.reserve(iv.size());
    SimTime max_cost{0}, min_cost{0};
    for (const Interval& v : iv) {
      const double top = y_of(v.addr + v.size), bottom = y_of(v.addr);
      boxes.push_back({x(v.t0), top, x(v.t1) - x(v.t0), bottom - top});
      if (v.cost > SimTime{0}) {
        max_cost = std::max(max_cost, v.cost);
        min_cost = min_cost == SimTime{0} ? v.cost : std::min(min_cost, v.cost);
      }
    }
    // The largest boxes on screen are drawn one by one; the rest merge into grid cells.
    std::vector<std::size_t> order(iv.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return boxes[a].w * boxes[a].h > boxes[b].w * boxes[b].h; });
    std::vector<bool> drawn(iv.size(), false);
    for (std::size_t k = 0; k < std::min(order.size(), opt_.max_rects); ++k) drawn[order[k]] = true;

    for (const auto& g : axis.gaps()) {
      const double top = kY0 + kPH * (1.0 - g.d1 / axis.total()), bottom = kY0 + kPH * (1.0 - g.d0 / axis.total());
      rect(kX0, top, kPW, bottom - top, "class=\"gap\"");
      text(kX0 + kPW / 2, (top + bottom) / 2 + 4, "sub", fmt::format("unused: {}", format_bytes(Bytes{g.bytes})),
           "middle");
    }
    const double log_lo = std::log(static_cast<double>(std::max<std::int64_t>(min_cost.count(), 1)));
    const double log_hi = std::log(static_cast<double>(std::max<std::int64_t>(max_cost.count(), 1)));
    std::size_t individual = 0;
    for (std::size_t i = 0; i < iv.size(); ++i) {
      if (!drawn[i]) continue;
      ++individual;
      const Interval& v = iv[i];
      const Box& b = boxes[i];
      const std::size_t role = role_index(trace_, v.storage);
      std::string cls = "block";
      if (opt_.colour == MemoryMapColour::Role) cls += std::string(" role-") + kRoles[role].css;
      if (v.evicted) cls += " evicted";
      if (v.swapped_out) cls += " swapped";
      std::string fill;
      if (opt_.colour == MemoryMapColour::Cost) {
        fill = v.cost == SimTime{0}
                   ? std::string(" fill=\"#d0d0d0\"")
                   : fmt::format(" fill=\"{}\"",
                                 viridis(log_hi > log_lo ? (std::log(static_cast<double>(v.cost.count())) - log_lo) /
                                                               (log_hi - log_lo)
                                                         : 1.0));
      }
      const std::uint64_t fid = v.storage < trace_.tensors.size() ? trace_.tensors[v.storage].file_id : v.storage;
      const std::string name = v.storage < trace_.tensors.size() ? trace_.tensors[v.storage].name : std::string();
      out_ += fmt::format(
          "<rect class=\"{}\"{} x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" "
          "height=\"{:.2f}\"><title>{}</title></rect>\n",
          cls, fill, b.x0, b.y0, std::max(b.w, 0.5), std::max(b.h, 0.5),
          xml_escape(fmt::format("tensor {}{} ({}): {} at {:#x}, {} to {}{}{}", fid, name.empty() ? "" : " " + name,
                                 kRoles[role].css, format_bytes(Bytes{v.size}), v.addr, format_time(v.t0),
                                 format_time(v.t1),
                                 v.cost > SimTime{0} ? ", producer op " + format_time(v.cost) : std::string(),
                                 v.evicted       ? ", evicted"
                                 : v.swapped_out ? ", swapped out"
                                                 : "")));
    }
    const std::size_t cells = merged_cells(boxes, drawn);
    transfers(y_of);
    // The address axis.
    const double total_mib = axis.total() / kMiB;
    const double step = memory_map::nice_step(total_mib, 8);
    for (const auto& p : axis.pieces()) {
      const double lo = static_cast<double>(p.lo - axis.base()) / kMiB,
                   hi = static_cast<double>(p.hi - axis.base()) / kMiB;
      for (double k = std::ceil(lo / step - 1e-9); k * step <= hi * (1 + 1e-12); k += 1) {
        y_tick(y_of(axis.base() + static_cast<std::uint64_t>(std::llround(k * step * kMiB))),
               memory_map::tick_label(k * step, step));
      }
    }
    out_ += fmt::format(
        "<text transform=\"translate(24,{:.1f}) rotate(-90)\" text-anchor=\"middle\">address - {:#x} (MiB)</text>\n",
        kY0 + kPH / 2, axis.base());
    std::string sub = fmt::format("{} block lifetimes", iv.size());
    if (individual < iv.size()) {
      sub += fmt::format(": the {} largest drawn one by one, {} small ones merged into {} grey cells", individual,
                         iv.size() - individual, cells);
    }
    if (!axis.gaps().empty()) sub += fmt::format("; {} unused address ranges collapsed", axis.gaps().size());
    text(kX0, 44, "sub", sub);
    // Legend.
    double ly = kY0 + 10;
    if (opt_.colour == MemoryMapColour::Role) {
      text(kLegendX, ly, nullptr, "tensor role");
      ly += 20;
      for (const RoleStyle& r : kRoles) swatch(ly, fmt::format("class=\"role-{}\"", r.css), r.css);
    } else {
      text(kLegendX, ly, nullptr, "eviction cost (producer op time)");
      ly += 12;
      rect(kLegendX, ly, 14, 100, "fill=\"url(#cost)\"");
      text(kLegendX + 20, ly + 10, nullptr, format_time(max_cost));
      text(kLegendX + 20, ly + 100, nullptr, format_time(min_cost));
      ly += 124;
      swatch(ly, "fill=\"#d0d0d0\"", "no producer op");
    }
    ly += 10;
    swatch(ly, "fill=\"#fff\" class=\"evicted\"", "evicted, then freed");
    swatch(ly, "fill=\"#fff\" class=\"swapped\"", "swapped out, then freed");
    swatch(ly, "class=\"transfer\"", "transfer in flight");
    if (cells > 0) swatch(ly, "class=\"merged\"", "merged small blocks");
    if (!axis.gaps().empty()) swatch(ly, "class=\"gap\"", "unused range (collapsed)");
  }

  // Boxes not drawn one by one, accumulated into a grid of kCell px cells (opacity = coverage).
  std::size_t merged_cells(const std::vector<Box>& boxes, const std::vector<bool>& drawn) {
    const auto nx = static_cast<std::size_t>(std::ceil(kPW / kCell)),
               ny = static_cast<std::size_t>(std::ceil(kPH / kCell));
    std::vector<double> cover;
    for (std::size_t i = 0; i < boxes.size(); ++i) {
      if (drawn[i]) continue;
      if (cover.empty()) cover.assign(nx * ny, 0.0);
      const double bx0 = std::clamp(boxes[i].x0 - kX0, 0.0, kPW),
                   bx1 = std::clamp(boxes[i].x0 + boxes[i].w - kX0, 0.0, kPW);
      const double by0 = std::clamp(boxes[i].y0 - kY0, 0.0, kPH),
                   by1 = std::clamp(boxes[i].y0 + boxes[i].h - kY0, 0.0, kPH);
      const auto cx1 = std::min(nx - 1, static_cast<std::size_t>(bx1 / kCell));
      const auto cy1 = std::min(ny - 1, static_cast<std::size_t>(by1 / kCell));
      for (auto cy = static_cast<std::size_t>(by0 / kCell); cy <= cy1; ++cy) {
        const double oy = std::min(by1, (cy + 1) * kCell) - std::max(by0, cy * kCell);
        for (auto cx = static_cast<std::size_t>(bx0 / kCell); cx <= cx1; ++cx) {
          const double ox = std::min(bx1, (cx + 1) * kCell) - std::max(bx0, cx * kCell);
          cover[cy * nx + cx] += std::max(ox, 0.05) * std::max(oy, 0.05);
        }
      }
    }
    std::size_t cells = 0;
    for (std::size_t c = 0; c < cover.size(); ++c) {
      if (cover[c] <= 0.0) continue;
      ++cells;
      const double opacity = std::min(1.0, 0.2 + 0.8 * cover[c] / (kCell * kCell));
      const std::size_t column = c % nx, row = c / nx;  // the grid cell of c (whole cells)
      rect(kX0 + static_cast<double>(column) * kCell, kY0 + static_cast<double>(row) * kCell, kCell, kCell,
           fmt::format("class=\"merged\" fill-opacity=\"{:.2f}\"", opacity));
    }
    return cells;
  }

  // Transfer windows, hatched over their block (the largest on screen, up to a fifth of the cap).
  template <typename F>
  void transfers(F y_of) {
    const auto& tr = data_.transfers;
    std::vector<std::size_t> order(tr.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    auto area = [&](std::size_t i) {
      return (x(tr[i].t1) - x(tr[i].t0)) * (y_of(tr[i].addr) - y_of(tr[i].addr + tr[i].size));
    };
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return area(a) > area(b); });
    order.resize(std::min(order.size(), opt_.max_rects / 5 + 1));
    std::sort(order.begin(), order.end());
    for (const std::size_t i : order) {
      const auto& t = tr[i];
      const double top = y_of(t.addr + t.size);
      out_ += fmt::format(
          "<rect class=\"transfer {}\" x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\"/>\n",
          t.out ? "out" : "in", x(t.t0), top, std::max(x(t.t1) - x(t.t0), 0.5), std::max(y_of(t.addr) - top, 0.5));
    }
  }

  // --- address-blind: stacked bars of live bytes by role -------------------------------------
  void stacked_bars();

  const Trace& trace_;
  const RunLog& log_;
  const Report& report_;
  const MemoryMapOptions& opt_;
  memory_map::Data data_;
  std::string out_;
};

void Svg::stacked_bars() {
  using Stack = std::array<std::uint64_t, kRoles.size()>;
  constexpr std::size_t kColumns = 450;
  struct Step {
    SimTime t;
    std::uint32_t record;
    std::size_t role;
    std::int64_t delta;
  };
  std::vector<Step> steps;
  for (const Interval& v : data_.intervals) {
    const std::size_t role = role_index(trace_, v.storage);
    steps.push_back({v.t0, v.record, role, static_cast<std::int64_t>(v.size)});
    if (v.free_record != kNoRecord) steps.push_back({v.t1, v.free_record, role, -static_cast<std::int64_t>(v.size)});
  }
  std::sort(steps.begin(), steps.end(),
            [](const Step& a, const Step& b) { return std::tie(a.t, a.record) < std::tie(b.t, b.record); });
  auto total = [](const Stack& s) {
    std::uint64_t n = 0;
    for (const auto b : s) n += b;
    return n;
  };
  auto column = [&](SimTime t) {
    return std::min(kColumns - 1, static_cast<std::size_t>(static_cast<double>(t.count()) /
                                                           static_cast<double>(data_.end.count()) * kColumns));
  };
  // Each column shows the state with the most live bytes within it.
  std::vector<Stack> best(kColumns);
  Stack cur{};
  std::size_t c = 0;
  std::uint64_t peak = 0;
  for (const Step& s : steps) {
    for (const std::size_t sc = column(s.t); c < sc;) best[++c] = cur;
    cur[s.role] = static_cast<std::uint64_t>(static_cast<std::int64_t>(cur[s.role]) + s.delta);
    if (total(cur) > total(best[c])) best[c] = cur;
    peak = std::max(peak, total(cur));
  }
  while (c + 1 < kColumns) best[++c] = cur;
  const double top_bytes = std::max<double>(1.0, 1.05 * static_cast<double>(std::max(peak, report_.budget.value)));
  auto y_of = [&](double bytes) { return kY0 + kPH * (1.0 - bytes / top_bytes); };
  const double col_w = kPW / kColumns;
  for (std::size_t k = 0; k < kColumns;) {
    std::size_t run = k + 1;
    while (run < kColumns && best[run] == best[k]) ++run;
    double below = 0.0;
    for (std::size_t r = 0; r < kRoles.size(); ++r) {
      if (best[k][r] == 0) continue;
      const auto bytes = static_cast<double>(best[k][r]);
      out_ += fmt::format(
          "<rect class=\"bar role-{}\" x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\"/>\n", kRoles[r].css,
          kX0 + k * col_w, y_of(below + bytes), (run - k) * col_w, y_of(below) - y_of(below + bytes));
      below += bytes;
    }
    k = run;
  }
  const double step = memory_map::nice_step(top_bytes / kMiB, 8);
  for (int k = 0; k * step * kMiB <= top_bytes; ++k)
    y_tick(y_of(k * step * kMiB), memory_map::tick_label(k * step, step));
  hline(y_of(static_cast<double>(report_.budget.value)), "budget");
  out_ += fmt::format(
      "<text transform=\"translate(24,{:.1f}) rotate(-90)\" text-anchor=\"middle\">live bytes (MiB)</text>\n",
      kY0 + kPH / 2);
  text(kX0, 44, "sub",
       fmt::format(
           "address-blind allocator ({}): addresses are not a layout, so this shows stacked bars of live bytes by role "
           "(the most in each time column)",
           report_.allocator));
  double ly = kY0 + 10;
  text(kLegendX, ly, nullptr, "tensor role");
  ly += 20;
  for (const RoleStyle& r : kRoles) swatch(ly, fmt::format("class=\"role-{}\"", r.css), r.css);
  ly += 10;
  out_ += fmt::format("<line class=\"budget\" x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\"/>\n", kLegendX,
                      ly - 4, kLegendX + 14);
  text(kLegendX + 20, ly, nullptr, "budget");
}

}  // namespace

std::optional<MemoryMapColour> parse_memory_map_colour(std::string_view name) {
  if (name == "role") return MemoryMapColour::Role;
  if (name == "cost") return MemoryMapColour::Cost;
  return std::nullopt;
}

std::string memory_map_svg(const Trace& trace, const RunLog& log, const Report& report,
                           const MemoryMapOptions& options) {
  return Svg(trace, log, report, options).run();
}

}  // namespace coopsim
