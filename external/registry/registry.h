// The registry of vendor runtimes (BYOC run side): vendor name -> runtime, in C++ or from plugins.
#ifndef KILN_EXTERNAL_REGISTRY_REGISTRY_H_
#define KILN_EXTERNAL_REGISTRY_REGISTRY_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "external/registry/plugin_abi.h"
#include "vm/providers.h"

namespace kiln {

/// A vendor runtime: creates the runtime of each region claimed by its compiler (Init, once per
/// region at load, with the blob and constants by reference). Thread-safe.
class VendorRuntime {
 public:
  virtual ~VendorRuntime() = default;
  /// The region's runtime. A vendor may decline a region it would run badly, when
  /// spec.may_decline, by returning Declined(reason) (base/status.h), the reason naming the region and the cause ("region
  /// 'onednn_0': ops[3] (binary add) gets oneDNN's reference implementation 'ref:any'"): the
  /// VM then runs the region's fallback function (JIT kernels computing the same) and prints
  /// one notice per vendor and load; a loader with require_vendor set (`--require-vendor`)
  /// fails instead. Declining costs nothing per call. Any other error fails the load.
  /// (Plugins cannot decline: the C ABI has no such result.)
  /// Deadlines: the region's Run is called on the thread of the VM run, which publishes the
  /// run's deadline there (base/deadline.h). A region made of several steps should call
  /// DeadlinePassed() between them and, when it is true, stop and return DeadlineExceeded
  /// naming the step it stopped before; the VM fails the run after any call that ran past the
  /// deadline anyway, so a region that never checks is only late, never wrong. Plugins learn the
  /// deadline through run_in_context (plugin_abi.h, vendor struct version 3).
  virtual StatusOr<std::unique_ptr<TensorFunction>> CreateRegion(const ExternalRegionSpec& spec) = 0;
  /// What a region's blob holds, for `kiln inspect`: one line per op, newline-terminated (the
  /// caller indents). Never crashes on any bytes; an error for a blob the vendor rejects.
  /// Vendors that cannot describe their blobs keep the default (Unsupported).
  virtual StatusOr<std::string> Describe(const uint8_t* blob, size_t size) const;
};

/// Maps vendor names to runtimes; pass it as LoadOptions::externals. Thread-safe. Vendors are
/// registered in C++ (Register) or from plugins (LoadPlugin, LoadPluginsFromEnvironment).
class ExternalRegistry : public ExternalProvider {
 public:
  ExternalRegistry() = default;
  /// The process-wide registry (built-in vendors register here). Never destroyed.
  static const std::shared_ptr<ExternalRegistry>& Global();

  /// InvalidArgument if `vendor` is empty or already registered.
  Status Register(const std::string& vendor, std::shared_ptr<VendorRuntime> runtime);

  /// dlopens `path` and calls its kiln_plugin_register. NotFound if the file does not exist;
  /// InvalidArgument if it is not a loadable library, exports no registration function, was
  /// built for another ABI version, or registers an invalid or duplicate vendor. Loading the
  /// same path twice is a no-op.
  Status LoadPlugin(const std::string& path);
  /// LoadPlugin for each path in $KILN_PLUGINS (colon-separated); nothing if unset.
  Status LoadPluginsFromEnvironment();

  /// ExternalProvider: the runtime of `spec.vendor` creates the region. NotFound naming the
  /// vendor and the registered ones if no runtime is registered for it.
  /// Passes the vendor's Declined(reason) through unchanged.
  StatusOr<std::unique_ptr<TensorFunction>> CreateRegion(const ExternalRegionSpec& spec) override;
  /// ExternalProvider: whether `vendor` is registered.
  bool HasVendor(std::string_view vendor) const override;

  /// The registered runtime of `vendor` describes `blob` (VendorRuntime::Describe). NotFound if
  /// no runtime is registered for it.
  StatusOr<std::string> Describe(const std::string& vendor, const uint8_t* blob, size_t size) const;

  std::vector<std::string> vendors() const;

 private:
  static int RegisterFromPlugin(void* registry, const KilnVendorC* vendor, char* error, size_t size);

  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<VendorRuntime>> vendors_;
  std::vector<std::string> loaded_plugins_;
};

}  // namespace kiln

#endif  // KILN_EXTERNAL_REGISTRY_REGISTRY_H_
