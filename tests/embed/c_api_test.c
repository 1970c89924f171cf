/* The C API from C: load (file and bytes, plain and through a runtime), inspect, invoke, errors
 * (null handles, bad dtypes, ranks, dims, unknown functions, small output arrays, deadlines),
 * ownership of outputs, tensor dtypes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "embed/c_api.h"

static int g_failed = 0, g_passed = 0;

#define CHECK(cond)                                                      \
  do {                                                                   \
    if (cond) {                                                          \
      ++g_passed;                                                        \
    } else {                                                             \
      ++g_failed;                                                        \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                    \
  } while (0)

/* Checks `s` has `code` and a message containing `part`, then frees it. */
static void ExpectError(kiln_status* s, kiln_status_code code, const char* part) {
  CHECK(s != NULL);
  if (s == NULL) return;
  CHECK(kiln_status_get_code(s) == code);
  if (strstr(kiln_status_message(s), part) == NULL) {
    ++g_failed;
    fprintf(stderr, "message '%s' lacks '%s'\n", kiln_status_message(s), part);
  }
  kiln_status_free(s);
}

static const char* FixturePath(void) { return "tests/embed/c_api_fixture.kiln"; }

/* The fixture's bytes at an odd address inside a malloc'd block (*block, to free), so loading
 * must copy to align them; *size is set. NULL on failure. */
static const void* ReadFixture(void** block, size_t* size) {
  FILE* f = fopen(FixturePath(), "rb");
  char* p;
  long n;
  *block = NULL;
  if (f == NULL) return NULL;
  if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) <= 0 || fseek(f, 0, SEEK_SET) != 0) {
    fclose(f);
    return NULL;
  }
  p = (char*)malloc((size_t)n + 1);
  if (p != NULL && fread(p + 1, 1, (size_t)n, f) != (size_t)n) {
    free(p);
    p = NULL;
  }
  fclose(f);
  if (p == NULL) return NULL;
  *block = p;
  *size = (size_t)n;
  return p + 1;
}

static void TestSignature(const kiln_executable* exe) {
  kiln_value_info info;
  CHECK(kiln_executable_num_functions(exe) == 3);
  CHECK(strcmp(kiln_executable_function_name(exe, 0), "main") == 0);
  CHECK(strcmp(kiln_executable_entry_function(exe), "main") == 0);
  CHECK(kiln_executable_function_name(exe, 7) == NULL);
  CHECK(kiln_function_num_params(exe, 0) == 2);
  CHECK(kiln_function_num_results(exe, 0) == 3);
  CHECK(kiln_function_param(exe, 0, 0, &info) == NULL);
  CHECK(strcmp(info.name, "x") == 0);
  CHECK(info.dtype == KILN_F32 && info.rank == 2);
  CHECK(info.dims[0] == -1 && strcmp(info.symbols[0], "n") == 0 && info.dims[1] == 3);
  ExpectError(kiln_function_param(exe, 0, 5, &info), KILN_OUT_OF_RANGE, "index 5 of 2");
  ExpectError(kiln_function_result(exe, 9, 0, &info), KILN_NOT_FOUND, "no function 9");
}

static void TestInvoke(kiln_context* ctx) {
  float x[6] = {1, 2, 3, 4, 5, 6};
  int64_t k = 42, shape[2] = {2, 3};
  kiln_tensor *tx = NULL, *tk = NULL, *out[4] = {NULL};
  size_t n = 0;
  CHECK(kiln_tensor_wrap(x, KILN_F32, shape, 2, &tx) == NULL);
  CHECK(kiln_tensor_wrap(&k, KILN_I64, NULL, 0, &tk) == NULL);
  const kiln_tensor* in[2] = {tx, tk};
  CHECK(kiln_context_invoke(ctx, "main", in, 2, out, 4, &n, 0) == NULL);
  CHECK(n == 3);
  CHECK(kiln_tensor_dtype(tx) == KILN_F32 && kiln_tensor_dtype(tk) == KILN_I64);
  CHECK(kiln_tensor_dtype(out[0]) == KILN_I64 && kiln_tensor_dtype(out[1]) == KILN_F32 &&
        kiln_tensor_dtype(out[2]) == KILN_F32);
  CHECK(*(int64_t*)kiln_tensor_data(out[0]) == 42);
  CHECK(kiln_tensor_rank(out[1]) == 2 && kiln_tensor_shape(out[1])[0] == 2);
  CHECK(kiln_tensor_data(out[1]) == (void*)x); /* zero copy in and out */
  CHECK(kiln_tensor_size_bytes(out[2]) == 8 && ((float*)kiln_tensor_data(out[2]))[1] == -1.5f);
  for (size_t i = 0; i < n; ++i) kiln_tensor_free(out[i]);

  /* Too small an output array: nothing written. */
  ExpectError(kiln_context_invoke(ctx, "main", in, 2, out, 2, &n, 0), KILN_OUT_OF_RANGE,
              "returns 3 outputs but outputs_capacity is 2");
  CHECK(n == 0);
  /* Wrong count, dtype and dim. */
  ExpectError(kiln_context_invoke(ctx, "main", in, 1, out, 4, &n, 0), KILN_INVALID_ARGUMENT,
              "takes 2 inputs, got 1");
  const kiln_tensor* swapped[2] = {tk, tx};
  ExpectError(kiln_context_invoke(ctx, "main", swapped, 2, out, 4, &n, 0), KILN_INVALID_ARGUMENT,
              "input 0 'x': dtype i64, expected f32");
  int64_t bad_shape[2] = {3, 2};
  kiln_tensor* bad = NULL;
  CHECK(kiln_tensor_wrap(x, KILN_F32, bad_shape, 2, &bad) == NULL);
  const kiln_tensor* bad_in[2] = {bad, tk};
  ExpectError(kiln_context_invoke(ctx, "main", bad_in, 2, out, 4, &n, 0), KILN_INVALID_ARGUMENT,
              "dim 1 is 2, expected 3");
  const kiln_tensor* null_in[2] = {tx, NULL};
  ExpectError(kiln_context_invoke(ctx, "main", null_in, 2, out, 4, &n, 0), KILN_INVALID_ARGUMENT,
              "input 1 is null");
  ExpectError(kiln_context_invoke(ctx, "nope", in, 2, out, 4, &n, 0), KILN_NOT_FOUND,
              "no function named 'nope'");
  ExpectError(kiln_context_invoke(ctx, "spin", NULL, 0, out, 4, &n, 50), KILN_DEADLINE_EXCEEDED,
              "in 'spin' at pc 1 (goto)");
  ExpectError(kiln_context_invoke(ctx, "fail", NULL, 0, out, 4, &n, 0), KILN_ABORTED,
              "fail was called");
  kiln_tensor_free(bad);
  kiln_tensor_free(tx);
  kiln_tensor_free(tk);
}

static void TestNullsAndBadTensors(void) {
  kiln_executable* exe = (kiln_executable*)1; /* must be overwritten */
  kiln_context* ctx = NULL;
  kiln_tensor* t = NULL;
  size_t n = 0;
  int64_t shape[1] = {-4};
  ExpectError(kiln_executable_load_file(NULL, &exe), KILN_INVALID_ARGUMENT, "path is null");
  ExpectError(kiln_executable_load_file("tests/embed/missing.kiln", &exe), KILN_NOT_FOUND, "no such file");
  CHECK(exe == NULL);
  ExpectError(kiln_executable_load_bytes("garbage!garbage!", 16, &exe), KILN_INVALID_FORMAT,
              "wrong file identifier 'garb'");
  ExpectError(kiln_context_create(NULL, &ctx), KILN_INVALID_ARGUMENT, "executable is null");
  ExpectError(kiln_context_invoke(NULL, "main", NULL, 0, NULL, 0, &n, 0), KILN_INVALID_ARGUMENT,
              "context is null");
  ExpectError(kiln_tensor_wrap(NULL, KILN_F32, shape, 1, &t), KILN_INVALID_ARGUMENT, "negative");
  ExpectError(kiln_tensor_create((kiln_dtype)77, NULL, 0, &t), KILN_INVALID_ARGUMENT, "invalid dtype 77");
  shape[0] = 4;
  ExpectError(kiln_tensor_wrap(NULL, KILN_F32, shape, 1, &t), KILN_INVALID_ARGUMENT, "data is null");
  ExpectError(kiln_tensor_create(KILN_F32, shape, 9, &t), KILN_UNSUPPORTED, "rank 9");
  CHECK(kiln_tensor_create(KILN_I32, shape, 1, &t) == NULL);
  CHECK(kiln_tensor_dtype(t) == KILN_I32);
  CHECK(((int32_t*)kiln_tensor_data(t))[3] == 0);
  kiln_tensor_free(t);
  CHECK(kiln_tensor_create(KILN_U64, shape, 1, &t) == NULL);
  CHECK(kiln_tensor_dtype(t) == KILN_U64 && ((uint64_t*)kiln_tensor_data(t))[3] == 0);
  kiln_tensor_free(t);
  CHECK(kiln_executable_num_functions(NULL) == -1);
  CHECK(kiln_tensor_rank(NULL) == -1);
  CHECK(kiln_tensor_dtype(NULL) == KILN_DTYPE_INVALID);
  CHECK(kiln_status_get_code(NULL) == KILN_OK && strcmp(kiln_status_message(NULL), "") == 0);
  kiln_executable_free(NULL);
  kiln_context_free(NULL);
  kiln_tensor_free(NULL);
  kiln_status_free(NULL);
}

/* The runtime API: load and run through a runtime, contexts outliving it, bad options. */
static void TestRuntime(void) {
  kiln_runtime* rt = NULL;
  kiln_executable* exe = NULL;
  kiln_context* ctx = NULL;
  kiln_runtime_stats stats;
  CHECK(kiln_runtime_create(NULL, &rt) == NULL);
  CHECK(kiln_runtime_load_file(rt, FixturePath(), &exe) == NULL);
  CHECK(kiln_runtime_context_create(rt, exe, &ctx) == NULL);
  /* Warm-up at n = 2 (one call on zeros); the dims are checked against the signature. */
  const char* names[2] = {"n", "m"};
  int64_t values[2] = {2, 5};
  CHECK(kiln_runtime_warmup(rt, exe, NULL, names, values, 1) == NULL);
  ExpectError(kiln_runtime_warmup(rt, exe, "", names, values, 0), KILN_INVALID_ARGUMENT,
              "no value for 'n'");
  ExpectError(kiln_runtime_warmup(rt, exe, NULL, names, values, 2), KILN_INVALID_ARGUMENT, "'m'");
  ExpectError(kiln_runtime_warmup(rt, exe, "nope", names, values, 1), KILN_NOT_FOUND, "nope");
  ExpectError(kiln_runtime_warmup(rt, NULL, NULL, names, values, 1), KILN_INVALID_ARGUMENT,
              "executable");
  kiln_runtime_get_stats(rt, &stats);
  CHECK(stats.jit_compilations == 0); /* the fixture has no kernels */
  kiln_executable_free(exe);
  kiln_runtime_free(rt); /* the context keeps what it needs alive */
  if (ctx != NULL) TestInvoke(ctx);
  kiln_context_free(ctx);

  kiln_runtime_options options;
  memset(&options, 0, sizeof(options));
  options.num_threads = -1;
  rt = NULL;
  ExpectError(kiln_runtime_create(&options, &rt), KILN_INVALID_ARGUMENT, "num_threads = -1");
  CHECK(rt == NULL);
  /* The JIT cache: "off", or a directory that cannot be created (one warning, no error). */
  options.num_threads = 1;
  options.jit_cache = "off";
  options.jit_cache_bytes = 1 << 20;
  CHECK(kiln_runtime_create(&options, &rt) == NULL);
  kiln_runtime_free(rt);
  rt = NULL;
  options.jit_cache = "/proc/kiln_cannot_create_this";
  CHECK(kiln_runtime_create(&options, &rt) == NULL);
  kiln_runtime_free(rt);
  rt = NULL;
  options.jit_cache = NULL;
  const char* plugins[1] = {"/nonexistent/libvendor.so"};
  options.num_threads = 1;
  options.plugins = plugins;
  options.num_plugins = 1;
  ExpectError(kiln_runtime_create(&options, &rt), KILN_NOT_FOUND, "/nonexistent/libvendor.so");
  ExpectError(kiln_runtime_load_file(NULL, FixturePath(), &exe), KILN_INVALID_ARGUMENT, "runtime");
  kiln_runtime_get_stats(NULL, &stats);
  CHECK(stats.jit_compilations == 0 && stats.generic_calls == 0);
}

/* Runs x + x (x = [1, -2, 4]) in `path` through a fresh runtime with no JIT cache (so every
 * count is this call's); *stats gets the runtime's JIT counters after the call. */
static void RunJitFixture(const char* path, kiln_jit_stats* stats) {
  kiln_runtime_options options;
  kiln_runtime* rt = NULL;
  kiln_executable* exe = NULL;
  kiln_context* ctx = NULL;
  float x[3] = {1, -2, 4};
  int64_t shape[1] = {3};
  kiln_tensor *tx = NULL, *out[1] = {NULL};
  size_t n = 0;
  memset(&options, 0, sizeof(options));
  memset(stats, 0, sizeof(*stats));
  options.num_threads = 1;
  options.jit_cache = "off";
  CHECK(kiln_runtime_create(&options, &rt) == NULL);
  CHECK(kiln_runtime_load_file(rt, path, &exe) == NULL);
  CHECK(kiln_runtime_context_create(rt, exe, &ctx) == NULL);
  CHECK(kiln_tensor_wrap(x, KILN_F32, shape, 1, &tx) == NULL);
  const kiln_tensor* in[1] = {tx};
  CHECK(kiln_context_invoke(ctx, "main", in, 1, out, 1, &n, 0) == NULL);
  CHECK(n == 1);
  if (n == 1) {
    const float* y = (const float*)kiln_tensor_data(out[0]);
    CHECK(y[0] == 2 && y[1] == -4 && y[2] == 8);
    kiln_tensor_free(out[0]);
  }
  kiln_runtime_get_jit_stats(rt, stats);
  kiln_tensor_free(tx);
  kiln_context_free(ctx);
  kiln_executable_free(exe);
  kiln_runtime_free(rt);
}

/* The JIT counters: a kernel compiled on first use, or linked from code compiled ahead of time
 * with nothing compiled. */
static void TestJitStats(void) {
  kiln_jit_stats jit, aot;
  RunJitFixture("tests/embed/c_api_jit.kiln", &jit);
  CHECK(jit.compilations == 1 && jit.fast_compilations == 1); /* the first tier */
  CHECK(jit.aot_linked == 0 && jit.failures == 0 && jit.object_cache_hits == 0);
  CHECK(jit.variant_requests >= 1 && jit.generic_calls == 1 && jit.specialized_calls == 0);
  CHECK(jit.kernels_alive >= 1 && jit.compile_seconds > 0);
  RunJitFixture("tests/embed/c_api_jit_aot.kiln", &aot);
  CHECK(aot.aot_linked == 1 && aot.aot_link_failures == 0);
  CHECK(aot.compilations == 0 && aot.fast_compilations == 0 && aot.variant_requests == 0);
  CHECK(aot.generic_calls == 1);
  kiln_runtime_get_jit_stats(NULL, &aot);
  CHECK(aot.aot_linked == 0 && aot.compilations == 0);
}

/* Loads tests/embed/c_api_tuned.kiln (a region of the unregistered vendor "acme" that
 * `kiln compile --tune` gave to its fallback) through a runtime with the given load policy,
 * with stderr (the load's notice) captured into `notice`; runs x + x when it loaded and
 * checks the answer. Returns the load's status. */
static kiln_status* LoadTuned(int require_vendor, int ignore_tuned, char* notice, size_t cap) {
  kiln_runtime_options options;
  kiln_runtime* rt = NULL;
  kiln_executable* exe = NULL;
  kiln_status* status;
  FILE* captured = tmpfile();
  int saved = dup(2);
  size_t got = 0;
  memset(&options, 0, sizeof(options));
  options.num_threads = 1;
  options.jit_cache = "off";
  options.require_vendor = require_vendor;
  options.ignore_tuned_fallback = ignore_tuned;
  CHECK(kiln_runtime_create(&options, &rt) == NULL);
  CHECK(captured != NULL && saved >= 0);
  fflush(stderr);
  if (captured != NULL) dup2(fileno(captured), 2);
  status = kiln_runtime_load_file(rt, "tests/embed/c_api_tuned.kiln", &exe);
  fflush(stderr);
  if (saved >= 0) dup2(saved, 2), close(saved);
  if (captured != NULL) {
    rewind(captured);
    got = fread(notice, 1, cap - 1, captured);
    fclose(captured);
  }
  notice[got] = '\0';
  if (status == NULL) {
    kiln_context* ctx = NULL;
    float x[3] = {1, -2, 4};
    int64_t shape[1] = {3};
    kiln_tensor *tx = NULL, *out[1] = {NULL};
    size_t n = 0;
    CHECK(kiln_runtime_context_create(rt, exe, &ctx) == NULL);
    CHECK(kiln_tensor_wrap(x, KILN_F32, shape, 1, &tx) == NULL);
    const kiln_tensor* in[1] = {tx};
    CHECK(kiln_context_invoke(ctx, "main", in, 1, out, 1, &n, 0) == NULL);
    CHECK(n == 1);
    if (n == 1) {
      const float* y = (const float*)kiln_tensor_data(out[0]);
      CHECK(y[0] == 2 && y[1] == -4 && y[2] == 8);
      kiln_tensor_free(out[0]);
    }
    kiln_tensor_free(tx);
    kiln_context_free(ctx);
  }
  kiln_executable_free(exe);
  kiln_runtime_free(rt);
  return status;
}

/* Checks that `text` contains `part`. */
static void ExpectIn(const char* text, const char* part) {
  if (strstr(text, part) != NULL) {
    ++g_passed;
  } else {
    ++g_failed;
    fprintf(stderr, "'%s' lacks '%s'\n", text, part);
  }
}

/* The load policy's options reach the loader: by default the tuned region runs its fallback
 * (the tune's notice); ignore_tuned_fallback asks for the vendor, absent here, so the region
 * falls back for that reason instead; require_vendor makes the absence an error. */
static void TestLoadPolicy(void) {
  char notice[4096];
  kiln_status* s = LoadTuned(0, 0, notice, sizeof(notice));
  CHECK(s == NULL);
  kiln_status_free(s);
  ExpectIn(notice, "--tune` measured them faster: acme_0 (fallback 0.5x the region)");
  CHECK(strstr(notice, "no runtime is registered") == NULL);
  s = LoadTuned(0, 1, notice, sizeof(notice));
  CHECK(s == NULL);
  kiln_status_free(s);
  ExpectIn(notice, "no runtime is registered for vendor 'acme'");
  CHECK(strstr(notice, "measured them faster") == NULL);
  ExpectError(LoadTuned(1, 0, notice, sizeof(notice)), KILN_NOT_FOUND,
              "no runtime is registered for vendor 'acme'; the vendor is required");
}

/* kiln_executable_load_bytes and kiln_runtime_load_bytes on a valid executable: same signature,
 * same answers, and the bytes may be freed as soon as the call returns. */
static void TestLoadBytes(void) {
  void* block = NULL;
  size_t size = 0;
  const void* bytes = ReadFixture(&block, &size);
  kiln_executable* exe = NULL;
  kiln_context* ctx = NULL;
  kiln_runtime* rt = NULL;
  CHECK(bytes != NULL);
  if (bytes == NULL) return;
  CHECK(kiln_executable_load_bytes(bytes, size, &exe) == NULL);
  CHECK(kiln_runtime_create(NULL, &rt) == NULL);
  kiln_executable* rt_exe = NULL;
  CHECK(kiln_runtime_load_bytes(rt, bytes, size, &rt_exe) == NULL);
  kiln_executable* bad = NULL; /* not rt_exe: a failed load overwrites *out with NULL */
  ExpectError(kiln_runtime_load_bytes(NULL, bytes, size, &bad), KILN_INVALID_ARGUMENT, "runtime");
  bad = (kiln_executable*)1;
  ExpectError(kiln_runtime_load_bytes(rt, bytes, size / 2, &bad), KILN_INVALID_FORMAT, "");
  CHECK(bad == NULL);
  memset(block, 0, size + 1); /* neither executable refers to the bytes after loading */
  free(block);
  if (exe != NULL) {
    TestSignature(exe);
    CHECK(kiln_context_create(exe, &ctx) == NULL);
    kiln_executable_free(exe);
    if (ctx != NULL) TestInvoke(ctx);
    kiln_context_free(ctx);
  }
  if (rt_exe != NULL) {
    ctx = NULL;
    TestSignature(rt_exe);
    CHECK(kiln_runtime_context_create(rt, rt_exe, &ctx) == NULL);
    kiln_executable_free(rt_exe);
    if (ctx != NULL) TestInvoke(ctx);
    kiln_context_free(ctx);
  }
  kiln_runtime_free(rt);
}

int main(void) {
  kiln_executable* exe = NULL;
  kiln_context* ctx = NULL;
  kiln_status* s = kiln_executable_load_file(FixturePath(), &exe);
  if (s != NULL) {
    fprintf(stderr, "load: %s\n", kiln_status_message(s));
    return 1;
  }
  TestSignature(exe);
  CHECK(kiln_context_create(exe, &ctx) == NULL);
  kiln_executable_free(exe); /* the context keeps it alive */
  TestInvoke(ctx);
  kiln_context_free(ctx);
  TestNullsAndBadTensors();
  TestRuntime();
  TestJitStats();
  TestLoadPolicy();
  TestLoadBytes();
  printf("%d checks passed, %d failed\n", g_passed, g_failed);
  return g_failed == 0 ? 0 : 1;
}
