// libFuzzer harness: the DTR log importer, in both MUTATE modes (in place and copy-on-write).
// An imported trace must be a valid trace v1: written and loaded back unchanged.
#include "coopsim/import/importers.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace coopsim;
  const std::string path = fuzz::write_temp("dtr.log", data, size);
  for (const bool cow : {false, true}) {
    Trace t;
    try {
      t = import_dtr_log(path, DtrOptions{cow}, fuzz::fuzz_limits());
    } catch (const Error& e) {
      fuzz::check_message(e);
      continue;
    }
    fuzz::check_round_trip(t);
  }
  return 0;
}
