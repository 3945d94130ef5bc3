// DTR's reference model (see dtr_refs.hpp for the rules and their source).
#include "dtr_refs.hpp"

#include <fmt/format.h>

#include "coopsim/base/error.hpp"
#include "dtr_records.hpp"

namespace coopsim::dtr_detail {

void DtrRefs::fail(std::uint64_t line, const std::string& problem) const { throw InputError(path_, line, problem); }

std::uint32_t DtrRefs::new_storage(std::uint64_t bytes) {
  storages_.push_back(Storage{kNone, bytes, 0, 0});
  return static_cast<std::uint32_t>(storages_.size() - 1);
}

std::uint32_t DtrRefs::new_tensor(std::uint32_t storage) {
  const auto index = static_cast<std::uint32_t>(tensors_.size());
  Storage& s = storages_[storage];
  if (s.root == kNone) s.root = index;
  ++s.refs;
  tensors_.push_back(Tensor{storage, 1, 0});
  return index;
}

void DtrRefs::check_new_name(const std::string& name, const std::string& where, std::uint64_t line) const {
  const auto it = names_.find(name);
  if (it != names_.end()) {
    fail(line, fmt::format("{}: {} is already defined (line {})", where, quote(name), it->second.line));
  }
}

void DtrRefs::bind(const std::string& name, std::uint32_t tensor, std::uint64_t line) {
  const auto [it, fresh] = names_.try_emplace(name, Name{tensor, line});
  if (!fresh) it->second.tensor = tensor;
  if (fresh) name_order_.push_back(name);
}

std::vector<std::uint32_t> DtrRefs::referenced_in_name_order() const {
  std::vector<std::uint32_t> out;
  for (const std::string& n : name_order_) {
    const std::uint32_t t = names_.at(n).tensor;
    if (tensors_[t].refs > 0) out.push_back(t);
  }
  return out;
}

std::uint32_t DtrRefs::find(const std::string& name) const {
  const auto it = names_.find(name);
  return it == names_.end() ? kNone : it->second.tensor;
}

std::uint32_t DtrRefs::use(const std::string& name, const std::string& where, std::uint64_t line) const {
  const std::uint32_t t = find(name);
  if (t == kNone) fail(line, fmt::format("{}: undefined name {} (not defined since START)", where, quote(name)));
  const Storage& s = storages_[tensors_[t].storage];
  if (s.death_line != 0) {
    fail(line,
         fmt::format("{}: use after release: {} (its storage was freed at line {})", where, quote(name), s.death_line));
  }
  return t;
}

void DtrRefs::add_reference(std::uint32_t tensor) {
  ++tensors_[tensor].refs;
  ++storages_[tensors_[tensor].storage].refs;
}

std::uint32_t DtrRefs::drop_reference(std::uint32_t tensor, const std::string& where, const std::string& name,
                                      std::uint64_t line) {
  Tensor& t = tensors_[tensor];
  // simrd would let the count go negative and corrupt its storage's sum; no real log does it.
  if (t.refs == 0) {
    fail(line, fmt::format("{}: the tensor of {} has no references left (last dropped at line {})", where, quote(name),
                           t.last_drop_line));
  }
  --t.refs;
  t.last_drop_line = line;
  Storage& s = storages_[t.storage];
  if (--s.refs > 0) return kNone;
  s.death_line = line;
  return s.root;
}

}  // namespace coopsim::dtr_detail
