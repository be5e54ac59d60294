#include "dsa/core/progress.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

namespace dsa {

ProgressBar::ProgressBar(std::string title, size_t total) : title_(std::move(title)), total_(total) {
  const char* env = std::getenv("DSA_PROGRESS");
  enabled_ = !(env && std::strcmp(env, "0") == 0);
  tty_ = ::isatty(::fileno(stderr)) == 1;
  start_ = last_draw_ = std::chrono::steady_clock::now();
  draw(true);
}

ProgressBar::~ProgressBar() {
  if (!finished_) finish();
}

std::string ProgressBar::render(size_t done, size_t total, int width) {
  size_t shown = total ? std::min(done, total) : 0;
  int fill = total ? static_cast<int>(shown * width / total) : width;
  int pct = total ? static_cast<int>(shown * 100 / total) : 100;
  std::string bar(fill, '#');
  bar.append(width - fill, '-');
  int digits = static_cast<int>(fmt::format("{}", total).size());
  return fmt::format("[{}] {:>{}}/{} {:>3}%", bar, done, digits, total, pct);
}

void ProgressBar::advance(size_t n, const std::string& what) {
  done_ += n;
  if (!what.empty()) what_ = what;
  draw(false);
}

void ProgressBar::draw(bool force) {
  if (!enabled_) return;
  auto now = std::chrono::steady_clock::now();
  double elapsed = std::chrono::duration<double>(now - start_).count();
  std::string eta;
  if (done_ > 0 && done_ < total_) eta = fmt::format(" ETA {:.0f}s", elapsed / done_ * (total_ - done_));
  std::string line = fmt::format("{} {} {:.1f}s{}", title_, render(done_, total_), elapsed, eta);
  if (!what_.empty()) line += "  " + what_;
  if (tty_) {
    if (!force && now - last_draw_ < std::chrono::milliseconds(100) && done_ < total_) return;
    last_draw_ = now;
    std::string padded = line;
    if (padded.size() < last_len_) padded.append(last_len_ - padded.size(), ' ');
    last_len_ = line.size();
    std::fprintf(stderr, "\r%s", padded.c_str());
    std::fflush(stderr);
  } else {
    int decile = total_ ? static_cast<int>(std::min(done_, total_) * 10 / total_) : 10;
    if (!force && decile == last_decile_) return;
    last_decile_ = decile;
    std::fprintf(stderr, "%s\n", line.c_str());
  }
}

void ProgressBar::finish() {
  if (finished_) return;
  finished_ = true;
  if (!enabled_) return;
  if (tty_) {
    draw(true);
    std::fprintf(stderr, "\n");
  } else if (last_decile_ != 10 || done_ == 0) {
    last_decile_ = -1;
    draw(true);
  }
}

}  // namespace dsa
