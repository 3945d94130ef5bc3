// Recorded allocator settings -> the `pytorch` model's options; the recorded end state of an
// imported snapshot and its comparison with a model's.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <functional>
#include <charconv>

#include "coopsim/base/error.hpp"
#include "coopsim/base/params.hpp"
#include "coopsim/import/torch_snapshot.hpp"

namespace coopsim::torch_snapshot {
namespace {

std::uint64_t bytes_setting(const nlohmann::json& v, const std::string& key) {
  if (!v.is_number_integer() || v.get<std::int64_t>() < 0) {
    throw ConfigError("allocator_settings." + key, "expected a non-negative integer (got " + shown_json(v) + ")");
  }
  return v.get<std::uint64_t>();
}

// Free blocks merged with free neighbours; free blocks carry no requested size.
std::vector<SeedBlock> normalized(const std::vector<SeedBlock>& blocks) {
  std::vector<SeedBlock> out;
  for (SeedBlock b : blocks) {
    if (!b.allocated) b.requested = Bytes{0};
    if (!b.allocated && !out.empty() && !out.back().allocated) {
      out.back().size += b.size;
    } else {
      out.push_back(b);
    }
  }
  return out;
}

std::string describe(const SeedSegment& s) {
  return fmt::format("{:#x}+{} (stream {}, {} pool{}, {} blocks)", s.addr, s.size().value, s.stream, to_string(s.pool),
                     s.expandable ? ", expandable" : "", s.blocks.size());
}

}  // namespace

PyTorchOptions allocator_options(const nlohmann::json& settings) {
  PyTorchOptions o;
  if (settings.is_null()) return o;
  if (!settings.is_object()) throw ConfigError("allocator_settings", "expected a dict (got " + shown_json(settings) + ")");
  if (const auto it = settings.find("max_split_size"); it != settings.end()) {
    // -1 (SIZE_MAX as a signed value) means unset.
    if (!(it->is_number_integer() && it->get<std::int64_t>() < 0))
      o.max_split_size = Bytes{bytes_setting(*it, "max_split_size")};
  }
  if (const auto it = settings.find("max_non_split_rounding_size"); it != settings.end()) {
    o.max_non_split_rounding_size = Bytes{bytes_setting(*it, "max_non_split_rounding_size")};
  }
  if (const auto it = settings.find("garbage_collection_threshold"); it != settings.end()) {
    if (!it->is_number()) {
      throw ConfigError("allocator_settings.garbage_collection_threshold",
                        "expected a number (got " + shown_json(*it) + ")");
    }
    o.garbage_collection_threshold = it->get<double>();
  }
  if (const auto it = settings.find("expandable_segments"); it != settings.end()) {
    if (!it->is_boolean())
      throw ConfigError("allocator_settings.expandable_segments", "expected a bool (got " + shown_json(*it) + ")");
    o.expandable_segments = it->get<bool>();
  }
  if (const auto it = settings.find("roundup_power2_divisions"); it != settings.end()) {
    const std::string key = "allocator_settings.roundup_power2_divisions";
    if (it->is_number_integer()) {  // one value for every interval
      o.set_roundup_power2_divisions(static_cast<std::uint32_t>(bytes_setting(*it, "roundup_power2_divisions")));
    } else if (it->is_object()) {
      // Keyed by the interval's start in MiB: "1" (1 MiB .. 2 MiB) is bucket 0 .. "32768" bucket 15.
      for (const auto& [k, v] : it->items()) {
        std::uint64_t start = 0;
        const auto res = std::from_chars(k.data(), k.data() + k.size(), start);
        if (res.ec != std::errc{} || res.ptr != k.data() + k.size() || !std::has_single_bit(start) ||
            std::bit_width(start) > static_cast<int>(PyTorchOptions::kRoundupBuckets)) {
          throw ConfigError(key, "unknown interval " + quote_excerpt(k) + " (expected a power of two from 1 to 32768)");
        }
        const std::uint64_t d = bytes_setting(v, "roundup_power2_divisions." + k);
        if (d > (1U << 20)) throw ConfigError(key, "divisions for " + quote_excerpt(k) + " too large: " + std::to_string(d));
        o.roundup_power2_divisions[static_cast<std::size_t>(std::bit_width(start) - 1)] = static_cast<std::uint32_t>(d);
      }
    } else {
      throw ConfigError(key, "expected an int or a dict (got " + shown_json(*it) + ")");
    }
  }
  // Let the model check the values (max_split_size >= 20 MiB, powers of two, threshold range).
  try {
    const PyTorchCachingAllocator check(Bytes{1}, o);
  } catch (const ConfigError& e) {
    throw ConfigError("allocator_settings", e.what());
  }
  return o;
}

std::optional<std::vector<SeedSegment>> final_segments(const Trace& trace) {
  const nlohmann::json& extra = trace.header.extra;
  if (!extra.is_object() || !extra.contains("final_segments")) return std::nullopt;
  const nlohmann::json& segs = extra.at("final_segments");
  auto bad = [&](const std::string& what) -> Error {
    return Error(fmt::format("{}: header: final_segments: {}", trace.path, what));
  };
  if (!segs.is_array()) throw bad("expected an array");
  std::vector<SeedSegment> out;
  try {
    for (std::size_t i = 0; i < segs.size(); ++i) {
      const nlohmann::json& g = segs[i];
      SeedSegment s;
      s.addr = g.at("addr").get<std::uint64_t>();
      s.stream = g.at("stream").get<std::uint32_t>();
      const std::string pool = g.at("pool").get<std::string>();
      if (pool != "small" && pool != "large") throw bad(fmt::format("[{}]: pool must be 'small' or 'large'", i));
      s.pool = pool == "small" ? SegmentPool::Small : SegmentPool::Large;
      s.expandable = g.value("expandable", false);
      for (const nlohmann::json& b : g.at("blocks")) {
        SeedBlock blk;
        blk.size = Bytes{b.at("size").get<std::uint64_t>()};
        blk.allocated = b.at("state").get<std::string>() != "inactive";
        blk.requested = Bytes{blk.allocated ? b.at("requested").get<std::uint64_t>() : 0};
        s.blocks.push_back(blk);
      }
      if (s.size().value != g.at("size").get<std::uint64_t>())
        throw bad(fmt::format("[{}]: blocks do not cover the segment", i));
      out.push_back(std::move(s));
    }
  } catch (const nlohmann::json::exception& e) {
    throw bad(e.what());
  }
  return out;
}

EndStateCheck compare_end_state(const std::vector<SeedSegment>& recorded, const std::vector<SeedSegment>& model) {
  EndStateCheck c;
  c.recorded_segments = recorded.size();
  c.model_segments = model.size();
  for (const auto& s : recorded) c.recorded_reserved += s.size();
  for (const auto& s : model) c.model_reserved += s.size();
  c.reserved_match = c.recorded_reserved == c.model_reserved;
  const std::size_t n = std::min(recorded.size(), model.size());
  for (std::size_t i = 0; i < n && c.first_difference.empty(); ++i) {
    SeedSegment r = recorded[i], m = model[i];
    r.blocks = normalized(r.blocks);
    m.blocks = normalized(m.blocks);
    if (r.addr != m.addr || r.size() != m.size() || r.stream != m.stream || r.pool != m.pool ||
        r.expandable != m.expandable) {
      c.first_difference = fmt::format("segment {}: recorded {}, model {}", i, describe(r), describe(m));
    } else if (r.blocks != m.blocks) {
      std::size_t j = 0;
      std::uint64_t at = r.addr;
      while (j < r.blocks.size() && j < m.blocks.size() && r.blocks[j] == m.blocks[j]) at += r.blocks[j++].size.value;
      auto block = [](const std::vector<SeedBlock>& v, std::size_t k) {
        if (k >= v.size()) return std::string("none");
        return fmt::format("{} bytes {}", v[k].size.value,
                           v[k].allocated ? fmt::format("allocated ({} requested)", v[k].requested.value) : "free");
      };
      c.first_difference = fmt::format("segment {} ({:#x}): block at {:#x}: recorded {}, model {}", i, r.addr, at,
                                       block(r.blocks, j), block(m.blocks, j));
    }
  }
  if (c.first_difference.empty() && recorded.size() != model.size()) {
    const bool more_recorded = recorded.size() > model.size();
    c.first_difference =
        fmt::format("segment {}: {} has {}, {} has none", n, more_recorded ? "recorded" : "model",
                    describe(more_recorded ? recorded[n] : model[n]), more_recorded ? "model" : "recorded");
  }
  c.segments_match = c.first_difference.empty();
  return c;
}

std::vector<std::string> replay_overrides(const Trace& trace, std::vector<std::string>* notes) {
  std::vector<std::string> sets;
  const nlohmann::json& extra = trace.header.extra;
  // Expandable ranges or reservations in the trace need the setting whatever the header says
  // (files before torch ~2.5 record no allocator_settings).
  const bool has_expandable = std::any_of(trace.initial_segments.begin(), trace.initial_segments.end(),
                                          [](const InitialSegment& g) { return g.expandable; }) ||
                              std::any_of(trace.segment_addresses.begin(), trace.segment_addresses.end(),
                                          [](const SegmentAddress& a) { return a.expandable; });
  if (extra.is_object() && extra.contains("allocator_settings")) {
    const PyTorchOptions o = allocator_options(extra["allocator_settings"]);
    const PyTorchOptions d;
    if (o.max_split_size != d.max_split_size) sets.push_back(fmt::format("pytorch.max_split_size={}", o.max_split_size.value));
    if (o.max_non_split_rounding_size != d.max_non_split_rounding_size) {
      sets.push_back(fmt::format("pytorch.max_non_split_rounding_size={}", o.max_non_split_rounding_size.value));
    }
    if (o.garbage_collection_threshold != d.garbage_collection_threshold) {
      sets.push_back(fmt::format("pytorch.garbage_collection_threshold={}", o.garbage_collection_threshold));
    }
    if (o.expandable_segments || has_expandable) sets.emplace_back("pytorch.expandable_segments=true");
    const auto& div = o.roundup_power2_divisions;
    if (std::adjacent_find(div.begin(), div.end(), std::not_equal_to<>()) != div.end()) {
      if (notes != nullptr) {
        notes->push_back(
            "note: the recorded roundup_power2_divisions differ per interval; --set takes one value for all "
            "(library users: torch_snapshot::allocator_options)");
      }
    } else if (div[0] > 1) {
      sets.push_back(fmt::format("pytorch.roundup_power2_divisions={}", div[0]));
    }
  } else if (has_expandable) {
    sets.emplace_back("pytorch.expandable_segments=true");
  }
  return sets;
}

std::vector<std::string> simulation_hints(const Trace& trace, const std::string& output) {
  std::vector<std::string> out;
  const nlohmann::json& source = trace.header.source;
  std::string flags;
  for (const std::string& s : replay_overrides(trace, &out)) flags += " --set " + s;
  out.insert(out.begin(), fmt::format("replay: coopsim run {} --allocator pytorch --check-addresses{}", output, flags));
  if (source.is_object() && source.contains("ooms")) {
    for (const auto& o : source["ooms"]) {
      if (!o.contains("event") || !o.contains("capacity")) continue;
      out.push_back(
          fmt::format("recorded OOM (entry {}, {} bytes): recurs at event {} with --budget {} "
                      "(reserved {} + device_free {})",
                      o["entry"].get<std::uint64_t>(), o["size"].get<std::uint64_t>(), o["event"].get<std::uint64_t>(),
                      o["capacity"].get<std::uint64_t>(), o["reserved"].get<std::uint64_t>(),
                      o["device_free"].get<std::uint64_t>()));
    }
  }
  if (source.is_object() && source.value("devices", 0) > 1) {
    out.push_back(fmt::format("the snapshot records {} devices; this is device {} (--device N imports another)",
                              source["devices"].get<std::uint64_t>(), source.value("device", 0)));
  }
  return out;
}

}  // namespace coopsim::torch_snapshot
