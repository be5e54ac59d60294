// ProgressBar: a one-line progress display on stderr for long CLI tasks (tuning, loading).
// On a terminal it redraws in place ("\r"), at most ~10 times a second; when stderr is not a
// terminal (logs, CI) it prints a plain line every 10 % instead, so logs stay readable.
// DSA_PROGRESS=0 turns it off.
#pragma once
#include <chrono>
#include <cstddef>
#include <string>

namespace dsa {

class ProgressBar {
 public:
  ProgressBar(std::string title, size_t total);
  ~ProgressBar();  // finish()es when not done
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // Advances by `n` and shows `what` (e.g. the item just started or finished).
  void advance(size_t n = 1, const std::string& what = "");
  // Completes the line (prints the final state and a newline).
  void finish();

  // The bar text for `done` of `total` (exposed for tests), e.g. "[#####-----]  5/10  50%".
  static std::string render(size_t done, size_t total, int width = 24);

 private:
  void draw(bool force);
  std::string title_;
  size_t total_ = 0, done_ = 0;
  std::string what_;
  bool enabled_ = true, tty_ = false, finished_ = false;
  int last_decile_ = -1;
  size_t last_len_ = 0;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace dsa
