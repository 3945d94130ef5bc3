#include "coopsim/error.hpp"
#include "coopsim/import/importers.hpp"
namespace coopsim {
Trace import_dtr_log(const std::string& path, const DtrOptions&) { throw Error(path + ": the dtr importer is not built yet"); }
}  // namespace coopsim
