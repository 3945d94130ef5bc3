// One-line usage errors for CLI11's parse errors (cli_errors.hpp). CLI11's own messages span two
// lines ("... / Run with --help for more information."), report a missing positional before an
// unknown option, and exit 105-114; this file rebuilds each message from the parser's state.
#include "cli_errors.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <string_view>
#include <utility>

#include "coopsim/base/error.hpp"
#include "coopsim/base/text.hpp"

namespace coopsim::cli {
namespace {

constexpr std::string_view kCannotConvert = "Could not convert: ";

// A plain decimal integer (optional '-', digits): CLI11 would also take "0x10", "1e3" or " 7".
bool parse_integer(const std::string& s, std::int64_t& out, bool& too_big) {
  too_big = false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (s.empty() || end != s.data() + s.size()) return false;
  too_big = ec == std::errc::result_out_of_range;
  return ec == std::errc{};
}

std::string joined(const std::vector<std::string>& names, const char* sep) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : sep) + n;
  return out;
}

std::vector<std::string> command_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    names.push_back(sub->get_name());
  return names;
}

// Every spelling of the options of `app` ("--budget", "-b", "--help", "-h"), in declaration order.
std::vector<std::string> option_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* opt : app.get_options()) {
    for (const auto& l : opt->get_lnames()) names.push_back("--" + l);
    for (const auto& s : opt->get_snames()) names.push_back("-" + s);
  }
  return names;
}

// "run: " inside a subcommand, nothing at the top level.
std::string where(const CLI::App& app, const CLI::App& ctx) { return &ctx == &app ? "" : ctx.get_name() + ": "; }

bool looks_like_option(const std::string& arg) {
  if (arg.size() < 2 || arg[0] != '-') return false;
  double ignored = 0;
  const auto [end, ec] = std::from_chars(arg.data(), arg.data() + arg.size(), ignored);
  return !(ec == std::errc{} && end == arg.data() + arg.size());  // "-5" is a value, not an option
}

// The first argument of the command line that no option or positional of `ctx` took, with the
// subcommand it was left in; nullopt when every argument was used.
std::optional<std::pair<const CLI::App*, std::string>> first_unknown(const CLI::App& ctx) {
  for (const auto& arg : ctx.remaining(false)) {
    if (arg != "--") return std::make_pair(&ctx, arg);
  }
  for (const CLI::App* sub : ctx.get_subcommands()) {
    if (auto found = first_unknown(*sub)) return found;
  }
  return std::nullopt;
}

std::string unknown_argument(const CLI::App& app, const CLI::App& ctx, const std::string& arg) {
  if (looks_like_option(arg)) {
    // "--budgett=5" names the option "--budgett".
    const std::string name = arg.rfind("--", 0) == 0 ? arg.substr(0, arg.find('=')) : arg;
    // Options renamed so that each word has one meaning (docs/architecture.md, "Names").
    if (name == "--validate" && ctx.get_name() == "run") {
      return where(app, ctx) + "unknown option '--validate': renamed --audit (the independent check of the run's event log)";
    }
    const std::string guess = closest_name(name, option_names(ctx));
    return where(app, ctx) + "unknown option " + quote_excerpt(name) +
           (guess.empty() ? "" : "; did you mean " + guess + "?");
  }
  if (&ctx == &app && app.get_subcommands().empty()) {
    const auto commands = command_names(app);
    const std::string guess = closest_name(arg, commands);
    return "unknown command " + quote_excerpt(arg) +
           (guess.empty() ? " (commands: " + joined(commands, ", ") + ")" : "; did you mean '" + guess + "'?");
  }
  return where(app, ctx) + "unexpected argument " + quote_excerpt(arg);
}

// The innermost subcommand the command line selected (the app itself when none).
const CLI::App& selected(const CLI::App& app) {
  const CLI::App* ctx = &app;
  while (!ctx->get_subcommands().empty()) ctx = ctx->get_subcommands().front();
  return *ctx;
}

std::string missing(const CLI::App& app, const CLI::ParseError& e) {
  const CLI::App& ctx = selected(app);
  if (&ctx == &app) return "missing a command (" + joined(command_names(app), ", ") + ")";
  for (const CLI::Option* opt : ctx.get_options()) {
    if (!opt->get_required() || opt->count() > 0) continue;
    if (opt->nonpositional()) return where(app, ctx) + "missing option " + opt->get_name();
    std::string name = opt->get_name();
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::toupper(c); });
    return where(app, ctx) + "missing argument " + name;
  }
  return where(app, ctx) + one_line(e.what());
}

}  // namespace

CLI::Validator integer(std::int64_t lo, std::int64_t hi, bool type_bounds) {
  return CLI::Validator(
      [=](std::string& s) -> std::string {
        std::int64_t v = 0;
        bool too_big = false;
        const bool is_integer = parse_integer(s, v, too_big);
        if (is_integer && v >= lo && v <= hi) return {};
        // Bounds that are only the option's type are named once the value is a number.
        const bool say_bounds = !type_bounds || is_integer || too_big;
        return fmt::format("expected an integer{}, got {}", say_bounds ? fmt::format(" from {} to {}", lo, hi) : "",
                           quote_excerpt(s));
      },
      type_bounds ? "" : fmt::format("[{}, {}]", lo, hi));
}

CLI::Validator number() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        double v = 0;
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (!s.empty() && end == s.data() + s.size() && ec == std::errc{} && std::isfinite(v)) return {};
        return "expected a number, got " + quote_excerpt(s);
      },
      "");
}

CLI::Validator one_of(std::vector<std::string> choices) {
  const std::string listed =
      choices.size() == 1 ? choices[0] : joined({choices.begin(), choices.end() - 1}, ", ") + " or " + choices.back();
  return CLI::Validator(
      [choices, listed](std::string& s) -> std::string {
        if (std::find(choices.begin(), choices.end(), s) != choices.end()) return {};
        const std::string guess = closest_name(s, choices);
        return "expected " + listed + ", got " + quote_excerpt(s) +
               (guess.empty() ? "" : "; did you mean '" + guess + "'?");
      },
      "{" + joined(choices, ",") + "}");
}

CLI::Validator comma_list() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        if (s.empty()) return {};
        const bool empty_entry = s.front() == ',' || s.back() == ',' || s.find(",,") != std::string::npos;
        return empty_entry ? "expected a comma list without empty entries, got " + quote_excerpt(s) : "";
      },
      "");
}

void split_comma_lists(std::vector<std::string>& values) {
  std::vector<std::string> entries;
  for (const std::string& v : values) {
    for (std::size_t start = 0;;) {
      const std::size_t comma = v.find(',', start);
      entries.push_back(v.substr(start, comma - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  values = std::move(entries);
}

void refuse_empty_values(CLI::App& app) {
  const CLI::Validator non_empty(
      [](std::string& s) -> std::string { return s.empty() ? "expected a value, got an empty string" : ""; }, "");
  for (CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    for (CLI::Option* opt : sub->get_options([](const CLI::Option* o) { return o->get_type_size_max() > 0; })) {
      opt->check(non_empty);
    }
  }
}

std::string usage_error(const CLI::App& app, const CLI::ParseError& e) {
  if (const auto unknown = first_unknown(app)) return unknown_argument(app, *unknown->first, unknown->second);
  if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr) return missing(app, e);
  const std::string what = e.what();
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr) {
    // "--budget: 1 required TEXT missing": the option was last on the line, without its value.
    const auto colon = what.find(": ");
    if (colon != std::string::npos && what.ends_with(" missing")) return what.substr(0, colon) + ": expected a value";
  }
  if (dynamic_cast<const CLI::ConversionError*>(&e) != nullptr && what.starts_with(kCannotConvert)) {
    // "Could not convert: --json = abc": only flags are left to CLI11's conversion (every option
    // with a value has a validator), and a flag reads true/false, yes/no, on/off or 1/0 at most.
    const std::string rest = what.substr(kCannotConvert.size());
    const auto eq = rest.find(" = ");
    if (eq != std::string::npos) {
      return rest.substr(0, eq) + ": a flag takes no value, got " + quote_excerpt(rest.substr(eq + 3));
    }
  }
  // ValidationError carries the validators' own "--jobs: expected ..." messages; anything else is
  // CLI11's text, on one line.
  return excerpt(what, 4 * kExcerptBytes);
}

}  // namespace coopsim::cli
