// kiln's OpenMP wait default: set only when the user set no wait variable, and in effect in
// libgomp (read back through omp_display_env in a program that links the default).
#define BOOST_TEST_MODULE omp_wait_test
#include "embed/omp_wait.h"

#include <sys/wait.h>

#include <boost/test/unit_test.hpp>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

namespace kiln {
namespace {

const char* Lookup(const std::map<std::string, std::string>& env, const char* name) {
  auto it = env.find(name);
  return it == env.end() ? nullptr : it->second.c_str();
}

const char* Decide(const std::map<std::string, std::string>& env) {
  return OmpSpinCountToSet([&](const char* name) { return Lookup(env, name); });
}

BOOST_AUTO_TEST_CASE(default_only_when_the_user_chose_nothing) {
  BOOST_CHECK_EQUAL(Decide({}), kOmpSpinCountDefault);
  // The thread count is not a wait policy: the default still applies.
  BOOST_CHECK_EQUAL(Decide({{"OMP_NUM_THREADS", "2"}}), kOmpSpinCountDefault);
  BOOST_CHECK(Decide({{"OMP_WAIT_POLICY", "active"}}) == nullptr);
  BOOST_CHECK(Decide({{"OMP_WAIT_POLICY", "passive"}}) == nullptr);
  BOOST_CHECK(Decide({{"GOMP_SPINCOUNT", "300000"}}) == nullptr);
  BOOST_CHECK(Decide({{"OMP_WAIT_POLICY", ""}}) == nullptr);  // set, even empty, is a choice
}

// Runs the probe under `env_prefix` (an `env` command line) and returns stdout and stderr.
std::string Probe(const std::string& env_prefix) {
  std::string cmd = "env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT -u OMP_DISPLAY_ENV " + env_prefix +
                    " tests/embed/omp_wait_probe 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  BOOST_REQUIRE(p != nullptr);
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof(buf), p) != nullptr) out += buf;
  int status = pclose(p);
  BOOST_REQUIRE_MESSAGE(WIFEXITED(status) && WEXITSTATUS(status) == 0, cmd << "\n" << out);
  return out;
}

// libgomp's GOMP_SPINCOUNT as it prints it ("  GOMP_SPINCOUNT = '3000'"), or "" if absent.
std::string SpinCount(const std::string& out) {
  const std::string key = "GOMP_SPINCOUNT = '";
  size_t at = out.find(key);
  if (at == std::string::npos) return "";
  at += key.size();
  return out.substr(at, out.find('\'', at) - at);
}

BOOST_AUTO_TEST_CASE(libgomp_runs_with_kiln_default_when_unset) {
  std::string out = Probe("");
  BOOST_TEST(SpinCount(out) == kOmpSpinCountDefault, out);
  BOOST_TEST(out.find("source: GOMP_SPINCOUNT=" + std::string(kOmpSpinCountDefault) +
                      " (kiln's default)") != std::string::npos,
             out);
}

BOOST_AUTO_TEST_CASE(the_users_variables_win) {
  std::string passive = Probe("OMP_WAIT_POLICY=passive");
  BOOST_TEST(SpinCount(passive) == "0", passive);
  BOOST_TEST(passive.find("(set by the user)") != std::string::npos, passive);
  std::string active = Probe("OMP_WAIT_POLICY=active");
  BOOST_TEST(SpinCount(active) == "30000000000", active);  // libgomp's active: ~5 minutes
  std::string spin = Probe("GOMP_SPINCOUNT=777");
  BOOST_TEST(SpinCount(spin) == "777", spin);
}

}  // namespace
}  // namespace kiln
