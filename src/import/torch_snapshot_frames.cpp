// Tensor names from a snapshot's stack frames (innermost first, as `frames` lists them). With C++
// stacks (_record_memory_history(stacks="all")) the ATen op is the `at::_ops::<op>::call` frame
// (an operator's dispatcher entry); the innermost one is the op that allocated, unless it is a
// factory helper (empty*, new_empty*) called by an outer op, which then names it better
// (zeros_like -> empty_like -> empty_strided). The Python location is the innermost frame of a
// .py file outside the torch package; with Python-only stacks it is all there is.
#include <fmt/format.h>

#include <string_view>

#include "coopsim/base/text.hpp"
#include "torch_snapshot_detail.hpp"

namespace coopsim::torch_snapshot::detail {
namespace {

using Kind = pickle::Value::Kind;

// The <op> of "at::_ops::<op>::call(...)", or "".
std::string_view aten_op(std::string_view frame) {
  constexpr std::string_view kPrefix = "at::_ops::";
  if (frame.substr(0, kPrefix.size()) != kPrefix) return {};
  const std::string_view rest = frame.substr(kPrefix.size());
  const std::size_t end = rest.find("::call(");
  if (end == std::string_view::npos || end == 0) return {};
  const std::string_view op = rest.substr(0, end);
  for (const char c : op) {
    if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) return {};
  }
  return op;
}

bool is_factory(std::string_view op) { return op.substr(0, 5) == "empty" || op.substr(0, 9) == "new_empty"; }

std::string_view base_name(std::string_view path) {
  const std::size_t slash = path.find_last_of("/\\");
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

bool in_torch_package(std::string_view path) {
  return path.find("/torch/") != std::string_view::npos || path.find("\\torch\\") != std::string_view::npos;
}

const std::string* text(const pickle::Value& frame, std::string_view key) {
  const pickle::Value* v = frame.get(key);
  return v != nullptr && v->kind == Kind::String ? &v->text : nullptr;
}

}  // namespace

std::string name_from_frames(const pickle::Value* frames) {
  if (frames == nullptr || (frames->kind != Kind::List && frames->kind != Kind::Tuple)) return {};
  std::string_view op;
  std::string where;
  for (const auto& f : frames->items) {
    if (f->kind != Kind::Dict) continue;
    const std::string* name = text(*f, "name");
    if (name == nullptr) continue;
    if (op.empty()) {
      const std::string_view o = aten_op(*name);
      if (!o.empty() && !is_factory(o)) op = o;
    }
    const std::string* file = text(*f, "filename");
    if (where.empty() && file != nullptr && file->size() > 3 && file->compare(file->size() - 3, 3, ".py") == 0 &&
        !in_torch_package(*file)) {
      const pickle::Value* line = f->get("line");
      where = fmt::format("{} ({}:{})", *name, base_name(*file),
                          line != nullptr && line->kind == Kind::Int ? line->integer : 0);
    }
  }
  // Only factories: the outermost one says most (new_empty_strided over empty_strided).
  if (op.empty()) {
    for (const auto& f : frames->items) {
      const std::string* name = f->kind == Kind::Dict ? text(*f, "name") : nullptr;
      if (name != nullptr && !aten_op(*name).empty()) op = aten_op(*name);
    }
  }
  if (op.empty()) return where;
  // Python strings may hold lone surrogates ("surrogatepass"): names must be UTF-8 in a trace.
  if (where.empty()) return to_utf8(op);
  return to_utf8(fmt::format("{} in {}", op, where));
}

}  // namespace coopsim::torch_snapshot::detail
