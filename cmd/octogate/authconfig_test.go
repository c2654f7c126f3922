package main

import (
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestKubeconfigAuthenticationConfig(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	if _, _, err := runCertsCmd("certs", "init", "--dir", dir, "--hosts", "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	out, _, err := runCertsCmd("kubeconfig", "authentication-config", "--issuer", "https://octogate.example.com",
		"--audience", "cluster-b", "--ca", filepath.Join(dir, "ca.crt"), "--discovery-url", "https://octogate.octogate-system.svc")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		JWT        []struct {
			Issuer struct {
				URL                  string   `json:"url"`
				DiscoveryURL         string   `json:"discoveryURL"`
				CertificateAuthority string   `json:"certificateAuthority"`
				Audiences            []string `json:"audiences"`
			} `json:"issuer"`
		} `json:"jwt"`
	}
	if err := yaml.Unmarshal([]byte(out), &c); err != nil {
		t.Fatal(err)
	}
	if c.APIVersion != "apiserver.config.k8s.io/v1" || c.Kind != "AuthenticationConfiguration" || len(c.JWT) != 1 {
		t.Fatalf("%+v", c)
	}
	is := c.JWT[0].Issuer
	if is.URL != "https://octogate.example.com" || is.DiscoveryURL != "https://octogate.octogate-system.svc/.well-known/openid-configuration" ||
		!strings.HasPrefix(is.CertificateAuthority, "-----BEGIN CERTIFICATE-----") || strings.Join(is.Audiences, ",") != "cluster-b" {
		t.Errorf("issuer %+v", is)
	}
	if _, _, err := runCertsCmd("kubeconfig", "authentication-config", "--issuer", "http://x", "--audience", "a"); err == nil {
		t.Error("an http issuer was accepted")
	}
}
