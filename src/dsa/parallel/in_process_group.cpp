#include "dsa/parallel/in_process_group.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>

#include "dsa/core/dtype_conv.h"
#include "dsa/core/error.h"
#include "dsa/parallel/host_view.h"

namespace dsa::parallel {

namespace {

// What one rank brings to a collective: checked against rank 0's before anyone reads data.
struct Post {
  const char* op = "";
  DType dtype = DType::U8;
  Shape shape, out_shape;
  int root = -1;
  const void* in = nullptr;
  size_t bytes = 0;  // of `in`
};

std::string describe(const Post& p) {
  std::string s = fmt::format("{} {}{}", p.op, dtype_name(p.dtype), shape_str(p.shape));
  if (!p.out_shape.empty()) s += fmt::format(" -> {}", shape_str(p.out_shape));
  if (p.root >= 0) s += fmt::format(" root {}", p.root);
  return s;
}

}  // namespace

struct InProcessGroup::State {
  int n;
  InProcessOptions opt;
  std::mutex m;
  std::condition_variable cv;
  int arrived = 0;
  uint64_t generation = 0;
  std::vector<char> here;
  bool aborted = false;
  int aborted_by = -1;
  std::string why;
  std::vector<Post> posts;
  std::vector<float> sum;  // an all-reduce's result

  State(int size, const InProcessOptions& o) : n(size), opt(o), here(static_cast<size_t>(size)), posts(static_cast<size_t>(size)) {}

  [[noreturn]] void throw_aborted(int r, const char* op) const {
    throw GroupStopped(fmt::format("{} on rank {} of {} (in-process group) stopped: {}", op, r, n, why));
  }

  // Under the lock, by the last rank to arrive: every rank must be in the same collective with
  // the same shapes (rank 0's post is the reference).
  std::string mismatch() const {
    for (int q = 1; q < n; ++q) {
      const Post &a = posts[0], &b = posts[static_cast<size_t>(q)];
      if (std::strcmp(a.op, b.op) != 0 || a.dtype != b.dtype || a.shape != b.shape || a.out_shape != b.out_shape ||
          a.root != b.root || a.bytes != b.bytes)
        return fmt::format("ranks disagree: rank 0 called {}, rank {} called {}", describe(a), q, describe(b));
    }
    return {};
  }

  // Waits until all n ranks have arrived at this phase. `validate`: the last arrival checks the
  // posts. Throws on abort, mismatch or timeout.
  void arrive(int r, const char* op, bool validate) {
    std::unique_lock lk(m);
    if (aborted) throw_aborted(r, op);
    const uint64_t g = generation;
    here[static_cast<size_t>(r)] = 1;
    if (++arrived == n) {
      if (validate) {
        std::string e = mismatch();
        if (!e.empty()) {
          aborted = true;
          why = std::move(e);
        } else if (std::strcmp(posts[0].op, "all_reduce_sum") == 0) {
          // Sized here, when every rank has arrived: no rank still reads the previous result.
          int64_t numel = 1;
          for (int64_t d : posts[0].shape) numel *= d;
          if (sum.size() < static_cast<size_t>(numel)) sum.resize(static_cast<size_t>(numel));
        }
      }
      arrived = 0;
      std::fill(here.begin(), here.end(), 0);
      ++generation;
      cv.notify_all();
    } else if (!cv.wait_for(lk, opt.timeout, [&] { return generation != g || aborted; })) {
      std::string missing;
      for (int q = 0; q < n; ++q)
        if (!here[static_cast<size_t>(q)]) missing += fmt::format("{}{}", missing.empty() ? "" : ", ", q);
      aborted = true;
      why = fmt::format("rank {} waited {} ms in {} for rank(s) {} that never arrived", r, opt.timeout.count(), op,
                        missing);
      cv.notify_all();
    }
    if (aborted) throw_aborted(r, op);
  }

  void abort(int r, const std::string& reason) {
    std::lock_guard lk(m);
    if (aborted) return;
    aborted = true;
    aborted_by = r;
    why = fmt::format("rank {} failed: {}", r, reason);
    cv.notify_all();
  }
};

namespace {

class InProcessRank final : public Communicator {
 public:
  InProcessRank(InProcessGroup::State& s, int r) : s_(s), r_(r) {}
  int rank() const override { return r_; }
  int size() const override { return s_.n; }
  const char* kind() const override { return "in-process"; }

  void all_reduce_sum(const Tensor& t) override {
    const char* op = "all_reduce_sum";
    check_reducible(t, op);
    HostView v(t);
    Post p{op, t.dtype(), t.shape(), {}, -1, v.host.raw(), t.nbytes()};
    post(p);
    s_.arrive(r_, op, true);
    // Rank r sums its own stripe of elements into the shared result (all ranks' inputs are
    // stable until the second arrival), in rank order.
    const int64_t N = t.numel(), n = s_.n;
    const int64_t lo = N * r_ / n, hi = N * (r_ + 1) / n;
    for (int64_t i = lo; i < hi; ++i) {
      float acc = 0.f;
      for (int q = 0; q < n; ++q) acc += element(s_.posts[static_cast<size_t>(q)], i);
      s_.sum[static_cast<size_t>(i)] = acc;
    }
    s_.arrive(r_, op, false);
    // The result stays until every rank has copied it: the next collective's first arrival.
    if (t.dtype() == DType::F32) {
      std::memcpy(v.host.raw(), s_.sum.data(), t.nbytes());
    } else {
      uint16_t* o = v.host.data<uint16_t>();
      for (int64_t i = 0; i < N; ++i) o[i] = f32_to_bf16_bits(s_.sum[static_cast<size_t>(i)]);
    }
    v.finish();
    count_bytes(t.nbytes());
  }

  void all_gather(const Tensor& in, const Tensor& out) override {
    const char* op = "all_gather";
    check_all_gather(in, out, s_.n, r_);
    HostView vi(in), vo(out);
    post({op, in.dtype(), in.shape(), out.shape(), -1, vi.host.raw(), in.nbytes()});
    s_.arrive(r_, op, true);
    char* dst = static_cast<char*>(vo.host.raw());
    for (int q = 0; q < s_.n; ++q) std::memcpy(dst + in.nbytes() * q, s_.posts[static_cast<size_t>(q)].in, in.nbytes());
    s_.arrive(r_, op, false);  // inputs may change only when every rank has read them
    vo.finish();
    count_bytes(in.nbytes());
  }

  void broadcast(const Tensor& t, int root) override {
    DSA_CHECK(t.defined() && t.is_contiguous(), "broadcast: the tensor must be defined and contiguous");
    HostView v(t);
    exchange("broadcast", t.dtype(), t.shape(), v.host.raw(), t.nbytes(), root);
    v.finish();
  }

  void broadcast_bytes(void* data, size_t bytes, int root) override {
    DSA_CHECK(data != nullptr || bytes == 0, "broadcast_bytes: null data");
    exchange("broadcast_bytes", DType::U8, {static_cast<int64_t>(bytes)}, data, bytes, root);
  }

  void barrier() override {
    post({"barrier", DType::U8, {}, {}, -1, nullptr, 0});
    s_.arrive(r_, "barrier", true);
  }

 private:
  void post(const Post& p) {
    {
      std::lock_guard lk(s_.m);
      s_.posts[static_cast<size_t>(r_)] = p;
    }
  }

  static float element(const Post& p, int64_t i) {
    if (p.dtype == DType::F32) return static_cast<const float*>(p.in)[i];
    return bf16_bits_to_f32(static_cast<const uint16_t*>(p.in)[i]);
  }

  void exchange(const char* op, DType dt, const Shape& shape, void* data, size_t bytes, int root) {
    DSA_CHECK(root >= 0 && root < s_.n, "{} on rank {}: root {} is not a rank of a group of {}", op, r_, root, s_.n);
    post({op, dt, shape, {}, root, data, bytes});
    s_.arrive(r_, op, true);
    if (r_ != root && bytes > 0) std::memcpy(data, s_.posts[static_cast<size_t>(root)].in, bytes);
    s_.arrive(r_, op, false);  // root's data may change only when every rank has read it
    count_bytes(bytes);
  }

  InProcessGroup::State& s_;
  int r_;
};

}  // namespace

InProcessGroup::InProcessGroup(int size, const InProcessOptions& opt) {
  DSA_CHECK(size >= 1, "in-process group: size {} must be at least 1", size);
  DSA_CHECK(opt.timeout.count() > 0, "in-process group: timeout must be positive");
  state_ = std::make_unique<State>(size, opt);
  for (int r = 0; r < size; ++r) ranks_.push_back(std::make_unique<InProcessRank>(*state_, r));
}

InProcessGroup::~InProcessGroup() = default;

int InProcessGroup::size() const { return state_->n; }

Communicator& InProcessGroup::rank(int r) {
  DSA_CHECK(r >= 0 && r < state_->n, "in-process group: rank {} of a group of {}", r, state_->n);
  return *ranks_[static_cast<size_t>(r)];
}

void InProcessGroup::abort(int rank, const std::string& why) { state_->abort(rank, why); }

bool InProcessGroup::aborted() const {
  std::lock_guard lk(state_->m);
  return state_->aborted;
}

int InProcessGroup::aborted_by() const {
  std::lock_guard lk(state_->m);
  return state_->aborted_by;
}

}  // namespace dsa::parallel
