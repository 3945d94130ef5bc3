// coopsim's public API: the one header a program using libcoopsim needs, and the only one Meson
// installs (with the libraries and a pkg-config file, `coopsim`). It names no internal type and
// includes no third-party header: a trace and a checked config are handles, a report is the JSON
// text of `coopsim run --json`. Everything else under include/coopsim/ is internal to the library
// and its tests (docs/architecture.md, "Public API").
//
//   coopsim::api::Trace trace = coopsim::api::Trace::load("step.jsonl.gz");
//   coopsim::api::Config config = coopsim::api::Config::parse(R"({"allocator": "bestfit"})", {"policy=dtr"});
//   std::string report_json = coopsim::api::run(trace, config, "60%");
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace coopsim {
struct Trace;
struct SimConfig;
class CheckedConfig;
}  // namespace coopsim

namespace coopsim::api {

// Every failure: what() is coopsim's one-line message (file:line or key, then the problem), as the
// command line prints it after "coopsim: error: ".
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The library's version (the project's, e.g. "0.1.0").
std::string version();

class Config;

// A trace v1 in memory (docs/trace-format.md); copies share it.
class Trace {
 public:
  // Reads a .jsonl or .jsonl.gz trace file, checking every record.
  static Trace load(const std::string& path);
  // Reads trace v1 text held in memory (plain JSON lines), checking every record as load does;
  // `name` stands for the file in errors ("name:line: problem").
  static Trace parse(const std::string& text, const std::string& name = "<text>");
  // Writes it as trace v1 (gzip-compressed when the path ends in .gz); never replaces anything
  // but a regular file.
  void write(const std::string& path) const;
  // The largest sum of live requested bytes over the trace (what "N%" budgets are a share of).
  [[nodiscard]] std::uint64_t peak_live_bytes() const;
  [[nodiscard]] std::uint64_t events() const;

 private:
  friend std::string run(const Trace&, const Config&, const std::string&);
  std::shared_ptr<const coopsim::Trace> trace_;
};

// A run config (docs/user-guide.md, "Config"), checked: allocator, policy, budget, link, engine,
// params and limits, with `key=value` overrides applied in order (as `--set`).
class Config {
 public:
  static Config parse(const std::string& json_text, const std::vector<std::string>& overrides = {});
  static Config load(const std::string& path, const std::vector<std::string>& overrides = {});
  // The config document, overrides applied (JSON text).
  [[nodiscard]] std::string json() const;

 private:
  friend std::string run(const Trace&, const Config&, const std::string&);
  static Config checked(coopsim::SimConfig cfg, const std::vector<std::string>& overrides);
  std::shared_ptr<const coopsim::CheckedConfig> checked_;
};

// Runs one simulation and returns its report as JSON (the document of `coopsim run --json`).
// `budget`: empty for the config's, else a size ("8GiB", plain bytes) or "N%" of the trace's
// peak live bytes (as `--budget`).
std::string run(const Trace& trace, const Config& config, const std::string& budget = "");

}  // namespace coopsim::api
