#!/usr/bin/env bash
# A real Kubernetes API server and kubelet on this machine, for the Kubernetes
# backend's tests, without ever touching the main Docker engine:
#
#   scripts/kube.sh build   # builds kube-apiserver and kubelet once per machine (cached)
#   scripts/kube.sh have-binaries  # exit status: whether they are cached (waits for a build under way)
#   scripts/kube.sh start   # etcd, kube-apiserver, a second dockerd, a kubelet and a registry
#   scripts/kube.sh env     # prints the variables that point the tests at it
#   scripts/kube.sh stop    # stops what `start` started, by PID, and removes it
#
# `build` compiles Debian 12's `kubernetes` source package (1.20.2, vendored)
# with Debian's Go; the binaries are cached in $REEVAL_KUBE_CACHE (default
# /var/cache/reeval-k8s), outside the checkout, and `build` is a no-op when
# they are there. The recipe and its workarounds are in
# shared/reference/engines-here.md, section 3.
set -euo pipefail

CACHE=${REEVAL_KUBE_CACHE:-/var/cache/reeval-k8s}
DIR=${REEVAL_KUBE_DIR:-/tmp/reeval-kube}
DEBIAN=http://deb.debian.org/debian
SRC_VERSION=1.20.5+really1.20.2
DEB_VERSION=$SRC_VERSION-1.1+deb12u1
ORIG_SHA256=b83c0780efb182d928dc63d46488a847f161f04e40a94b96bf5247dd671ecdfc
DEBIAN_SHA256=9b6e5fd41769d2b5badf2e73b274e3bcd90f85e13d06a1a4a845ccce018127d8

log() { printf 'kube: %s\n' "$*" >&2; }

# The stamp names the build recipe: a cache built by an older recipe is rebuilt.
STAMP=reflect2-1.0.2
cached() { [ -x "$CACHE/kube-apiserver" ] && [ -x "$CACHE/kubelet" ] && [ -f "$CACHE/$STAMP" ]; }
# A build holds $CACHE/.lock: whether the binaries are there waits for a build under
# way (CI starts the build in the background and asks just before the cluster's tests).
have_binaries() {
  mkdir -p "$CACHE"
  (flock -s 8 && cached) 8>"$CACHE/.lock"
}

build() {
  mkdir -p "$CACHE"
  exec 8>"$CACHE/.lock"
  flock 8
  if cached; then
    log "kube-apiserver and kubelet already cached in $CACHE"
    return 0
  fi
  for tool in go rsync jq curl; do
    command -v "$tool" >/dev/null || { log "missing $tool (apt-get install golang-go rsync jq curl golang-github-modern-go-reflect2-dev)"; exit 1; }
  done
  local reflect2=/usr/share/gocode/src/github.com/modern-go/reflect2
  [ -f "$reflect2/go_above_118.go" ] || { log "missing reflect2 1.0.2 (apt-get install golang-github-modern-go-reflect2-dev)"; exit 1; }
  local work=$CACHE/build
  mkdir -p "$work"
  cd "$work"
  # The source package straight from the pool (no deb-src line needed), checked.
  local orig=kubernetes_$SRC_VERSION.orig.tar.gz deb=kubernetes_$DEB_VERSION.debian.tar.xz
  [ -f "$orig" ] || curl -fsSLo "$orig" "$DEBIAN/pool/main/k/kubernetes/$orig"
  [ -f "$deb" ] || curl -fsSLo "$deb" "$DEBIAN/pool/main/k/kubernetes/$deb"
  echo "$ORIG_SHA256  $orig" | sha256sum -c --quiet
  echo "$DEBIAN_SHA256  $deb" | sha256sum -c --quiet
  if [ ! -d src ]; then
    rm -rf src.tmp && mkdir src.tmp
    tar -xzf "$orig" -C src.tmp
    # The orig tarball has one top directory; Debian's patches go on top.
    mv src.tmp/* src && rmdir src.tmp
    tar -xJf "$deb" -C src
    (cd src && while read -r patch; do
      case "$patch" in ''|'#'*) continue ;; esac
      patch -p1 -s <"debian/patches/$patch"
    done <debian/patches/series)
    # The vendored reflect2 1.0.1 corrupts memory under Go >= 1.18 (map
    # iteration; kube-apiserver died with SIGSEGV in json-iterator here):
    # Debian's reflect2 1.0.2 is the fix, API-compatible.
    rm -rf src/vendor/github.com/modern-go/reflect2
    cp -r "$reflect2" src/vendor/github.com/modern-go/reflect2
    rm -f src/vendor/github.com/modern-go/reflect2/go.mod
  fi
  cd src
  log "building kube-apiserver and kubelet (about 6 minutes of 2 cores)"
  # Only what the two binaries need: `make WHAT=…` first regenerates every
  # generated file (deepcopy, conversion, defaulters, …), which the tarball
  # already has but for the API server's OpenAPI definitions, so only those
  # are generated. The `providerless` tag leaves out the in-tree cloud
  # providers and their SDKs (a third of the compile); the build strips the
  # binaries (-s -w) and trims paths, as Kubernetes' own does. Vendored code
  # only (GOPATH mode, as its scripts force), no network.
  export CGO_ENABLED=0 GOPROXY=off GOFLAGS=-tags=providerless \
    KUBE_GIT_VERSION=v1.20.2 KUBE_GIT_TREE_STATE=clean
  nice -n 10 make gen_openapi
  nice -n 10 hack/make-rules/build.sh cmd/kube-apiserver cmd/kubelet
  install -m 0755 _output/local/bin/linux/*/kube-apiserver _output/local/bin/linux/*/kubelet "$CACHE/"
  touch "$CACHE/$STAMP"
  cd /
  rm -rf "$work"
  log "cached in $CACHE: $(ls "$CACHE" | tr '\n' ' ')"
}

# --- the cluster -----------------------------------------------------------
# Ports, names and paths of its own (never those of scripts/engines.sh).
ETCD_PORT=${REEVAL_KUBE_ETCD_PORT:-23790}
API_PORT=${REEVAL_KUBE_API_PORT:-26443}
KUBELET_PORT=${REEVAL_KUBE_KUBELET_PORT:-20250}
REGISTRY_PORT=${REEVAL_KUBE_REGISTRY_PORT:-25000}
NETNS=reeval-kube
NODE=reeval-node
IMAGE=reeval/base:latest
PAUSE=reeval-kube/pause:1
D2=$DIR/dockerd
DOCKER2="docker -H unix://$D2/docker.sock"

running() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

api() { # GET a path of the API server as the admin
  curl -fsS --cacert "$DIR/pki/ca.pem" -H "Authorization: Bearer $(sed -n 1p "$DIR/pki/tokens.csv" | cut -d, -f1)" \
    "https://127.0.0.1:$API_PORT$1"
}

node_ready() {
  api "/api/v1/nodes/$NODE" | jq -e '.status.conditions[] | select(.type == "Ready") | .status == "True"' >/dev/null
}

wait_for() { # what, tries of 0.2 s, command...
  local what=$1 tries=$2; shift 2
  for _ in $(seq 1 "$tries"); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  log "$what did not come up; see $DIR/*.log"; return 1
}

certs() {
  mkdir -p "$DIR/pki"
  [ -f "$DIR/pki/ca.pem" ] && return 0
  (
    cd "$DIR/pki"
    openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=reeval test kube CA" -keyout ca-key.pem -out ca.pem 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" -keyout server-key.pem -out server.csr 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' > server.ext
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 30 -extfile server.ext -out server.pem 2>/dev/null
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    # An admin (system:masters), and a user with no role for the RBAC preflight test.
    printf '%s,reeval-admin,reeval-admin,"system:masters"\n%s,reeval-limited,reeval-limited\n' \
      "$(openssl rand -hex 16)" "$(openssl rand -hex 16)" > tokens.csv
  )
}

kubeconfig() { # file token
  {
    echo "apiVersion: v1"
    echo "kind: Config"
    echo "clusters:"
    echo "- name: reeval"
    echo "  cluster: {server: 'https://127.0.0.1:$API_PORT', certificate-authority: '$DIR/pki/ca.pem'}"
    echo "users:"
    echo "- name: user"
    echo "  user: {token: '$2'}"
    echo "contexts:"
    echo "- name: reeval"
    echo "  context: {cluster: reeval, user: user, namespace: default}"
    echo "current-context: reeval"
  } > "$1"
}

start_etcd() {
  running "$DIR/etcd.pid" && return 0
  log "starting etcd on 127.0.0.1:$ETCD_PORT"
  nohup etcd --name reeval-kube --data-dir "$DIR/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" --initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
    --initial-cluster "reeval-kube=http://127.0.0.1:$((ETCD_PORT + 1))" \
    >"$DIR/etcd.log" 2>&1 &
  echo $! > "$DIR/etcd.pid"
  wait_for etcd 100 curl -fsS "http://127.0.0.1:$ETCD_PORT/health"
}

start_apiserver() {
  running "$DIR/apiserver.pid" && return 0
  log "starting kube-apiserver on 127.0.0.1:$API_PORT"
  # Workaround: the kubelet refuses a loopback node IP and reports the host's
  # own address, where it does not listen (it listens on loopback only). So
  # the API server reaches it by its Hostname address, which an /etc/hosts of
  # the API server's own mount namespace resolves to 127.0.0.1.
  { cat /etc/hosts; echo "127.0.0.1 $NODE"; } > "$DIR/hosts"
  {
    echo '#!/bin/sh'
    echo 'set -e'
    echo "mount --bind '$DIR/hosts' /etc/hosts"
    echo "exec '$CACHE/kube-apiserver' \\"
    echo "  --etcd-servers 'http://127.0.0.1:$ETCD_PORT' \\"
    echo "  --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port $API_PORT \\"
    echo "  --tls-cert-file '$DIR/pki/server.pem' --tls-private-key-file '$DIR/pki/server-key.pem' \\"
    echo "  --client-ca-file '$DIR/pki/ca.pem' --token-auth-file '$DIR/pki/tokens.csv' \\"
    echo "  --service-account-key-file '$DIR/pki/sa.pub' --service-account-signing-key-file '$DIR/pki/sa.key' \\"
    echo "  --service-account-issuer https://kubernetes.default.svc --service-cluster-ip-range 10.216.0.0/24 \\"
    echo "  --authorization-mode RBAC --disable-admission-plugins ServiceAccount \\"
    echo "  --kubelet-preferred-address-types Hostname --cert-dir '$DIR/pki/apiserver'"
  } > "$DIR/apiserver.sh"
  chmod +x "$DIR/apiserver.sh"
  nohup unshare -m --kill-child=SIGTERM "$DIR/apiserver.sh" >"$DIR/apiserver.log" 2>&1 &
  echo $! > "$DIR/apiserver.pid"
  wait_for kube-apiserver 300 api /readyz
}

start_dockerd() {
  running "$D2/dockerd.pid" && return 0
  mkdir -p "$D2/data" "$D2/exec"
  # Workaround: runc cannot lower the pause container's oom_score_adj without
  # CAP_SYS_RESOURCE, which this machine lacks; a wrapper drops the setting.
  {
    echo '#!/bin/sh'
    echo 'prev='
    echo 'for a in "$@"; do'
    echo '  if [ "$prev" = --bundle ] && [ -f "$a/config.json" ]; then'
    echo '    jq "del(.process.oomScoreAdj)" "$a/config.json" > "$a/config.json.tmp" && mv "$a/config.json.tmp" "$a/config.json"'
    echo '  fi'
    echo '  prev=$a'
    echo 'done'
    echo "exec $(command -v runc) \"\$@\""
  } > "$D2/runc"
  chmod +x "$D2/runc"
  printf '{"runtimes": {"reeval-runc": {"path": "%s"}}, "default-runtime": "reeval-runc"}\n' "$D2/runc" > "$D2/daemon.json"
  ip netns list | grep -qw "$NETNS" || { ip netns add "$NETNS"; ip netns exec "$NETNS" ip link set lo up; }
  log "starting a second dockerd for the kubelet in netns $NETNS: unix://$D2/docker.sock"
  # nsenter, not `ip netns exec`: that remounts /sys, hiding the cgroup mounts dockerd needs.
  nohup nsenter --net="/var/run/netns/$NETNS" dockerd \
    --config-file "$D2/daemon.json" \
    --data-root "$D2/data" --exec-root "$D2/exec" --pidfile "$D2/dockerd.pid" \
    -H "unix://$D2/docker.sock" \
    --iptables=false --ip-masq=false --ip-forward=false \
    --storage-driver fuse-overlayfs --cgroup-parent /reeval-kube \
    >"$D2/dockerd.log" 2>&1 &
  wait_for "the second dockerd" 150 $DOCKER2 version
  if ! $DOCKER2 image inspect "$IMAGE" >/dev/null 2>&1; then
    log "copying $IMAGE into it"
    docker save "$IMAGE" | $DOCKER2 load >/dev/null
  fi
  if ! $DOCKER2 image inspect "$PAUSE" >/dev/null 2>&1; then
    printf 'FROM %s\nENTRYPOINT ["sleep", "infinity"]\n' "$IMAGE" | $DOCKER2 build -q -t "$PAUSE" - >/dev/null
  fi
}

start_kubelet() {
  running "$DIR/kubelet.pid" && return 0
  mkdir -p "$DIR/kubelet" "$DIR/varlog" "$DIR/sysctl"
  [ -d /var/lib/kubelet ] || touch "$DIR/remove-var-lib-kubelet"
  # Read-only copies of the sysctls the kubelet would otherwise rewrite, holding the values it wants.
  echo 1 > "$DIR/sysctl/overcommit_memory"; echo 10 > "$DIR/sysctl/panic"; echo 1 > "$DIR/sysctl/panic_on_oops"
  # Workaround: dockershim forwards a port with `nsenter -t <pid> -n socat - TCP4:localhost:<port>`,
  # where <pid> is the pod's process as the host sees it, which the kubelet's own PID namespace
  # does not. Every pod here is on the node's network ($NETNS): the wrapper enters that instead.
  mkdir -p "$DIR/bin"
  {
    echo '#!/bin/sh'
    echo 'if [ "$1" = -t ] && [ "$3" = -n ]; then shift 3; exec '"$(command -v nsenter)"' --net=/var/run/netns/'"$NETNS"' "$@"; fi'
    echo 'exec '"$(command -v nsenter)"' "$@"'
  } > "$DIR/bin/nsenter"
  chmod +x "$DIR/bin/nsenter"
  {
    echo '#!/bin/sh'
    echo 'set -e'
    echo "mount --bind -o ro '$DIR/sysctl/overcommit_memory' /proc/sys/vm/overcommit_memory"
    echo "mount --bind -o ro '$DIR/sysctl/panic' /proc/sys/kernel/panic"
    echo "mount --bind -o ro '$DIR/sysctl/panic_on_oops' /proc/sys/kernel/panic_on_oops"
    echo "mount --bind '$DIR/varlog' /var/log"
    echo "export PATH='$DIR/bin':\$PATH"
    echo "exec '$CACHE/kubelet' --kubeconfig '$DIR/admin.kubeconfig' --hostname-override $NODE \\"
    echo "  --container-runtime docker --docker-endpoint 'unix://$D2/docker.sock' --pod-infra-container-image $PAUSE \\"
    echo "  --root-dir '$DIR/kubelet/root' --cert-dir '$DIR/kubelet/pki' --volume-plugin-dir '$DIR/kubelet/plugins' \\"
    echo "  --experimental-dockershim-root-directory '$DIR/kubelet/dockershim' \\"
    echo "  --address 127.0.0.1 --port $KUBELET_PORT --read-only-port 0 --healthz-port 0 \\"
    echo "  --fail-swap-on=false --cgroups-per-qos=false --enforce-node-allocatable= --cgroup-driver cgroupfs \\"
    echo "  --make-iptables-util-chains=false --eviction-hard= --image-gc-high-threshold 100 --image-gc-low-threshold 99 \\"
    echo "  --v 1"
  } > "$DIR/kubelet.sh"
  chmod +x "$DIR/kubelet.sh"
  log "starting the kubelet (node $NODE, port $KUBELET_PORT) in its own mount and PID namespaces"
  nohup unshare -m -p -f --kill-child=SIGTERM --mount-proc "$DIR/kubelet.sh" >"$DIR/kubelet.log" 2>&1 &
  echo $! > "$DIR/kubelet.pid"
  wait_for "node $NODE Ready" 300 node_ready
  # Pods on the node's network (hostNetwork) report the node's address as their IP,
  # but live in $NETNS, which has only lo: give lo that address, so that they reach
  # each other there as on a real node (the egress tests' sandbox -> gateway pod).
  local node_ip
  node_ip=$(api "/api/v1/nodes/$NODE" | jq -r '.status.addresses[] | select(.type == "InternalIP") | .address')
  if [ -n "$node_ip" ] && ! ip netns exec "$NETNS" ip -4 addr show dev lo | grep -qw "$node_ip"; then
    ip netns exec "$NETNS" ip addr add "$node_ip/32" dev lo
  fi
}

# A registry for images reeval builds and pushes (Debian's docker-registry) on
# 127.0.0.1:$REGISTRY_PORT, where the main engine pushes to it over HTTP (it
# treats 127.0.0.0/8 as insecure by default). The node's dockerd lives in
# $NETNS, whose 127.0.0.1 is its own: socat listens on the same port there and
# forwards through a unix socket to socat here, so one name works for both.
start_registry() {
  command -v docker-registry >/dev/null && command -v socat >/dev/null \
    || { log "missing docker-registry or socat (apt-get install docker-registry socat)"; exit 1; }
  if ! running "$DIR/registry.pid"; then
    mkdir -p "$DIR/registry/data"
    {
      echo "version: 0.1"
      echo "storage: {filesystem: {rootdirectory: '$DIR/registry/data'}, delete: {enabled: true}}"
      echo "http: {addr: '127.0.0.1:$REGISTRY_PORT'}"
      echo "log: {level: warn}"
    } > "$DIR/registry/config.yml"
    log "starting a registry on 127.0.0.1:$REGISTRY_PORT"
    nohup docker-registry serve "$DIR/registry/config.yml" >"$DIR/registry.log" 2>&1 &
    echo $! > "$DIR/registry.pid"
    wait_for "the registry" 100 curl -fsS "http://127.0.0.1:$REGISTRY_PORT/v2/"
  fi
  if ! running "$DIR/registry-socat-host.pid"; then
    rm -f "$DIR/registry.sock"
    nohup socat "UNIX-LISTEN:$DIR/registry.sock,fork" "TCP:127.0.0.1:$REGISTRY_PORT" >/dev/null 2>&1 &
    echo $! > "$DIR/registry-socat-host.pid"
  fi
  if ! running "$DIR/registry-socat-netns.pid"; then
    nohup ip netns exec "$NETNS" socat "TCP-LISTEN:$REGISTRY_PORT,bind=127.0.0.1,fork,reuseaddr" \
      "UNIX-CONNECT:$DIR/registry.sock" >/dev/null 2>&1 &
    echo $! > "$DIR/registry-socat-netns.pid"
  fi
  wait_for "the registry in $NETNS" 100 ip netns exec "$NETNS" curl -fsS "http://127.0.0.1:$REGISTRY_PORT/v2/"
}

start() {
  have_binaries || { log "no cached binaries in $CACHE: run $0 build first"; exit 1; }
  for tool in etcd unshare nsenter socat jq openssl curl dockerd; do
    command -v "$tool" >/dev/null || { log "missing $tool (apt-get install etcd-server util-linux jq openssl curl)"; exit 1; }
  done
  mkdir -p "$DIR"
  certs
  kubeconfig "$DIR/admin.kubeconfig" "$(sed -n 1p "$DIR/pki/tokens.csv" | cut -d, -f1)"
  kubeconfig "$DIR/limited.kubeconfig" "$(sed -n 2p "$DIR/pki/tokens.csv" | cut -d, -f1)"
  start_etcd
  start_apiserver
  start_dockerd
  start_kubelet
  start_registry
  log "ready: KUBECONFIG=$DIR/admin.kubeconfig (node $NODE)"
}

print_env() {
  echo "export REEVAL_TEST_KUBECONFIG=$DIR/admin.kubeconfig"
  echo "export REEVAL_TEST_KUBECONFIG_LIMITED=$DIR/limited.kubeconfig"
  echo "export REEVAL_TEST_KUBE_NODE=$NODE"
  echo "export REEVAL_TEST_KUBE_REGISTRY=127.0.0.1:$REGISTRY_PORT"
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
  stop_pid "$DIR/registry-socat-netns.pid"
  stop_pid "$DIR/registry-socat-host.pid"
  stop_pid "$DIR/registry.pid"
  rm -rf "$DIR/registry" "$DIR/registry.sock"
  stop_pid "$DIR/kubelet.pid"
  # The pods' containers, so that their shims go with the daemon.
  if [ -S "$D2/docker.sock" ]; then
    $DOCKER2 ps -aq | xargs -r $DOCKER2 rm -f >/dev/null 2>&1 || true
  fi
  stop_pid "$D2/dockerd.pid"
  stop_pid "$DIR/apiserver.pid"
  stop_pid "$DIR/etcd.pid"
  grep -o "$DIR/[^ ]*" /proc/mounts 2>/dev/null | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
  if ip netns list | grep -qw "$NETNS"; then ip netns delete "$NETNS"; fi
  # The kubelet creates /var/lib/kubelet/device-plugins whatever its root dir is.
  if [ -f "$DIR/remove-var-lib-kubelet" ]; then rm -rf /var/lib/kubelet "$DIR/remove-var-lib-kubelet"; fi
  # The cluster's state goes; certificates and the daemon's images stay for the next start.
  rm -rf "$DIR/etcd" "$DIR/kubelet" || log "could not remove all of $DIR/kubelet"
  log "stopped"
}

case "${1:-}" in
  build) build ;;
  have-binaries) have_binaries ;;
  start) start >&2; print_env ;;
  env) print_env ;;
  stop) stop ;;
  *) echo "usage: $0 build|start|env|stop" >&2; exit 2 ;;
esac
