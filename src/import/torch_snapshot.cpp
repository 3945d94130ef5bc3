#include "coopsim/error.hpp"
#include "coopsim/import/importers.hpp"
namespace coopsim {
Trace import_torch_snapshot(const std::string& path, const TorchSnapshotOptions&) {
  throw Error(path + ": the torch-snapshot importer is not built yet");
}
}  // namespace coopsim
