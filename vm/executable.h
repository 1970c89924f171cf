// Executable: a verified, immutable .kiln file in memory, bound to its kernels and regions.
#ifndef KILN_VM_EXECUTABLE_H_
#define KILN_VM_EXECUTABLE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "serializer/executable_generated.h"
#include "vm/providers.h"
#include "base/status.h"
#include "base/tensor.h"

namespace kiln {

/// A declared dimension: fixed (value >= 0) or symbolic (value < 0, `symbol` may be empty).
struct DimSpec {
  int64_t value = -1;
  std::string symbol;
  /// Within one function's parameters, the index of `symbol` (same name, same id); -1 if fixed
  /// or unnamed. Set by the loader so input checks compare ids, not strings.
  int symbol_id = -1;
  bool fixed() const { return value >= 0; }
};

/// A declared parameter or result.
struct ValueSpec {
  std::string name;
  DType dtype = DType::kInvalid;
  std::vector<DimSpec> shape;
  bool is_tuple = false;
  /// Only the dtype is checked at Invoke: the function never reads this parameter (e.g.
  /// CastLike's `like`), so a tensor of any shape is accepted. `shape` is the declared one.
  bool dtype_only = false;
  /// "input_ids: i64[batch, seq]"; "like: f32[3, 4] (any shape)" when dtype_only
  std::string ToString() const;
};

struct FunctionSignature {
  std::string name;
  std::vector<ValueSpec> params;
  std::vector<ValueSpec> results;
  /// Symbols named in params (DimSpec::symbol_id indexes this).
  std::vector<std::string> symbols;
};

struct LoadOptions {
  /// Binds kernels and shape functions. Required if the file has any (unless !bind).
  std::shared_ptr<KernelProvider> kernels;
  /// Creates external-region runtimes. Required if the file has any (unless !bind).
  std::shared_ptr<ExternalProvider> externals;
  /// False: verify only, bind nothing (for inspection). Such an executable cannot run.
  bool bind = true;
  /// A region whose vendor declines it (ExternalProvider) or is not registered runs its
  /// fallback function, with one notice per vendor. True: that is a load error instead
  /// (Unsupported for a decline, NotFound for an absent vendor, naming vendor and region), for
  /// users who want the vendor or nothing (`--require-vendor`).
  bool require_vendor = false;
  /// A region that `kiln compile --tune` measured slower than its fallback
  /// (ExternalRegion.tuned_fallback, format 1.4) runs its fallback without its vendor region
  /// being created (a cheaper load), with one notice line. True: ignore that record and create
  /// the vendor region as for any other (`--ignore-tuned-fallback`, for A/B). require_vendor
  /// implies it.
  bool ignore_tuned_fallback = false;
  /// Receives the notices (one line each, no newline) about regions that run their fallback.
  /// Unset: printed to stderr as "kiln: notice: ...".
  std::function<void(const std::string&)> notice;
  /// Ask the kernel to read constant pages ahead (madvise WILLNEED) so the first run does not
  /// fault them in one by one.
  bool prefetch_constants = true;
  /// LoadFile only: read the file into private memory backed by transparent huge pages
  /// (2 MiB aligned, madvise MADV_HUGEPAGE) instead of mapping it. Kernels that stream weights
  /// then miss the TLB far less: the BERT-like encoder at seq 16 runs ~20% faster on the
  /// measuring machine. Costs one read of the file at load (~10 ms per 20 MB) and its size in
  /// private memory (not shared page cache). Without THP (`never`) it is a plain 4 KiB copy.
  bool huge_page_constants = false;
};

/// An immutable, verified executable. Shared by any number of threads (std::shared_ptr); VM
/// contexts keep it alive. Constant bytes are used in place: from the mapped file (or its
/// huge-page copy, LoadOptions::huge_page_constants), or from the caller's buffer when it is
/// 64-byte aligned (otherwise copied once, here). Never copied per context.
class Executable {
 public:
  /// Maps `path` and verifies it. NotFound / InvalidArgument if it cannot be opened;
  /// InvalidFormat naming where and what for a malformed file; Unsupported for another major
  /// or a newer minor version; errors from providers while binding, with the entry named.
  static StatusOr<std::shared_ptr<const Executable>> LoadFile(const std::string& path,
                                                              const LoadOptions& options = {});
  /// Verifies `bytes`; uses them in place if 64-byte aligned and `keepalive` owns them (it is
  /// held for the executable's lifetime), otherwise copies them once.
  static StatusOr<std::shared_ptr<const Executable>> LoadBytes(
      const uint8_t* data, size_t size, const LoadOptions& options = {},
      std::shared_ptr<const void> keepalive = nullptr);

  ~Executable();
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;

  const fb::Executable& root() const { return *root_; }
  uint16_t version_major() const;
  uint16_t version_minor() const;
  std::string_view producer() const;
  /// Total file bytes; bytes of the FlatBuffer part (everything but constant data).
  size_t file_size() const { return size_; }
  /// The executable's bytes (the mapping, or the caller's or a copied buffer).
  const uint8_t* bytes() const { return data_; }
  size_t flatbuffer_size() const { return flatbuffer_size_; }
  bool bound() const { return bound_; }

  int num_functions() const;
  /// Index of the function called `name`, or -1.
  int FindFunction(std::string_view name) const;
  const FunctionSignature& signature(int function) const { return signatures_[function]; }
  const std::vector<FunctionSignature>& signatures() const { return signatures_; }
  /// Name of the entry function from the model metadata, or "main" if absent.
  std::string_view entry_function() const;

  /// Constant `i` as a tensor viewing the executable's bytes (no copy).
  const Tensor& constant(int i) const { return constants_[i]; }
  int num_constants() const { return static_cast<int>(constants_.size()); }

  /// Bound code; null when !bound() (nothing was bound, so the tables are empty).
  TensorFunction* kernel(int i) const { return bound_ ? kernels_[i].get() : nullptr; }
  /// Kernel i's declared dtypes, inputs then outputs, and its input count.
  const std::vector<DType>& kernel_dtypes(int i) const { return kernel_dtypes_[i]; }
  int kernel_num_inputs(int i) const { return kernel_num_inputs_[i]; }
  TensorFunction* shape_function(int i) const { return bound_ ? shape_functions_[i].get() : nullptr; }
  /// The vendor's runtime of region i; null when it runs its fallback (or when !bound()).
  TensorFunction* external_region(int i) const { return bound_ ? externals_[i].get() : nullptr; }
  /// The function that runs in place of region i (its fallback, ExternalRegion.fallback) when
  /// its vendor declined it or is absent; -1 when the vendor runs it (or when !bound()).
  int external_fallback(int i) const { return bound_ ? fallbacks_[i].function : -1; }
  /// Why region i runs its fallback (the vendor's reason, that it is absent, or the tune's
  /// record); "" if not.
  const std::string& external_fallback_reason(int i) const { return fallbacks_[i].reason; }

  /// Calls TensorFunction::Prefetch on every kernel and shape function that function
  /// `function` calls, in the order its code names them (each once), and on those of the
  /// functions it invokes and of the fallbacks its regions run: what its first call needs
  /// starts compiling before the call. Kernels of a fallback no region runs are left alone.
  /// Returns at once; does nothing when !bound() or for an index out of range.
  void Prefetch(int function) const;

  /// Source node of functions[f].code[pc] from the debug table, or "" if none.
  std::string_view SourceNode(int function, int pc) const;
  std::string_view String(int i) const;

  /// Largest register_count and operand-list length over all functions (sizes VM scratch).
  uint32_t max_registers() const { return max_registers_; }
  uint32_t max_list_length() const { return max_list_; }

 private:
  Executable() = default;
  Status Init(const LoadOptions& options);
  Status BindProviders(const LoadOptions& options);
  Status BindRegions(const LoadOptions& options);
  Status BindRegion(int i, const LoadOptions& options,
                    std::map<std::string, std::vector<std::string>>* fell_back,
                    std::vector<std::string>* tuned);
  // Why region `name` has no fallback, as `kiln compile` wrote it in the function it gave up
  // on ("<name>/fallback", a single fatal instruction); "" when the file says nothing.
  std::string NoFallbackReason(const std::string& name) const;

  std::shared_ptr<const void> buffer_;  // keeps the bytes alive (mapping or copy)
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t flatbuffer_size_ = 0;
  const fb::Executable* root_ = nullptr;
  bool bound_ = false;
  std::vector<FunctionSignature> signatures_;
  std::unordered_map<std::string, int> function_index_;
  std::vector<Tensor> constants_;
  std::vector<std::unique_ptr<TensorFunction>> kernels_;
  std::vector<std::vector<DType>> kernel_dtypes_;
  std::vector<int> kernel_num_inputs_;
  std::vector<std::unique_ptr<TensorFunction>> shape_functions_;
  std::vector<std::unique_ptr<TensorFunction>> externals_;
  struct Fallback {
    int function = -1;   // run in place of the region; -1: the vendor runs it
    std::string reason;  // why
  };
  std::vector<Fallback> fallbacks_;  // per region
  uint32_t max_registers_ = 0;
  uint32_t max_list_ = 0;
};

}  // namespace kiln

#endif  // KILN_VM_EXECUTABLE_H_
