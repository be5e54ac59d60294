#include "dsa/server/server_context.h"

#include <algorithm>
#include <cctype>
#include <ctime>

#include "dsa/core/error.h"
#include "dsa/core/log.h"
#include "dsa/server/openai_protocol.h"

namespace dsa::server {
namespace {

using json = nlohmann::json;

// The record of the request this worker serves (set by the route wrapper, logged and cleared by
// the logger, which httplib calls on the same thread once the response is written).
thread_local std::shared_ptr<RequestRecord> t_record;

bool equal_constant_time(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char d = 0;
  for (size_t i = 0; i < a.size(); ++i) d |= static_cast<unsigned char>(a[i] ^ b[i]);
  return d == 0;
}

bool authorized(const ServerOptions& opt, const httplib::Request& req) {
  if (opt.api_key.empty()) return true;
  return equal_constant_time(req.get_header_value("Authorization"), "Bearer " + opt.api_key);
}

void send_unauthorized(httplib::Response& res) {
  send_json(res, 401,
            {{"error",
              {{"message", "missing or incorrect API key: send the header \"Authorization: Bearer <key>\""},
               {"type", "invalid_request_error"},
               {"param", nullptr},
               {"code", "invalid_api_key"}}}});
}

// CORS: the allowed origin of the request, or "" when none applies.
std::string allowed_origin(const ServerOptions& opt, const httplib::Request& req) {
  if (opt.allowed_origins.empty() || !req.has_header("Origin")) return {};
  const std::string origin = req.get_header_value("Origin");
  for (const std::string& o : opt.allowed_origins) {
    if (o == "*") return "*";
    if (o == origin) return origin;
  }
  return {};
}

void add_cors(const ServerOptions& opt, const httplib::Request& req, httplib::Response& res) {
  const std::string o = allowed_origin(opt, req);
  if (o.empty()) return;
  res.set_header("Access-Control-Allow-Origin", o);
  if (o != "*") res.set_header("Vary", "Origin");
}

// Runs a handler; whatever it throws becomes an error response (a client error for
// BadRequest, else a 500), never an exception out of a server callback.
void guarded(httplib::Response& res, const std::function<void()>& fn) {
  try {
    fn();
  } catch (const BadRequest& e) {
    send_error(res, 400, e.what(), e.param);
  } catch (const std::exception& e) {
    log_error("server: handler failed: {}", e.what());
    send_error(res, 500, std::string("internal error: ") + e.what());
  } catch (...) {
    log_error("server: handler failed with an unknown exception");
    send_error(res, 500, "internal error");
  }
}

std::string lower_trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  s = s.substr(i);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool chunked(const httplib::Request& req) {
  return req.has_header("Transfer-Encoding") && lower_trim(req.get_header_value("Transfer-Encoding")) == "chunked";
}

// The body framing headers, checked before any byte of the body is read: "" when acceptable,
// else why not (and *status the answer). Request smuggling defences (RFC 9112 6.3): both
// Content-Length and Transfer-Encoding, several different lengths, a length that is not a
// number, a transfer coding other than chunked; and the size limit.
std::string framing_problem(const httplib::Request& req, size_t limit, int* status) {
  *status = 400;
  const size_t n_len = req.get_header_value_count("Content-Length");
  const size_t n_te = req.get_header_value_count("Transfer-Encoding");
  if (n_len && n_te) return "a request may not have both Content-Length and Transfer-Encoding";
  if (n_te > 1 || (n_te == 1 && !chunked(req)))
    return "unsupported Transfer-Encoding \"" + req.get_header_value("Transfer-Encoding") + "\" (only chunked)";
  if (n_len) {
    const std::string v = req.get_header_value("Content-Length", 0);
    for (size_t i = 0; i < n_len; ++i)
      if (req.get_header_value("Content-Length", i) != v) return "conflicting Content-Length headers";
    if (v.empty() || v.size() > 18 || !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return "Content-Length \"" + v + "\" is not a number";
    if (std::stoull(v) > limit) {
      *status = 413;
      return "the request body (" + v + " bytes) exceeds the limit of " + std::to_string(limit) + " bytes";
    }
  }
  return {};
}

std::string default_message(const httplib::Request& req, int status) {
  switch (status) {
    case 400: return "malformed request";
    case 404: return "no route " + req.method + " " + req.path;
    case 405: return "method not allowed";
    case 413: return "the request is too large";
    case 414: return "the request URI is too long";
    case 416: return "unsatisfiable Range header";
    default: return "HTTP error " + std::to_string(status);
  }
}

}  // namespace

std::string dump_json(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

int64_t unix_time() { return static_cast<int64_t>(std::time(nullptr)); }

bool sse_event(httplib::DataSink& sink, const std::string& data) {
  const std::string line = "data: " + data + "\n\n";
  return sink.write(line.data(), line.size());
}

void serve_sse(httplib::Response& res, std::function<bool(httplib::DataSink&)> run, std::function<void()> abort) {
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  auto safe_abort = [abort] {
    try {
      abort();
    } catch (...) {
    }
  };
  res.set_chunked_content_provider(
      "text/event-stream",
      [run = std::move(run), safe_abort](size_t, httplib::DataSink& sink) {
        try {
          return run(sink);
        } catch (const std::exception& e) {
          safe_abort();
          try {
            sse_event(sink, dump_json(error_json(std::string("internal error: ") + e.what(), "internal_server_error", "", 500)));
            sse_event(sink, "[DONE]");
            sink.done();
          } catch (...) {
          }
          return true;
        } catch (...) {
          safe_abort();
          return false;
        }
      },
      [safe_abort](bool) noexcept { safe_abort(); });
}

void send_json(httplib::Response& res, int status, const json& j) {
  res.status = status;
  res.set_content(dump_json(j), "application/json");
}

void send_error(httplib::Response& res, int status, const std::string& message, const std::string& param) {
  send_json(res, status, error_json(message, error_type(status), param, status));
}

void ServerContext::get(const std::string& pattern, RouteHandler h, bool open) {
  http.Get(pattern, httplib::Server::Handler([this, h, open](const httplib::Request& req, httplib::Response& res) {
    auto rec = std::make_shared<RequestRecord>();
    t_record = rec;
    add_cors(opt, req, res);
    if (!open && !authorized(opt, req)) return send_unauthorized(res);
    guarded(res, [&] { h(req, res, std::string(), rec); });
  }));
}

void ServerContext::post(const std::string& pattern, RouteHandler h, bool open) {
  http.Post(pattern, httplib::Server::HandlerWithContentReader([this, h, open](const httplib::Request& req,
                                                                              httplib::Response& res,
                                                                              const httplib::ContentReader& reader) {
    auto rec = std::make_shared<RequestRecord>();
    t_record = rec;
    add_cors(opt, req, res);
    if (!open && !authorized(opt, req)) {
      close_after_response();  // the body stays unread
      return send_unauthorized(res);
    }
    std::string body;
    if (req.has_header("Content-Length") || chunked(req)) {
      bool too_big = false;
      const size_t limit = opt.max_request_bytes;
      const bool ok = reader([&](const char* d, size_t n) {
        if (body.size() + n > limit) {
          too_big = true;
          return false;
        }
        body.append(d, n);
        return true;
      });
      if (too_big) {
        close_after_response();
        return send_error(res, 413, "the request body exceeds the limit of " + std::to_string(limit) + " bytes");
      }
      if (!ok) {
        close_after_response();
        return send_error(res, 400, "the request body could not be read (malformed chunks, or too slow)");
      }
    }
    guarded(res, [&] { h(req, res, body, rec); });
  }));
}

void install_common_handlers(ServerContext& ctx) {
  HttpServer& s = ctx.http;
  const ServerOptions& opt = ctx.opt;
  s.set_payload_max_length(opt.max_request_bytes);  // httplib's own check, behind ours
  s.set_pre_routing_handler([&opt](const httplib::Request& req, httplib::Response& res) {
    t_record = nullptr;
    try {
      int status = 400;
      const std::string why = framing_problem(req, opt.max_request_bytes, &status);
      if (why.empty()) return httplib::Server::HandlerResponse::Unhandled;
      close_after_response();  // the body is not read: nothing else can follow on this connection
      send_error(res, status, why);
    } catch (const std::exception& e) {
      close_after_response();
      send_error(res, 400, e.what());
    }
    return httplib::Server::HandlerResponse::Handled;
  });
  s.set_expect_100_continue_handler([&opt](const httplib::Request& req, httplib::Response& res) {
    int status = 400;
    std::string why;
    try {
      why = framing_problem(req, opt.max_request_bytes, &status);
    } catch (const std::exception& e) {
      why = e.what();
    }
    if (why.empty()) return 100;
    close_after_response();
    send_error(res, status, why);
    return status;
  });
  s.set_error_handler(
      httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        try {
          send_error(res, res.status, default_message(req, res.status));
        } catch (...) {
        }
        return httplib::Server::HandlerResponse::Handled;
      }));
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    log_error("server: unhandled exception: {}", what);
    try {
      send_error(res, 500, what);
    } catch (...) {
    }
  });
  s.set_logger([&ctx](const httplib::Request& req, const httplib::Response& res) {
    try {
      std::shared_ptr<RequestRecord> rec = std::exchange(t_record, nullptr);
      ctx.metrics.count_response(res.status);
      const bool quiet = req.path == "/health" || req.path == "/metrics";
      if (log_level() > (quiet ? LogLevel::Debug : LogLevel::Info)) return;
      std::string line = (rec && !rec->id.empty() ? rec->id + " " : std::string()) + req.method + " " + req.path +
                         " " + std::to_string(res.status);
      if (rec) {
        if (rec->prompt_tokens >= 0) line += fmt::format(" prompt={}", rec->prompt_tokens);
        if (rec->output_tokens >= 0) line += fmt::format(" output={}", rec->output_tokens);
        if (rec->ttft_s >= 0) line += fmt::format(" ttft={:.3f}s", rec->ttft_s);
        line += fmt::format(" duration={:.3f}s",
                            std::chrono::duration<double>(std::chrono::steady_clock::now() - rec->start).count());
      }
      log_write(quiet ? LogLevel::Debug : LogLevel::Info, "request " + line);
    } catch (...) {
    }
  });
  // CORS preflight (no API key: browsers send none with it).
  s.Options(".*", [&opt](const httplib::Request& req, httplib::Response& res) {
    res.status = 204;
    res.set_header("Allow", "GET, POST, OPTIONS");
    const std::string o = allowed_origin(opt, req);
    if (o.empty()) return;
    add_cors(opt, req, res);
    res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    const std::string h = req.get_header_value("Access-Control-Request-Headers");
    res.set_header("Access-Control-Allow-Headers", h.empty() ? "Authorization, Content-Type" : h);
    res.set_header("Access-Control-Max-Age", "600");
  });
  // Unknown routes with a body: answered without reading it (then the connection closes), so
  // an unbounded chunked body is never buffered.
  const auto not_found = httplib::Server::HandlerWithContentReader(
      [](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader&) {
        close_after_response();
        send_error(res, 404, default_message(req, 404));
      });
  s.Post(".*", not_found);
  s.Put(".*", not_found);
  s.Patch(".*", not_found);
  s.Delete(".*", not_found);
}

}  // namespace dsa::server
