// Dynamic batching: collect, stack along dim 0, invoke once, split outputs by rows.
#include "examples/serving/batcher.h"

#include <algorithm>
#include <cstring>

#include "examples/serving/inference.h"
#include "examples/serving/model_repository.h"
#include "vm/context.h"

namespace kiln::serving {

namespace {

using Clock = std::chrono::steady_clock;

// Every input of one request has the same number of rows (dim 0); one that does not is run
// alone, so Invoke reports its contradiction instead of rows pairing up across requests.
bool SameRows(const std::vector<Tensor>& inputs) {
  for (const Tensor& t : inputs) {
    if (t.rank() < 1 || t.dim(0) != inputs[0].dim(0)) return false;
  }
  return !inputs.empty();
}

// Inputs of two requests stack if each pair has the same dtype and dims after dim 0.
bool Stackable(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size() || !SameRows(a) || !SameRows(b)) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].dtype() != b[i].dtype() || a[i].rank() != b[i].rank() || a[i].rank() < 1) {
      return false;
    }
    for (int d = 1; d < a[i].rank(); ++d) {
      if (a[i].dim(d) != b[i].dim(d)) return false;
    }
  }
  return true;
}

// One input of the batch: the requests' tensors (contiguous) one after another along dim 0.
StatusOr<Tensor> Concatenate(const std::vector<const Tensor*>& parts) {
  Shape shape = parts[0]->shape();
  int64_t rows = 0;
  for (const Tensor* t : parts) rows += t->dim(0);
  shape[0] = rows;
  ASSIGN_OR_RETURN(Tensor out, Tensor::Allocate(DefaultAllocator(), parts[0]->dtype(), shape));
  char* dst = static_cast<char*>(out.data());
  for (const Tensor* t : parts) {
    if (!t->IsContiguous()) return Internal("batcher: a request input is not contiguous");
    std::memcpy(dst, t->data(), t->NumBytes());
    dst += t->NumBytes();
  }
  return out;
}

}  // namespace

bool IsBatchable(const FunctionSignature& sig) {
  std::string symbol;
  for (const auto* list : {&sig.params, &sig.results}) {
    for (const ValueSpec& v : *list) {
      if (v.shape.empty() || v.shape[0].fixed() || v.shape[0].symbol.empty()) return false;
      if (symbol.empty()) symbol = v.shape[0].symbol;
      if (v.shape[0].symbol != symbol) return false;
    }
  }
  return !symbol.empty();
}

StatusOr<std::vector<Tensor>> Batcher::Run(const std::vector<Tensor>& inputs,
                                           Clock::time_point deadline) {
  Request me{&inputs, deadline};
  std::unique_lock<std::mutex> lock(mu_);
  queue_.push_back(&me);
  cv_.notify_all();
  while (!me.done) {
    if (collecting_ || queue_.empty()) {
      cv_.wait(lock);
      continue;
    }
    // Collect: wait for the batch to fill or the timeout, then run it (which may or may not
    // contain this request; the loop continues until it has run).
    collecting_ = true;
    auto until = Clock::now() + options_.timeout;
    cv_.wait_until(lock, until, [this] {
      return queue_.size() >= static_cast<size_t>(options_.max_batch);
    });
    stats_.most_queued = std::max<uint64_t>(stats_.most_queued, queue_.size());
    std::vector<Request*> batch = TakeBatch();
    if (batch.size() > 1) {
      ++stats_.batches;
      stats_.requests += batch.size();
    }
    collecting_ = false;
    cv_.notify_all();  // another waiter may start collecting the next batch
    lock.unlock();
    Execute(batch);
    lock.lock();
    for (Request* r : batch) r->done = true;
    cv_.notify_all();
  }
  return std::move(me.result);
}

Batcher::Stats Batcher::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

std::vector<Batcher::Request*> Batcher::TakeBatch() {
  std::vector<Request*> batch;
  for (auto it = queue_.begin();
       it != queue_.end() && batch.size() < static_cast<size_t>(options_.max_batch);) {
    if (batch.empty() || Stackable(*batch[0]->inputs, *(*it)->inputs)) {
      batch.push_back(*it);
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
  return batch;
}

void Batcher::Execute(const std::vector<Request*>& batch) {
  auto ctx = model_.AcquireContext();
  if (!ctx.ok()) {
    for (Request* r : batch) r->result = ctx.status();
    return;
  }
  auto run_alone = [&] {
    for (Request* r : batch) r->result = InvokeModel(model_, **ctx, *r->inputs, r->deadline);
  };
  if (batch.size() == 1) return run_alone();
  Clock::time_point deadline = Clock::time_point::max();
  for (Request* r : batch) deadline = std::min(deadline, r->deadline);
  std::vector<Tensor> stacked;
  for (size_t i = 0; i < batch[0]->inputs->size(); ++i) {
    std::vector<const Tensor*> parts;
    for (Request* r : batch) parts.push_back(&(*r->inputs)[i]);
    auto t = Concatenate(parts);
    if (!t.ok()) return run_alone();
    stacked.push_back(std::move(*t));
  }
  auto outputs = InvokeModel(model_, **ctx, stacked, deadline);
  if (!outputs.ok()) return run_alone();  // errors must name the request that caused them
  // Split: request k gets rows [offset, offset + its rows) of every output, as views.
  int64_t rows = stacked[0].dim(0);
  for (const Tensor& out : *outputs) {
    if (out.rank() < 1 || out.dim(0) != rows || !out.IsContiguous()) return run_alone();
  }
  int64_t offset = 0;
  for (Request* r : batch) {
    int64_t n = (*r->inputs)[0].dim(0);
    std::vector<Tensor> mine;
    for (const Tensor& out : *outputs) {
      Shape shape = out.shape();
      shape[0] = n;
      int64_t row_bytes = rows > 0 ? static_cast<int64_t>(out.NumBytes()) / rows : 0;
      auto view = Tensor::View(out.storage(), out.byte_offset() + offset * row_bytes,
                               out.dtype(), shape);
      if (!view.ok()) {
        r->result = view.status();
        break;
      }
      mine.push_back(std::move(*view));
    }
    if (mine.size() == outputs->size()) r->result = std::move(mine);
    offset += n;
  }
}

}  // namespace kiln::serving
