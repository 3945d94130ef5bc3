// libFuzzer harness: the trace v1 loader (load_trace) on arbitrary bytes (plain or gzip). An
// accepted trace must survive write_trace + load_trace unchanged, and summarize() must run.
#include "fuzz_common.hpp"
#include "coopsim/formats/trace_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace coopsim;
  const std::string path = fuzz::write_temp("trace.jsonl", data, size);
  Trace t;
  try {
    t = load_trace(path, fuzz::fuzz_limits());
  } catch (const InputError& e) {
    fuzz::check_message(e);
    fuzz::require(e.file() == path, "error names another file", e.what());
    return 0;
  }
  (void)summarize(t);
  fuzz::check_round_trip(t);
  return 0;
}
