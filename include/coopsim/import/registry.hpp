// The importers (`coopsim import KIND INPUT -o OUT`), one entry each in src/import/registry.cpp:
// a name, a help line, the options it takes, and the conversion to trace v1.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "coopsim/base/limits.hpp"
#include "coopsim/base/registry.hpp"
#include "coopsim/model/trace.hpp"

namespace coopsim {

// Every importer option of the command line; each importer reads the ones it names in
// ImporterEntry::options (the others must keep their defaults).
struct ImportOptions {
  int device = 0;                  // --device
  bool copy_on_write = false;      // --copy-on-write
  std::string compat = "coopsim";  // --compat
  std::string et;                  // --et
  Limits limits;                   // --limit KEY=VALUE
};

struct ImporterEntry {
  std::string name;
  std::string help;
  std::vector<std::string> options;  // command-line options it reads beyond --limit, e.g. "--device"
  std::vector<std::string> profiles;  // values of --compat it knows (empty: it has none)
  std::function<Trace(const std::string& input, const ImportOptions&)> import;
  // Lines printed after the summary (how to simulate the result); may be empty.
  std::function<std::vector<std::string>(const Trace&, const std::string& output)> hints;
};

using ImporterRegistry = NamedList<ImporterEntry>;

// Built-in importers, in `coopsim list` order.
ImporterRegistry builtin_importers();

}  // namespace coopsim
