#!/usr/bin/env bash
# Builds the pinned kube-apiserver, kube-controller-manager, kubectl, etcd and helm into bin/k8s/.
# Versions come from tools/go.mod. Each binary is rebuilt only when its module's go.mod, go.sum
# or its own build flags change (bin/k8s/.NAME.stamp). The first build takes 10-20 minutes on
# 2 cores.
#
# OCTOGATE_K8S_MODULE names another module directory for the three Kubernetes binaries (e.g.
# tools/k8s-1.32, the oldest minor octogate supports); etcd and helm still come from tools/go.mod.
# OCTOGATE_K8S_BIN is where the binaries go (default bin/k8s).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
out=${OCTOGATE_K8S_BIN:-$root/bin/k8s}
kubemod=$(cd "$root" && cd "${OCTOGATE_K8S_MODULE:-$here}" && pwd)
mkdir -p "$out"

cd "$here"
version() { go list -m -f '{{.Version}}' "$1"; }
kube=$(cd "$kubemod" && version k8s.io/kubernetes)
etcd=$(version go.etcd.io/etcd/server/v3)
helm=$(version helm.sh/helm/v3)
[[ $kube =~ ^v([0-9]+)\.([0-9]+) ]] && major=${BASH_REMATCH[1]} minor=${BASH_REMATCH[2]}
now=$(date -u +%Y-%m-%dT%H:%M:%SZ)

kubeflags=""
for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
  kubeflags+=" -X $pkg.gitVersion=$kube -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
  kubeflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$now"
done

modsum() { cat "$1/go.mod" "$1/go.sum" | sha256sum | cut -d' ' -f1; }

build() { # name package ldflags [module directory, default tools/]
  local name=$1 pkg=$2 flags=$3 dir=${4:-$here} start=$SECONDS stamp
  # buildDate changes every run; leave it out of what decides a rebuild.
  stamp=$(printf '%s\n%s\n%s\n' "$(modsum "$dir")" "$pkg" "${flags//$now/}" | sha256sum | cut -d' ' -f1)
  if [ -x "$out/$name" ] && [ "$(cat "$out/.$name.stamp" 2>/dev/null)" = "$stamp" ]; then
    echo "tools: $name is up to date"
    return
  fi
  echo "tools: building $name from $pkg ..."
  (cd "$dir" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $flags" -o "$out/$name.new" "$pkg")
  mv "$out/$name.new" "$out/$name"
  echo "$stamp" > "$out/.$name.stamp"
  echo "tools: built $name in $((SECONDS - start))s"
}

build etcd go.etcd.io/etcd/server/v3 "-X go.etcd.io/etcd/api/v3/version.GitSHA=$etcd"
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$kubeflags" "$kubemod"
build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "$kubeflags" "$kubemod"
build kubectl k8s.io/kubernetes/cmd/kubectl "$kubeflags" "$kubemod"
helmflags="-X helm.sh/helm/v3/internal/version.version=$helm"
# helm's own Makefile sets the Kubernetes version it assumes for `helm template` and lint.
for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
  helmflags+=" -X $pkg.k8sVersionMajor=$major -X $pkg.k8sVersionMinor=$minor"
done
build helm helm.sh/helm/v3/cmd/helm "$helmflags"

touch "$out/.stamp"
echo "tools: kubernetes $kube, etcd $etcd, helm $helm in $out"
