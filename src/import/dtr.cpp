#include "coopsim/error.hpp"
#include "coopsim/import/importers.hpp"
namespace coopsim {
Trace import_dtr_log(const std::string& path) { throw Error(path + ": the dtr importer is not built yet"); }
}  // namespace coopsim
