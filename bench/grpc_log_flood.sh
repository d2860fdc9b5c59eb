#!/usr/bin/env bash
# How much log a peer can make Sluice write by breaking off TLS handshakes on the gRPC port:
# starts SLUICE (default build/bin/sluice) with a throw-away self-signed certificate on the
# memory backend, opens plaintext connections to the TLS port as fast as one Python loop can for
# SECONDS (default 5), then prints the connections made and the bytes and lines of log written.
#
#   bench/grpc_log_flood.sh [SLUICE] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
sluice="${1:-build/bin/sluice}"
seconds="${2:-5}"
work="$(mktemp -d "${TMPDIR:-/tmp}/sluice-logflood.XXXXXX")"
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$work/key.pem" -out "$work/cert.pem" \
  -days 1 -subj /CN=localhost 2>/dev/null
grpc_port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
http_port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
"$sluice" --config=examples/config --backend=memory \
  --grpc_address="127.0.0.1:$grpc_port" --http_address="127.0.0.1:$http_port" \
  --tls_cert="$work/cert.pem" --tls_key="$work/key.pem" >"$work/log" 2>&1 &
pid=$!
for _ in $(seq 100); do
  python3 -c "import socket; socket.create_connection(('127.0.0.1',$grpc_port)).close()" \
    2>/dev/null && break
  sleep 0.1
done
start_bytes="$(wc -c <"$work/log")"
python3 - "$grpc_port" "$seconds" <<'PY'
import socket, sys, time
port, seconds = int(sys.argv[1]), float(sys.argv[2])
end = time.time() + seconds
n = 0
while time.time() < end:
    s = socket.create_connection(("127.0.0.1", port))
    s.send(b"GET / HTTP/1.1\r\n\r\n\x07garbage" * 3)
    try:
        s.recv(100)
    except OSError:
        pass
    s.close()
    n += 1
print(f"connections: {n}")
PY
sleep 0.5
kill "$pid"; wait "$pid" 2>/dev/null || true
echo "log written during the flood: $(( $(wc -c <"$work/log") - start_bytes )) bytes, $(wc -l <"$work/log") lines in all"
