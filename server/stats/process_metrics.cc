#include "server/stats/process_metrics.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/stats/prometheus_exposition.h"

namespace sluice {
namespace {

void Append(std::string* out, const char* name, const char* type, const char* help,
            double value) {
  absl::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n", name, " ",
                  PrometheusValueText(value), "\n");
}

std::string ReadFile(const char* path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The fields of /proc/self/stat after the command name, which may hold spaces and parentheses:
// fields[0] is field 3 of proc(5) (the state).
std::vector<std::string> StatFields() {
  const std::string stat = ReadFile("/proc/self/stat");
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) {
    return {};
  }
  return absl::StrSplit(stat.substr(close + 1), ' ', absl::SkipEmpty());
}

// Field `number` of proc(5)'s /proc/[pid]/stat, or false.
bool StatField(const std::vector<std::string>& fields, size_t number, double* value) {
  return number >= 3 && number - 3 < fields.size() && absl::SimpleAtod(fields[number - 3], value);
}

// The system's boot time (/proc/stat btime), in seconds since the epoch; 0 if unknown.
double BootTime() {
  std::istringstream stat(ReadFile("/proc/stat"));
  std::string line;
  while (std::getline(stat, line)) {
    double seconds = 0;
    if (line.rfind("btime ", 0) == 0 && absl::SimpleAtod(line.substr(6), &seconds)) {
      return seconds;
    }
  }
  return 0;
}

int OpenFds() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) {
    return -1;
  }
  int count = 0;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') {
      ++count;
    }
  }
  closedir(dir);
  return count - 1;  // the directory stream's own descriptor
}

}  // namespace

std::string ProcessMetricsText() {
  std::string out;
  const std::vector<std::string> fields = StatFields();
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  double utime = 0;
  double stime = 0;
  if (ticks > 0 && StatField(fields, 14, &utime) && StatField(fields, 15, &stime)) {
    Append(&out, "process_cpu_seconds_total", "counter",
           "Total user and system CPU time spent in seconds.", (utime + stime) / ticks);
  }
  if (const int fds = OpenFds(); fds >= 0) {
    Append(&out, "process_open_fds", "gauge", "Number of open file descriptors.", fds);
  }
  if (rlimit files{}; getrlimit(RLIMIT_NOFILE, &files) == 0) {
    Append(&out, "process_max_fds", "gauge", "Maximum number of open file descriptors.",
           static_cast<double>(files.rlim_cur));
  }
  double vsize = 0;
  if (StatField(fields, 23, &vsize)) {
    Append(&out, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", vsize);
  }
  double rss_pages = 0;
  if (page > 0 && StatField(fields, 24, &rss_pages)) {
    Append(&out, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
           rss_pages * page);
  }
  double start_ticks = 0;
  const double boot = BootTime();
  if (ticks > 0 && boot > 0 && StatField(fields, 22, &start_ticks)) {
    Append(&out, "process_start_time_seconds", "gauge",
           "Start time of the process since unix epoch in seconds.", boot + start_ticks / ticks);
  }
  return out;
}

}  // namespace sluice
