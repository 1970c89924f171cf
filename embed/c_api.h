/* kiln C API: load an executable, inspect its signature, run it. For languages other than C++.
 *
 * Conventions
 * - Handles are opaque; each *_create / *_load / *_wrap has a matching *_free (NULL is accepted).
 * - Fallible calls return a kiln_status*: NULL means success; otherwise the caller owns it and
 *   frees it with kiln_status_free. No C++ exception ever crosses this API.
 * - Thread safety: a kiln_executable may be shared by any number of threads; a kiln_context is
 *   used by one thread at a time (create one per thread). Tensors are immutable once passed in.
 * - Ownership: tensors returned by kiln_context_invoke belong to the caller (kiln_tensor_free);
 *   they stay valid after the context and the executable are freed.
 */
#ifndef KILN_EMBED_C_API_H_
#define KILN_EMBED_C_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kiln_status kiln_status;
typedef struct kiln_executable kiln_executable;
typedef struct kiln_context kiln_context;
typedef struct kiln_tensor kiln_tensor;

/* Same numbering as kiln::StatusCode. */
typedef enum kiln_status_code {
  KILN_OK = 0,
  KILN_INVALID_ARGUMENT = 1,
  KILN_INVALID_FORMAT = 2,
  KILN_UNSUPPORTED = 3,
  KILN_NOT_FOUND = 4,
  KILN_OUT_OF_RANGE = 5,
  KILN_DEADLINE_EXCEEDED = 6,
  KILN_RESOURCE_EXHAUSTED = 7,
  KILN_INTERNAL = 8,
  KILN_ABORTED = 9,
  KILN_DECLINED = 10 /* internal to loading: a vendor declined a region (never returned) */
} kiln_status_code;

/* Same numbering as kiln::DType and the file format. */
typedef enum kiln_dtype {
  KILN_DTYPE_INVALID = 0,
  KILN_F32 = 1,
  KILN_F16 = 2,
  KILN_BF16 = 3,
  KILN_F64 = 4,
  KILN_I8 = 5,
  KILN_U8 = 6,
  KILN_I16 = 7,
  KILN_I32 = 8,
  KILN_I64 = 9,
  KILN_BOOL = 10,
  KILN_U16 = 11,
  KILN_U32 = 12,
  KILN_U64 = 13
} kiln_dtype;

#define KILN_MAX_RANK 8

/* ---- Status ---- */
kiln_status_code kiln_status_get_code(const kiln_status* status); /* KILN_OK for NULL */
const char* kiln_status_message(const kiln_status* status);       /* "" for NULL */
void kiln_status_free(kiln_status* status);

/* ---- Executables ---- */
/* Maps and verifies a .kiln file; vendor plugins named in $KILN_PLUGINS are loaded first. */
kiln_status* kiln_executable_load_file(const char* path, kiln_executable** out);
/* Verifies `size` bytes (copied once if they are not 64-byte aligned or must outlive the call:
 * the executable never refers to `data` after returning). */
kiln_status* kiln_executable_load_bytes(const void* data, size_t size, kiln_executable** out);
void kiln_executable_free(kiln_executable* executable);

int kiln_executable_num_functions(const kiln_executable* executable);          /* -1 for NULL */
const char* kiln_executable_function_name(const kiln_executable* executable, int function);
const char* kiln_executable_entry_function(const kiln_executable* executable);

/* A declared parameter or result. Strings point into the executable (valid until it is freed).
 * dims[i] >= 0 is a fixed size; -1 is symbolic, named by symbols[i] ("" if unnamed). */
typedef struct kiln_value_info {
  const char* name;
  kiln_dtype dtype;
  int32_t rank;
  int64_t dims[KILN_MAX_RANK];
  const char* symbols[KILN_MAX_RANK];
} kiln_value_info;

int kiln_function_num_params(const kiln_executable* executable, int function);  /* -1 if invalid */
int kiln_function_num_results(const kiln_executable* executable, int function); /* -1 if invalid */
kiln_status* kiln_function_param(const kiln_executable* executable, int function, int index,
                                 kiln_value_info* out);
kiln_status* kiln_function_result(const kiln_executable* executable, int function, int index,
                                  kiln_value_info* out);

/* ---- Tensors ---- */
/* A view of caller memory, no copy: the caller keeps `data` valid and unchanged while the tensor
 * (or any output that may alias it) is in use. */
kiln_status* kiln_tensor_wrap(void* data, kiln_dtype dtype, const int64_t* shape, int32_t rank,
                              kiln_tensor** out);
/* A new zero-filled tensor owned by kiln. */
kiln_status* kiln_tensor_create(kiln_dtype dtype, const int64_t* shape, int32_t rank,
                                kiln_tensor** out);
void kiln_tensor_free(kiln_tensor* tensor);
kiln_dtype kiln_tensor_dtype(const kiln_tensor* tensor);
int32_t kiln_tensor_rank(const kiln_tensor* tensor);           /* -1 for NULL */
const int64_t* kiln_tensor_shape(const kiln_tensor* tensor);   /* rank entries */
void* kiln_tensor_data(const kiln_tensor* tensor);
size_t kiln_tensor_size_bytes(const kiln_tensor* tensor);

/* ---- Contexts ---- */
kiln_status* kiln_context_create(const kiln_executable* executable, kiln_context** out);
void kiln_context_free(kiln_context* context);

/* Runs `function` on `inputs`. On success writes *num_outputs new tensors into `outputs`
 * (KILN_OUT_OF_RANGE, nothing written, if there are more than `outputs_capacity`). Inputs are
 * checked against the declared parameters (count, dtype, rank, dims). timeout_ms > 0 stops a run
 * that takes longer with KILN_DEADLINE_EXCEEDED. */
kiln_status* kiln_context_invoke(kiln_context* context, const char* function,
                                 const kiln_tensor* const* inputs, size_t num_inputs,
                                 kiln_tensor** outputs, size_t outputs_capacity,
                                 size_t* num_outputs, int64_t timeout_ms);

/* ---- Runtimes (embed/runtime.h) ----
 * A runtime holds the JIT (kernels compiled on first use, on-disk cache), the vendor
 * runtimes (oneDNN, plugins) and an allocator. Executables it loads can run JIT kernels and
 * external regions (kiln_executable_load_* bind external regions only). Thread-safe. Executables
 * and contexts it made, and tensors they returned, stay valid after kiln_runtime_free. */
typedef struct kiln_runtime kiln_runtime;

/* Zero-initialize (or memset 0) for the defaults. */
typedef struct kiln_runtime_options {
  int32_t num_threads;           /* OpenMP threads for kernels and oneDNN; 0: OpenMP default */
  const char* jit_cache;         /* persistent JIT object cache directory; NULL or "": the
                                    default ($XDG_CACHE_HOME/kiln, else ~/.cache/kiln); "off":
                                    none. Unusable: one warning on stderr, no cache. */
  size_t allocator_cache_bytes;  /* bytes the allocator keeps for reuse; 0: 1 GiB */
  const char* const* plugins;    /* vendor plugin .so paths (plus $KILN_PLUGINS) */
  size_t num_plugins;
  uint64_t jit_cache_bytes;      /* bound on the JIT cache directory (LRU); 0: 1 GiB */
  int32_t jit_tiering_off;       /* nonzero: kernels are optimized at their first compile (no
                                    cheap first tier; RuntimeOptions::dispatch.tiering) */
  int32_t require_vendor;        /* nonzero: loading fails when a vendor declines an external
                                    region or is not registered (default: the region runs its
                                    fallback, kiln's JIT, with one notice on stderr) */
  int32_t ignore_tuned_fallback; /* nonzero: regions `kiln compile --tune` measured slower than
                                    their fallback get their vendor runtime anyway (default:
                                    they run the fallback) */
} kiln_runtime_options;

/* Counters since the runtime was created. */
typedef struct kiln_runtime_stats {
  int64_t jit_compilations;        /* kernels compiled (including failed attempts) */
  int64_t jit_cache_hits;          /* kernel requests served without compiling */
  int64_t jit_object_cache_hits;   /* compilations served from the JIT cache directory */
  double jit_compile_seconds;
  int64_t specialized_calls;       /* kernel calls served by a shape-specialized variant */
  int64_t generic_calls;           /* ... by the generic variant */
} kiln_runtime_stats;

/* The JIT's counters since the runtime was created (kiln::RuntimeStats::engine and ::dispatch;
 * jit/engine.h and jit/dispatch.h say what each counts). A struct of its own, so that
 * kiln_runtime_stats keeps its size for programs built against it. */
typedef struct kiln_jit_stats {
  int64_t compilations;          /* kernels LLVM compiled (failed attempts included) */
  int64_t fast_compilations;     /* of those, at the cheap first tier */
  int64_t failures;              /* compilations that failed */
  int64_t cache_hits;            /* kernel requests served without compiling */
  int64_t object_cache_hits;     /* compilations served from the JIT cache directory */
  int64_t object_cache_misses;   /* compilations that found no usable entry there */
  int64_t aot_linked;            /* kernels linked from code compiled ahead of time */
  int64_t aot_link_failures;     /* such objects that did not link (compiled instead) */
  int64_t kernels_alive;         /* distinct kernels the engine holds now */
  int64_t kernels_freed;         /* kernels whose code was freed */
  double compile_seconds;        /* wall time in compilations */
  int64_t variant_requests;      /* kernel variants dispatch asked for (generic, specialized) */
  int64_t specializations;       /* shape-specialized variants installed */
  int64_t tier_ups;              /* optimized generic variants swapped in for first-tier ones */
  int64_t specialized_calls;     /* kernel calls served by a specialized variant */
  int64_t generic_calls;         /* ... by the generic variant */
} kiln_jit_stats;

/* options NULL: defaults. KILN_INVALID_ARGUMENT for a negative or huge num_threads;
 * KILN_NOT_FOUND / KILN_INVALID_ARGUMENT naming a plugin that is missing or not loadable;
 * KILN_INTERNAL if LLVM cannot create the JIT. */
kiln_status* kiln_runtime_create(const kiln_runtime_options* options, kiln_runtime** out);
void kiln_runtime_free(kiln_runtime* runtime);
/* As kiln_executable_load_file / _load_bytes, bound to the runtime's JIT and vendors. */
kiln_status* kiln_runtime_load_file(const kiln_runtime* runtime, const char* path,
                                    kiln_executable** out);
kiln_status* kiln_runtime_load_bytes(const kiln_runtime* runtime, const void* data, size_t size,
                                     kiln_executable** out);
/* A context allocating from the runtime's allocator. */
kiln_status* kiln_runtime_context_create(const kiln_runtime* runtime,
                                         const kiln_executable* executable, kiln_context** out);
/* Compiles every kernel `function` (NULL or "": the entry) of `executable` needs at the shapes
 * given by `num_dims` symbolic dims (dim_names[i] = dim_values[i]), before the first request, by
 * one call on zero-filled inputs; returns once the optimized code of every kernel it reached is
 * compiled, so an invoke at those shapes compiles nothing (kiln::Runtime::Warmup has the
 * details). KILN_INVALID_ARGUMENT for a null argument, a missing, unnamed or unknown dim;
 * KILN_NOT_FOUND for an unknown function; the call's error otherwise. */
kiln_status* kiln_runtime_warmup(const kiln_runtime* runtime, const kiln_executable* executable,
                                 const char* function, const char* const* dim_names,
                                 const int64_t* dim_values, size_t num_dims);
/* Zeros *out for a NULL runtime. */
void kiln_runtime_get_stats(const kiln_runtime* runtime, kiln_runtime_stats* out);
/* Zeros *out for a NULL runtime. */
void kiln_runtime_get_jit_stats(const kiln_runtime* runtime, kiln_jit_stats* out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KILN_EMBED_C_API_H_ */
