// End-to-end test of the kiln_serve binary: start it on a free port, serve, SIGTERM, clean exit;
// its flags (errors naming the flag, exit 2; help with defaults).
#define BOOST_TEST_MODULE kiln_serve_test
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <thread>
#include <vector>

#include "examples/serving/demo_model.h"
#include "examples/serving/http_client.h"
#include "examples/serving/json.h"

namespace kiln::serving {
namespace {

// A kiln_serve child process with its stdout (and with `with_stderr` its stderr) on a pipe.
struct Child {
  pid_t pid = -1;
  FILE* out = nullptr;
};

Child Spawn(const std::vector<std::string>& args, bool with_stderr = false) {
  int fds[2];
  BOOST_REQUIRE(pipe(fds) == 0);
  Child c;
  c.pid = fork();
  BOOST_REQUIRE(c.pid >= 0);
  if (c.pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    if (with_stderr) dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    close(fds[1]);
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(fds[1]);
  c.out = fdopen(fds[0], "r");
  return c;
}

std::string ReadLine(FILE* f) {
  char buf[512];
  return std::fgets(buf, sizeof(buf), f) ? std::string(buf) : std::string();
}

BOOST_AUTO_TEST_CASE(serves_and_shuts_down_on_sigterm) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string path = std::string(tmp ? tmp : "/tmp") + "/affine.kiln";
  auto bytes = BuildAffineModel();
  BOOST_REQUIRE(bytes.ok());
  BOOST_REQUIRE(WriteBytes(path, *bytes).ok());

  Child child = Spawn({"examples/serving/kiln_serve", "--model", "affine=" + path, "--host",
                       "127.0.0.1", "--port=0", "--workers", "1", "--threads=1"});
  // "kiln_serve: 1 model(s) on http://127.0.0.1:PORT (...)"
  std::string banner = ReadLine(child.out);
  size_t colon = banner.find("127.0.0.1:");
  BOOST_REQUIRE_MESSAGE(colon != std::string::npos, "banner: " << banner);
  int port = std::atoi(banner.c_str() + colon + 10);
  BOOST_REQUIRE(port > 0);

  auto client = HttpClient::Connect("127.0.0.1", port, std::chrono::seconds(30));
  BOOST_REQUIRE_MESSAGE(client.ok(), client.status().ToString());
  auto ready = (*client)->Request("GET", "/v2/health/ready");
  BOOST_REQUIRE(ready.ok());
  BOOST_TEST(ready->status == 200);
  auto infer = (*client)->Request(
      "POST", "/v2/models/affine/infer",
      R"({"inputs":[{"name":"x","shape":[1,4],"datatype":"FP32","data":[1,2,3,4]},)"
      R"({"name":"b","shape":[4],"datatype":"FP32","data":[0.5,0.5,0.5,0.5]}]})");
  BOOST_REQUIRE(infer.ok());
  BOOST_REQUIRE_MESSAGE(infer->status == 200, infer->body);
  auto reply = ParseJson(infer->body);
  BOOST_REQUIRE(reply.ok());
  const Json& s = reply->Find("outputs")->items()[1];
  BOOST_TEST(s.Find("name")->string_value() == "s");
  BOOST_TEST(s.Find("data")->items()[0].double_value() == 10.0);

  // SIGTERM with an idle keep-alive connection open: a prompt, clean exit.
  auto start = std::chrono::steady_clock::now();
  BOOST_REQUIRE(kill(child.pid, SIGTERM) == 0);
  int status = 0;
  BOOST_REQUIRE(waitpid(child.pid, &status, 0) == child.pid);
  // A hang-only bound (a busy 2-core machine makes any tighter one flaky); the order is what is
  // checked: the exit comes after the signal, then the lines below, then the connection closes.
  BOOST_TEST((std::chrono::steady_clock::now() - start < std::chrono::seconds(30)));
  BOOST_TEST(WIFEXITED(status));
  BOOST_TEST(WEXITSTATUS(status) == 0);
  BOOST_TEST(ReadLine(child.out).find("signal 15, shutting down") != std::string::npos);
  BOOST_TEST(ReadLine(child.out).find("served 2 requests (1 inferences") != std::string::npos);
  std::fclose(child.out);
  BOOST_TEST((*client)->WaitForClose(std::chrono::seconds(30)));
}

// Runs kiln_serve to its exit; its exit code and everything it printed.
std::pair<int, std::string> RunToExit(const std::vector<std::string>& args) {
  Child child = Spawn(args, /*with_stderr=*/true);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), child.out)) > 0) out.append(buf, n);
  std::fclose(child.out);
  int status = 0;
  BOOST_REQUIRE(waitpid(child.pid, &status, 0) == child.pid);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

BOOST_AUTO_TEST_CASE(bad_flags_exit_2_naming_the_flag) {
  const std::string serve = "examples/serving/kiln_serve";
  struct Case {
    std::vector<std::string> args;
    std::string message;
  } cases[] = {
      {{serve}, "kiln_serve: at least one --model NAME=FILE is required"},
      {{serve, "--model", "noequals"}, "kiln_serve: --model: wants NAME=FILE, got 'noequals'"},
      {{serve, "--model", "a=b", "--port", "70000"},
       "kiln_serve: --port: wants an integer from 0 to 65535, got '70000'"},
      {{serve, "--model=a=b", "--bogus"}, "kiln_serve: unknown flag --bogus\n"},
      {{serve, "--model", "a=b", "--threads", "-2"}, "kiln_serve: --threads: wants an integer"},
      {{serve, "--model", "a=b", "--workers"}, "kiln_serve: --workers needs a value"},
      {{serve, "--model", "a=b", "--warmup-dims", "seq=9:2"},
       "kiln_serve: --warmup-dims: seq=9:2: HI is below LO"},
  };
  for (const Case& c : cases) {
    auto [code, out] = RunToExit(c.args);
    BOOST_TEST(code == 2, out);
    BOOST_TEST(out.find(c.message) != std::string::npos, out);
    BOOST_TEST(out.find("usage: kiln_serve --model NAME=FILE.kiln") != std::string::npos, out);
  }
}

// --help (anywhere, even after a bad flag) says what each flag does and its default.
BOOST_AUTO_TEST_CASE(help_describes_every_flag_with_its_default) {
  for (std::vector<std::string> args : std::vector<std::vector<std::string>>{
           {"examples/serving/kiln_serve", "--help"},
           {"examples/serving/kiln_serve", "--model", "a=b", "--bogus", "-h"}}) {
    auto [code, out] = RunToExit(args);
    BOOST_TEST(code == 0, out);
    for (const char* part :
         {"  --model NAME=FILE  ", "  --host ADDR  ", "(default: 127.0.0.1)", "  --port N  ",
          "(default: 8000)", "  --workers N  ", "(default: one per core)",
          "  --threads N  ", "OpenMP threads", "  --io-threads N  ", "  --max-queue N  ",
          "(default: 64)", "  --max-body-bytes N  ", "(default: 16 MiB)", "  --timeout-ms N  ",
          "(default: 10000)", "  --invoke-timeout-ms N  ", "  --jit-cache DIR|off  ",
          "  --plugin PATH  ", "  --grpc-port N  ", "(default: -1)", "  --warmup  ",
          "  --dim NAME=VALUE  ", "  --warmup-dims NAME=LO:HI|NAME=V1,V2,...\n", "  --max-batch N  ", "  --batch-timeout-us N  ",
          "(default: 500)", "  -h, --help  "}) {
      BOOST_TEST(out.find(part) != std::string::npos, part << " in\n" << out);
    }
  }
}

}  // namespace
}  // namespace kiln::serving
