#include "coopsim/error.hpp"
#include "coopsim/import/importers.hpp"
namespace coopsim {
Trace import_kineto(const std::string& path, const KinetoOptions&) {
  throw Error(path + ": the kineto importer is not built yet");
}
}  // namespace coopsim
