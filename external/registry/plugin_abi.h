/* The C ABI between kiln and a vendor plugin (a shared library loaded at run time).
 *
 * A plugin exports one function:
 *
 *   int kiln_plugin_register(uint32_t abi_version, KilnRegisterVendorFn register_vendor,
 *                            void* registry, char* error, size_t error_size);
 *
 * kiln calls it once after dlopen with its KILN_PLUGIN_ABI_VERSION. The plugin returns non-zero
 * (and writes a message into `error`) if it does not speak that version; otherwise it calls
 * `register_vendor(registry, &vendor)` for each vendor it provides and returns 0. The vendor
 * struct and its strings must stay valid while the library is loaded (kiln never unloads it).
 *
 * Per external region, kiln calls `create` once at load (the vendor's Init, with the region's
 * blob and constants by reference, both valid for the region's lifetime) and `run` any number
 * of times, possibly concurrently from several threads, then `destroy` once. Errors are
 * reported as a non-zero return with a NUL-terminated message in `error`; a plugin must never
 * let a C++ exception or a signal cross this boundary.
 *
 * Profiling (optional): a vendor struct of version 2 (KilnVendorC.abi_version =
 * KILN_PLUGIN_VENDOR_VERSION) ends with `run_profiled`, which kiln calls instead of `run` while
 * it profiles, so `kiln profile` can list the steps inside a region. Version 1 structs (without
 * that field) keep loading; kiln never reads past their end. kiln_plugin_register is still
 * offered KILN_PLUGIN_ABI_VERSION (1), so plugins built against the older header are unaffected.
 *
 * Deadlines (optional): a vendor struct of version 3 adds `run_in_context`, which kiln then
 * calls for every run (profiled or not) with a KilnRunContextC: the run's deadline and a cheap
 * `should_stop` to call between the region's steps. A region that stops early returns
 * KILN_RUN_STOPPED and kiln fails the run with DeadlineExceeded (the outputs are discarded).
 * Versions 1 and 2 keep loading; their regions are only checked after they return.
 */
#ifndef KILN_EXTERNAL_REGISTRY_PLUGIN_ABI_H_
#define KILN_EXTERNAL_REGISTRY_PLUGIN_ABI_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_PLUGIN_ABI_VERSION 1u
/* The newest KilnVendorC layout this header declares (3: with run_in_context). */
#define KILN_PLUGIN_VENDOR_VERSION 3u
/* run_in_context's result when the region stopped early because should_stop said so. */
#define KILN_RUN_STOPPED 2
#define KILN_PLUGIN_REGISTER_SYMBOL "kiln_plugin_register"

/* A tensor view. dtype uses kiln's numbering (serializer/executable.fbs DType: 1 = f32, 2 = f16,
 * 3 = bf16, 4 = f64, 5 = i8, 6 = u8, 7 = i16, 8 = i32, 9 = i64, 10 = bool). Strides in
 * elements. Inputs are read-only; outputs are allocated by kiln with the computed shapes. */
typedef struct KilnTensorC {
  void* data;
  int32_t dtype;
  int32_t rank;
  const int64_t* shape;
  const int64_t* strides;
} KilnTensorC;

typedef struct KilnRegionSpecC {
  const char* name;    /* region name, e.g. "example_0" */
  const char* vendor;
  const uint8_t* blob; /* vendor-defined; checksum already verified by kiln */
  size_t blob_size;
  const KilnTensorC* constants;
  int32_t num_constants;
  int32_t num_inputs;
  int32_t num_outputs;
} KilnRegionSpecC;

/* One step a profiled region ran (e.g. one primitive). The strings need only live during
 * `record`. */
typedef struct KilnStepSampleC {
  int32_t step;       /* position in the region's execution, from 0 */
  const char* kind;   /* short op kind: "conv", "matmul", "binary", ... */
  const char* impl;   /* the vendor's implementation name */
  const char* shapes; /* operand dims, e.g. "1x16x56x56 -> 1x16x28x28"; may be "" or NULL */
  int32_t reference;  /* non-zero: a slow reference implementation */
  int64_t dur_ns;     /* wall time of the step */
} KilnStepSampleC;

/* Where run_profiled reports its steps: call record(context, &sample) once per step, on the
 * thread that called run_profiled. */
typedef struct KilnProfilerC {
  void* context;
  void (*record)(void* context, const KilnStepSampleC* sample);
} KilnProfilerC;

/* What kiln tells a version 3 region about the run it is part of. Valid during the call. */
typedef struct KilnRunContextC {
  /* The run's deadline on CLOCK_MONOTONIC in nanoseconds (INT64_MAX: none), for vendors that
   * hand it on (to a device queue, say). To decide whether to stop, call should_stop. */
  int64_t deadline_ns;
  /* Non-zero once the run must stop (its deadline has passed). Cheap (reads the clock only when
   * there is a deadline); call it between steps on the thread that called run_in_context. */
  int (*should_stop)(void* context);
  void* context;
  /* Non-NULL while kiln profiles: report each step to it, as run_profiled does. */
  const KilnProfilerC* profiler;
} KilnRunContextC;

typedef struct KilnVendorC {
  /* The struct's layout: KILN_PLUGIN_ABI_VERSION (1, ends at `destroy`), 2 (adds
   * `run_profiled`) or KILN_PLUGIN_VENDOR_VERSION (3, adds `run_in_context`). */
  uint32_t abi_version;
  const char* name;     /* vendor name as the compiler writes it into regions */
  void* user_data;      /* passed back to create */
  /* Returns a region handle, or NULL with `error` filled. */
  void* (*create)(void* user_data, const KilnRegionSpecC* spec, char* error, size_t error_size);
  /* args: inputs then outputs. Returns 0 on success. Must be thread-safe. */
  int (*run)(void* region, const KilnTensorC* args, int32_t num_inputs, int32_t num_outputs,
             char* error, size_t error_size);
  void (*destroy)(void* region);
  /* Version 2 only, may be NULL: like run, and reports each step to `profiler` (non-NULL). */
  int (*run_profiled)(void* region, const KilnTensorC* args, int32_t num_inputs,
                      int32_t num_outputs, const KilnProfilerC* profiler, char* error,
                      size_t error_size);
  /* Version 3 only, may be NULL: like run, told about the run (`run`, non-NULL). Returns 0 on
   * success, KILN_RUN_STOPPED with `error` naming the step it stopped before when
   * run->should_stop said so, any other non-zero value on failure. When it is set, kiln calls
   * it instead of run and run_profiled. Must be thread-safe. */
  int (*run_in_context)(void* region, const KilnTensorC* args, int32_t num_inputs,
                        int32_t num_outputs, const KilnRunContextC* run, char* error,
                        size_t error_size);
} KilnVendorC;

/* Returns 0 on success, non-zero with `error` filled otherwise. */
typedef int (*KilnRegisterVendorFn)(void* registry, const KilnVendorC* vendor, char* error,
                                    size_t error_size);

typedef int (*KilnPluginRegisterFn)(uint32_t abi_version, KilnRegisterVendorFn register_vendor,
                                    void* registry, char* error, size_t error_size);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* KILN_EXTERNAL_REGISTRY_PLUGIN_ABI_H_ */
