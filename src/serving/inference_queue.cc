#include "serving/inference_queue.h"

#include <cstring>
#include <future>

namespace opfuse::serving {

struct InferenceQueue::Job {
  TensorMap inputs;
  std::chrono::steady_clock::time_point deadline;  // its caller answers 504 after this
  std::promise<std::pair<Result<TensorMap>, int>> reply;  // outputs, batch size
  std::atomic<bool> abandoned{false};                     // its caller stopped waiting
};

namespace {

int64_t rows(const TensorMap& inputs) { return inputs.begin()->second.dims()[0]; }

// Same names, dtypes and dims except dim 0: requests that can run as one batch.
bool stackable(const TensorMap& a, const TensorMap& b) {
  if (a.size() != b.size()) return false;
  for (auto ia = a.begin(), ib = b.begin(); ia != a.end(); ++ia, ++ib) {
    const Tensor& x = ia->second;
    const Tensor& y = ib->second;
    if (ia->first != ib->first || x.dtype() != y.dtype() || x.rank() != y.rank() || x.rank() == 0) return false;
    if (!std::equal(x.dims().begin() + 1, x.dims().end(), y.dims().begin() + 1)) return false;
  }
  return true;
}

// Row-major tensors stacked along dim 0: each part is one contiguous run of bytes.
Result<Tensor> concat_rows(const std::vector<const Tensor*>& parts) {
  std::vector<int64_t> dims = parts[0]->dims();
  dims[0] = 0;
  for (const Tensor* t : parts) dims[0] += t->dims()[0];
  OPFUSE_ASSIGN_OR_RETURN(Tensor out, Tensor::zeros(parts[0]->dtype(), dims, "batched input"));
  auto* dst = static_cast<char*>(out.raw_data());
  for (const Tensor* t : parts) {
    if (t->nbytes() > 0) std::memcpy(dst, t->raw_data(), t->nbytes());
    dst += t->nbytes();
  }
  return out;
}

Result<Tensor> slice_rows(const Tensor& t, int64_t begin, int64_t count) {
  std::vector<int64_t> dims = t.dims();
  const size_t row_bytes = dims[0] == 0 ? 0 : t.nbytes() / static_cast<size_t>(dims[0]);
  dims[0] = count;
  OPFUSE_ASSIGN_OR_RETURN(Tensor out, Tensor::zeros(t.dtype(), dims, "batch output"));
  if (out.nbytes() > 0) {
    std::memcpy(out.raw_data(), static_cast<const char*>(t.raw_data()) + row_bytes * begin, out.nbytes());
  }
  return out;
}

// A run that throws (out of memory, a bug) fails its requests instead of the worker thread.
Result<TensorMap> run_guarded(const Session& session, const TensorMap& inputs, const RunLimits& limits) {
  try {
    return session.run(inputs, limits);
  } catch (const std::exception& e) {
    return Status::internal_error(str_cat("the run failed: ", e.what()));
  }
}

}  // namespace

InferenceQueue::InferenceQueue(std::shared_ptr<const Session> session, InferenceQueueOptions options)
    : session_(std::move(session)), options_(options) {
  // Batchable when every input's dim 0 is one symbol: then a stack of requests is itself a valid
  // input, and each output row belongs to one request only if the outputs share that dim 0
  // (checked on every batch, see run_batch).
  std::string symbol;
  batch_dim_ok_ = !session_->inputs().empty();
  for (const auto& sig : session_->inputs()) {
    const bool symbolic = sig.shape && !sig.shape->empty() && (*sig.shape)[0].is_symbolic();
    if (!symbolic || (!symbol.empty() && (*sig.shape)[0].symbol_name() != symbol)) {
      batch_dim_ok_ = false;
      break;
    }
    symbol = (*sig.shape)[0].symbol_name();
  }
  for (int i = 0; i < std::max(1, options_.instances); ++i) workers_.emplace_back([this] { work(); });
}

InferenceQueue::~InferenceQueue() {
  drain();
  {
    std::lock_guard lock(mutex_);
    exiting_ = true;
  }
  wake_.notify_all();
  for (auto& worker : workers_) worker.join();
}

QueueReply InferenceQueue::submit(TensorMap inputs, std::chrono::milliseconds limit) {
  auto job = std::make_shared<Job>();
  job->inputs = std::move(inputs);
  job->deadline = std::chrono::steady_clock::now() + limit;
  auto future = job->reply.get_future();
  {
    std::lock_guard lock(mutex_);
    if (!accepting_) return {QueueReply::Kind::kStopped};
    if (queue_.size() >= static_cast<size_t>(options_.max_queue)) return {QueueReply::Kind::kQueueFull};
    queue_.push_back(job);
  }
  wake_.notify_one();
  if (future.wait_for(limit) != std::future_status::ready) {
    job->abandoned = true;  // dropped if still queued
    return {QueueReply::Kind::kTimedOut};
  }
  auto [outputs, batch_size] = future.get();
  // A run stopped by this request's own deadline (RunLimits) may answer just before the wait
  // above gives up: that is the time limit too, not a failed run.
  if (!outputs.is_ok() && std::chrono::steady_clock::now() >= job->deadline) return {QueueReply::Kind::kTimedOut};
  return {QueueReply::Kind::kDone, std::move(outputs), batch_size};
}

void InferenceQueue::drain() {
  std::unique_lock lock(mutex_);
  accepting_ = false;
  drained_.wait(lock, [&] { return queue_.empty() && running_ == 0; });
}

size_t InferenceQueue::depth() const {
  std::lock_guard lock(mutex_);
  return queue_.size();
}

std::vector<std::shared_ptr<InferenceQueue::Job>> InferenceQueue::take_batch(std::unique_lock<std::mutex>&) {
  std::vector<std::shared_ptr<Job>> batch;
  while (!queue_.empty() && batch.empty()) {
    auto job = std::move(queue_.front());
    queue_.pop_front();
    if (!job->abandoned) batch.push_back(std::move(job));
  }
  if (batch.empty() || !batching()) return batch;
  int64_t total = rows(batch[0]->inputs);
  for (auto it = queue_.begin(); it != queue_.end();) {
    const auto& job = *it;
    if (job->abandoned) {
      it = queue_.erase(it);
      continue;
    }
    const int64_t r = rows(job->inputs);
    if (total + r <= options_.max_batch && stackable(batch[0]->inputs, job->inputs)) {
      total += r;
      batch.push_back(job);
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
  return batch;
}

void InferenceQueue::run_batch(const std::vector<std::shared_ptr<Job>>& jobs) {
  // A run past every waiting caller's time limit stops at its next step: nobody reads it.
  RunLimits limits;
  for (const auto& job : jobs) limits.deadline = std::max(limits.deadline.value_or(job->deadline), job->deadline);
  auto run_alone = [&](const std::shared_ptr<Job>& job) {
    job->reply.set_value({run_guarded(*session_, job->inputs, RunLimits{job->deadline, nullptr}), 1});
  };
  if (jobs.size() == 1) return run_alone(jobs[0]);
  TensorMap stacked;
  for (const auto& [name, first] : jobs[0]->inputs) {
    std::vector<const Tensor*> parts;
    for (const auto& job : jobs) parts.push_back(&job->inputs.at(name));
    auto t = concat_rows(parts);
    if (!t.is_ok()) {
      for (const auto& job : jobs) run_alone(job);
      return;
    }
    stacked.emplace(name, std::move(*t));
  }
  const int64_t total = rows(stacked);
  auto outputs = run_guarded(*session_, stacked, limits);
  // Outputs that do not carry the batch in dim 0 cannot be split per request: run them alone.
  bool splittable = outputs.is_ok();
  if (splittable) {
    for (const auto& [name, t] : *outputs) splittable = splittable && t.rank() > 0 && t.dims()[0] == total;
  }
  if (!splittable) {
    for (const auto& job : jobs) run_alone(job);
    return;
  }
  int64_t begin = 0;
  for (const auto& job : jobs) {
    const int64_t count = rows(job->inputs);
    TensorMap mine;
    Status status;
    for (const auto& [name, t] : *outputs) {
      auto part = slice_rows(t, begin, count);
      if (!part.is_ok()) {
        status = part.status();
        break;
      }
      mine.emplace(name, std::move(*part));
    }
    begin += count;
    if (status.is_ok()) {
      job->reply.set_value({std::move(mine), static_cast<int>(jobs.size())});
    } else {
      job->reply.set_value({status, static_cast<int>(jobs.size())});
    }
  }
}

void InferenceQueue::work() {
  std::unique_lock lock(mutex_);
  while (true) {
    wake_.wait(lock, [&] { return exiting_ || !queue_.empty(); });
    if (queue_.empty()) {
      if (exiting_) return;
      continue;
    }
    auto jobs = take_batch(lock);
    if (jobs.empty()) {
      if (queue_.empty() && running_ == 0) drained_.notify_all();
      continue;
    }
    ++running_;
    lock.unlock();
    run_batch(jobs);
    lock.lock();
    --running_;
    if (queue_.empty() && running_ == 0) drained_.notify_all();
  }
}

}  // namespace opfuse::serving
