// sluice-netdelay: holds every packet of one netfilter queue for a fixed time, then lets it go.
// With an iptables rule `-j NFQUEUE --queue-num <N> --queue-bypass` in a network namespace it
// adds a real delay to the packets the rule matches: what `tc qdisc ... netem delay` does, on kernels built without
// sch_netem (this project's test machines among them). Packets keep their order, since every
// packet waits the same time; with no sluice-netdelay bound to the queue, `bypass` lets them
// through undelayed.
//
//   sluice-netdelay <queue number> <delay in microseconds>
//
// Prints "ready" once bound to the queue. SIGTERM or SIGINT lets every held packet go and exits.
// Test tooling: Linux only, needs CAP_NET_ADMIN in the namespace it runs in.
#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>

extern "C" {
#include <libnetfilter_queue/libnetfilter_queue.h>
}

namespace {

volatile sig_atomic_t stopping = 0;

void OnSignal(int) { stopping = 1; }

int64_t NowMicros() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

struct Held {
  uint32_t id;
  int64_t due_us;
};

struct State {
  int64_t delay_us = 0;
  std::deque<Held> held;  // in arrival order, which is also due order
};

int OnPacket(nfq_q_handle*, nfgenmsg*, nfq_data* packet, void* data) {
  auto* state = static_cast<State*>(data);
  const nfqnl_msg_packet_hdr* header = nfq_get_msg_packet_hdr(packet);
  if (header != nullptr) {
    state->held.push_back(Held{ntohl(header->packet_id), NowMicros() + state->delay_us});
  }
  return 0;
}

void Release(nfq_q_handle* queue, State& state, int64_t now_us) {
  while (!state.held.empty() && state.held.front().due_us <= now_us) {
    nfq_set_verdict(queue, state.held.front().id, NF_ACCEPT, 0, nullptr);
    state.held.pop_front();
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s <queue number> <delay in microseconds>\n", argv[0]);
    return 2;
  }
  const int queue_number = std::atoi(argv[1]);
  State state;
  state.delay_us = std::atoll(argv[2]);
  if (queue_number < 0 || queue_number > 65535 || state.delay_us < 0) {
    std::fprintf(stderr, "bad queue number or delay\n");
    return 2;
  }
  signal(SIGTERM, OnSignal);
  signal(SIGINT, OnSignal);

  nfq_handle* handle = nfq_open();
  if (handle == nullptr) {
    std::perror("nfq_open");
    return 1;
  }
  nfq_q_handle* queue =
      nfq_create_queue(handle, static_cast<uint16_t>(queue_number), &OnPacket, &state);
  if (queue == nullptr) {
    std::perror("nfq_create_queue");
    return 1;
  }
  // Only the verdict is needed, not the payload.
  if (nfq_set_mode(queue, NFQNL_COPY_META, 0) < 0) {
    std::perror("nfq_set_mode");
    return 1;
  }
  nfq_set_queue_maxlen(queue, 65536);
  const int fd = nfq_fd(handle);
  std::printf("ready\n");
  std::fflush(stdout);

  alignas(8) char buffer[65536];
  while (!stopping) {
    const int64_t now = NowMicros();
    Release(queue, state, now);
    // Sleep exactly until the next packet is due (poll's milliseconds would add up to 1 ms to
    // each delay), or a while when none is held; a packet arriving wakes it early.
    const int64_t wait_us =
        state.held.empty() ? 100000 : std::max<int64_t>(0, state.held.front().due_us - now);
    timespec wait{static_cast<time_t>(wait_us / 1000000), static_cast<long>(wait_us % 1000000) * 1000};
    pollfd pfd{fd, POLLIN, 0};
    const int ready = ppoll(&pfd, 1, &wait, nullptr);
    if (ready <= 0) {
      continue;
    }
    for (;;) {
      const ssize_t n = recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT);
      if (n < 0) {
        // ENOBUFS: the kernel dropped queue messages it could not deliver; those packets are
        // lost, as on a congested link. Anything else: nothing more to read now.
        break;
      }
      nfq_handle_packet(handle, buffer, static_cast<int>(n));
    }
  }
  for (const Held& h : state.held) {
    nfq_set_verdict(queue, h.id, NF_ACCEPT, 0, nullptr);
  }
  nfq_destroy_queue(queue);
  nfq_close(handle);
  return 0;
}
