// Vendor registry and the plugin adapter (C ABI <-> TensorFunction).
#include "external/registry/registry.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "base/deadline.h"

namespace kiln {
namespace {

constexpr size_t kErrorSize = 1024;

KilnTensorC ToC(const Tensor& t) {
  return KilnTensorC{t.data(), static_cast<int32_t>(t.dtype()), t.rank(), t.shape().data(), t.strides()};
}

// One region created by a plugin vendor; destroyed through the plugin.
class PluginRegion : public TensorFunction {
 public:
  PluginRegion(const KilnVendorC* vendor, void* handle, std::string name)
      : vendor_(vendor), handle_(handle), name_(std::move(name)) {}
  ~PluginRegion() override { vendor_->destroy(handle_); }

  Status Run(const Tensor* const* args, int num_inputs, int num_outputs) override {
    return Call(args, num_inputs, num_outputs, nullptr);
  }

  // Through run_in_context or run_profiled when the vendor struct has them (version 3, 2),
  // else Run.
  Status RunProfiled(const Tensor* const* args, int num_inputs, int num_outputs,
                     RegionProfiler* profiler) override {
    bool has_profiled =
        has_context() || (vendor_->abi_version >= 2 && vendor_->run_profiled != nullptr);
    return Call(args, num_inputs, num_outputs, has_profiled ? profiler : nullptr);
  }

 private:
  // Version 3 structs may have run_in_context; older ones end before it (never read).
  bool has_context() const {
    return vendor_->abi_version >= 3 && vendor_->run_in_context != nullptr;
  }

  static int ShouldStop(void*) { return DeadlinePassed() ? 1 : 0; }

  // The C view of this thread's run: its deadline and ShouldStop.
  static KilnRunContextC RunContext(const KilnProfilerC* profiler) {
    Clock::time_point deadline = CurrentDeadline();
    int64_t deadline_ns = std::numeric_limits<int64_t>::max();
    if (deadline != Clock::time_point::max()) {
      deadline_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.time_since_epoch())
                        .count();
    }
    return KilnRunContextC{deadline_ns, &ShouldStop, nullptr, profiler};
  }

  // Forwards C samples to `profiler`.
  static void RecordStep(void* context, const KilnStepSampleC* c) {
    if (c == nullptr) return;
    RegionStepSample sample;
    sample.step = c->step;
    sample.kind = c->kind ? c->kind : "";
    sample.impl = c->impl ? c->impl : "";
    sample.shapes = c->shapes ? c->shapes : "";
    sample.reference = c->reference != 0;
    sample.dur_ns = c->dur_ns;
    static_cast<RegionProfiler*>(context)->Record(sample);
  }

  // run, or run_profiled reporting to `profiler` if it is not null.
  Status Call(const Tensor* const* args, int num_inputs, int num_outputs,
              RegionProfiler* profiler) {
    constexpr int kInline = 16;
    int n = num_inputs + num_outputs;
    KilnTensorC inline_args[kInline];
    std::vector<KilnTensorC> heap_args;
    KilnTensorC* c_args = inline_args;
    if (n > kInline) {
      heap_args.resize(n);
      c_args = heap_args.data();
    }
    for (int i = 0; i < n; ++i) c_args[i] = ToC(*args[i]);
    char error[kErrorSize] = "";
    KilnProfilerC c_profiler{profiler, &RecordStep};
    int rc;
    if (has_context()) {
      KilnRunContextC run = RunContext(profiler != nullptr ? &c_profiler : nullptr);
      rc = vendor_->run_in_context(handle_, c_args, num_inputs, num_outputs, &run, error,
                                   sizeof(error));
    } else if (profiler != nullptr) {
      rc = vendor_->run_profiled(handle_, c_args, num_inputs, num_outputs, &c_profiler, error,
                                 sizeof(error));
    } else {
      rc = vendor_->run(handle_, c_args, num_inputs, num_outputs, error, sizeof(error));
    }
    if (rc == 0) return Status::Ok();
    error[kErrorSize - 1] = '\0';
    std::string why = error[0] ? error : "(no message)";
    if (rc == KILN_RUN_STOPPED && has_context()) {
      return DeadlineExceeded(std::string("vendor '") + vendor_->name + "' stopped region '" +
                              name_ + "' at the deadline: " + why);
    }
    return Internal(std::string("vendor '") + vendor_->name + "' failed running region '" + name_ +
                    "': " + why);
  }

  const KilnVendorC* vendor_;
  void* handle_;
  std::string name_;
};

class PluginVendor : public VendorRuntime {
 public:
  explicit PluginVendor(const KilnVendorC* vendor) : vendor_(vendor) {}

  StatusOr<std::unique_ptr<TensorFunction>> CreateRegion(const ExternalRegionSpec& spec) override {
    std::vector<KilnTensorC> constants;
    for (const Tensor& t : spec.constants) constants.push_back(ToC(t));
    std::string name(spec.name), vendor(spec.vendor);
    KilnRegionSpecC c{name.c_str(), vendor.c_str(), spec.blob, spec.blob_size,
                      constants.data(), static_cast<int32_t>(constants.size()),
                      spec.num_inputs, spec.num_outputs};
    char error[kErrorSize] = "";
    void* handle = vendor_->create(vendor_->user_data, &c, error, sizeof(error));
    if (handle == nullptr) {
      error[kErrorSize - 1] = '\0';
      return InvalidArgument(std::string("vendor '") + vendor_->name + "' rejected the region: " +
                             (error[0] ? error : "(no message)"));
    }
    return std::unique_ptr<TensorFunction>(new PluginRegion(vendor_, handle, name));
  }

 private:
  const KilnVendorC* vendor_;
};

}  // namespace

const std::shared_ptr<ExternalRegistry>& ExternalRegistry::Global() {
  static auto* registry = new std::shared_ptr<ExternalRegistry>(std::make_shared<ExternalRegistry>());
  return *registry;
}

Status ExternalRegistry::Register(const std::string& vendor, std::shared_ptr<VendorRuntime> runtime) {
  if (vendor.empty()) return InvalidArgument("vendor name is empty");
  if (runtime == nullptr) return InvalidArgument("vendor '" + vendor + "': null runtime");
  std::lock_guard<std::mutex> lock(mu_);
  if (!vendors_.emplace(vendor, std::move(runtime)).second) {
    return InvalidArgument("vendor '" + vendor + "' is already registered");
  }
  return Status::Ok();
}

int ExternalRegistry::RegisterFromPlugin(void* registry, const KilnVendorC* vendor, char* error,
                                         size_t size) {
  auto fail = [&](const std::string& message) {
    if (error && size) std::snprintf(error, size, "%s", message.c_str());
    return 1;
  };
  if (vendor == nullptr || vendor->name == nullptr) return fail("null vendor or vendor name");
  // Version 1 structs end at destroy, version 2 at run_profiled: nothing past a struct's end is
  // read (PluginRegion).
  if (vendor->abi_version < KILN_PLUGIN_ABI_VERSION ||
      vendor->abi_version > KILN_PLUGIN_VENDOR_VERSION) {
    return fail("vendor '" + std::string(vendor->name) + "' was built for plugin ABI " +
                std::to_string(vendor->abi_version) + "; this kiln speaks ABI " +
                std::to_string(KILN_PLUGIN_ABI_VERSION) + " (vendor structs of version " +
                std::to_string(KILN_PLUGIN_ABI_VERSION) + " to " +
                std::to_string(KILN_PLUGIN_VENDOR_VERSION) + ")");
  }
  if (!vendor->create || !vendor->run || !vendor->destroy) {
    return fail("vendor '" + std::string(vendor->name) + "' lacks create, run or destroy");
  }
  Status s = static_cast<ExternalRegistry*>(registry)->Register(vendor->name,
                                                                 std::make_shared<PluginVendor>(vendor));
  return s.ok() ? 0 : fail(s.message());
}

Status ExternalRegistry::LoadPlugin(const std::string& path) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const std::string& p : loaded_plugins_) {
      if (p == path) return Status::Ok();
    }
  }
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return NotFound("plugin " + path + ": no such file");
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    return InvalidArgument("plugin " + path + ": cannot load: " + (why ? why : "unknown error"));
  }
  auto entry = reinterpret_cast<KilnPluginRegisterFn>(dlsym(lib, KILN_PLUGIN_REGISTER_SYMBOL));
  if (entry == nullptr) {
    dlclose(lib);
    return InvalidArgument("plugin " + path + ": exports no " KILN_PLUGIN_REGISTER_SYMBOL
                           " function (not a kiln plugin?)");
  }
  char error[kErrorSize] = "";
  if (entry(KILN_PLUGIN_ABI_VERSION, &ExternalRegistry::RegisterFromPlugin, this, error,
            sizeof(error)) != 0) {
    error[kErrorSize - 1] = '\0';
    // Vendors it registered before failing stay: they may be referenced; the library stays.
    return InvalidArgument("plugin " + path + ": registration failed: " +
                           (error[0] ? error : "(no message)"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  loaded_plugins_.push_back(path);  // never dlclosed: its vendors live as long as the registry
  return Status::Ok();
}

Status ExternalRegistry::LoadPluginsFromEnvironment() {
  const char* env = std::getenv("KILN_PLUGINS");
  if (env == nullptr) return Status::Ok();
  std::string paths(env);
  size_t start = 0;
  while (start <= paths.size()) {
    size_t end = paths.find(':', start);
    if (end == std::string::npos) end = paths.size();
    if (end > start) {
      Status s = LoadPlugin(paths.substr(start, end - start));
      if (!s.ok()) return s.WithContext("KILN_PLUGINS");
    }
    start = end + 1;
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<TensorFunction>> ExternalRegistry::CreateRegion(const ExternalRegionSpec& spec) {
  std::shared_ptr<VendorRuntime> runtime;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = vendors_.find(std::string(spec.vendor));
    if (it != vendors_.end()) runtime = it->second;
  }
  if (runtime == nullptr) {
    std::string known;
    for (const std::string& v : vendors()) known += (known.empty() ? "" : ", ") + v;
    return NotFound("no runtime is registered for vendor '" + std::string(spec.vendor) +
                    "' (needed by region '" + std::string(spec.name) + "'; registered: " +
                    (known.empty() ? "none" : known) + ")");
  }
  return runtime->CreateRegion(spec);
}

bool ExternalRegistry::HasVendor(std::string_view vendor) const {
  std::lock_guard<std::mutex> lock(mu_);
  return vendors_.count(std::string(vendor)) > 0;
}

StatusOr<std::string> VendorRuntime::Describe(const uint8_t*, size_t) const {
  return Unsupported("this vendor runtime does not describe its regions");
}

StatusOr<std::string> ExternalRegistry::Describe(const std::string& vendor, const uint8_t* blob,
                                                 size_t size) const {
  std::shared_ptr<VendorRuntime> runtime;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = vendors_.find(vendor);
    if (it != vendors_.end()) runtime = it->second;
  }
  if (runtime == nullptr) return NotFound("no runtime is registered for vendor '" + vendor + "'");
  return runtime->Describe(blob, size);
}

std::vector<std::string> ExternalRegistry::vendors() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const auto& [name, runtime] : vendors_) out.push_back(name);
  return out;
}

}  // namespace kiln
