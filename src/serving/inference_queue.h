// The requests waiting for one model version, and the workers ("instances") running them.
//
// A request is queued only while the queue has room (else it is refused at once: the server
// answers 503), and its caller waits at most its time limit (then 504; a request still queued is
// dropped, one already running stops at the next step boundary: RunLimits; compiling a plan for a
// new shape is not interrupted).
// With max_batch > 1, a worker takes every queued request whose inputs differ only in dim 0 (up
// to max_batch rows in all), runs them as one batch and splits the outputs: it never waits for
// more requests to arrive, so batching only happens when requests are already queued, and adds
// no latency when they are not.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/session.h"

namespace opfuse::serving {

struct InferenceQueueOptions {
  int instances = 1;
  int max_queue = 64;
  int max_batch = 0;  // <= 1: no batching
};

struct QueueReply {
  enum class Kind { kDone, kQueueFull, kTimedOut, kStopped };
  Kind kind = Kind::kDone;
  Result<TensorMap> outputs = Status::internal_error("no reply");  // meaningful for kDone
  int batch_size = 1;  // how many requests ran together with this one (itself included)
};

class InferenceQueue {
 public:
  InferenceQueue(std::shared_ptr<const Session> session, InferenceQueueOptions options);
  ~InferenceQueue();  // stop(), then joins the workers
  InferenceQueue(const InferenceQueue&) = delete;
  InferenceQueue& operator=(const InferenceQueue&) = delete;

  // Blocks until the request ran, the queue refused it, or `limit` passed.
  QueueReply submit(TensorMap inputs, std::chrono::milliseconds limit);
  // Stops taking requests; what is queued still runs. Returns when the queue is empty and no
  // worker is running anything.
  void drain();
  size_t depth() const;
  // Whether requests for this model can be stacked along dim 0 (every input's dim 0 is the same
  // symbol); max_batch is ignored otherwise.
  bool batching() const { return batch_dim_ok_ && options_.max_batch > 1; }

 private:
  struct Job;
  void work();
  // The next request and, when batching, the queued ones that stack with it. `lock` (of mutex_)
  // is only the proof that the caller holds it.
  std::vector<std::shared_ptr<Job>> take_batch(std::unique_lock<std::mutex>& lock);
  void run_batch(const std::vector<std::shared_ptr<Job>>& jobs);

  std::shared_ptr<const Session> session_;
  InferenceQueueOptions options_;
  bool batch_dim_ok_ = false;
  mutable std::mutex mutex_;
  std::condition_variable wake_;     // workers: a job arrived, or stopping
  std::condition_variable drained_;  // drain(): the queue emptied and workers idle
  std::deque<std::shared_ptr<Job>> queue_;
  int running_ = 0;
  bool accepting_ = true;
  bool exiting_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace opfuse::serving
