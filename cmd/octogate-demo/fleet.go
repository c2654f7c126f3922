package main

import (
	"context"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/octogate/octogate/credential"
	"github.com/octogate/octogate/fleet"
	"github.com/octogate/octogate/internal/cluster"
	"github.com/octogate/octogate/internal/tour"
)

// managedAudience is the managed-like cluster's name at the issuer: the audience of its
// sessions, verified by its proxy.
const managedAudience = "managed"

// fleetServer is where kubectl reaches one of the issuer's clusters, and the CA of that address.
type fleetServer struct {
	url, caFile string
}

// unknownServer stands in for a cluster's address in the clusters file octogate starts with:
// the clusters' ports are chosen as they start, and the file is rewritten then (octogate
// reloads it).
var unknownServer = fleetServer{url: "https://127.0.0.1:1"}

// fleetClusters is the issuer's clusters file (OCTOGATE_SESSION_CLUSTERS_FILE, docs/sessions.md
// "Fleet"): the demo cluster, whose octogate verifies sessions (mode (a)), for every org member,
// and the managed-like cluster behind octogate's proxy, for acme/platform-admins only (alice,
// not bob).
func fleetClusters(demo, managed fleetServer) ([]byte, error) {
	c := func(name string, s fleetServer, accepts fleet.Accepts, env string) (fleet.Cluster, error) {
		out := fleet.Cluster{Name: name, Server: s.url, Accepts: accepts, Labels: map[string]string{"env": env}}
		if s.caFile != "" {
			ca, err := os.ReadFile(s.caFile)
			if err != nil {
				return out, err
			}
			out.CertificateAuthorityData = base64.StdEncoding.EncodeToString(ca)
		}
		return out, nil
	}
	d, err := c(sessionAudience, demo, fleet.AcceptsWebhook, "dev")
	if err != nil {
		return nil, err
	}
	m, err := c(managedAudience, managed, fleet.AcceptsProxy, "prod")
	if err != nil {
		return nil, err
	}
	m.Subjects = []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: cluster.AdminGroup}}
	b, err := yaml.Marshal(fleet.SessionClusters{APIVersion: fleet.APIVersion, Kind: fleet.Kind, Clusters: []fleet.Cluster{d, m}})
	if err != nil {
		return nil, err
	}
	if _, err := fleet.Parse(b); err != nil {
		return nil, fmt.Errorf("the demo's clusters file: %w", err)
	}
	return b, nil
}

// writeFleetClusters writes the clusters file at path, replacing it in one rename so that
// octogate never reads half of it.
func writeFleetClusters(path string, demo, managed fleetServer) error {
	b, err := fleetClusters(demo, managed)
	if err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// managedVerifierEnv makes the managed-like cluster's octogate (its proxy) verify the demo
// issuer's sessions for cluster managed; caFile is the issuer's serving CA.
func managedVerifierEnv(issuer, caFile string) []string {
	return []string{
		"OCTOGATE_SESSION_TRUST_ISSUER=" + issuer,
		"OCTOGATE_SESSION_TRUST_CA_FILE=" + caFile,
		"OCTOGATE_SESSION_AUDIENCE=" + managedAudience,
	}
}

// waitFleet waits until the issuer lists the managed cluster at server to alice (octogate
// reloads the clusters file on its directory's events, else every 2 s), for at most 10 s.
func waitFleet(ctx context.Context, issuer, caFile, server string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		_, clusters, err := credential.IssuerClusters(ctx, issuer, caFile, cluster.AliceToken)
		for _, c := range clusters {
			if c.Name == managedAudience && c.Server == server {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("the issuer does not list cluster %s at %s", managedAudience, server), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// demoFleetTour is the fleet part of the tour: alice's and bob's fixed tokens, the issuer and
// its CA, the kubeconfig `octogate login` writes (fleetKubeconfig, in the demo's directory,
// removed on exit) and a session cache in the demo's work directory.
func demoFleetTour(issuer, caFile, fleetKubeconfig, work string) tour.FleetTour {
	return tour.FleetTour{Issuer: issuer, CAFile: caFile, AliceToken: cluster.AliceToken, BobToken: cluster.BobToken,
		Kubeconfig: fleetKubeconfig, Cache: filepath.Join(work, "fleet-cache")}
}

// waitCA waits until path holds a PEM certificate (`octogate certs init` writes its files all
// at once, by swapping a symlink), polling every 20 ms until ctx is done.
func waitCA(ctx context.Context, path string) error {
	for {
		if b, err := os.ReadFile(path); err == nil {
			if block, _ := pem.Decode(b); block != nil && block.Type == "CERTIFICATE" {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the issuer's CA %s: %w", path, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
