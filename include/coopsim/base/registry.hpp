// Explicitly filled registries of named entries, one per extension point: allocators
// (src/alloc/registry.cpp), policies (src/policy/registry.cpp), importers
// (src/import/registry.cpp), run exports (src/output/registry.cpp) and planner methods
// (src/planner/registry.cpp). Entries are added one line each in those files (no static
// self-registration: static libraries would drop self-registering objects); the CLI's choices,
// its error lines, `coopsim list` and the tests take names from them, in their order.
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "coopsim/base/error.hpp"
#include "coopsim/base/params.hpp"
#include "coopsim/base/text.hpp"

namespace coopsim {

// Entries with a `name`, in the order they were added.
template <class Entry>
class NamedList {
 public:
  void add(Entry e) {
    if (find(e.name) != nullptr) throw std::logic_error("duplicate registry entry " + e.name);
    entries_.push_back(std::move(e));
  }

  [[nodiscard]] const Entry* find(std::string_view name) const {
    auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.name == name; });
    return it == entries_.end() ? nullptr : &*it;
  }

  // Throws ConfigError(key, "unknown <what> 'x' (valid: a, b, c)"), with "; did you mean 'b'?"
  // when one name is close (closest_name, text.hpp).
  [[nodiscard]] const Entry& get(std::string_view name, const std::string& key, std::string_view what) const {
    if (const Entry* e = find(name)) return *e;
    std::vector<std::string> all;
    for (const auto& e : entries_) all.push_back(e.name);
    const std::string guess = closest_name(name, all);
    throw ConfigError(key, "unknown " + std::string(what) + " " + quote_excerpt(name) + " (valid: " + names() + ")" +
                               (guess.empty() ? "" : "; did you mean '" + guess + "'?"));
  }

  // "a, b, c" (or with another separator: "a | b | c" for help texts).
  [[nodiscard]] std::string names(std::string_view separator = ", ") const {
    std::string out;
    for (const auto& e : entries_) {
      if (!out.empty()) out += separator;
      out += e.name;
    }
    return out;
  }

  [[nodiscard]] std::span<const Entry> entries() const { return entries_; }

 private:
  std::vector<Entry> entries_;
};

// The entry of a named implementation of `Interface`: its help, parameters and factory.
template <class Interface, class... Args>
struct FactoryEntry {
  using Factory = std::function<std::unique_ptr<Interface>(const Params&, Args...)>;
  std::string name;
  std::string help;
  std::vector<ParamDoc> params;
  Factory make;
};

// A registry of named implementations of one interface, built by factories.
template <class Interface, class... Args>
class Registry : public NamedList<FactoryEntry<Interface, Args...>> {
 public:
  using Entry = FactoryEntry<Interface, Args...>;
  using Factory = typename Entry::Factory;

  // The entry of a class that names itself: T::kName, T::kHelp, T::param_docs(), T::create.
  template <class T>
  static Entry entry_for() {
    return {std::string(T::kName), std::string(T::kHelp), T::param_docs(), &T::create};
  }
};

}  // namespace coopsim
