// Usage errors of the command line (docs/architecture.md, "Errors and exit status"): every
// CLI11 parse error becomes one line "coopsim: error: ..." and exit status 2, with "did you
// mean" for a mistyped option or command; option values are checked by validators whose
// messages quote the value (cut like every quoted input, error.hpp).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace coopsim::cli {

// Exit status of a bad command line.
inline constexpr int kUsageStatus = 2;

// An integer option value from `lo` to `hi`: "expected an integer from 1 to 4096, got '0'", or
// "expected an integer, got 'abc'" when the bounds are those of the option's type.
CLI::Validator integer(std::int64_t lo, std::int64_t hi, bool type_bounds = false);
template <class T>
CLI::Validator integer() {
  return integer(static_cast<std::int64_t>(std::numeric_limits<T>::min()),
                 static_cast<std::int64_t>(
                     std::min<std::uint64_t>(std::numeric_limits<T>::max(), std::numeric_limits<std::int64_t>::max())),
                 true);
}
// A finite decimal number: "expected a number, got 'x'".
CLI::Validator number();
// One of `choices`: "expected role or cost, got 'rol'; did you mean 'role'?".
CLI::Validator one_of(std::vector<std::string> choices);

// A comma list ("pytorch,bestfit"; repeated options add to it): refuses an empty entry
// ("--allocator: expected a comma list without empty entries, got ','"), which CLI11's own
// delimiter would drop silently (`-a ,` would then mean the default). An empty value is left to
// refuse_empty_values. split_comma_lists() turns the values into the list's entries after parsing.
CLI::Validator comma_list();
void split_comma_lists(std::vector<std::string>& values);

// Adds to every option and positional of every subcommand of `app` that takes a value a check
// that refuses an empty one ("--allocator: expected a value, got an empty string"): an empty
// value never silently means "the default" (`run T -a ""`), nor "no output file" (`-o ""`).
void refuse_empty_values(CLI::App& app);

// The message (without "coopsim: error: ") for a parse error of `app` that is not a request for
// help or the version. Unknown arguments are reported first, whatever CLI11 stopped on: "run
// --bogus" is about --bogus, not about the missing trace.
std::string usage_error(const CLI::App& app, const CLI::ParseError& e);

}  // namespace coopsim::cli
