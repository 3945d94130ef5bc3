// Shared Chrome trace JSON pieces (coopsim/output/chrome_trace.hpp).
#include "coopsim/output/chrome_trace.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdint>

namespace coopsim::chrome_trace {

std::string json_text(std::string_view s) {
  return nlohmann::json(std::string(s)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string micros(SimTime t) {
  const std::int64_t ns = t.count();
  const std::uint64_t mag = ns < 0 ? static_cast<std::uint64_t>(-(ns + 1)) + 1 : static_cast<std::uint64_t>(ns);
  return fmt::format("{}{}.{:03}", ns < 0 ? "-" : "", mag / 1000, mag % 1000);
}

void EventList::process_name(int pid, const std::string& name) {
  add(fmt::format(R"({{"ph":"M","pid":{},"name":"process_name","args":{{"name":{}}}}})", pid, json_text(name)));
}

void EventList::thread_name(int pid, int tid, const std::string& name, int order) {
  add(fmt::format(R"({{"ph":"M","pid":{},"tid":{},"name":"thread_name","args":{{"name":{}}}}})", pid, tid,
                  json_text(name)));
  add(fmt::format(R"({{"ph":"M","pid":{},"tid":{},"name":"thread_sort_index","args":{{"sort_index":{}}}}})", pid,
                  tid, order));
}

}  // namespace coopsim::chrome_trace
