#include "dsa/parallel/tcp_group.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <sstream>
#include <vector>

#include "dsa/core/dtype_conv.h"
#include "dsa/core/error.h"
#include "dsa/parallel/host_view.h"

namespace dsa::parallel {

namespace {

constexpr uint32_t kMagic = 0x64736147;  // "Gasd": a dsa TCP group frame
constexpr uint32_t kVersion = 1;

// Every message is one frame: a header, then `bytes` bytes of payload.
enum class Kind : uint32_t { Hello = 1, Welcome, Refuse, Post, Result, Error };
struct Header {
  uint32_t magic = kMagic;
  uint32_t kind = 0;
  uint64_t bytes = 0;
};

// Flat little serialisation of the few fields a frame holds (both ends are this build: the
// fingerprint says so).
class Writer {
 public:
  void u64(uint64_t v) { raw(&v, sizeof v); }
  void str(const std::string& s) {
    u64(s.size());
    raw(s.data(), s.size());
  }
  void raw(const void* p, size_t n) { buf_.append(static_cast<const char*>(p), n); }
  const std::string& bytes() const { return buf_; }

 private:
  std::string buf_;
};

class Reader {
 public:
  Reader(const std::string& b, std::string what) : b_(b), what_(std::move(what)) {}
  uint64_t u64() {
    uint64_t v;
    raw(&v, sizeof v);
    return v;
  }
  std::string str() {
    const uint64_t n = u64();
    DSA_CHECK(n <= b_.size() - off_, "{}: malformed frame (a string of {} bytes, {} left)", what_, n, b_.size() - off_);
    std::string s = b_.substr(off_, n);
    off_ += n;
    return s;
  }
  void raw(void* p, size_t n) {
    DSA_CHECK(n <= b_.size() - off_, "{}: malformed frame ({} bytes wanted, {} left)", what_, n, b_.size() - off_);
    std::memcpy(p, b_.data() + off_, n);
    off_ += n;
  }
  size_t left() const { return b_.size() - off_; }
  const char* here() const { return b_.data() + off_; }

 private:
  const std::string& b_;
  size_t off_ = 0;
  std::string what_;
};

void send_frame(TcpStream& s, Kind k, const std::string& payload, const std::string& what) {
  Header h;
  h.kind = static_cast<uint32_t>(k);
  h.bytes = payload.size();
  s.send_all(&h, sizeof h, what);
  if (!payload.empty()) s.send_all(payload.data(), payload.size(), what);
}

// Frames above this are refused: a peer that is not a dsa rank (or is corrupt) cannot make this
// process allocate without bound.
constexpr uint64_t kMaxFrame = uint64_t{1} << 36;

Kind recv_frame(TcpStream& s, std::string& payload, Deadline until, const std::string& what) {
  Header h;
  s.recv_all(&h, sizeof h, until, what);
  DSA_CHECK(h.magic == kMagic, "{}: the peer is not a dsa rank (bad frame magic {:#x})", what, h.magic);
  DSA_CHECK(h.kind >= 1 && h.kind <= 6, "{}: unknown frame kind {}", what, h.kind);
  DSA_CHECK(h.bytes <= kMaxFrame, "{}: frame of {} bytes is above the limit", what, h.bytes);
  payload.resize(h.bytes);
  if (h.bytes > 0) s.recv_all(payload.data(), h.bytes, until, what);
  return static_cast<Kind>(h.kind);
}

std::map<std::string, std::string> fields(const std::string& fp) {
  std::map<std::string, std::string> m;
  std::istringstream in(fp);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const size_t eq = line.find('=');
    if (eq == std::string::npos)
      m[line] = "";
    else
      m[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return m;
}

// What one rank brings to a collective (rank 0 compares every rank's with its own).
struct Post {
  std::string op;
  int dtype = 0;
  Shape shape, out_shape;
  int64_t root = -1;
  uint64_t bytes = 0;  // of the rank's tensor (or byte buffer)

  void write(Writer& w) const {
    w.str(op);
    w.u64(static_cast<uint64_t>(dtype));
    w.u64(shape.size());
    for (int64_t d : shape) w.u64(static_cast<uint64_t>(d));
    w.u64(out_shape.size());
    for (int64_t d : out_shape) w.u64(static_cast<uint64_t>(d));
    w.u64(static_cast<uint64_t>(root));
    w.u64(bytes);
  }
  static Post read(Reader& r) {
    Post p;
    p.op = r.str();
    p.dtype = static_cast<int>(r.u64());
    const uint64_t ns = r.u64();
    DSA_CHECK(ns <= 16, "malformed collective frame: {} dims", ns);
    for (uint64_t i = 0; i < ns; ++i) p.shape.push_back(static_cast<int64_t>(r.u64()));
    const uint64_t no = r.u64();
    DSA_CHECK(no <= 16, "malformed collective frame: {} dims", no);
    for (uint64_t i = 0; i < no; ++i) p.out_shape.push_back(static_cast<int64_t>(r.u64()));
    p.root = static_cast<int64_t>(r.u64());
    p.bytes = r.u64();
    return p;
  }
  bool operator==(const Post& o) const {
    return op == o.op && dtype == o.dtype && shape == o.shape && out_shape == o.out_shape && root == o.root &&
           bytes == o.bytes;
  }
  std::string describe() const {
    std::string s = fmt::format("{} {}{}", op, dtype_name(static_cast<DType>(dtype)), shape_str(shape));
    if (!out_shape.empty()) s += fmt::format(" -> {}", shape_str(out_shape));
    if (root >= 0) s += fmt::format(" root {}", root);
    return s;
  }
};

// Whether rank `r` sends its data with its post, for collective `op` with `root`.
bool sends_data(const std::string& op, int r, int64_t root) {
  if (op == "all_reduce_sum" || op == "all_gather") return true;
  if (op == "broadcast" || op == "broadcast_bytes") return r == root;
  return false;
}

class TcpRank final : public Communicator {
 public:
  TcpRank(int rank, int size, std::vector<TcpStream> peers, const TcpGroupOptions& opt)
      : r_(rank), n_(size), peers_(std::move(peers)), opt_(opt) {}
  ~TcpRank() override = default;

  int rank() const override { return r_; }
  int size() const override { return n_; }
  const char* kind() const override { return "tcp"; }

  void all_reduce_sum(const Tensor& t) override {
    check_reducible(t, "all_reduce_sum");
    HostView v(t);
    Post p{"all_reduce_sum", static_cast<int>(t.dtype()), t.shape(), {}, -1, t.nbytes()};
    std::string result = collective(p, v.host.raw());
    DSA_CHECK(result.size() == t.nbytes(), "all_reduce_sum on rank {}: reply of {} bytes for {}", r_, result.size(),
              t.str());
    std::memcpy(v.host.raw(), result.data(), result.size());
    v.finish();
    count_bytes(t.nbytes());
  }

  void all_gather(const Tensor& in, const Tensor& out) override {
    const char* op = "all_gather";
    check_all_gather(in, out, n_, r_);
    HostView vi(in), vo(out);
    std::string result =
        collective({op, static_cast<int>(in.dtype()), in.shape(), out.shape(), -1, in.nbytes()}, vi.host.raw());
    DSA_CHECK(result.size() == out.nbytes(), "{} on rank {}: reply of {} bytes for {}", op, r_, result.size(), out.str());
    std::memcpy(vo.host.raw(), result.data(), result.size());
    vo.finish();
    count_bytes(in.nbytes());
  }

  void broadcast(const Tensor& t, int root) override {
    DSA_CHECK(t.defined() && t.is_contiguous(), "broadcast: the tensor must be defined and contiguous");
    HostView v(t);
    bcast("broadcast", static_cast<int>(t.dtype()), t.shape(), v.host.raw(), t.nbytes(), root);
    v.finish();
  }

  void broadcast_bytes(void* data, size_t bytes, int root) override {
    DSA_CHECK(data != nullptr || bytes == 0, "broadcast_bytes: null data");
    bcast("broadcast_bytes", static_cast<int>(DType::U8), {static_cast<int64_t>(bytes)}, data, bytes, root);
  }

  void barrier() override { collective({"barrier", static_cast<int>(DType::U8), {}, {}, -1, 0}, nullptr); }
  void set_wait_timeout(std::chrono::milliseconds t) override { opt_.timeout = t; }
  std::chrono::milliseconds wait_timeout() const override { return opt_.timeout; }

 private:
  void bcast(const char* op, int dt, const Shape& shape, void* data, size_t bytes, int root) {
    DSA_CHECK(root >= 0 && root < n_, "{} on rank {}: root {} is not a rank of a group of {}", op, r_, root, n_);
    std::string result = collective({op, dt, shape, {}, root, bytes}, data);
    if (r_ != root) {
      DSA_CHECK(result.size() == bytes, "{} on rank {}: reply of {} bytes for {}", op, r_, result.size(), bytes);
      if (bytes > 0) std::memcpy(data, result.data(), bytes);
    }
    count_bytes(bytes);
  }

  [[noreturn]] void stopped(const std::string& why) {
    if (why_.empty()) why_ = why;
    throw GroupStopped(fmt::format("{} (rank {} of {}, TCP group)", why_, r_, n_));
  }

  Deadline deadline() const {
    const auto now = std::chrono::steady_clock::now();
    return opt_.timeout >= std::chrono::hours(24 * 365) ? Deadline::max() : now + opt_.timeout;
  }

  // Runs one collective: every rank posts, rank 0 checks and computes, each rank gets back the
  // bytes it needs (empty for the root of a broadcast and for a barrier).
  std::string collective(const Post& p, const void* data) {
    if (!why_.empty()) stopped(why_);
    return r_ == 0 ? lead(p, data) : follow(p, data);
  }

  std::string follow(const Post& p, const void* data) {
    TcpStream& s = peers_[0];
    const std::string what = fmt::format("rank {}'s {} (waiting on rank 0)", r_, p.op);
    std::string reply;
    Kind k;
    try {
      Writer w;
      p.write(w);
      if (sends_data(p.op, r_, p.root)) w.raw(data, p.bytes);
      try {
        send_frame(s, Kind::Post, w.bytes(), what);
      } catch (const std::exception& e) {
        // Rank 0 may have stopped the group before reading this post: its reason can already be
        // here, and says more than the failed send.
        std::string why;
        bool told = false;
        try {
          told = recv_frame(s, why, std::chrono::steady_clock::now() + std::chrono::milliseconds(500), what) ==
                 Kind::Error;
        } catch (const std::exception&) {
        }
        s.close();
        stopped(told ? why : e.what());
      }
      k = recv_frame(s, reply, deadline(), what);
    } catch (const GroupStopped&) {
      throw;
    } catch (const std::exception& e) {
      s.close();
      stopped(e.what());
    }
    if (k == Kind::Error) {
      s.close();
      stopped(reply);
    }
    if (k != Kind::Result) stopped(fmt::format("{}: unexpected frame {}", what, static_cast<int>(k)));
    return reply;
  }

  // Rank 0: tells every other rank why the group stops, then throws it.
  [[noreturn]] void stop_all(const std::string& why) {
    for (int q = 1; q < n_; ++q) {
      TcpStream& s = peers_[static_cast<size_t>(q)];
      if (!s.open()) continue;
      try {
        send_frame(s, Kind::Error, why, "the stop message");
      } catch (const std::exception&) {  // that rank is gone too: nothing to tell it
      }
      // Not a plain close: a rank whose post is still unread here would get a reset that can
      // drop the stop message (seen: "send failed: Broken pipe" instead of the reason).
      s.close_after_draining(std::chrono::steady_clock::now() + std::chrono::milliseconds(500));
    }
    stopped(why);
  }

  std::string lead(const Post& p, const void* data) {
    std::vector<Post> posts(static_cast<size_t>(n_));
    std::vector<std::string> frames(static_cast<size_t>(n_));
    std::vector<const char*> in(static_cast<size_t>(n_), nullptr);
    posts[0] = p;
    in[0] = static_cast<const char*>(data);
    for (int q = 1; q < n_; ++q) {
      const std::string what = fmt::format("rank 0's {} waiting on rank {}", p.op, q);
      std::string& f = frames[static_cast<size_t>(q)];
      try {
        const Kind k = recv_frame(peers_[static_cast<size_t>(q)], f, deadline(), what);
        DSA_CHECK(k == Kind::Post, "{}: unexpected frame {}", what, static_cast<int>(k));
        Reader r(f, what);
        posts[static_cast<size_t>(q)] = Post::read(r);
        const Post& got = posts[static_cast<size_t>(q)];
        if (!(got == p))
          stop_all(fmt::format("ranks disagree: rank 0 called {}, rank {} called {}", p.describe(), q, got.describe()));
        if (sends_data(got.op, q, got.root)) {
          DSA_CHECK(r.left() == got.bytes, "{}: {} bytes of data for {}", what, r.left(), got.bytes);
          in[static_cast<size_t>(q)] = r.here();
        }
      } catch (const GroupStopped&) {
        throw;
      } catch (const std::exception& e) {
        peers_[static_cast<size_t>(q)].close();
        stop_all(e.what());
      }
    }
    std::vector<std::string> replies(static_cast<size_t>(n_));  // what each rank gets back
    if (p.op == "all_reduce_sum") {
      const int64_t N = static_cast<int64_t>(p.bytes / (p.dtype == static_cast<int>(DType::F32) ? 4 : 2));
      std::string out(p.bytes, '\0');
      for (int64_t i = 0; i < N; ++i) {
        float acc = 0.f;  // in rank order, as the in-process group
        for (int q = 0; q < n_; ++q) {
          const char* src = in[static_cast<size_t>(q)];
          if (p.dtype == static_cast<int>(DType::F32)) {
            float v;
            std::memcpy(&v, src + 4 * i, 4);
            acc += v;
          } else {
            uint16_t b;
            std::memcpy(&b, src + 2 * i, 2);
            acc += bf16_bits_to_f32(b);
          }
        }
        if (p.dtype == static_cast<int>(DType::F32)) {
          std::memcpy(out.data() + 4 * i, &acc, 4);
        } else {
          const uint16_t b = f32_to_bf16_bits(acc);
          std::memcpy(out.data() + 2 * i, &b, 2);
        }
      }
      std::fill(replies.begin(), replies.end(), out);
    } else if (p.op == "all_gather") {
      std::string out;
      for (int q = 0; q < n_; ++q) out.append(in[static_cast<size_t>(q)], p.bytes);
      std::fill(replies.begin(), replies.end(), out);
    } else if (p.op == "broadcast" || p.op == "broadcast_bytes") {
      const std::string out(in[static_cast<size_t>(p.root)], p.bytes);
      for (int q = 0; q < n_; ++q)
        if (q != p.root) replies[static_cast<size_t>(q)] = out;
    }
    for (int q = 1; q < n_; ++q) {
      try {
        send_frame(peers_[static_cast<size_t>(q)], Kind::Result, replies[static_cast<size_t>(q)],
                   fmt::format("rank 0's reply to rank {} in {}", q, p.op));
      } catch (const std::exception& e) {
        peers_[static_cast<size_t>(q)].close();
        stop_all(e.what());
      }
    }
    return replies[0];
  }

  int r_, n_;
  std::vector<TcpStream> peers_;  // rank 0: one per rank (index 0 unused); others: [0] = rank 0
  TcpGroupOptions opt_;
  std::string why_;  // set once the group stopped
};

std::string hello(int rank, int size, const std::string& fingerprint) {
  Writer w;
  w.u64(kVersion);
  w.u64(static_cast<uint64_t>(rank));
  w.u64(static_cast<uint64_t>(size));
  w.str(fingerprint);
  return w.bytes();
}

std::unique_ptr<Communicator> join_as_lead(int size, const HostPort& addr, const TcpGroupOptions& opt,
                                           TcpListener* given) {
  std::unique_ptr<TcpListener> own;
  if (!given) own = std::make_unique<TcpListener>(addr);
  TcpListener& l = given ? *given : *own;
  const Deadline until = std::chrono::steady_clock::now() + opt.startup_timeout;
  std::vector<TcpStream> peers(static_cast<size_t>(size));
  std::vector<TcpStream> extra;  // connections refused before they got a rank
  std::string problem;
  auto missing = [&] {
    std::string m;
    for (int q = 1; q < size; ++q)
      if (!peers[static_cast<size_t>(q)].open()) m += fmt::format("{}{}", m.empty() ? "" : ", ", q);
    return m;
  };
  int seen = 0;  // connections accepted
  bool timed_out = false;
  while (seen < size - 1 && problem.empty()) {
    TcpStream s;
    try {
      s = l.accept(until, "start-up");
    } catch (const std::exception&) {
      problem = fmt::format("rank 0 waited {} ms on {}:{} for rank(s) {} to join (are they started, with "
                            "--dist-init-addr {}:{} and the same world size?)",
                            opt.startup_timeout.count(), addr.host, l.port(), missing(), addr.host, l.port());
      timed_out = true;
      break;
    }
    ++seen;
    std::string f;
    try {
      const Kind k = recv_frame(s, f, until, "a joining rank's hello");
      DSA_CHECK(k == Kind::Hello, "a joining rank sent frame {} instead of its hello", static_cast<int>(k));
    } catch (const std::exception& e) {
      problem = e.what();
      extra.push_back(std::move(s));
      break;
    }
    Reader r(f, "hello");
    const uint64_t version = r.u64();
    const int q = static_cast<int>(r.u64());
    const int n = static_cast<int>(r.u64());
    const std::string fp = r.str();
    if (version != kVersion)
      problem = fmt::format("rank {} speaks TCP group version {}, rank 0 version {} (mismatched builds)", q, version,
                            kVersion);
    else if (n != size)
      problem = fmt::format("rank {} was started for a world size of {}, rank 0 for {}", q, n, size);
    else if (q < 1 || q >= size)
      problem = fmt::format("a rank joined as rank {}, outside 1..{}", q, size - 1);
    else if (peers[static_cast<size_t>(q)].open())
      problem = fmt::format("two processes joined as rank {}", q);
    else if (const std::string d = fingerprint_difference(opt.fingerprint, fp); !d.empty())
      problem = fmt::format("rank {} does not match rank 0 (mismatched builds or configs across ranks; rank 0's "
                            "value first): {}",
                            q, d);
    if (problem.empty())
      peers[static_cast<size_t>(q)] = std::move(s);
    else
      extra.push_back(std::move(s));
  }
  if (!problem.empty()) {
    // Ranks already on their way (started with the others) are refused too, rather than left to
    // time out: a short grace for their connections (their hello is read first, since closing a
    // socket with unread data resets it before the refusal arrives).
    const Deadline grace = std::min(until, std::chrono::steady_clock::now() + std::chrono::seconds(1));
    while (!timed_out && seen < size - 1) {
      TcpStream s;
      try {
        s = l.accept(grace, "start-up");
        ++seen;
        std::string f;
        recv_frame(s, f, grace, "a joining rank's hello");
      } catch (const std::exception&) {
        break;
      }
      extra.push_back(std::move(s));
    }
    for (auto* list : {&peers, &extra})
      for (TcpStream& s : *list)
        if (s.open()) try {
            send_frame(s, Kind::Refuse, problem, "the refusal");
          } catch (const std::exception&) {
          }
    fail("tensor-parallel start-up refused: {}", problem);
  }
  for (int q = 1; q < size; ++q)
    send_frame(peers[static_cast<size_t>(q)], Kind::Welcome, {}, fmt::format("rank 0's welcome to rank {}", q));
  return std::make_unique<TcpRank>(0, size, std::move(peers), opt);
}

std::unique_ptr<Communicator> join_as_follower(int rank, int size, const HostPort& addr, const TcpGroupOptions& opt) {
  const Deadline until = std::chrono::steady_clock::now() + opt.startup_timeout;
  TcpStream s = TcpStream::connect(addr, until);
  const std::string what = fmt::format("rank {} joining rank 0 at {}:{}", rank, addr.host, addr.port);
  send_frame(s, Kind::Hello, hello(rank, size, opt.fingerprint), what);
  std::string f;
  // Rank 0 decides when the last rank came or its own start-up timeout passed, which may be
  // somewhat later than this rank's: wait a little longer for the verdict than for the connection.
  const Kind k = recv_frame(s, f, until + std::chrono::seconds(5), what);
  if (k == Kind::Refuse) fail("tensor-parallel start-up refused by rank 0: {}", f);
  DSA_CHECK(k == Kind::Welcome, "{}: unexpected frame {}", what, static_cast<int>(k));
  std::vector<TcpStream> peers;
  peers.push_back(std::move(s));
  return std::make_unique<TcpRank>(rank, size, std::move(peers), opt);
}

}  // namespace

std::string fingerprint_difference(const std::string& a, const std::string& b) {
  if (a == b) return {};
  const auto fa = fields(a), fb = fields(b);
  for (const auto& [k, v] : fa) {
    auto it = fb.find(k);
    if (it == fb.end()) return fmt::format("{}: '{}' vs absent", k, v);
    if (it->second != v) return fmt::format("{}: '{}' vs '{}'", k, v, it->second);
  }
  for (const auto& [k, v] : fb)
    if (!fa.count(k)) return fmt::format("{}: absent vs '{}'", k, v);
  return "the fingerprints differ in their order or blank lines";
}

std::unique_ptr<Communicator> tcp_group_join(int rank, int size, const HostPort& addr, const TcpGroupOptions& opt,
                                             TcpListener* listener) {
  DSA_CHECK(size >= 1, "TCP group: world size {} must be at least 1", size);
  DSA_CHECK(rank >= 0 && rank < size, "TCP group: rank {} is outside 0..{}", rank, size - 1);
  DSA_CHECK(opt.timeout.count() > 0 && opt.startup_timeout.count() > 0, "TCP group: timeouts must be positive");
  if (rank == 0) return join_as_lead(size, addr, opt, listener);
  return join_as_follower(rank, size, addr, opt);
}

}  // namespace dsa::parallel
