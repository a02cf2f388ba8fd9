#!/usr/bin/env bash
# Builds etcd, kube-apiserver, kube-controller-manager and kube-scheduler from the releases
# go.mod pins, into kube/bin/ (ignored). Go's build cache makes a second run take seconds.
set -euo pipefail
cd "$(dirname "$0")"
command -v go >/dev/null || { echo "!! make kube needs Go (https://go.dev/doc/install)" >&2; exit 1; }
k8s=$(go list -mod=readonly -m -f '{{.Version}}' k8s.io/kubernetes)
etcd=$(go list -mod=readonly -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
# The version the binaries report (kubectl version, /version); without it they say v0.0.0.
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=${k8s} \
 -X k8s.io/component-base/version.gitMajor=$(echo "${k8s#v}" | cut -d. -f1) \
 -X k8s.io/component-base/version.gitMinor=$(echo "${k8s#v}" | cut -d. -f2) \
 -X k8s.io/client-go/pkg/version.gitVersion=${k8s} \
 -X go.etcd.io/etcd/api/v3/version.GitSHA=${etcd}"
mkdir -p bin
echo ">> building kube-apiserver, kube-controller-manager, kube-scheduler ${k8s} and etcd ${etcd} into kube/bin"
nice -n 10 go build -mod=readonly -trimpath -ldflags "${ldflags}" -o bin/ \
	k8s.io/kubernetes/cmd/kube-apiserver \
	k8s.io/kubernetes/cmd/kube-controller-manager \
	k8s.io/kubernetes/cmd/kube-scheduler
nice -n 10 go build -mod=readonly -trimpath -ldflags "${ldflags}" -o bin/etcd go.etcd.io/etcd/server/v3
