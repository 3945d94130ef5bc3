// Plan basics: names of step kinds and streams, lookups, step descriptions and the JSON writer
// (docs/plan-format.md): header keys one per line, one tensor, op or step per line.
#include "coopsim/replay/replay_plan.hpp"
#include "coopsim/base/text.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <utility>

namespace coopsim::gpu {

namespace {
constexpr std::array<std::pair<StepKind, std::string_view>, 8> kKinds{{
    {StepKind::Alloc, "alloc"},
    {StepKind::Free, "free"},
    {StepKind::Evict, "evict"},
    {StepKind::Op, "op"},
    {StepKind::Recompute, "recompute"},
    {StepKind::Access, "access"},
    {StepKind::SwapOut, "swap_out"},
    {StepKind::SwapIn, "swap_in"},
}};
constexpr std::array<std::string_view, kStreams> kStreamNames{"compute", "d2h", "h2d"};

template <typename T, typename Id>
const T* find_id(const std::vector<T>& v, Id id) {
  auto it = std::lower_bound(v.begin(), v.end(), id, [](const T& x, Id i) { return x.id < i; });
  return it != v.end() && it->id == id ? &*it : nullptr;
}

using Json = nlohmann::ordered_json;

Json ref_json(const PlanRef& r) {
  return Json{{"tensor", index_of(r.tensor)}, {"version", r.version}, {"offset", r.offset}, {"size", r.size.value}};
}

Json step_json(const PlanStep& s, std::uint32_t id) {
  Json j;
  j["id"] = id;
  j["kind"] = to_string(s.kind);
  j["stream"] = to_string(s.stream);
  Json after = Json::array();
  for (const StepId a : s.after) after.push_back(index_of(a));
  j["after"] = std::move(after);
  j["start_ns"] = s.start.count();
  j["end_ns"] = s.end.count();
  auto block = [&](bool with_version) {
    j["tensor"] = index_of(s.block.tensor);
    if (with_version) j["version"] = s.block.version;
    j["offset"] = s.block.offset;
    j["size"] = s.block.size.value;
  };
  auto refs = [](const std::vector<PlanRef>& v) {
    Json a = Json::array();
    for (const auto& r : v) a.push_back(ref_json(r));
    return a;
  };
  switch (s.kind) {
    case StepKind::Alloc:
      block(false);
      j["fresh"] = s.fresh;
      j["fill"] = s.fill;
      break;
    case StepKind::Free: block(false); break;
    case StepKind::Evict:
      block(true);
      j["forced"] = s.forced;
      break;
    case StepKind::Access: block(true); break;
    case StepKind::Op:
    case StepKind::Recompute:
      j["op"] = index_of(s.op);
      if (s.kind == StepKind::Recompute) j["origin"] = index_of(s.origin);
      j["reads"] = refs(s.reads);
      j["writes"] = refs(s.writes);
      break;
    case StepKind::SwapOut:
    case StepKind::SwapIn:
      block(true);
      j["bytes"] = s.bytes.value;
      break;
  }
  return j;
}

template <typename T, typename F>
void write_list(std::string& out, std::string_view key, const std::vector<T>& items, F&& to_json, bool last) {
  out += fmt::format("  \"{}\": [", key);
  for (std::size_t i = 0; i < items.size(); ++i) {
    out += i == 0 ? "\n    " : ",\n    ";
    out += to_json(items[i], static_cast<std::uint32_t>(i)).dump();
  }
  out += items.empty() ? "]" : "\n  ]";
  out += last ? "\n" : ",\n";
}

}  // namespace

std::string_view to_string(StepKind k) {
  for (const auto& [kind, name] : kKinds) {
    if (kind == k) return name;
  }
  return "?";
}

std::string_view to_string(Stream s) { return kStreamNames[static_cast<std::size_t>(s)]; }

std::optional<StepKind> parse_step_kind(std::string_view s) {
  for (const auto& [kind, name] : kKinds) {
    if (name == s) return kind;
  }
  return std::nullopt;
}

std::optional<Stream> parse_stream(std::string_view s) {
  for (std::size_t i = 0; i < kStreams; ++i) {
    if (kStreamNames[i] == s) return static_cast<Stream>(i);
  }
  return std::nullopt;
}

Stream stream_of(StepKind k) {
  if (k == StepKind::SwapOut) return Stream::DeviceToHost;
  if (k == StepKind::SwapIn) return Stream::HostToDevice;
  return Stream::Compute;
}

const PlanTensor* Plan::tensor(TensorId id) const { return find_id(tensors, id); }
const PlanOp* Plan::op(OpId id) const { return find_id(ops, id); }

PlanError::PlanError(const std::string& file, const std::string& path, const std::string& problem)
    : Error(path.empty() ? file + ": " + problem : file + ": " + path + ": " + problem) {}

std::string describe_step(const Plan& plan, StepId id) {
  const PlanStep& s = plan.step(id);
  auto named = [](std::string_view what, std::uint32_t x, const std::string* name) {
    return name == nullptr || name->empty() ? fmt::format("{} {}", what, x)
                                            : fmt::format("{} {} '{}'", what, x, one_line(*name));
  };
  std::string what;
  if (s.kind == StepKind::Op || s.kind == StepKind::Recompute) {
    const PlanOp* op = plan.op(s.op);
    what = named("op", index_of(s.op), op == nullptr ? nullptr : &op->name);
    if (s.kind == StepKind::Recompute) what = "recompute of " + what;
  } else {
    const PlanTensor* t = plan.tensor(s.block.tensor);
    what = fmt::format("{} of {}", to_string(s.kind),
                       named("tensor", index_of(s.block.tensor), t == nullptr ? nullptr : &t->name));
  }
  return fmt::format("steps[{}] ({})", index_of(id), what);
}

std::string plan_to_text(const Plan& plan) {
  const PlanHeader& h = plan.header;
  auto line = [](std::string_view key, const Json& v) { return fmt::format("  \"{}\": {},\n", key, v.dump()); };
  std::string out = "{\n";
  out += line("format", kPlanFormat);
  out += line("version", kPlanVersion);
  out += line("coopsim_version", h.coopsim_version);
  out += line("trace", Json{{"path", h.trace_path},
                            {"model", h.model},
                            {"hash", fmt::format("{:016x}", h.trace_hash)},
                            {"iterations", h.iterations}});
  out += line("allocator", h.allocator);
  out += line("policy", h.policy);
  out += line("budget", h.budget.value);
  out += line("arena_size", h.arena_size.value);
  out += line("address_base", h.address_base);
  out += line("link", Json{{"name", h.link.name},
                           {"d2h_ns_per_byte", h.link.d2h_ns_per_byte},
                           {"d2h_latency_ns", h.link.d2h_latency.count()},
                           {"h2d_ns_per_byte", h.link.h2d_ns_per_byte},
                           {"h2d_latency_ns", h.link.h2d_latency.count()},
                           {"serial", h.link.serial}});
  out += line("simulated", Json{{"time_ns", h.simulated_time.count()},
                                {"stall_ns", h.stall_time.count()},
                                {"op_time_ns", h.op_time.count()},
                                {"recompute_ns", h.recompute_time.count()}});
  write_list(
      out, "tensors", plan.tensors,
      [](const PlanTensor& t, std::uint32_t) {
        return Json{{"id", index_of(t.id)}, {"file_id", t.file_id}, {"size", t.size.value}, {"name", t.name}};
      },
      false);
  write_list(
      out, "ops", plan.ops,
      [](const PlanOp& o, std::uint32_t) {
        return Json{
            {"id", index_of(o.id)}, {"file_id", o.file_id}, {"name", o.name}, {"duration_ns", o.duration.count()}};
      },
      false);
  write_list(out, "steps", plan.steps, step_json, true);
  out += "}\n";
  return out;
}

}  // namespace coopsim::gpu
