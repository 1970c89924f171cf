// Shared helpers of the kiln_serve tests: the demo models, a server on a loopback port, HTTP calls.
// Failures are reported through Boost.Test (BOOST_REQUIRE), so only test binaries link this.
#ifndef KILN_TESTS_EXAMPLES_SERVING_SERVING_TEST_UTIL_H_
#define KILN_TESTS_EXAMPLES_SERVING_SERVING_TEST_UTIL_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "embed/runtime.h"
#include "examples/serving/http_client.h"
#include "examples/serving/json.h"
#include "examples/serving/model_repository.h"
#include "examples/serving/server.h"

namespace kiln::serving {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

int64_t MsSince(Clock::time_point t);

/// One runtime (JIT, vendors, allocator) for the whole test binary, as in kiln_serve.
std::shared_ptr<const Runtime> TestRuntime();
/// A new repository of the three demo models (affine, spin, add; files written once).
std::shared_ptr<ModelRepository> NewRepository();
/// One such repository shared by the whole test binary (tests must not load or unload in it).
std::shared_ptr<ModelRepository> Repository();

/// A spin `n` that keeps a worker busy for about `ms` on this machine (sanitizer builds are
/// many times slower, so fixed counts would make timing-based tests flaky).
int64_t SpinCountFor(int ms);
/// {"inputs":[{"name":"n",...,"data":[n]}]} for the spin model.
std::string SpinRequest(int64_t n);

/// Loopback, ephemeral port, 2 workers, 5 s I/O timeout.
ServerOptions TestOptions();
/// A started server on `repo` (null: Repository()).
std::unique_ptr<Server> StartServer(const ServerOptions& options = TestOptions(),
                                    std::shared_ptr<ModelRepository> repo = nullptr);

/// The client's per-operation timeout only catches hangs: 30 s, because one 70,000-iteration
/// spin request under TSan on a busy 2-core machine took over 10 s.
std::unique_ptr<HttpClient> Connect(const Server& server,
                                    milliseconds timeout = milliseconds(30000));
/// One request that must get a reply (any status).
HttpResponse Call(HttpClient& c, const std::string& method, const std::string& target,
                  const std::string& body = "", const HttpHeaders& headers = {});
/// The reply body as JSON (required to parse).
Json ParseBody(const HttpResponse& r);
/// The error message of a {"error": "..."} reply.
std::string ErrorOf(const HttpResponse& r);
/// The elements of a JSON list of numbers.
std::vector<double> Numbers(const Json& list);

}  // namespace kiln::serving

#endif  // KILN_TESTS_EXAMPLES_SERVING_SERVING_TEST_UTIL_H_
