#!/usr/bin/env bash
# Starts and stops the extra engines the engine tests run against, without
# ever touching the main Docker engine:
#
#   scripts/engines.sh start   # a second dockerd (TCP+TLS on 127.0.0.1, and SSH), and Podman
#   scripts/engines.sh env     # prints the variables that point at them
#   scripts/engines.sh stop    # stops what `start` started, by PID, and removes it
#
# The second dockerd follows the safe recipe (shared/reference/engines-here.md):
# its own config file, data root, exec root and pid file, and its own network
# namespace (reeval-engine2), reached from the host over a veth pair
# (10.214.0.1 here, 10.214.0.2 there). There its bridges, its docker0 and its
# firewall are its own: the host's FORWARD policy (DROP, with bridge netfilter
# on) would otherwise drop traffic between its containers, and nothing it does
# can touch the main engine's docker0 (never `--bridge none`). The base image is
# copied into each engine (docker save | load). State lives under
# $REEVAL_ENGINES_DIR (default /tmp/reeval-engines).
set -euo pipefail

DIR=${REEVAL_ENGINES_DIR:-/tmp/reeval-engines}
D2=$DIR/dockerd
PORT=${REEVAL_ENGINE2_PORT:-23760}
SSH_PORT=${REEVAL_ENGINE2_SSH_PORT:-23722}
NETNS=reeval-engine2
HOST_IP=10.214.0.1
NETNS_IP=10.214.0.2
IMAGE=reeval/base:latest

log() { printf 'engines: %s\n' "$*" >&2; }

certs() {
  mkdir -p "$D2/tls" "$D2/client"
  cd "$D2/tls"
  [ -f ca.pem ] && return 0
  openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=reeval test engine CA" -keyout ca-key.pem -out ca.pem 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout server-key.pem -out server.csr 2>/dev/null
  printf 'subjectAltName=IP:%s,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' "$NETNS_IP" > server.ext
  openssl x509 -req -in server.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 30 -extfile server.ext -out server-cert.pem 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=reeval test client" -keyout key.pem -out client.csr 2>/dev/null
  printf 'extendedKeyUsage=clientAuth\n' > client.ext
  openssl x509 -req -in client.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 30 -extfile client.ext -out cert.pem 2>/dev/null
  cp ca.pem cert.pem key.pem "$D2/client/"
  cd - >/dev/null
}

start_dockerd() {
  if [ -f "$D2/dockerd.pid" ] && kill -0 "$(cat "$D2/dockerd.pid")" 2>/dev/null; then
    log "second dockerd already runs"
    return 0
  fi
  mkdir -p "$D2/data" "$D2/exec"
  echo '{}' > "$D2/daemon.json"
  certs
  if ! ip netns list | grep -qw "$NETNS"; then
    ip netns add "$NETNS"
    ip link add reeval-e2h type veth peer name reeval-e2n
    ip link set reeval-e2n netns "$NETNS"
    ip addr add "$HOST_IP/30" dev reeval-e2h
    ip link set reeval-e2h up
    ip netns exec "$NETNS" ip addr add "$NETNS_IP/30" dev reeval-e2n
    ip netns exec "$NETNS" ip link set reeval-e2n up
    ip netns exec "$NETNS" ip link set lo up
    ip netns exec "$NETNS" ip route add default via "$HOST_IP"
    # Its containers reach the host (test upstreams listen on 0.0.0.0) as 10.214.0.2.
    ip netns exec "$NETNS" sysctl -qw net.ipv4.ip_forward=1
    ip netns exec "$NETNS" iptables -t nat -A POSTROUTING -o reeval-e2n -j MASQUERADE
  fi
  log "starting a second dockerd in netns $NETNS: tcp://$NETNS_IP:$PORT (TLS) and unix://$D2/docker.sock"
  # nsenter, not `ip netns exec`: that remounts /sys, hiding the cgroup mounts dockerd needs.
  nohup nsenter --net="/var/run/netns/$NETNS" dockerd \
    --config-file "$D2/daemon.json" \
    --data-root "$D2/data" --exec-root "$D2/exec" --pidfile "$D2/dockerd.pid" \
    -H "unix://$D2/docker.sock" -H "tcp://$NETNS_IP:$PORT" \
    --tlsverify --tlscacert "$D2/tls/ca.pem" --tlscert "$D2/tls/server-cert.pem" --tlskey "$D2/tls/server-key.pem" \
    --iptables=false --ip-masq=false --ip-forward=false \
    --storage-driver fuse-overlayfs --cgroup-parent /reeval-engine2 \
    >"$D2/dockerd.log" 2>&1 &
  for _ in $(seq 1 100); do
    docker -H "unix://$D2/docker.sock" version >/dev/null 2>&1 && break
    sleep 0.2
  done
  docker -H "unix://$D2/docker.sock" version --format 'second dockerd {{.Server.Version}} (API {{.Server.APIVersion}})' >&2
  if ! docker -H "unix://$D2/docker.sock" image inspect "$IMAGE" >/dev/null 2>&1; then
    log "copying $IMAGE into it"
    docker save "$IMAGE" | docker -H "unix://$D2/docker.sock" load >/dev/null
  fi
}

start_sshd() {
  command -v sshd >/dev/null || { log "no sshd (apt-get install openssh-server): skipping SSH"; return 0; }
  if [ -f "$D2/sshd.pid" ] && kill -0 "$(cat "$D2/sshd.pid")" 2>/dev/null; then return 0; fi
  mkdir -p "$D2/ssh" /run/sshd
  [ -f "$D2/ssh/host_key" ] || ssh-keygen -q -t ed25519 -N '' -f "$D2/ssh/host_key"
  [ -f "$D2/ssh/client_key" ] || ssh-keygen -q -t ed25519 -N '' -f "$D2/ssh/client_key"
  # The session's docker CLI talks to the second engine: bollard runs `docker system dial-stdio`.
  printf 'command="DOCKER_HOST=unix://%s/docker.sock exec ${SSH_ORIGINAL_COMMAND}",no-port-forwarding,no-pty %s\n' \
    "$D2" "$(cat "$D2/ssh/client_key.pub")" > "$D2/ssh/authorized_keys"
  chmod 600 "$D2/ssh/authorized_keys"
  cat > "$D2/ssh/sshd_config" <<EOF
Port $SSH_PORT
ListenAddress 127.0.0.1
HostKey $D2/ssh/host_key
PidFile $D2/sshd.pid
AuthorizedKeysFile $D2/ssh/authorized_keys
PasswordAuthentication no
PermitRootLogin prohibit-password
StrictModes no
UsePAM no
# bollard opens an SSH connection per request: sshd's default (10 unauthenticated
# at once, then 30 % dropped) dropped one under load (an exec inspect failed).
MaxStartups 200:30:400
EOF
  "$(command -v sshd)" -f "$D2/ssh/sshd_config" -E "$D2/sshd.log"
  # A host alias with its port, key and known hosts, so `ssh://reeval-engine2` works
  # unattended (bollard's SSH transport does not read a port from DOCKER_HOST).
  mkdir -p ~/.ssh && chmod 700 ~/.ssh
  touch ~/.ssh/config
  if ! grep -q "^Host reeval-engine2" ~/.ssh/config; then
    cat >> ~/.ssh/config <<EOF

# scripts/engines.sh: the second test engine over SSH
Host reeval-engine2
  HostName 127.0.0.1
  Port $SSH_PORT
  User root
  IdentityFile $D2/ssh/client_key
  StrictHostKeyChecking accept-new
  UserKnownHostsFile $D2/ssh/known_hosts
EOF
  fi
  log "sshd on 127.0.0.1:$SSH_PORT"
}

start_podman() {
  command -v podman >/dev/null || { log "no podman (apt-get install podman catatonit): skipping Podman"; return 0; }
  if [ -f "$DIR/podman.pid" ] && kill -0 "$(cat "$DIR/podman.pid")" 2>/dev/null; then return 0; fi
  mkdir -p "$DIR"
  # Started in its state dir: conmon can leave files in its working directory
  # (an empty `oom` after an OOM kill appeared once at the repository's root).
  (cd "$DIR" && exec nohup podman system service --time=0 "unix://$DIR/podman.sock" >"$DIR/podman.log" 2>&1) &
  echo $! > "$DIR/podman.pid"
  for _ in $(seq 1 50); do [ -S "$DIR/podman.sock" ] && break; sleep 0.2; done
  if ! podman image exists "$IMAGE"; then
    log "copying $IMAGE into Podman"
    docker save "$IMAGE" | podman load >/dev/null
  fi
  log "podman service on unix://$DIR/podman.sock"
}

print_env() {
  # The TLS engine as https:// with its client certificates: DOCKER_TLS_VERIFY
  # is not exported, because it would point the docker CLI's default engine at
  # tcp://localhost:2376 instead of the local socket.
  echo "export DOCKER_CERT_PATH=$D2/client"
  echo "export REEVAL_TEST_ENGINE2=https://$NETNS_IP:$PORT"
  if [ -f "$D2/sshd.pid" ]; then echo "export REEVAL_TEST_ENGINE2_SSH=ssh://reeval-engine2"; fi
  if [ -f "$DIR/podman.pid" ]; then echo "export REEVAL_TEST_PODMAN=unix://$DIR/podman.sock"; fi
  echo "export REEVAL_TEST_ENGINE2_PIDFILE=$D2/dockerd.pid"
}

stop_pid() {
  local file=$1
  [ -f "$file" ] || return 0
  local pid
  pid=$(cat "$file")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$file"
}

stop() {
  # Containers of the second engine first, so its shims go with it.
  if [ -S "$D2/docker.sock" ]; then
    docker -H "unix://$D2/docker.sock" ps -aq | xargs -r docker -H "unix://$D2/docker.sock" rm -f >/dev/null 2>&1 || true
  fi
  stop_pid "$D2/dockerd.pid"
  stop_pid "$D2/sshd.pid"
  stop_pid "$DIR/podman.pid"
  # What the daemon left mounted under its exec root (network namespaces).
  grep -o "$D2/[^ ]*" /proc/mounts 2>/dev/null | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
  ip link show reeval-e2h >/dev/null 2>&1 && ip link delete reeval-e2h || true
  ip netns list | grep -qw "$NETNS" && ip netns delete "$NETNS" || true
  log "stopped"
}

case "${1:-}" in
  start) start_dockerd >&2; start_sshd >&2; start_podman >&2; print_env ;;
  start-dockerd) start_dockerd >&2 ;;
  stop-dockerd) stop_pid "$D2/dockerd.pid" ;;
  env) print_env ;;
  stop) stop ;;
  *) echo "usage: $0 start|env|stop" >&2; exit 2 ;;
esac
