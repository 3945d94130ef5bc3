// Generator options: documented parameter list, conversion from/to checked Params, validation.
// The trace construction itself is in training_step*.cpp.
#include "coopsim/generate/generator.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "coopsim/base/error.hpp"

namespace coopsim {

namespace {

std::string key(const char* option) { return std::string(kGeneratorComponent) + "." + option; }

// Largest single tensor accepted (256 TiB): keeps every size and sum far from uint64 overflow.
constexpr double kMaxTensorBytes = 281474976710656.0;

void check_range(const char* option, std::int64_t v, std::int64_t lo, std::int64_t hi) {
  if (v < lo || v > hi) {
    throw ConfigError(key(option), fmt::format("must be in [{}, {}], got {}", lo, hi, v));
  }
}

void check_tensor(const char* option, const char* what, double bytes) {
  if (bytes > kMaxTensorBytes) {
    throw ConfigError(key(option), fmt::format("{} would be {:.3g} bytes (limit 256 TiB)", what, bytes));
  }
}

}  // namespace

std::vector<ParamDoc> generator_param_docs() {
  return {
      {"model", ParamType::String, "cnn", "network kind", {"mlp", "cnn"}},
      {"layers", ParamType::Int, "8", "hidden layers (1..100000)", {}},
      {"batch", ParamType::Int, "32", "samples per micro-batch", {}},
      {"width", ParamType::Int, "64", "mlp: features per layer; cnn: channels per layer", {}},
      {"spatial", ParamType::Int, "32", "cnn: feature-map height and width (unused for mlp)", {}},
      {"classes", ParamType::Int, "10", "classifier outputs", {}},
      {"iterations", ParamType::Int, "3", "training iterations (optimizer steps), >= 1", {}},
      {"micro_batches",
       ParamType::Int,
       "1",
       "forward/backward passes per iteration; gradients accumulated in place",
       {}},
      {"optimizer",
       ParamType::String,
       "adam",
       "optimizer: sgd (no state), momentum (1 state/param), adam (2 states/param)",
       {"sgd", "momentum", "adam"}},
      {"residual_every",
       ParamType::Int,
       "2",
       "in-place residual add_ every k layers (layer j adds the output of layer j-k), 0 = none",
       {}},
      {"workspace",
       ParamType::Bool,
       "true",
       "conv/linear ops allocate a workspace right before and free it right after",
       {}},
      {"dropout", ParamType::Bool, "false", "random dropout op (output + mask) after each ReLU", {}},
      {"dtype_bytes", ParamType::Int, "4", "bytes per element of float tensors (1, 2, 4, 8)", {}},
      {"seed", ParamType::Int, "1", "seed of the duration jitter (>= 0)", {}},
      {"peak_flops", ParamType::Float, "19.5e12", "roofline peak FLOP/s (A100 fp32)", {}},
      {"mem_bandwidth", ParamType::Float, "1.5e12", "roofline memory bandwidth, bytes/s", {}},
      {"launch_overhead", ParamType::Time, "5us", "fixed time added to every non-view op", {}},
      {"jitter",
       ParamType::Float,
       "0.05",
       "relative duration jitter: duration *= 1 + jitter * u, u uniform in [-1, 1)",
       {}},
  };
}

GeneratorOptions generator_options_from(const Params& p) {
  GeneratorOptions o;
  o.model = p.get_string("model");
  o.layers = p.get_int("layers");
  o.batch = p.get_int("batch");
  o.width = p.get_int("width");
  o.spatial = p.get_int("spatial");
  o.classes = p.get_int("classes");
  o.iterations = p.get_int("iterations");
  o.micro_batches = p.get_int("micro_batches");
  o.optimizer = p.get_string("optimizer");
  o.residual_every = p.get_int("residual_every");
  o.workspace = p.get_bool("workspace");
  o.dropout = p.get_bool("dropout");
  o.dtype_bytes = p.get_int("dtype_bytes");
  const std::int64_t seed = p.get_int("seed");
  if (seed < 0) throw ConfigError(key("seed"), fmt::format("must be >= 0, got {}", seed));
  o.seed = static_cast<std::uint64_t>(seed);
  o.peak_flops = p.get_float("peak_flops");
  o.mem_bandwidth = p.get_float("mem_bandwidth");
  o.launch_overhead = p.get_time("launch_overhead");
  o.jitter = p.get_float("jitter");
  validate_generator_options(o);
  return o;
}

GeneratorOptions generator_options_from_json(const nlohmann::json& object) {
  const auto docs = generator_param_docs();
  return generator_options_from(Params(kGeneratorComponent, object, docs));
}

nlohmann::json generator_options_json(const GeneratorOptions& o) {
  nlohmann::json j = nlohmann::json::object();
  j["model"] = o.model;
  j["layers"] = o.layers;
  j["batch"] = o.batch;
  j["width"] = o.width;
  j["spatial"] = o.spatial;
  j["classes"] = o.classes;
  j["iterations"] = o.iterations;
  j["micro_batches"] = o.micro_batches;
  j["optimizer"] = o.optimizer;
  j["residual_every"] = o.residual_every;
  j["workspace"] = o.workspace;
  j["dropout"] = o.dropout;
  j["dtype_bytes"] = o.dtype_bytes;
  j["seed"] = static_cast<std::int64_t>(o.seed);
  j["peak_flops"] = o.peak_flops;
  j["mem_bandwidth"] = o.mem_bandwidth;
  j["launch_overhead"] = o.launch_overhead.count();
  j["jitter"] = o.jitter;
  return j;
}

void validate_generator_options(const GeneratorOptions& o) {
  if (o.model != "mlp" && o.model != "cnn") {
    throw ConfigError(key("model"), fmt::format("invalid value '{}' (valid: mlp, cnn)", o.model));
  }
  check_range("layers", o.layers, 1, 100000);
  check_range("batch", o.batch, 1, 1 << 24);
  check_range("width", o.width, 1, 1 << 24);
  check_range("spatial", o.spatial, 1, 1 << 16);
  check_range("classes", o.classes, 1, 1 << 24);
  check_range("iterations", o.iterations, 1, 100000000);
  check_range("micro_batches", o.micro_batches, 1, 1 << 16);
  if (o.optimizer != "sgd" && o.optimizer != "momentum" && o.optimizer != "adam") {
    throw ConfigError(key("optimizer"), fmt::format("invalid value '{}' (valid: sgd, momentum, adam)", o.optimizer));
  }
  check_range("residual_every", o.residual_every, 0, 100000);
  if (o.dtype_bytes != 1 && o.dtype_bytes != 2 && o.dtype_bytes != 4 && o.dtype_bytes != 8) {
    throw ConfigError(key("dtype_bytes"), fmt::format("must be 1, 2, 4 or 8, got {}", o.dtype_bytes));
  }
  if (o.seed > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    throw ConfigError(key("seed"), fmt::format("must be < 2^63, got {}", o.seed));
  }
  if (!(std::isfinite(o.peak_flops) && o.peak_flops > 0)) {
    throw ConfigError(key("peak_flops"), fmt::format("must be a positive number, got {}", o.peak_flops));
  }
  if (!(std::isfinite(o.mem_bandwidth) && o.mem_bandwidth > 0)) {
    throw ConfigError(key("mem_bandwidth"), fmt::format("must be a positive number, got {}", o.mem_bandwidth));
  }
  if (o.launch_overhead.count() < 0 || o.launch_overhead.count() > 1000000000000LL) {
    throw ConfigError(key("launch_overhead"),
                      fmt::format("must be in [0, 1000s], got {} ns", o.launch_overhead.count()));
  }
  if (!(o.jitter >= 0 && o.jitter < 1)) {
    throw ConfigError(key("jitter"), fmt::format("must be in [0, 1), got {}", o.jitter));
  }
  // Tensor sizes (doubles are exact enough for a limit check).
  const double b = static_cast<double>(o.batch), w = static_cast<double>(o.width);
  const double s = o.model == "cnn" ? static_cast<double>(o.spatial) : 1.0;
  const double c = static_cast<double>(o.classes), d = static_cast<double>(o.dtype_bytes);
  check_tensor("batch", "an activation (batch*width*spatial^2*dtype_bytes)", b * w * s * s * d);
  check_tensor("batch", "the input batch", b * std::max(w, 3.0) * s * s * d);
  check_tensor("width", "a weight (width^2*9*dtype_bytes)", w * w * 9 * d);
  check_tensor("classes", "the head weight / logits", std::max(w, b) * c * d);
}

std::string generator_model_name(const GeneratorOptions& o) {
  return fmt::format("synthetic-{}-L{}-B{}", o.model, o.layers, o.batch);
}

}  // namespace coopsim
