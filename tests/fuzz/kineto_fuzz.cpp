// libFuzzer harness: the Kineto (PyTorch profiler) trace importer for device 0. An imported
// trace must be a valid trace v1: written and loaded back unchanged.
#include "coopsim/import/importers.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace coopsim;
  const std::string path = fuzz::write_temp("kineto.json", data, size);
  Trace t;
  try {
    t = import_kineto(path, KinetoOptions(), fuzz::fuzz_limits());
  } catch (const Error& e) {
    fuzz::check_message(e);
    return 0;
  }
  fuzz::check_round_trip(t);
  return 0;
}
