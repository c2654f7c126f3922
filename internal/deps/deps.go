package deps

import (
	_ "github.com/caarlos0/env/v11"
	_ "github.com/go-chi/chi/v5"
	_ "github.com/google/go-github/v57/github"
	_ "github.com/hashicorp/golang-lru/v2/expirable"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/spf13/cobra"
	_ "golang.org/x/oauth2"
	_ "golang.org/x/sync/singleflight"
	_ "k8s.io/api/authentication/v1"
	_ "k8s.io/client-go/kubernetes"
	_ "sigs.k8s.io/controller-runtime/pkg/envtest"
	_ "sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	_ "sigs.k8s.io/controller-runtime/pkg/certwatcher"
	_ "sigs.k8s.io/yaml"
	_ "gomodules.xyz/jsonpatch/v2"
	_ "github.com/evanphx/json-patch/v5"
	_ "github.com/fsnotify/fsnotify"
)
