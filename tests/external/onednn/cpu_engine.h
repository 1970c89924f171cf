// The CPU engine the oneDNN kernel tests (winograd_conv_test, blocked_pool_test) build their
// reference primitives and memories on, without the whole run library's Engine().
#ifndef KILN_TESTS_EXTERNAL_ONEDNN_CPU_ENGINE_H_
#define KILN_TESTS_EXTERNAL_ONEDNN_CPU_ENGINE_H_

#include "oneapi/dnnl/dnnl.hpp"

namespace kiln::onednn::testing {

/// The process's oneDNN CPU engine (index 0), created on first use and never destroyed.
inline const dnnl::engine& Cpu() {
  static const dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

}  // namespace kiln::onednn::testing

#endif  // KILN_TESTS_EXTERNAL_ONEDNN_CPU_ENGINE_H_
