// kiln_serve: serves .kiln models over the KServe v2 REST protocol until SIGINT or SIGTERM.
//
//   kiln_serve --model NAME=FILE.kiln [--model ...] [--host 127.0.0.1] [--port 8000]
//              [--workers N] [--io-threads N] [--max-body-bytes N] [--timeout-ms N]
//              [--max-queue N] [--invoke-timeout-ms N] [--plugin LIB.so ...]
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "examples/serving/model_repository.h"
#include "examples/serving/server.h"

namespace {

using kiln::serving::ServerOptions;

constexpr char kUsage[] =
    "usage: kiln_serve --model NAME=FILE.kiln [--model ...] [--host ADDR] [--port N]\n"
    "                  [--workers N] [--io-threads N] [--max-body-bytes N] [--timeout-ms N]\n"
    "                  [--max-queue N] [--invoke-timeout-ms N] [--plugin LIB.so]\n";

bool ParseInt(const char* s, int64_t lo, int64_t hi, int64_t* out) {
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

struct Flags {
  std::vector<kiln::serving::ModelSource> models;
  std::vector<std::string> plugins;
  ServerOptions server;
};

// Returns an error message, or "" on success.
std::string ParseFlags(int argc, char** argv, Flags* flags) {
  flags->server.workers = std::max(1u, std::thread::hardware_concurrency());
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") return "help";
    if (i + 1 >= argc) return "missing value for " + flag;
    const char* value = argv[++i];
    int64_t n = 0;
    auto number = [&](int64_t lo, int64_t hi) { return ParseInt(value, lo, hi, &n); };
    if (flag == "--model") {
      auto source = kiln::serving::ParseModelFlag(value);
      if (!source.ok()) return source.status().message();
      flags->models.push_back(*source);
    } else if (flag == "--plugin") {
      flags->plugins.push_back(value);
    } else if (flag == "--host") {
      flags->server.host = value;
    } else if (flag == "--port" && number(0, 65535)) {
      flags->server.port = static_cast<int>(n);
    } else if (flag == "--workers" && number(1, 1024)) {
      flags->server.workers = static_cast<int>(n);
    } else if (flag == "--io-threads" && number(1, 1024)) {
      flags->server.io_threads = static_cast<int>(n);
    } else if (flag == "--max-body-bytes" && number(1, int64_t{1} << 40)) {
      flags->server.max_body_bytes = static_cast<size_t>(n);
    } else if (flag == "--timeout-ms" && number(1, int64_t{1} << 40)) {
      flags->server.timeout_ms = n;
    } else if (flag == "--max-queue" && number(0, int64_t{1} << 30)) {
      flags->server.max_queue = static_cast<size_t>(n);
    } else if (flag == "--invoke-timeout-ms" && number(0, int64_t{1} << 40)) {
      flags->server.invoke_timeout_ms = n;
    } else {
      return "bad flag or value: " + flag + " " + value;
    }
  }
  if (flags->models.empty()) return "at least one --model NAME=FILE is required";
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  if (std::string error = ParseFlags(argc, argv, &flags); !error.empty()) {
    if (error != "help") std::fprintf(stderr, "kiln_serve: %s\n", error.c_str());
    std::fputs(kUsage, error == "help" ? stdout : stderr);
    return error == "help" ? 0 : 2;
  }

  // (1) Block SIGINT/SIGTERM before any thread starts, so every thread inherits the mask and
  // the main thread alone receives them (sigwait below): no async-signal-safety concerns.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  // (2) Load and verify every model once; workers share the executables.
  auto options = kiln::serving::MakeJitLoadOptions(flags.plugins);
  if (!options.ok()) {
    std::fprintf(stderr, "kiln_serve: %s\n", options.status().ToString().c_str());
    return 1;
  }
  auto repo = kiln::serving::ModelRepository::Load(flags.models, *options);
  if (!repo.ok()) {
    std::fprintf(stderr, "kiln_serve: %s\n", repo.status().ToString().c_str());
    return 1;
  }

  // (3) Listen and serve.
  auto server = kiln::serving::Server::Start(*repo, flags.server);
  if (!server.ok()) {
    std::fprintf(stderr, "kiln_serve: %s\n", server.status().ToString().c_str());
    return 1;
  }
  std::printf("kiln_serve: %zu model(s) on http://%s:%d (%d workers, queue %zu)\n",
              (*repo)->models().size(), flags.server.host.c_str(), (*server)->port(),
              flags.server.workers, flags.server.max_queue);
  std::fflush(stdout);

  // (4) Wait for a signal, then shut down gracefully.
  int sig = 0;
  sigwait(&signals, &sig);
  std::printf("kiln_serve: signal %d, shutting down\n", sig);
  std::fflush(stdout);
  (*server)->Stop();
  auto stats = (*server)->stats();
  std::printf("kiln_serve: served %llu requests (%llu inferences, %llu rejected as overloaded)\n",
              static_cast<unsigned long long>(stats.requests),
              static_cast<unsigned long long>(stats.infer_ok),
              static_cast<unsigned long long>(stats.rejected));
  return 0;
}
