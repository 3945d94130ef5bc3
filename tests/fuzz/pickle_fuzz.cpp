// libFuzzer harness: coopsim's pickle reader and the torch-snapshot importer on its result. A
// parsed value is converted as a snapshot of device 0; an imported trace must be a valid
// trace v1, written and loaded back unchanged.
#include "coopsim/formats/pickle.hpp"
#include "coopsim/import/torch_snapshot.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace coopsim;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  MemoryCap memory(fuzz::fuzz_limits().max_memory);  // the values, then the import
  pickle::ValuePtr root;
  try {
    root = pickle::parse(bytes, "fuzz.pickle", memory);
  } catch (const Error& e) {
    fuzz::check_message(e);
    return 0;
  }
  Trace t;
  try {
    t = torch_snapshot::import_value(*root, "fuzz.pickle", TorchSnapshotOptions{0}, memory);
  } catch (const Error& e) {
    fuzz::check_message(e);
    return 0;
  }
  fuzz::check_round_trip(t);
  return 0;
}
