// check_output_paths (output_file.hpp): an output must not be an input, and two outputs of one
// command must not be one file: the later rename would silently replace the earlier result.
#include <sys/stat.h>

#include <filesystem>
#include <optional>
#include <vector>

#include "coopsim/base/error.hpp"
#include "coopsim/base/output_file.hpp"

namespace coopsim {
namespace {

struct FileKey {
  bool exists = false;
  dev_t dev = 0;
  ino_t ino = 0;
  std::string normal;  // for a path that does not exist yet
  bool operator==(const FileKey&) const = default;
};

// nullopt for paths that are not compared: empty ones and character devices.
std::optional<FileKey> key_of(const std::string& path) {
  if (path.empty()) return std::nullopt;
  FileKey k;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {  // follows links: a link to the input is the input
    if (S_ISCHR(st.st_mode)) return std::nullopt;
    k.exists = true;
    k.dev = st.st_dev;
    k.ino = st.st_ino;
    return k;
  }
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(path, ec);
  if (ec) p = path;
  const std::filesystem::path w = std::filesystem::weakly_canonical(p, ec);
  k.normal = (ec ? p : w).lexically_normal().string();
  return k;
}

}  // namespace

void check_output_paths(std::span<const NamedPath> outputs, std::span<const NamedPath> inputs) {
  std::vector<std::optional<FileKey>> out_keys;
  for (const NamedPath& o : outputs) out_keys.push_back(key_of(o.path));
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    if (!out_keys[i]) continue;
    for (const NamedPath& in : inputs) {
      if (key_of(in.path) == out_keys[i]) {
        throw Error(outputs[i].label + " " + outputs[i].path + " is the same file as " + in.label + " " + in.path +
                    ": refusing to overwrite an input");
      }
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (out_keys[j] == out_keys[i]) {
        throw Error(outputs[i].label + " " + outputs[i].path + " is the same file as " + outputs[j].label + " " +
                    outputs[j].path + ": give each output its own file");
      }
    }
  }
}

}  // namespace coopsim
