// Loading: map or adopt the bytes, verify in three layers, then bind kernels and regions.
#include "vm/executable.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "vm/opcodes.h"
#include "vm/verifier.h"

namespace kiln {
namespace {

// A read-only private mapping of a whole file; unmapped when the last owner drops it.
struct Mapping {
  void* addr = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (addr != nullptr && addr != MAP_FAILED) munmap(addr, size);
  }
};

// A whole file read into anonymous memory, 2 MiB aligned and advised to use huge pages.
struct HugePageCopy {
  void* base = nullptr;  // the mapping (with room to align)
  size_t length = 0;
  void* addr = nullptr;  // the file's first byte, 2 MiB aligned
  ~HugePageCopy() {
    if (base != nullptr && base != MAP_FAILED) munmap(base, length);
  }
};

constexpr size_t kHugePage = size_t{2} << 20;

struct AlignedCopy {
  void* data = nullptr;
  ~AlignedCopy() { std::free(data); }
};

std::string ErrnoText() { return std::strerror(errno); }

ValueSpec ToValueSpec(const fb::TensorSpec* spec) {
  ValueSpec v;
  if (spec->name()) v.name = spec->name()->str();
  v.dtype = static_cast<DType>(spec->dtype());
  v.is_tuple = spec->is_tuple();
  v.dtype_only = spec->dtype_only();
  if (spec->shape()) {
    for (const fb::Dim* d : *spec->shape()) {
      v.shape.push_back(DimSpec{d->value(), d->symbol() ? d->symbol()->str() : ""});
    }
  }
  return v;
}

std::vector<ValueSpec> ToValueSpecs(
    const flatbuffers::Vector<flatbuffers::Offset<fb::TensorSpec>>* specs) {
  std::vector<ValueSpec> out;
  if (specs) {
    for (const fb::TensorSpec* s : *specs) out.push_back(ToValueSpec(s));
  }
  return out;
}

template <typename T>
std::vector<DType> ToDTypes(const flatbuffers::Vector<T>* v) {
  std::vector<DType> out;
  if (v) {
    for (auto d : *v) out.push_back(static_cast<DType>(d));
  }
  return out;
}

std::string_view View(const flatbuffers::String* s) {
  return s ? std::string_view(s->c_str(), s->size()) : std::string_view();
}

}  // namespace

std::string ValueSpec::ToString() const {
  std::string s = name.empty() ? "" : name + ": ";
  if (is_tuple) return s + "tuple";
  s += DTypeShortName(dtype);
  s += "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    if (shape[i].fixed()) {
      s += std::to_string(shape[i].value);
    } else {
      s += shape[i].symbol.empty() ? "?" : shape[i].symbol;
    }
  }
  return s + (dtype_only ? "] (any shape)" : "]");
}

Executable::~Executable() = default;

StatusOr<std::shared_ptr<const Executable>> Executable::LoadFile(const std::string& path,
                                                                 const LoadOptions& options) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever. It has no
  // effect on the regular files that pass the check below.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return NotFound(path + ": no such file");
    return InvalidArgument(path + ": cannot open: " + ErrnoText());
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgument(path + ": not a regular file (a .kiln executable is read from a file, "
                           "not a pipe, device or directory)");
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (options.huge_page_constants && size > 0) {
    auto copy = std::make_shared<HugePageCopy>();
    size_t rounded = (size + kHugePage - 1) / kHugePage * kHugePage;
    copy->length = rounded + kHugePage;
    copy->base = mmap(nullptr, copy->length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                      -1, 0);
    if (copy->base == MAP_FAILED) {
      ::close(fd);
      return ResourceExhausted(path + ": cannot allocate " + std::to_string(copy->length) +
                               " bytes for its huge-page copy: " + ErrnoText());
    }
    auto aligned = (reinterpret_cast<uintptr_t>(copy->base) + kHugePage - 1) & ~(kHugePage - 1);
    copy->addr = reinterpret_cast<void*>(aligned);
    madvise(copy->addr, rounded, MADV_HUGEPAGE);  // best effort: THP may be off
    size_t done = 0;
    while (done < size) {
      ssize_t n = ::pread(fd, static_cast<char*>(copy->addr) + done, size - done,
                          static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        std::string why = n < 0 ? ErrnoText() : "the file shrank while it was read";
        ::close(fd);
        return InvalidArgument(path + ": read failed at byte " + std::to_string(done) + ": " + why);
      }
      done += static_cast<size_t>(n);
    }
    ::close(fd);
    mprotect(copy->addr, rounded, PROT_READ);  // constants are read-only, as in the mapping
    LoadOptions rest = options;
    rest.prefetch_constants = false;  // already resident
    StatusOr<std::shared_ptr<const Executable>> exe =
        LoadBytes(static_cast<const uint8_t*>(copy->addr), size, rest, copy);
    if (!exe.ok()) return exe.status().WithContext(path);
    return exe;
  }
  auto mapping = std::make_shared<Mapping>();
  mapping->size = size;
  if (mapping->size > 0) {
    mapping->addr = mmap(nullptr, mapping->size, PROT_READ, MAP_PRIVATE, fd, 0);
  }
  ::close(fd);
  if (mapping->size > 0 && mapping->addr == MAP_FAILED) {
    return InvalidArgument(path + ": mmap failed: " + ErrnoText());
  }
  auto* data = static_cast<const uint8_t*>(mapping->addr);
  StatusOr<std::shared_ptr<const Executable>> exe =
      LoadBytes(data ? data : reinterpret_cast<const uint8_t*>(""), mapping->size, options, mapping);
  if (!exe.ok()) return exe.status().WithContext(path);
  return exe;
}

StatusOr<std::shared_ptr<const Executable>> Executable::LoadBytes(
    const uint8_t* data, size_t size, const LoadOptions& options,
    std::shared_ptr<const void> keepalive) {
  std::shared_ptr<Executable> exe(new Executable());
  if (keepalive == nullptr || reinterpret_cast<uintptr_t>(data) % kStorageAlignment != 0) {
    auto copy = std::make_shared<AlignedCopy>();
    copy->data = std::aligned_alloc(kStorageAlignment, (size + kStorageAlignment) & ~(kStorageAlignment - 1));
    if (copy->data == nullptr) return ResourceExhausted("cannot copy executable bytes");
    if (size) std::memcpy(copy->data, data, size);
    data = static_cast<const uint8_t*>(copy->data);
    keepalive = copy;
  }
  exe->buffer_ = std::move(keepalive);
  exe->data_ = data;
  exe->size_ = size;
  RETURN_IF_ERROR(exe->Init(options));
  return std::shared_ptr<const Executable>(std::move(exe));
}

Status Executable::Init(const LoadOptions& options) {
  RETURN_IF_ERROR(VerifyStructure(data_, size_, &root_, &flatbuffer_size_));
  RETURN_IF_ERROR(VerifySemantics(*root_, size_, flatbuffer_size_));
  RETURN_IF_ERROR(VerifyBytecode(*root_));

  for (int i = 0; i < num_functions(); ++i) {
    const fb::Function* f = root_->functions()->Get(i);
    FunctionSignature sig{f->name()->str(), ToValueSpecs(f->params()), ToValueSpecs(f->results()), {}};
    for (ValueSpec& p : sig.params) {
      for (DimSpec& d : p.shape) {
        if (d.fixed() || d.symbol.empty()) continue;
        auto it = std::find(sig.symbols.begin(), sig.symbols.end(), d.symbol);
        d.symbol_id = static_cast<int>(it - sig.symbols.begin());
        if (it == sig.symbols.end()) sig.symbols.push_back(d.symbol);
      }
    }
    signatures_.push_back(std::move(sig));
    function_index_.emplace(f->name()->str(), i);
    max_registers_ = std::max(max_registers_, f->register_count());
    max_list_ = std::max<uint32_t>(max_list_, f->operands() ? f->operands()->size() : 0);
  }
  if (root_->kernels()) {
    for (const fb::Kernel* k : *root_->kernels()) {
      std::vector<DType> dtypes = ToDTypes(k->input_dtypes());
      kernel_num_inputs_.push_back(static_cast<int>(dtypes.size()));
      for (DType t : ToDTypes(k->output_dtypes())) dtypes.push_back(t);
      kernel_dtypes_.push_back(std::move(dtypes));
    }
  }
  if (root_->constants()) {
    for (const fb::Constant* c : *root_->constants()) {
      // Views of the file's bytes; the storage keeps the mapping (or copy) alive.
      void* bytes = const_cast<uint8_t*>(data_ + c->offset());
      StorageRef storage = StorageRef::Adopt(Storage::Borrow(bytes, c->size(), buffer_));
      StatusOr<Shape> shape = Shape::Make(c->shape() ? c->shape()->data() : nullptr,
                                          c->shape() ? c->shape()->size() : 0);
      StatusOr<Tensor> t = Tensor::View(std::move(storage), 0, static_cast<DType>(c->dtype()), *shape);
      if (!t.ok()) return Internal("constant view: " + t.status().message());
      constants_.push_back(std::move(*t));
      if (options.prefetch_constants && c->size() > 0) {
        auto page = reinterpret_cast<uintptr_t>(bytes) & ~uintptr_t{4095};
        madvise(reinterpret_cast<void*>(page), c->size() + (reinterpret_cast<uintptr_t>(bytes) - page),
                MADV_WILLNEED);
      }
    }
  }
  if (!options.bind) return Status::Ok();
  RETURN_IF_ERROR(BindProviders(options));
  bound_ = true;
  return Status::Ok();
}

namespace {

// The provider's choice among the executable's code targets (-1: none, or none in the file).
int ChooseCodeTarget(const fb::Executable& root, KernelProvider& provider) {
  const auto* all = root.aot_targets();
  if (all == nullptr || all->size() == 0) return -1;
  std::vector<CodeTargetSpec> targets;
  for (size_t t = 0; t < all->size(); ++t) {
    const fb::AotTarget* a = all->Get(t);
    targets.push_back({static_cast<int>(t), AotTargetWhere(t, *a), View(a->triple()),
                       View(a->cpu()), View(a->features()), View(a->llvm_version()),
                       View(a->abi())});
  }
  int chosen = provider.SelectCodeTarget(targets);
  return chosen >= 0 && chosen < static_cast<int>(all->size()) ? chosen : -1;
}

// Entry i's object in code target `target` (kernels or shape functions); empty if none.
CodeObjectSpec CodeObject(const fb::Executable& root, int target, bool shape_function, size_t i) {
  CodeObjectSpec spec;
  if (target < 0) return spec;
  const fb::AotTarget* t = root.aot_targets()->Get(target);
  const auto* objects = shape_function ? t->shape_functions() : t->kernels();
  if (objects == nullptr || i >= objects->size()) return spec;
  const fb::AotObject* o = objects->Get(i);
  if (o->object() == nullptr || o->object()->size() == 0) return spec;
  spec.where = AotTargetWhere(target, *t) + (shape_function ? ".shape_functions[" : ".kernels[") +
               std::to_string(i) + "]";
  spec.symbol = View(o->symbol());
  spec.target_features = View(t->features());
  spec.data = o->object()->data();
  spec.size = o->object()->size();
  return spec;
}

}  // namespace

Status Executable::BindProviders(const LoadOptions& options) {
  auto need = [](const void* provider, size_t count, const char* what) -> Status {
    if (count > 0 && provider == nullptr) {
      return InvalidArgument(std::string("the executable has ") + std::to_string(count) + " " +
                             what + " but no provider was given to bind them");
    }
    return Status::Ok();
  };
  size_t nk = root_->kernels() ? root_->kernels()->size() : 0;
  size_t ns = root_->shape_functions() ? root_->shape_functions()->size() : 0;
  size_t nx = root_->external_regions() ? root_->external_regions()->size() : 0;
  RETURN_IF_ERROR(need(options.kernels.get(), nk + ns, "kernels/shape functions"));
  RETURN_IF_ERROR(need(options.externals.get(), nx, "external regions"));
  int code = nk + ns > 0 ? ChooseCodeTarget(*root_, *options.kernels) : -1;
  for (size_t i = 0; i < nk; ++i) {
    const fb::Kernel* k = root_->kernels()->Get(i);
    KernelSpec spec{static_cast<int>(i), View(k->name()), ToDTypes(k->input_dtypes()),
                    ToDTypes(k->output_dtypes()), View(k->payload_format()),
                    k->payload() ? k->payload()->data() : nullptr,
                    k->payload() ? k->payload()->size() : 0, {}};
    if (k->dispatch_hints()) {
      for (const fb::DispatchHint* h : *k->dispatch_hints()) {
        DispatchHintSpec hint{View(h->symbol()), {}};
        if (h->buckets()) hint.buckets.assign(h->buckets()->begin(), h->buckets()->end());
        spec.dispatch_hints.push_back(std::move(hint));
      }
    }
    spec.code = CodeObject(*root_, code, /*shape_function=*/false, i);
    auto fn = options.kernels->PrepareKernel(spec);
    if (!fn.ok()) return fn.status().WithContext("kernels[" + std::to_string(i) + "] '" + std::string(spec.name) + "'");
    kernels_.push_back(std::move(*fn));
  }
  for (size_t i = 0; i < ns; ++i) {
    const fb::ShapeFunction* s = root_->shape_functions()->Get(i);
    ShapeFunctionSpec spec{static_cast<int>(i), View(s->name()), static_cast<int>(s->num_inputs()),
                           static_cast<int>(s->num_outputs()), {}, View(s->payload_format()),
                           s->payload() ? s->payload()->data() : nullptr,
                           s->payload() ? s->payload()->size() : 0};
    if (s->data_dependent()) {
      for (bool b : *s->data_dependent()) spec.data_dependent.push_back(b);
    }
    spec.data_dependent.resize(spec.num_inputs, false);
    spec.code = CodeObject(*root_, code, /*shape_function=*/true, i);
    auto fn = options.kernels->PrepareShapeFunction(spec);
    if (!fn.ok()) return fn.status().WithContext("shape_functions[" + std::to_string(i) + "] '" + std::string(spec.name) + "'");
    shape_functions_.push_back(std::move(*fn));
  }
  return BindRegions(options);
}

// Binds every region to its vendor's runtime or, when the vendor declines it or is absent, to
// its fallback function; then one notice per vendor whose regions fell back.
Status Executable::BindRegions(const LoadOptions& options) {
  size_t nx = root_->external_regions() ? root_->external_regions()->size() : 0;
  fallbacks_.assign(nx, Fallback{});
  std::map<std::string, std::vector<std::string>> fell_back;  // vendor -> why, per region
  std::vector<std::string> tuned;  // "name (note)" per region the tune gave to its fallback
  for (size_t i = 0; i < nx; ++i) {
    RETURN_IF_ERROR(BindRegion(static_cast<int>(i), options, &fell_back, &tuned));
  }
  auto notice = [&](const std::string& line) {
    if (options.notice) {
      options.notice(line);
    } else {
      std::fprintf(stderr, "kiln: notice: %s\n", line.c_str());
    }
  };
  if (!tuned.empty()) {
    std::string line = std::to_string(tuned.size()) + " of " + std::to_string(nx) +
                       " regions run their fallback functions (kiln's JIT) because `kiln compile "
                       "--tune` measured them faster: ";
    for (size_t j = 0; j < tuned.size(); ++j) line += (j ? "; " : "") + tuned[j];
    notice(line + " (--ignore-tuned-fallback runs the vendor)");
  }
  for (const auto& [vendor, regions] : fell_back) {
    std::string line;
    if (!options.externals->HasVendor(vendor)) {
      line = "no runtime is registered for vendor '" + vendor + "': its regions ";
      for (size_t j = 0; j < regions.size(); ++j) line += (j ? ", " : "") + regions[j];
      line += " run their fallback functions (kiln's JIT) instead";
    } else {
      line = "vendor '" + vendor + "' declined " + std::to_string(regions.size()) + " of " +
             std::to_string(nx) + " regions, which run their fallback functions (kiln's JIT) "
             "instead: ";
      for (size_t j = 0; j < regions.size(); ++j) line += (j ? "; " : "") + regions[j];
    }
    notice(line + " (--require-vendor makes this an error)");
  }
  return Status::Ok();
}

// Region i: the vendor's runtime, else (declined, or an absent vendor) its fallback, recorded
// in `fell_back` for the notice. Without a fallback (files before 1.2) the vendor may not
// decline and its answer stands, as before; with options.require_vendor a decline or absence
// is an error. A region the tune gave to its fallback (1.4) runs it without asking the vendor,
// recorded in `tuned`, unless options say to ignore that.
Status Executable::BindRegion(int i, const LoadOptions& options,
                              std::map<std::string, std::vector<std::string>>* fell_back,
                              std::vector<std::string>* tuned) {
  const fb::ExternalRegion* r = root_->external_regions()->Get(i);
  ExternalRegionSpec spec{i, View(r->name()), View(r->vendor()),
                          r->blob() ? r->blob()->data() : nullptr,
                          r->blob() ? r->blob()->size() : 0, {},
                          static_cast<int>(r->num_inputs()), static_cast<int>(r->num_outputs())};
  const std::string name(spec.name), vendor(spec.vendor);
  const std::string where = "external_regions[" + std::to_string(i) + "] '" + name +
                            "' (vendor '" + vendor + "')";
  const int fallback = r->fallback();
  if (r->tuned_fallback() && fallback >= 0 && !options.ignore_tuned_fallback &&
      !options.require_vendor) {
    const std::string note = r->tuned_note() ? r->tuned_note()->str() : "";
    externals_.push_back(nullptr);
    fallbacks_[i] = Fallback{fallback, "`kiln compile --tune` measured the fallback faster" +
                                           (note.empty() ? "" : ": " + note)};
    tuned->push_back(note.empty() ? name : name + " (" + note + ")");
    return Status::Ok();
  }
  Status why;
  std::string entry = name;  // in the notice
  if (!options.externals->HasVendor(spec.vendor) && (fallback >= 0 || options.require_vendor)) {
    why = NotFound("no runtime is registered for vendor '" + vendor + "'");
  } else {
    if (r->constants()) {
      for (uint32_t c : *r->constants()) spec.constants.push_back(constants_[c]);
    }
    spec.may_decline = fallback >= 0 || options.require_vendor;
    auto fn = options.externals->CreateRegion(spec);
    if (fn.ok()) {
      externals_.push_back(std::move(*fn));
      return Status::Ok();
    }
    std::string reason = fallback < 0 ? NoFallbackReason(name) : "";
    if (fn.status().code() != StatusCode::kDeclined) {
      if (reason.empty()) return fn.status().WithContext(where);
      return Status(fn.status().code(), where + ": " + fn.status().message() + "; " + reason);
    }
    why = Unsupported("the vendor declined the region: " + fn.status().message());
    entry = fn.status().message();
    if (fallback < 0 && !options.require_vendor) {
      return Unsupported(where + ": " + why.message() + "; " +
                         (!reason.empty() ? reason
                                          : "the region has no fallback function (written by a "
                                            "kiln before format 1.2, or `kiln compile` found no "
                                            "JIT lowering for one of its nodes)"));
    }
  }
  if (options.require_vendor) {
    return Status(why.code(), where + ": " + why.message() +
                                  "; the vendor is required (--require-vendor)");
  }
  externals_.push_back(nullptr);
  fallbacks_[i] = Fallback{fallback, why.message()};
  (*fell_back)[vendor].push_back(entry);
  return Status::Ok();
}

std::string Executable::NoFallbackReason(const std::string& name) const {
  int f = FindFunction(name + "/fallback");
  if (f < 0) return "";
  const auto* code = root_->functions()->Get(f)->code();
  if (!code || code->size() != 1 || code->Get(0)->opcode() != static_cast<uint8_t>(Opcode::kFatal))
    return "";
  return std::string(String(code->Get(0)->a()));
}

uint16_t Executable::version_major() const { return root_->header()->version()->major(); }
uint16_t Executable::version_minor() const { return root_->header()->version()->minor(); }
std::string_view Executable::producer() const { return View(root_->header()->producer()); }

int Executable::num_functions() const {
  return root_->functions() ? static_cast<int>(root_->functions()->size()) : 0;
}

int Executable::FindFunction(std::string_view name) const {
  auto it = function_index_.find(std::string(name));
  return it == function_index_.end() ? -1 : it->second;
}

std::string_view Executable::entry_function() const {
  const fb::ModelMetadata* m = root_->metadata();
  if (m && m->entry() && m->entry()->size() > 0) return View(m->entry());
  return "main";
}

void Executable::Prefetch(int function) const {
  if (!bound_ || function < 0 || function >= num_functions()) return;
  // A worklist of functions, each visited once (recursion and shared callees are fine).
  std::vector<bool> seen_function(num_functions(), false), seen_kernel(kernels_.size(), false),
      seen_shape(shape_functions_.size(), false);
  std::vector<int> work = {function};
  seen_function[function] = true;
  auto visit = [&](int f) {
    if (f >= 0 && f < num_functions() && !seen_function[f]) {
      seen_function[f] = true;
      work.push_back(f);
    }
  };
  // Verified at load: every callee index is in range.
  for (size_t next = 0; next < work.size(); ++next) {
    const auto* code = root_->functions()->Get(work[next])->code();
    if (code == nullptr) continue;
    for (const fb::Instruction* in : *code) {
      auto op = static_cast<Opcode>(in->opcode());
      int callee = in->a();
      if (op == Opcode::kInvokeKernel && !seen_kernel[callee]) {
        seen_kernel[callee] = true;
        kernels_[callee]->Prefetch();
      } else if (op == Opcode::kInvokeShapeFunc && !seen_shape[callee]) {
        seen_shape[callee] = true;
        shape_functions_[callee]->Prefetch();
      } else if (op == Opcode::kInvoke) {
        visit(callee);
      } else if (op == Opcode::kInvokeExternal) {
        visit(external_fallback(callee));  // -1 (the vendor runs it) is skipped
      }
    }
  }
}

std::string_view Executable::SourceNode(int function, int pc) const {
  const fb::DebugInfo* debug = root_->debug();
  if (!debug || !debug->functions() || function >= static_cast<int>(debug->functions()->size())) {
    return {};
  }
  const auto* nodes = debug->functions()->Get(function)->source_nodes();
  if (!nodes || pc < 0 || pc >= static_cast<int>(nodes->size()) || nodes->Get(pc) < 0) return {};
  return String(nodes->Get(pc));
}

std::string_view Executable::String(int i) const {
  if (!root_->strings() || i < 0 || i >= static_cast<int>(root_->strings()->size())) return {};
  return View(root_->strings()->Get(i));
}

}  // namespace kiln
