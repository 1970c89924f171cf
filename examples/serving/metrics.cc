// Prometheus text rendering of kiln_serve's counters.
#include "examples/serving/metrics.h"

#include <cstdio>

namespace kiln::serving {

namespace {

// A label value escaped per the exposition format (backslash, quote, newline).
std::string Label(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

void Header(std::string* out, const char* name, const char* type, const char* help) {
  *out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

}  // namespace

void Metrics::Begin(std::string_view model) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = models_.find(model);
  if (it == models_.end()) it = models_.emplace(std::string(model), PerModel()).first;
  ++it->second.in_flight;
}

void Metrics::End(std::string_view model, std::string_view protocol, std::string_view status,
                  double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = models_.find(model);
  if (it == models_.end()) it = models_.emplace(std::string(model), PerModel()).first;
  PerModel& m = it->second;
  --m.in_flight;
  ++m.by_status[{std::string(protocol), std::string(status)}];
  size_t b = 0;
  while (b < kBuckets.size() && seconds > kBuckets[b]) ++b;
  ++m.buckets[b];
  m.sum_seconds += seconds;
  ++m.count;
}

void Metrics::CountOnly(std::string_view model, std::string_view protocol,
                        std::string_view status) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = models_.find(model);
  if (it == models_.end()) it = models_.emplace(std::string(model), PerModel()).first;
  ++it->second.by_status[{std::string(protocol), std::string(status)}];
}

std::string Metrics::Render(const MetricsSnapshot& snapshot) const {
  std::string out;
  std::lock_guard<std::mutex> lock(mu_);
  Header(&out, "kiln_inference_requests_total", "counter",
         "Inference requests answered, by model, protocol and status.");
  for (const auto& [name, m] : models_) {
    for (const auto& [key, n] : m.by_status) {
      out += "kiln_inference_requests_total{model=\"" + Label(name) + "\",protocol=\"" +
             Label(key.first) + "\",status=\"" + Label(key.second) + "\"} " +
             std::to_string(n) + "\n";
    }
  }
  Header(&out, "kiln_inference_request_duration_seconds", "histogram",
         "Time from receiving an inference request to its reply being ready.");
  for (const auto& [name, m] : models_) {
    std::string model = "model=\"" + Label(name) + "\"";
    uint64_t cumulative = 0;
    for (size_t b = 0; b <= kBuckets.size(); ++b) {
      cumulative += m.buckets[b];
      std::string le = b < kBuckets.size() ? Number(kBuckets[b]) : "+Inf";
      out += "kiln_inference_request_duration_seconds_bucket{" + model + ",le=\"" + le + "\"} " +
             std::to_string(cumulative) + "\n";
    }
    out += "kiln_inference_request_duration_seconds_sum{" + model + "} " +
           Number(m.sum_seconds) + "\n";
    out += "kiln_inference_request_duration_seconds_count{" + model + "} " +
           std::to_string(m.count) + "\n";
  }
  Header(&out, "kiln_inference_in_flight", "gauge", "Inference requests being handled.");
  for (const auto& [name, m] : models_) {
    out += "kiln_inference_in_flight{model=\"" + Label(name) + "\"} " +
           std::to_string(m.in_flight) + "\n";
  }
  Header(&out, "kiln_inference_queue_depth", "gauge", "Inference requests waiting for a worker.");
  out += "kiln_inference_queue_depth " + std::to_string(snapshot.queue_depth) + "\n";
  Header(&out, "kiln_busy_workers", "gauge", "Inference workers running a request.");
  out += "kiln_busy_workers " + std::to_string(snapshot.busy_workers) + "\n";
  Header(&out, "kiln_batches_total", "counter",
         "Dynamic batching: invocations that ran more than one request.");
  for (const auto& b : snapshot.batching) {
    out += "kiln_batches_total{model=\"" + Label(b.model) + "\"} " + std::to_string(b.batches) +
           "\n";
  }
  Header(&out, "kiln_batched_requests_total", "counter",
         "Dynamic batching: requests that ran inside such invocations.");
  for (const auto& b : snapshot.batching) {
    out += "kiln_batched_requests_total{model=\"" + Label(b.model) + "\"} " +
           std::to_string(b.requests) + "\n";
  }
  if (snapshot.runtime != nullptr) {
    const jit::EngineStats& e = snapshot.runtime->engine;
    const jit::DispatchStats& d = snapshot.runtime->dispatch;
    struct {
      const char* name;
      const char* help;
      double value;
    } counters[] = {
        {"kiln_jit_compilations_total", "Kernels generated and compiled by the JIT.",
         static_cast<double>(e.compilations)},
        {"kiln_jit_compile_seconds_total", "Wall time spent compiling kernels.",
         e.compile_seconds},
        {"kiln_jit_cache_hits_total", "Kernel requests served from the in-memory JIT cache.",
         static_cast<double>(e.cache_hits)},
        {"kiln_jit_object_cache_hits_total",
         "Compilations served from the persistent object cache (--jit-cache).",
         static_cast<double>(e.object_cache_hits)},
        {"kiln_jit_object_cache_misses_total",
         "Compilations that found no usable object in the persistent cache.",
         static_cast<double>(e.object_cache_misses)},
        {"kiln_jit_dispatch_specialized_calls_total",
         "Kernel calls served by a shape-specialized variant.", static_cast<double>(d.hits)},
        {"kiln_jit_dispatch_generic_calls_total", "Kernel calls served by the generic variant.",
         static_cast<double>(d.misses)},
        {"kiln_jit_specializations_total", "Shape-specialized kernel variants installed.",
         static_cast<double>(d.specializations)},
    };
    for (const auto& c : counters) {
      Header(&out, c.name, "counter", c.help);
      out += std::string(c.name) + " " + Number(c.value) + "\n";
    }
    // Where a serving process's memory goes (issue 17 finding 8): the allocator's blocks
    // (handed out, and cached for reuse up to its cap) and the JIT's live kernels.
    const AllocatorStats& a = snapshot.runtime->allocator;
    Header(&out, "kiln_allocator_bytes", "gauge",
           "Tensor memory of the runtime's allocator: in use, or cached for reuse.");
    out += "kiln_allocator_bytes{state=\"in_use\"} " + std::to_string(a.bytes_in_use) + "\n";
    out += "kiln_allocator_bytes{state=\"cached\"} " + std::to_string(a.bytes_cached) + "\n";
    Header(&out, "kiln_jit_cached_kernels", "gauge", "Compiled kernels held by the JIT now.");
    out += "kiln_jit_cached_kernels " + std::to_string(e.cached_kernels) + "\n";
    Header(&out, "kiln_jit_dispatch_evictions_total", "counter",
           "Shape-table entries evicted from kernel dispatch tables.");
    out += "kiln_jit_dispatch_evictions_total " + std::to_string(d.evictions) + "\n";
  }
  return out;
}

}  // namespace kiln::serving
