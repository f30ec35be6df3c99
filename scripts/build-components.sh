#!/usr/bin/env bash
# Builds the real Kubernetes components the component tests (test/components/) run, into
# .components/ (ignored), with the machine's Go and the Go module proxy:
#   kube-proxy, kube-apiserver, kubelet, kube-controller-manager, kube-scheduler
#                  k8s.io/kubernetes/cmd/..., the release test/cluster/go.mod pins
#   etcd           go.etcd.io/etcd/server/v3 (etcdmain), the version that release requires
#   wireguard-go   golang.zx2c4.com/wireguard, the version test/tunnels/go.mod pins (tunnel lab)
#   ip-masq-agent  k8s.io/ip-masq-agent, when the module proxy serves it; it refuses that module
#                  today, so the refusal is recorded in .components/ip-masq-agent.unavailable
#                  (the tests show it as their skip reason). IP_MASQ_AGENT_SRC=<a checkout of
#                  kubernetes-sigs/ip-masq-agent, or its git directory> builds it from there (from
#                  a git directory: its newest v* release tag, or IP_MASQ_AGENT_REF).
# Idempotent: skips a component whose inputs (go.mod, go.sum, Go version, this script) are
# unchanged since its last build; the Go build and module caches make a rebuild quick.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${COMPONENTS_DIR:-$root/.components}"
mkdir -p "$out"
export GOFLAGS="${GOFLAGS:--buildvcs=false}"

stamp_of() { # the inputs of one component, hashed
  { go version; cat "$root/scripts/build-components.sh"; for f in "$@"; do cat "$f"; done; } |
    sha256sum | cut -d' ' -f1
}

up_to_date() { # name stamp
  [[ -x "$out/$1" && -f "$out/$1.stamp" && "$(cat "$out/$1.stamp")" == "$2" ]]
}

timed() { # name command...: runs it and prints how long it took
  local name="$1" start=$SECONDS
  shift
  "$@"
  echo "build-components: $name built in $((SECONDS - start))s"
}

# kube-proxy and kube-apiserver (tools of the module test/cluster, whose go.mod pins
# k8s.io/kubernetes and its staging modules) and etcd (test/cluster/etcd: etcdmain of
# go.etcd.io/etcd/server/v3, the version k8s.io/kubernetes requires), built from the module
# cache: no copied source.
cluster="$root/test/cluster"
s="$(stamp_of "$cluster/go.mod" "$cluster/go.sum" "$cluster/etcd/main.go")"
# the version a Kubernetes binary reports is the pinned module's (a module build has no git tree)
v="$(cd "$cluster" && go list -m -f '{{.Version}}' k8s.io/kubernetes)"
minor="${v#v1.}"
minor="${minor%%.*}"
pkg=k8s.io/component-base/version
for c in kube-proxy:k8s.io/kubernetes/cmd/kube-proxy \
  kube-apiserver:k8s.io/kubernetes/cmd/kube-apiserver kubelet:k8s.io/kubernetes/cmd/kubelet \
  kube-controller-manager:k8s.io/kubernetes/cmd/kube-controller-manager \
  kube-scheduler:k8s.io/kubernetes/cmd/kube-scheduler etcd:./etcd; do
  name="${c%%:*}"
  if up_to_date "$name" "$s"; then
    echo "build-components: $name up to date ($out/$name)"
    continue
  fi
  (cd "$cluster" && timed "$name" go build -trimpath \
    -ldflags "-X $pkg.gitVersion=$v -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor" \
    -o "$out/$name" "${c#*:}")
  echo "$s" >"$out/$name.stamp"
done

# ip-masq-agent
build_ipmasq_from() { # directory holding go.mod of k8s.io/ip-masq-agent (with its vendor/)
  local mod=-mod=mod
  [[ -d "$1/vendor" ]] && mod=-mod=vendor
  (cd "$1" && timed ip-masq-agent go build "$mod" -trimpath -o "$out/ip-masq-agent" \
    ./cmd/ip-masq-agent)
}
if [[ -n "${IP_MASQ_AGENT_SRC:-}" ]]; then
  src="$IP_MASQ_AGENT_SRC"
  if [[ -f "$src/HEAD" && ! -e "$src/go.mod" ]]; then # a git directory: a release's tree
    ref="${IP_MASQ_AGENT_REF:-$(git --git-dir="$src" tag --list 'v*' --sort=-v:refname | head -1)}"
    rev="$(git --git-dir="$src" rev-parse "${ref:-HEAD}^{commit}")"
    s="$(echo "$rev" | stamp_of /dev/stdin)"
    if up_to_date ip-masq-agent "$s"; then
      echo "build-components: ip-masq-agent up to date ($out/ip-masq-agent, ${ref:-HEAD})"
    else
      tree="$(mktemp -d)"
      trap 'rm -rf "$tree"' EXIT
      git --git-dir="$src" archive "$rev" | tar -x -C "$tree"
      build_ipmasq_from "$tree"
      echo "build-components: ip-masq-agent is ${ref:-HEAD} (${rev:0:12})"
      echo "$s" >"$out/ip-masq-agent.stamp"
    fi
  else
    build_ipmasq_from "$src"
    rm -f "$out/ip-masq-agent.stamp"
  fi
  rm -f "$out/ip-masq-agent.unavailable"
elif probe="$(cd "$cluster" && go list -m -json k8s.io/ip-masq-agent@latest 2>&1)"; then
  version="$(sed -n 's/^\t"Version": "\(.*\)",$/\1/p' <<<"$probe")"
  s="$(echo "$version" | stamp_of /dev/stdin)"
  if up_to_date ip-masq-agent "$s"; then
    echo "build-components: ip-masq-agent up to date ($out/ip-masq-agent, $version)"
  else
    gobin="$(mktemp -d)"
    timed ip-masq-agent env GOBIN="$gobin" go install "k8s.io/ip-masq-agent/cmd/ip-masq-agent@$version"
    mv "$gobin/ip-masq-agent" "$out/ip-masq-agent"
    rm -rf "$gobin"
    echo "$s" >"$out/ip-masq-agent.stamp"
  fi
  rm -f "$out/ip-masq-agent.unavailable"
elif [[ -x "$out/ip-masq-agent" ]]; then
  echo "build-components: ip-masq-agent: the module proxy does not serve it; keeping the one built before"
else
  printf 'the Go module proxy does not serve k8s.io/ip-masq-agent: %s\n' \
    "$(tr -s '[:space:]' ' ' <<<"$probe" | sed -E 's#https?://[^/ ]+#<proxy>#g;s/ $//')" \
    >"$out/ip-masq-agent.unavailable"
  echo "build-components: ip-masq-agent not built: $(cat "$out/ip-masq-agent.unavailable")"
fi
# wireguard-go (golang.zx2c4.com/wireguard, the version test/tunnels/go.mod pins): the userspace
# WireGuard the tunnel lab runs where the kernel module is missing.
tunnels="$root/test/tunnels"
s="$(stamp_of "$tunnels/go.mod" "$tunnels/go.sum")"
if up_to_date wireguard-go "$s"; then
  echo "build-components: wireguard-go up to date ($out/wireguard-go)"
else
  (cd "$tunnels" && timed wireguard-go go build -trimpath -o "$out/wireguard-go" golang.zx2c4.com/wireguard)
  echo "$s" >"$out/wireguard-go.stamp"
fi
echo "build-components: done ($out)"
