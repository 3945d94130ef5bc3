// A typed, explicitly filled registry of named implementations of one interface.
// Entries are added explicitly, one line each, in src/alloc/registry.cpp and
// src/policy/registry.cpp (no static self-registration: static libraries would drop
// self-registering objects). `coopsim list` prints entries() in order.
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

template <class Interface, class... Args>
class Registry {
 public:
  using Factory = std::function<std::unique_ptr<Interface>(const Params&, Args...)>;
  struct Entry {
    std::string name;
    std::string help;
    std::vector<ParamDoc> params;
    Factory make;
  };

  // The entry of a class that names itself: T::kName, T::kHelp, T::param_docs(), T::create.
  template <class T>
  static Entry entry_for() {
    return {std::string(T::kName), std::string(T::kHelp), T::param_docs(), &T::create};
  }

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

  [[nodiscard]] std::string names() const {
    std::string out;
    for (const auto& e : entries_) {
      if (!out.empty()) out += ", ";
      out += e.name;
    }
    return out;
  }

  [[nodiscard]] std::span<const Entry> entries() const { return entries_; }

 private:
  std::vector<Entry> entries_;
};

}  // namespace coopsim
