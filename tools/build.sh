#!/usr/bin/env bash
# Builds the pinned kube-apiserver, kube-controller-manager, kubectl, etcd and helm into bin/k8s/.
# Versions come from tools/go.mod; the binaries are rebuilt only when go.mod, go.sum or this
# script change. The first build takes several minutes on 2 cores.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
out=${OCTOGATE_K8S_BIN:-$root/bin/k8s}
mkdir -p "$out"

stamp=$(cat "$here/go.mod" "$here/go.sum" "$here/build.sh" | sha256sum | cut -d' ' -f1)
tools=(kube-apiserver kube-controller-manager kubectl etcd helm)
if [ -f "$out/.stamp" ] && [ "$(cat "$out/.stamp")" = "$stamp" ]; then
  missing=0
  for t in "${tools[@]}"; do [ -x "$out/$t" ] || missing=1; done
  if [ $missing = 0 ]; then
    echo "tools: bin/k8s is up to date ($(cd "$here" && go list -m -f '{{.Version}}' k8s.io/kubernetes))"
    exit 0
  fi
fi

cd "$here"
version() { go list -m -f '{{.Version}}' "$1"; }
kube=$(version k8s.io/kubernetes)
etcd=$(version go.etcd.io/etcd/server/v3)
helm=$(version helm.sh/helm/v3)
[[ $kube =~ ^v([0-9]+)\.([0-9]+) ]] && major=${BASH_REMATCH[1]} minor=${BASH_REMATCH[2]}
now=$(date -u +%Y-%m-%dT%H:%M:%SZ)

kubeflags=""
for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
  kubeflags+=" -X $pkg.gitVersion=$kube -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
  kubeflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$now"
done

build() { # name package ldflags
  local name=$1 pkg=$2 flags=$3 start=$SECONDS
  echo "tools: building $name from $pkg ..."
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $flags" -o "$out/$name.new" "$pkg"
  mv "$out/$name.new" "$out/$name"
  echo "tools: built $name in $((SECONDS - start))s"
}

build etcd go.etcd.io/etcd/server/v3 "-X go.etcd.io/etcd/api/v3/version.GitSHA=$etcd"
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$kubeflags"
build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "$kubeflags"
build kubectl k8s.io/kubernetes/cmd/kubectl "$kubeflags"
build helm helm.sh/helm/v3/cmd/helm "-X helm.sh/helm/v3/internal/version.version=$helm"

echo "$stamp" > "$out/.stamp"
echo "tools: kubernetes $kube, etcd $etcd, helm $helm in $out"
