#include "tests/support/host_stalls.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cmath>
#include <ctime>

#include "absl/strings/str_cat.h"

namespace sluice::testing {

namespace {

// `intervals` sorted, with those that overlap or touch made one.
HostStalls::Intervals Merged(HostStalls::Intervals intervals) {
  std::sort(intervals.begin(), intervals.end());
  HostStalls::Intervals merged;
  for (const auto& [from, to] : intervals) {
    if (!merged.empty() && from <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, to);
    } else {
      merged.emplace_back(from, to);
    }
  }
  return merged;
}

absl::Duration MonotonicNow() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return absl::DurationFromTimespec(now);
}

}  // namespace

HostStalls::HostStalls(std::vector<Intervals> per_cpu) {
  Intervals all;
  for (Intervals& cpu : per_cpu) {
    all.insert(all.end(), cpu.begin(), cpu.end());
    per_cpu_.push_back(Merged(std::move(cpu)));
  }
  merged_ = Merged(std::move(all));
}

absl::Duration HostStalls::total() const {
  absl::Duration sum;
  for (const auto& [from, to] : merged_) sum += to - from;
  return sum;
}

absl::Duration HostStalls::longest() const {
  absl::Duration most;
  for (const auto& [from, to] : merged_) most = std::max(most, to - from);
  return most;
}

uint64_t HostStalls::CallsExposed(double rate, absl::Duration lead) const {
  // Per CPU, the union of [from - lead, to] over its stalls, in seconds; their mean times the
  // rate.
  double seconds = 0;
  for (const Intervals& cpu : per_cpu_) {
    absl::Duration covered_to = -absl::InfiniteDuration();
    for (const auto& [from, to] : cpu) {
      const absl::Duration start = std::max(from - lead, covered_to);
      if (to > start) {
        seconds += absl::ToDoubleSeconds(to - start);
        covered_to = to;
      }
    }
  }
  if (per_cpu_.empty()) return 0;
  return static_cast<uint64_t>(std::ceil(seconds * rate / static_cast<double>(per_cpu_.size())));
}

std::string HostStalls::Describe() const {
  if (merged_.empty()) return "none";
  return absl::StrCat(count(), " (", absl::ToInt64Milliseconds(total()), " ms, longest ",
                      absl::ToInt64Milliseconds(longest()), " ms)");
}

HostStallProbe::HostStallProbe(absl::Duration threshold)
    : threshold_(threshold), start_(MonotonicNow()) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) {
    CPU_SET(0, &allowed);
  }
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &allowed)) cpus.push_back(cpu);
  }
  seen_.resize(cpus.size());
  for (size_t i = 0; i < cpus.size(); ++i) {
    threads_.emplace_back([this, cpu = cpus[i], i] { Watch(cpu, i); });
  }
}

HostStallProbe::~HostStallProbe() {
  if (!threads_.empty()) Stop();
}

HostStalls HostStallProbe::Stop() {
  stopping_.store(true, std::memory_order_relaxed);
  for (auto& thread : threads_) thread.join();
  threads_.clear();
  return HostStalls(std::move(seen_));
}

void HostStallProbe::Watch(int cpu, size_t index) {
  // Pinned, so that a CPU taken away shows while the others run: an unpinned thread would
  // simply be woken on another one.
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
  HostStalls::Intervals seen;
  absl::Duration due = MonotonicNow();
  while (!stopping_.load(std::memory_order_relaxed)) {
    due += kTick;
    const timespec until = absl::ToTimespec(due);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, nullptr) != 0) {
    }
    const absl::Duration woke = MonotonicNow();
    if (woke - due > threshold_) {
      seen.emplace_back(due - start_, woke - start_);
      due = woke;  // no burst of make-up ticks after a stall
    }
  }
  seen_[index] = std::move(seen);
}

}  // namespace sluice::testing
