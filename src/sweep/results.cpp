// A sweep directory's files (docs/sweep.md): the sweep.json manifest, results.csv rows,
// results.json entries and the journal of an unfinished sweep, minbudget.csv; reading them back
// for --resume, and writing the sorted final form (through result_stream.hpp's writers, which
// `coopsim merge` streams with).
#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "coopsim/base/schema_version.hpp"
#include "coopsim/base/error.hpp"
#include "coopsim/base/json_document.hpp"
#include "coopsim/base/output_file.hpp"
#include "coopsim/base/text.hpp"
#include "coopsim/sweep/sweep.hpp"
#include "coopsim/output/report_writers.hpp"
#include "result_stream.hpp"

namespace coopsim::sweep {
namespace {

namespace fs = std::filesystem;
using OJ = nlohmann::ordered_json;

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw Error(p.string() + ": cannot read");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Complete lines of a file being appended to: a last line without its newline was cut by an
// interruption and is left out.
std::vector<std::string> complete_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  for (std::size_t nl = text.find('\n'); nl != std::string::npos; nl = text.find('\n', start)) {
    lines.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return lines;
}

// Rows of a CSV written by a sweep, keyed by their first column (run or search index), and where
// each was read ("FILE:LINE"). An index listed twice is an error: a sweep writes each result once.
void read_rows(const fs::path& file, const std::string& header, std::size_t limit, const char* what,
               std::map<std::size_t, std::string>& rows, std::map<std::size_t, std::string>& at) {
  if (!fs::exists(file)) return;
  const auto lines = complete_lines(read_text(file));
  if (lines.empty()) return;
  if (lines[0] != header)
    throw InputError(file.string(), 1, "the columns differ from this coopsim's " + file.filename().string());
  const std::size_t columns = split_csv_line(header).size();
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const auto fields = split_csv_line(lines[i]);
    if (fields.size() != columns) {
      throw InputError(file.string(), i + 1, fmt::format("expected {} columns, found {}", columns, fields.size()));
    }
    const std::size_t index = parse_index(fields[0], limit, file, i + 1, what);
    const std::string where = fmt::format("{}:{}", file.string(), i + 1);
    if (!rows.emplace(index, lines[i]).second) {
      throw InputError(file.string(), i + 1, fmt::format("{} {} is listed twice (also {})", what, index, at.at(index)));
    }
    at.emplace(index, where);
  }
}

// One results.json entry or journal line; `where` names it in messages ("FILE:LINE", or
// "FILE: runs[K]"). Entries of one file name each run once.
void add_entry(const OJ& e, std::size_t limit, const fs::path& file, std::uint64_t line, const std::string& where,
               Finished& f, std::map<std::size_t, std::string>& in_file) {
  if (!e.is_object() || !e.contains("run") || !e.at("run").is_number_unsigned() || !e.contains("report")) {
    throw Error(where + ": expected an object with \"run\" and \"report\"");
  }
  const std::size_t index = parse_index(std::to_string(e.at("run").get<std::uint64_t>()), limit, file, line, "run");
  if (const auto [it, fresh] = in_file.emplace(index, where); !fresh) {
    throw Error(fmt::format("{}: run {} is listed twice (also {})", where, index, it->second));
  }
  if (f.entries.emplace(index, e).second) f.entry_at.emplace(index, where);
}

}  // namespace

std::size_t parse_index(const std::string& text, std::size_t limit, const fs::path& file, std::uint64_t line,
                        const char* what) {
  std::size_t used = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || v >= limit) {
    throw InputError(file.string(), line,
                     fmt::format("{} '{}' is not one of this sweep's {} {}s", what, text, limit, what));
  }
  return static_cast<std::size_t>(v);
}

nlohmann::ordered_json manifest_json(const Manifest& m) {
  OJ j;
  j["schema_version"] = schema_version::kSweepManifest;
  j["coopsim_version"] = m.coopsim_version;
  j["config_hash"] = fmt::format("{:016x}", m.config_hash);
  j["runs"] = m.runs;
  j["searches"] = m.searches;
  j["shard"] = m.shard ? OJ(fmt::format("{}/{}", m.shard->index, m.shard->count)) : OJ(nullptr);
  return j;
}

Manifest read_manifest(const fs::path& dir) {
  const fs::path file = dir / "sweep.json";
  if (!fs::exists(file)) throw Error(file.string() + ": missing: not a sweep output directory");
  const OJ j = parse_ordered_json_document(read_text(file), file.string());
  // A manifest from before schema_version (absent) reads as version 1; a later one is refused.
  if (const auto v = j.find("schema_version");
      v != j.end() && !(v->is_number_unsigned() && v->get<std::uint64_t>() == schema_version::kSweepManifest)) {
    throw Error(fmt::format("{}: schema_version {} (this coopsim reads sweep manifests of version {})", file.string(),
                            excerpt(v->dump(), 40), schema_version::kSweepManifest));
  }
  Manifest m;
  try {
    m.coopsim_version = j.at("coopsim_version").get<std::string>();
    m.config_hash = std::stoull(j.at("config_hash").get<std::string>(), nullptr, 16);
    // Counts must be unsigned: get<std::size_t>() of -1 would wrap to 2^64 - 1.
    if (!j.at("runs").is_number_unsigned() || !j.at("searches").is_number_unsigned()) throw Error("negative count");
    m.runs = j.at("runs").get<std::size_t>();
    m.searches = j.at("searches").get<std::size_t>();
    if (!j.at("shard").is_null()) m.shard = parse_shard(j.at("shard").get<std::string>());
  } catch (const std::exception&) {
    throw Error(file.string() +
                ": not a sweep manifest (expected coopsim_version, config_hash, runs, searches, shard)");
  }
  return m;
}

std::string results_csv_header() { return "run,variant,budget_ratio," + csv_header(); }

std::string results_csv_row(const SweepConfig& cfg, const GridRun& run, const Report& r) {
  return fmt::format("{},{},{},{}", run.index, cfg.variants.at(run.variant).name,
                     run.ratio ? fmt::format("{}", *run.ratio) : std::string(), csv_row(r));
}

nlohmann::ordered_json results_json_entry(const SweepConfig& cfg, const GridRun& run, const Report& r) {
  OJ e;
  e["run"] = run.index;
  e["variant"] = cfg.variants.at(run.variant).name;
  e["budget_ratio"] = run.ratio ? OJ(*run.ratio) : OJ(nullptr);
  e["report"] = to_json(r);
  return e;
}

void make_output_dir(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) {
    throw Error(dir.string() + ": cannot create the output directory" + (ec ? " (" + ec.message() + ")" : ""));
  }
}

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char ch = line[i];
    if (quoted) {
      if (ch == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        out.back() += '"';
        ++i;
      } else if (ch == '"') {
        quoted = false;
      } else {
        out.back() += ch;
      }
    } else if (ch == '"') {
      quoted = true;
    } else if (ch == ',') {
      out.emplace_back();
    } else {
      out.back() += ch;
    }
  }
  return out;
}

Finished read_finished(const fs::path& dir, const Manifest& m) {
  Finished f;
  read_rows(dir / "results.csv", results_csv_header(), m.runs, "run", f.rows, f.row_at);
  read_rows(dir / "minbudget.csv", minbudget_csv_header(), m.searches, "search", f.search_rows, f.search_row_at);
  const fs::path json = dir / "results.json";
  if (fs::exists(json)) {
    const OJ doc = parse_ordered_json_document(read_text(json), json.string());
    if (!doc.is_object() || !doc.contains("runs") || !doc.at("runs").is_array()) {
      throw Error(json.string() + ": expected an object with a \"runs\" list");
    }
    std::map<std::size_t, std::string> listed;
    for (std::size_t k = 0; k < doc.at("runs").size(); ++k) {
      add_entry(doc.at("runs")[k], m.runs, json, 1, fmt::format("{}: runs[{}]", json.string(), k), f, listed);
    }
  }
  const fs::path journal = dir / kJournal;
  if (fs::exists(journal)) {
    const auto lines = complete_lines(read_text(journal));
    std::map<std::size_t, std::string> listed;
    for (std::size_t i = 0; i < lines.size(); ++i) {
      const OJ e = parse_ordered_json_document(lines[i], journal.string(), i + 1);
      add_entry(e, m.runs, journal, i + 1, fmt::format("{}:{}", journal.string(), i + 1), f, listed);
    }
  }
  return f;
}

void check_sweep_files(const fs::path& dir) {
  for (const char* name : kSweepFiles) check_owned_output((dir / name).string());
}

void write_results(const fs::path& dir, const Manifest& m, const Finished& f) {
  // Through the writers merge streams with (result_stream.hpp): one text for both.
  BufferedOutput csv(dir / "results.csv");
  csv.write(results_csv_header() + "\n");
  for (const auto& [i, row] : f.rows) {
    csv.write(row);
    csv.write("\n");
  }
  csv.commit();
  if (m.searches > 0) {
    BufferedOutput mb(dir / "minbudget.csv");
    mb.write(minbudget_csv_header() + "\n");
    for (const auto& [i, row] : f.search_rows) {
      mb.write(row);
      mb.write("\n");
    }
    mb.commit();
  }
  ResultsJsonWriter json(dir / "results.json", m);
  for (const auto& [i, e] : f.entries) json.add(e);
  json.finish();
  json.commit();
  write_file_atomic((dir / "sweep.json").string(), manifest_json(m).dump(2) + "\n", OutputFile::Target::Owned);
  std::error_code ec;
  fs::remove(dir / kJournal, ec);
}

}  // namespace coopsim::sweep
