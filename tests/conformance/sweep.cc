// sweep: runs ONNX backend node tests through kiln and reports each one, the totals and the most
// common failure reasons; --write-list writes the passing names (tests/conformance/
// expected_pass.txt is made this way).
//
// Tests run in forked worker processes that share one JIT engine across the tests they run. A
// test that crashes its worker or runs past --timeout is reported as such, and a fresh worker
// takes over the rest: no single test can take the sweep down.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tests/conformance/runner.h"

namespace kiln::conformance {
namespace {

constexpr char kUsage[] =
    "usage: sweep [--data DIR] [--jobs N] [--timeout SECONDS] [--filter TEXT]\n"
    "             [--external onednn|none] [--write-list PATH] [--out-of-scope PATH]\n"
    "             [--quiet] [TEST...]\n"
    "Runs the ONNX node tests in DIR (default $KILN_ONNX_TESTDATA, else\n"
    "/usr/share/libonnx-testdata/data/node): all of them, those named, or those whose name\n"
    "contains TEXT. Prints one line per test, the failure reasons by frequency and\n"
    "'N passed, M failed of T'. --jobs runs N worker processes (default 1); --timeout bounds\n"
    "each test, compile included (default 120 s). --write-list writes the sorted names of the\n"
    "passing tests (relative paths are taken from the workspace under `bazel run`). --external\n"
    "picks the compiler's external compiler (default: its default). --out-of-scope also\n"
    "counts the tests not named in PATH (tests/conformance/out_of_scope.txt: issue 18's\n"
    "scope). --quiet prints only failures.\n";

using Clock = std::chrono::steady_clock;

struct Args {
  std::string data = TestDataDir();
  std::string write_list, filter, external, out_of_scope;
  std::vector<std::string> tests;
  int jobs = 1;
  double timeout_s = 120;
  bool quiet = false;
};

enum class Outcome { kPending, kPass, kFail, kCrash, kTimeout };

struct Result {
  Outcome outcome = Outcome::kPending;
  std::string reason;
  double seconds = 0;
};

// A forked child running tests: it reads test indices (one per line) and writes back
// "index passed seconds reason" lines. Its stdout and stderr come back through `err_fd`.
struct Worker {
  pid_t pid = -1;
  int to_child = -1, from_child = -1, err_fd = -1;
  std::string in, err_tail;
  int current = -1;  // index of the test it is running, -1 if idle
  Clock::time_point started;
};

bool WriteAll(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// The child's side: one Runner (one JIT engine) for every test it is given.
[[noreturn]] void WorkerMain(int in_fd, int out_fd, const Args& args,
                             const std::vector<std::string>& tests) {
  RunnerOptions options;
  options.external = args.external;
  StatusOr<std::unique_ptr<Runner>> runner = Runner::Create(options);
  if (!runner.ok()) {
    std::fprintf(stderr, "cannot create the runner: %s\n", runner.status().ToString().c_str());
    _exit(3);
  }
  // Self-test hooks (sweep_test.sh): make the named test crash or hang its worker.
  const char* crash = std::getenv("KILN_SWEEP_SELFTEST_CRASH");
  const char* hang = std::getenv("KILN_SWEEP_SELFTEST_HANG");
  FILE* in = ::fdopen(in_fd, "r");
  char line[64];
  while (in != nullptr && std::fgets(line, sizeof(line), in) != nullptr) {
    int index = std::atoi(line);
    if (index < 0 || static_cast<size_t>(index) >= tests.size()) break;
    if (crash != nullptr && tests[index] == crash) {
      std::fprintf(stderr, "self-test: crashing on %s\n", crash);
      std::fflush(stderr);
      ::raise(SIGSEGV);
    }
    while (hang != nullptr && tests[index] == hang) ::pause();
    TestResult r = (*runner)->Run(args.data + "/" + tests[index]);
    char head[64];
    std::snprintf(head, sizeof(head), "%d %d %.3f ", index, r.passed ? 1 : 0, r.seconds);
    if (!WriteAll(out_fd, head + OneLine(r.reason) + "\n")) break;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  _exit(0);
}

Status StartWorker(Worker* w, const Args& args, const std::vector<std::string>& tests) {
  int to[2], from[2], err[2];
  if (::pipe(to) != 0 || ::pipe(from) != 0 || ::pipe(err) != 0) {
    return Internal(std::string("pipe: ") + std::strerror(errno));
  }
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = ::fork();
  if (pid < 0) return Internal(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::close(to[1]);
    ::close(from[0]);
    ::close(err[0]);
    ::dup2(err[1], STDOUT_FILENO);
    ::dup2(err[1], STDERR_FILENO);
    // Close every other descriptor, the pipes of the other workers above all: a copy of
    // another worker's input pipe here would keep that worker from ever seeing EOF.
    for (int fd = 3; fd < 4096; ++fd) {
      if (fd != to[0] && fd != from[1]) ::close(fd);
    }
    WorkerMain(to[0], from[1], args, tests);
  }
  ::close(to[0]);
  ::close(from[1]);
  ::close(err[1]);
  *w = Worker();
  w->pid = pid;
  w->to_child = to[1];
  w->from_child = from[0];
  w->err_fd = err[0];
  return Status::Ok();
}

void CloseWorker(Worker* w) {
  for (int* fd : {&w->to_child, &w->from_child, &w->err_fd}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
}

// What a dead worker printed that says most: a sanitizer's "ERROR:" line if there is one
// (its last line is only "ABORTING"), else the last non-empty line (an assertion, say).
std::string LastLine(const std::string& text) {
  size_t error = text.find("ERROR: ");
  if (error != std::string::npos) {
    size_t begin = text.rfind('\n', error);
    begin = begin == std::string::npos ? 0 : begin + 1;
    return text.substr(begin, text.find('\n', error) - begin);
  }
  size_t end = text.find_last_not_of("\n ");
  if (end == std::string::npos) return "";
  size_t begin = text.rfind('\n', end);
  begin = begin == std::string::npos ? 0 : begin + 1;
  return text.substr(begin, end - begin + 1);
}

// How a worker ended, for the test it was running.
std::string DescribeExit(int status) {
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return "killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  if (WIFEXITED(status)) return "worker exited with code " + std::to_string(WEXITSTATUS(status));
  return "worker ended";
}

class Sweep {
 public:
  Sweep(const Args& args, std::vector<std::string> tests)
      : args_(args), tests_(std::move(tests)), results_(tests_.size()) {}

  Status Run() {
    workers_.resize(std::max(1, std::min<int>(args_.jobs, static_cast<int>(tests_.size()))));
    for (Worker& w : workers_) RETURN_IF_ERROR(StartWorker(&w, args_, tests_));
    while (done_ < tests_.size()) {
      for (Worker& w : workers_) RETURN_IF_ERROR(Feed(&w));
      RETURN_IF_ERROR(Wait());
    }
    for (Worker& w : workers_) {
      CloseWorker(&w);  // EOF on its input: the child exits
      int status;
      if (w.pid > 0) ::waitpid(w.pid, &status, 0);
    }
    return Status::Ok();
  }

  const std::vector<Result>& results() const { return results_; }
  const std::vector<std::string>& tests() const { return tests_; }

 private:
  // Gives an idle worker the next test (restarting it first if it died).
  Status Feed(Worker* w) {
    if (w->current >= 0 || next_ >= tests_.size()) return Status::Ok();
    if (w->pid < 0) RETURN_IF_ERROR(StartWorker(w, args_, tests_));
    w->current = static_cast<int>(next_++);
    w->started = Clock::now();
    w->err_tail.clear();
    if (!WriteAll(w->to_child, std::to_string(w->current) + "\n")) Reap(w, Outcome::kCrash, "");
    return Status::Ok();
  }

  // Waits for output from any worker or for the first running test's deadline.
  Status Wait() {
    std::vector<pollfd> fds;
    std::vector<std::pair<Worker*, bool>> owners;  // (worker, is its result pipe)
    int timeout_ms = 1000;
    auto now = Clock::now();
    for (Worker& w : workers_) {
      if (w.pid < 0) continue;
      fds.push_back({w.from_child, POLLIN, 0});
      owners.push_back({&w, true});
      fds.push_back({w.err_fd, POLLIN, 0});
      owners.push_back({&w, false});
      if (w.current >= 0) {
        double left = args_.timeout_s - std::chrono::duration<double>(now - w.started).count();
        timeout_ms = std::min(timeout_ms, std::max(0, static_cast<int>(left * 1000) + 1));
      }
    }
    int n = ::poll(fds.data(), fds.size(), timeout_ms);
    if (n < 0 && errno != EINTR) return Internal(std::string("poll: ") + std::strerror(errno));
    for (size_t i = 0; n > 0 && i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      Worker* w = owners[i].first;
      if (w->pid < 0) continue;  // reaped earlier in this loop
      char buf[4096];
      ssize_t got = ::read(fds[i].fd, buf, sizeof(buf));
      if (owners[i].second) {
        if (got <= 0) {
          Reap(w, Outcome::kCrash, "");
          continue;
        }
        w->in.append(buf, static_cast<size_t>(got));
        TakeResults(w);
      } else if (got > 0) {
        w->err_tail.append(buf, static_cast<size_t>(got));
        if (w->err_tail.size() > 8192) w->err_tail.erase(0, w->err_tail.size() - 4096);
      }
    }
    now = Clock::now();
    for (Worker& w : workers_) {
      if (w.pid >= 0 && w.current >= 0 &&
          std::chrono::duration<double>(now - w.started).count() > args_.timeout_s) {
        ::kill(w.pid, SIGKILL);
        Reap(&w, Outcome::kTimeout, "");
      }
    }
    return Status::Ok();
  }

  // Parses complete result lines from a worker.
  void TakeResults(Worker* w) {
    size_t eol;
    while ((eol = w->in.find('\n')) != std::string::npos) {
      std::string line = w->in.substr(0, eol);
      w->in.erase(0, eol + 1);
      int index = -1, passed = 0, consumed = 0;
      double seconds = 0;
      if (std::sscanf(line.c_str(), "%d %d %lf %n", &index, &passed, &seconds, &consumed) < 3 ||
          index != w->current) {
        continue;  // not a result line: cannot happen unless the child is broken
      }
      Record(index, passed ? Outcome::kPass : Outcome::kFail, line.substr(consumed), seconds);
      w->current = -1;
    }
  }

  // A worker ended (crash, or killed at its deadline): its test gets `outcome`.
  void Reap(Worker* w, Outcome outcome, const std::string& why) {
    int status = 0;
    if (outcome != Outcome::kTimeout) {
      // Drain what it printed last, for the reason.
      char buf[4096];
      ssize_t got;
      while ((got = ::read(w->err_fd, buf, sizeof(buf))) > 0) {
        w->err_tail.append(buf, static_cast<size_t>(got));
      }
    }
    ::waitpid(w->pid, &status, 0);
    if (w->current >= 0) {
      double seconds = std::chrono::duration<double>(Clock::now() - w->started).count();
      std::string reason =
          outcome == Outcome::kTimeout
              ? "no result after " + std::to_string(static_cast<int>(args_.timeout_s)) + " s"
              : DescribeExit(status);
      std::string last = LastLine(w->err_tail);
      if (!last.empty()) reason += "; last output: " + OneLine(last);
      Record(w->current, outcome, why + reason, seconds);
    }
    CloseWorker(w);
    w->pid = -1;
    w->current = -1;
  }

  void Record(int index, Outcome outcome, const std::string& reason, double seconds) {
    results_[index] = {outcome, reason, seconds};
    ++done_;
    static const char* kTag[] = {"?", "PASS", "FAIL", "CRASH", "TIMEOUT"};
    if (outcome == Outcome::kPass && args_.quiet) return;
    std::printf("[%zu/%zu] %s %s (%.2f s)%s%s\n", done_, tests_.size(),
                kTag[static_cast<int>(outcome)], tests_[index].c_str(), seconds,
                reason.empty() ? "" : ": ", reason.c_str());
    std::fflush(stdout);
  }

  const Args& args_;
  std::vector<std::string> tests_;
  std::vector<Result> results_;
  std::vector<Worker> workers_;
  size_t next_ = 0, done_ = 0;
};

// The reason with test-specific details cut, so failures group: quoted names become '_',
// "test_data_set_3" becomes "test_data_set_N", numbers after "values differ" go.
std::string ReasonKey(const std::string& reason) {
  std::string key;
  bool quoted = false;
  for (char c : reason) {
    if (c == '\'') {
      if (!quoted) key += "'_'";
      quoted = !quoted;
    } else if (!quoted) {
      key += c;
    }
  }
  size_t colon = key.find(':');
  if (key.compare(0, 14, "test_data_set_") == 0 && colon != std::string::npos) {
    key = "test_data_set_N" + key.substr(colon);
  }
  size_t differ = key.find(" values differ");
  if (differ != std::string::npos) {
    key = key.substr(0, key.rfind(':', differ) + 1) + " values differ";
  }
  return key.substr(0, 110);
}

// "in scope: P passed of T" over the tests not named in the out-of-scope list.
Status PrintInScope(const Sweep& sweep, const std::string& list) {
  ASSIGN_OR_RETURN(std::vector<std::string> excluded, ReadTestList(list));
  std::set<std::string> out(excluded.begin(), excluded.end());
  int passed = 0, total = 0;
  for (size_t i = 0; i < sweep.tests().size(); ++i) {
    if (out.count(sweep.tests()[i])) continue;
    ++total;
    passed += sweep.results()[i].outcome == Outcome::kPass ? 1 : 0;
  }
  std::printf("in scope (all but the tests %s names): %d passed, %d failed of %d\n",
              list.c_str(), passed, total - passed, total);
  return Status::Ok();
}

void PrintSummary(const Sweep& sweep) {
  const std::vector<Result>& results = sweep.results();
  int passed = 0, failed = 0, crashed = 0, timed_out = 0;
  std::map<std::string, int> reasons;
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    if (r.outcome == Outcome::kPass) {
      ++passed;
      continue;
    }
    ++failed;
    if (r.outcome == Outcome::kCrash) ++crashed;
    if (r.outcome == Outcome::kTimeout) ++timed_out;
    ++reasons[r.outcome == Outcome::kFail    ? ReasonKey(r.reason)
              : r.outcome == Outcome::kCrash ? "CRASH"
                                             : "TIMEOUT"];
  }
  std::vector<std::pair<int, std::string>> by_count;
  for (const auto& [key, count] : reasons) by_count.push_back({count, key});
  std::sort(by_count.rbegin(), by_count.rend());
  if (!by_count.empty()) std::printf("\nfailure reasons (most common first):\n");
  for (size_t i = 0; i < by_count.size() && i < 40; ++i) {
    std::printf("%5d  %s\n", by_count[i].first, by_count[i].second.c_str());
  }
  if (crashed + timed_out > 0) {
    std::printf("\ncrashed or timed out:\n");
    for (size_t i = 0; i < results.size(); ++i) {
      if (results[i].outcome == Outcome::kCrash || results[i].outcome == Outcome::kTimeout) {
        std::printf("  %s: %s\n", sweep.tests()[i].c_str(), results[i].reason.c_str());
      }
    }
  }
  std::printf("\n%d crashed, %d timed out\n", crashed, timed_out);
  std::printf("%d passed, %d failed of %zu\n", passed, failed, results.size());
}

Status WriteList(const std::string& path, const Sweep& sweep) {
  std::vector<std::string> names;
  for (size_t i = 0; i < sweep.tests().size(); ++i) {
    if (sweep.results()[i].outcome == Outcome::kPass) names.push_back(sweep.tests()[i]);
  }
  std::sort(names.begin(), names.end());
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    return InvalidArgument(path + ": cannot open for writing: " + std::strerror(errno));
  }
  std::fprintf(f,
               "# ONNX backend node tests kiln passes (libonnx-testdata), one per line.\n"
               "# //tests/conformance:onnx_node_tests runs them all. Regenerate with\n"
               "#   bazel run //tests/conformance:sweep -- --jobs 2 --write-list "
               "tests/conformance/expected_pass.txt\n");
  for (const std::string& n : names) std::fprintf(f, "%s\n", n.c_str());
  if (std::fclose(f) != 0) return Internal(path + ": write failed");
  std::printf("wrote %zu names to %s\n", names.size(), path.c_str());
  return Status::Ok();
}

// Parses argv; returns 0 to go on, else the exit code (after printing why).
int ParseArgs(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    if (s == "--help" || s == "-h") {
      std::fputs(kUsage, stdout);
      return -1;
    }
    bool takes_value = s == "--data" || s == "--jobs" || s == "--timeout" || s == "--external" ||
                       s == "--write-list" || s == "--filter" || s == "--out-of-scope";
    if (takes_value && i + 1 >= argc) {
      std::fprintf(stderr, "sweep: %s needs a value\n", s.c_str());
      return 2;
    }
    if (s == "--data") {
      a->data = argv[++i];
    } else if (s == "--jobs") {
      a->jobs = std::atoi(argv[++i]);
    } else if (s == "--timeout") {
      a->timeout_s = std::atof(argv[++i]);
    } else if (s == "--write-list") {
      a->write_list = argv[++i];
    } else if (s == "--external") {
      a->external = argv[++i];
    } else if (s == "--out-of-scope") {
      a->out_of_scope = argv[++i];
    } else if (s == "--filter") {
      a->filter = argv[++i];
    } else if (s == "--quiet") {
      a->quiet = true;
    } else if (!s.empty() && s[0] == '-') {
      std::fprintf(stderr, "sweep: unknown option '%s'\n%s", s.c_str(), kUsage);
      return 2;
    } else {
      a->tests.push_back(s);
    }
  }
  if (a->jobs < 1 || a->timeout_s <= 0) {
    std::fprintf(stderr, "sweep: --jobs and --timeout want positive numbers\n");
    return 2;
  }
  // Under `bazel run` the working directory is the runfiles tree; a relative list path means
  // the workspace.
  const char* ws = std::getenv("BUILD_WORKSPACE_DIRECTORY");
  for (std::string* path : {&a->write_list, &a->out_of_scope}) {
    if (!path->empty() && (*path)[0] != '/' && ws != nullptr) *path = std::string(ws) + "/" + *path;
  }
  return 0;
}

int Main(int argc, char** argv) {
  Args args;
  if (int code = ParseArgs(argc, argv, &args); code != 0) return code < 0 ? 0 : code;
  ::signal(SIGPIPE, SIG_IGN);  // a worker dying mid-write must not kill the sweep
  StatusOr<std::vector<std::string>> all = ListTests(args.data);
  if (!all.ok()) {
    std::fprintf(stderr, "sweep: %s\n", all.status().ToString().c_str());
    return 1;
  }
  std::vector<std::string> tests;
  for (const std::string& t : *all) {
    bool named = args.tests.empty() ||
                 std::find(args.tests.begin(), args.tests.end(), t) != args.tests.end();
    if (named && t.find(args.filter) != std::string::npos) tests.push_back(t);
  }
  for (const std::string& t : args.tests) {
    if (std::find(all->begin(), all->end(), t) == all->end()) {
      std::fprintf(stderr, "sweep: no test named '%s' in %s\n", t.c_str(), args.data.c_str());
      return 1;
    }
  }
  Sweep sweep(args, std::move(tests));
  Status s = sweep.Run();
  if (!s.ok()) {
    std::fprintf(stderr, "sweep: %s\n", s.ToString().c_str());
    return 1;
  }
  PrintSummary(sweep);
  if (!args.out_of_scope.empty()) {
    Status in_scope = PrintInScope(sweep, args.out_of_scope);
    if (!in_scope.ok()) {
      std::fprintf(stderr, "sweep: %s\n", in_scope.ToString().c_str());
      return 1;
    }
  }
  if (!args.write_list.empty()) {
    Status w = WriteList(args.write_list, sweep);
    if (!w.ok()) {
      std::fprintf(stderr, "sweep: %s\n", w.ToString().c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace
}  // namespace kiln::conformance

int main(int argc, char** argv) { return kiln::conformance::Main(argc, argv); }
