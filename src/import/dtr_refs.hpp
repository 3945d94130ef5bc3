// DTR's three-level reference model, private to src/import: names (program handles) point to
// tensors, tensors share storages (views), memory belongs to storages. Follows simrd
// (uwsampl/dtr-prototype @eff53cc4: parse/parse.py keeps one count per tensor, `_ref`;
// tensor.py / runtime/v1.py keep their sum per storage, `ref_ext`, and banish a storage when it
// reaches zero; a banished storage is never used again).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace coopsim::dtr_detail {

class DtrRefs {
 public:
  static constexpr std::uint32_t kNone = 0xffffffffU;
  // Bytes per tensor (limits.max_memory): its counts, its storage's, a name-map entry and its
  // place in the definition order (handles are short texts of the log, kept at most twice).
  static constexpr std::uint64_t kBytesPerTensor = 24 + 32 + 64 + sizeof(std::string);

  explicit DtrRefs(std::string path) : path_(std::move(path)) {}

  std::uint32_t new_storage(std::uint64_t bytes);
  // A tensor with one reference on `storage`; tensors are numbered 0, 1, ... in creation order
  // and the first tensor of a storage is its root (owner).
  std::uint32_t new_tensor(std::uint32_t storage);

  [[nodiscard]] std::uint32_t storage_of(std::uint32_t tensor) const { return tensors_[tensor].storage; }
  [[nodiscard]] std::uint32_t root_of(std::uint32_t tensor) const { return storages_[storage_of(tensor)].root; }
  [[nodiscard]] std::uint64_t bytes_of(std::uint32_t tensor) const { return storages_[storage_of(tensor)].bytes; }

  // Names. `where` prefixes error messages ("CALL 'add' ARGS[1]"); errors are TraceErrors at `line`.
  void check_new_name(const std::string& name, const std::string& where, std::uint64_t line) const;
  void bind(const std::string& name, std::uint32_t tensor, std::uint64_t line);  // define or rebind
  [[nodiscard]] std::uint32_t find(const std::string& name) const;               // kNone if undefined
  // The tensor a name refers to, which must be defined and on a live storage.
  [[nodiscard]] std::uint32_t use(const std::string& name, const std::string& where, std::uint64_t line) const;

  // Tensors still referenced at the end, one per name in the order names were first defined
  // (parse.py's pins of the outputs iterate its name map in insertion order).
  [[nodiscard]] std::vector<std::uint32_t> referenced_in_name_order() const;

  void add_reference(std::uint32_t tensor);
  // Drops one reference held through `name`. Returns the root of the storage when this was the
  // storage's last reference (the storage is now dead), else kNone.
  std::uint32_t drop_reference(std::uint32_t tensor, const std::string& where, const std::string& name,
                               std::uint64_t line);

 private:
  struct Storage {
    std::uint32_t root = kNone;
    std::uint64_t bytes = 0;
    std::uint64_t refs = 0;        // sum of its tensors' references
    std::uint64_t death_line = 0;  // line of the drop that killed it; 0 while alive
  };
  struct Tensor {
    std::uint32_t storage = 0;
    std::uint64_t refs = 0;
    std::uint64_t last_drop_line = 0;
  };
  struct Name {
    std::uint32_t tensor = 0;
    std::uint64_t line = 0;  // where it was first defined
  };
  [[noreturn]] void fail(std::uint64_t line, const std::string& problem) const;

  std::string path_;
  std::vector<Storage> storages_;
  std::vector<Tensor> tensors_;
  std::unordered_map<std::string, Name> names_;  // lookups only, never iterated
  std::vector<std::string> name_order_;          // names in first-definition order
};

}  // namespace coopsim::dtr_detail
