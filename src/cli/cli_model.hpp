// The command line described as plain data, read from the CLI11 app that command_line.cpp builds
// and from the registries (allocators, policies, importers, plan methods, parameters): what the
// shell completions and the man page are generated from, so neither can drift from --help.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace coopsim::cli {

// What a value of an option or a positional is, for completion.
enum class ValueKind {
  None,     // a flag: no value
  Free,     // free text or a number (a budget, a count): nothing to offer
  Path,     // a file or directory name
  Choice,   // one of `choices`
  List,     // a comma list of `choices`
  Setting,  // KEY=VALUE, the keys in `choices` (with their '=')
};

struct OptionModel {
  std::vector<std::string> flags;  // "-a", "--allocator" (empty for a positional)
  std::string name;                // "--allocator", or the positional's name ("trace")
  std::string value_name;          // CLI11's type name: TEXT, INT, TEXT:{role,cost}; "" for a flag
  std::string help;
  bool required = false;
  bool repeatable = false;  // a positional that takes several values (merge's dirs)
  ValueKind kind = ValueKind::None;
  std::vector<std::string> choices;
};

struct CommandModel {
  std::string name;
  std::string help;
  std::vector<OptionModel> options;      // help and hidden options excluded
  std::vector<OptionModel> positionals;  // in order
};

// Every visible subcommand of `app`, in the order they were added.
std::vector<CommandModel> describe_commands(const CLI::App& app);

// The shells' completion scripts and the man page (roff), from describe_commands(app).
std::string bash_completion(const CLI::App& app);
std::string zsh_completion(const CLI::App& app);
std::string man_page(const CLI::App& app);

}  // namespace coopsim::cli
