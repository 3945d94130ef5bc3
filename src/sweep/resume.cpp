// check_earlier (resume.hpp): the manifest of an output directory against this sweep's, then each
// kept row and entry against the grid's run or search of its index, field by field.
#include "resume.hpp"

#include <fmt/format.h>

#include <initializer_list>
#include <optional>
#include <string>

#include "coopsim/base/error.hpp"

namespace coopsim::sweep {
namespace {

namespace fs = std::filesystem;
using OJ = nlohmann::ordered_json;

// One field of a run's identity: its name in messages, the text found, the text the grid expects.
struct Field {
  const char* name;
  std::string found, expected;
};

// The first field that differs, as "(NAME: 'found' here, 'expected' in the sweep)", or nullopt.
std::optional<std::string> first_difference(std::initializer_list<Field> fields) {
  for (const Field& f : fields) {
    if (f.found != f.expected) {
      return fmt::format("({}: {} here, {} in the sweep)", f.name, quote_excerpt(f.found), quote_excerpt(f.expected));
    }
  }
  return std::nullopt;
}

// The value at `path` inside `e` as text (a string's content, else its JSON), or "(missing)".
std::string text_at(const OJ& e, std::initializer_list<const char*> path) {
  const OJ* v = &e;
  for (const char* key : path) {
    if (!v->is_object() || !v->contains(key)) return "(missing)";
    v = &v->at(key);
  }
  return v->is_string() ? v->get<std::string>() : v->dump();
}

std::string ratio_text(const GridRun& r) { return r.ratio ? fmt::format("{}", *r.ratio) : std::string(); }

std::string hash_text(const Trace& t) { return fmt::format("{:016x}", t.content_hash); }

}  // namespace

void check_earlier(const fs::path& dir, const Manifest& old, const Manifest& now, const SweepConfig& cfg,
                   const SweepGrid& grid, const std::vector<Trace>& traces, const Finished& f) {
  const std::string manifest = (dir / "sweep.json").string();
  if (old.coopsim_version != now.coopsim_version) {
    throw Error(manifest + ": written by coopsim " + old.coopsim_version + ", this is " + now.coopsim_version +
                ": use another -o");
  }
  if (old.config_hash != now.config_hash) {
    throw Error(manifest + fmt::format(": the sweep config or its traces changed since this directory was written "
                                       "(hash {:016x}, now {:016x}): use another -o",
                                       old.config_hash, now.config_hash));
  }
  const Shard a = old.shard.value_or(Shard{}), b = now.shard.value_or(Shard{});
  if (a.index != b.index || a.count != b.count) {
    throw Error(manifest + fmt::format(": holds shard {}/{}, not {}/{}", a.index, a.count, b.index, b.count));
  }
  auto refuse = [&](const std::string& where, const char* what, std::size_t i, const std::string& why) {
    throw Error(fmt::format("{}: {} {} is not this sweep's {} {} {}", where, what, i, what, i, why));
  };
  auto check_shard = [&](const std::string& where, const char* what, std::size_t i) {
    if (!in_shard(i, b)) refuse(where, what, i, fmt::format("(it is not in shard {}/{})", b.index, b.count));
  };
  for (const auto& [i, row] : f.rows) {
    const GridRun& r = grid.runs[i];
    const auto x = split_csv_line(row);
    const std::string& where = f.row_at.at(i);
    check_shard(where, "run", i);
    const auto diff = first_difference({{"variant", x[1], cfg.variants[r.variant].name},
                                        {"budget_ratio", x[2], ratio_text(r)},
                                        {"trace", x[3], cfg.traces[r.trace]},
                                        {"trace_hash", x[5], hash_text(traces[r.trace])},
                                        {"allocator", x[6], r.allocator},
                                        {"policy", x[7], r.policy},
                                        {"budget_bytes", x[8], std::to_string(r.budget.value)}});
    if (diff) refuse(where, "run", i, *diff);
  }
  for (const auto& [i, e] : f.entries) {
    const GridRun& r = grid.runs[i];
    const std::string& where = f.entry_at.at(i);
    check_shard(where, "run", i);
    const std::string ratio = r.ratio ? OJ(*r.ratio).dump() : std::string("null");
    const auto diff = first_difference({{"variant", text_at(e, {"variant"}), cfg.variants[r.variant].name},
                                        {"budget_ratio", text_at(e, {"budget_ratio"}), ratio},
                                        {"trace", text_at(e, {"report", "trace", "path"}), cfg.traces[r.trace]},
                                        {"trace hash", text_at(e, {"report", "trace", "hash"}), hash_text(traces[r.trace])},
                                        {"allocator", text_at(e, {"report", "allocator"}), r.allocator},
                                        {"policy", text_at(e, {"report", "policy"}), r.policy},
                                        {"budget_bytes", text_at(e, {"report", "budget_bytes"}),
                                         std::to_string(r.budget.value)}});
    if (diff) refuse(where, "run", i, *diff);
  }
  for (const auto& [i, row] : f.search_rows) {
    const GridSearch& s = grid.searches[i];
    const auto x = split_csv_line(row);
    const std::string& where = f.search_row_at.at(i);
    check_shard(where, "search", i);
    const auto diff = first_difference({{"trace", x[1], cfg.traces[s.trace]},
                                        {"allocator", x[2], s.allocator},
                                        {"policy", x[3], s.policy},
                                        {"variant", x[4], cfg.variants[s.variant].name}});
    if (diff) refuse(where, "search", i, *diff);
  }
}

}  // namespace coopsim::sweep
