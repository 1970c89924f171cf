// Gives libgomp kiln's OpenMP wait default (embed/omp_wait.h) in an executable that links this
// file, by answering libgomp's getenv("GOMP_SPINCOUNT") when the user set no wait variable.
//
// Why getenv: libgomp reads OMP_WAIT_POLICY / GOMP_SPINCOUNT once, in its own constructor, and
// the dynamic loader runs a library's constructors before those of the program that needs it,
// so no constructor or Runtime call of kiln's is early enough to setenv. (An executable's
// .preinit_array runs earlier, but libc then resets `environ` to the process's initial
// environment before libgomp reads it.) A getenv defined in the executable interposes on
// libc's for every shared library, libgomp included; this one is libc's (a scan of `environ`)
// except for that one answer. The linker cannot give a shared object's definition precedence,
// so this target is for executables; the python package sets the variable in its __init__.py
// before it loads its extension. libgomp 12 calls getenv for each variable; omp_wait_test checks
// that libgomp really runs with the value, so a libgomp that reads `environ` itself is noticed.
#include <cstring>

#include "embed/omp_wait.h"

extern char** environ;

namespace {

// libc's getenv: the value of the first `name=value` entry of `environ`, else nullptr.
char* FindInEnviron(const char* name) {
  if (environ == nullptr || name == nullptr) return nullptr;
  size_t n = std::strlen(name);
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, name, n) == 0 && (*e)[n] == '=') return *e + n + 1;
  }
  return nullptr;
}

// Whether `name` is the variable kiln answers. Null-safe here, outside getenv, whose parameter
// libc declares nonnull (a test of it there is -Wnonnull-compare, and may be folded away).
bool IsSpinCount(const char* name) {
  return name != nullptr && std::strcmp(name, "GOMP_SPINCOUNT") == 0;
}

}  // namespace

extern "C" char* getenv(const char* name) noexcept {
  char* value = FindInEnviron(name);
  if (value != nullptr || !IsSpinCount(name)) return value;
  const char* kiln = kiln::OmpSpinCountToSet(FindInEnviron);
  if (kiln == nullptr) return nullptr;
  kiln::internal::NoteOmpWaitDefaultRead();
  return const_cast<char*>(kiln);
}
