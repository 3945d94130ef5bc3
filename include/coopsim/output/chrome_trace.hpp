// Pieces of the Chrome trace / Perfetto JSON ("Trace Event Format", JSON Object Format) that
// every timeline coopsim writes shares: the run timeline (perfetto_json) and the snapshot
// timeline (`coopsim snapshot timeline`), so both print strings and times the same way.
#pragma once

#include <string>
#include <string_view>

#include "coopsim/base/units.hpp"

namespace coopsim::chrome_trace {

// A JSON string literal; invalid UTF-8 is replaced rather than refused (names come from traces).
std::string json_text(std::string_view s);

// Microseconds (the format's unit) with exactly 3 decimals: the nanosecond value, exactly.
std::string micros(SimTime t);

// Appends events to a {"traceEvents": [...]} document, one per line, comma-separated.
class EventList {
 public:
  void add(const std::string& json) {
    if (!first_) out_ += ",\n";
    first_ = false;
    out_ += json;
  }
  // The process / thread name and sort order metadata ("M") events.
  void process_name(int pid, const std::string& name);
  void thread_name(int pid, int tid, const std::string& name, int order);
  [[nodiscard]] std::string& text() { return out_; }

 private:
  std::string out_;
  bool first_ = true;
};

}  // namespace coopsim::chrome_trace
