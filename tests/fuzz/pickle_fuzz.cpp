// libFuzzer harness: coopsim's pickle reader and the torch-snapshot importer on its result. A
// parsed value is converted as a snapshot of device 0; an imported trace must be a valid
// trace v1, written and loaded back unchanged, and the streamed import must give the same trace.
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
  // The streamed import (what import_torch_snapshot does with a file) must give the same trace.
  Trace streamed;
  try {
    streamed =
        torch_snapshot::import_bytes(bytes, "fuzz.pickle", TorchSnapshotOptions{0}, fuzz::fuzz_limits().max_memory);
  } catch (const Error& e) {
    fuzz::check_message(e);  // its memory is counted differently: it may stop where the tree did not
    return 0;
  }
  fuzz::require(streamed.header == t.header && streamed.tensors == t.tensors && streamed.events == t.events &&
                    streamed.labels == t.labels && streamed.initial_segments == t.initial_segments,
                "the streamed import differs from the tree's");
  return 0;
}
