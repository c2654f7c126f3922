package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/octogate/octogate/session"
)

// The chart's CronJob: the Secret starts empty, each run updates it only when a step is due,
// and what it writes is a key file serve loads.
func TestRotateSecretIsIdempotent(t *testing.T) {
	const name = "octogate-session-keys"
	cs := fake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: renewNS},
		Data: map[string][]byte{"keep": []byte("x")}})
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	run := func(at time.Time) session.Rotation {
		t.Helper()
		r, err := rotateSecret(context.Background(), cs.CoreV1(), renewNS, name, session.RotateOptions{Now: at})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	signer := func() string {
		t.Helper()
		s, err := cs.CoreV1().Secrets(renewNS).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if string(s.Data["keep"]) != "x" {
			t.Fatalf("the Secret's other keys were not kept: %v", s.Data)
		}
		k, err := session.ParseKeys(s.Data[SessionKeysSecretKey])
		if err != nil {
			t.Fatalf("the Secret's %s does not load: %v", SessionKeysSecretKey, err)
		}
		return k.KeyID()
	}
	first := run(t0)
	if updates(cs) != 1 || signer() != first.Signer {
		t.Fatalf("first run: %d updates, signer %s, want 1 and %s", updates(cs), signer(), first.Signer)
	}
	run(t0.Add(time.Minute))
	if updates(cs) != 1 {
		t.Fatalf("a run with nothing due updated the Secret (%d updates)", updates(cs))
	}
	second := run(t0.Add(session.DefaultPublishFor))
	if updates(cs) != 2 || second.Signer != first.Added || signer() != first.Added {
		t.Fatalf("the run after %v: %d updates, signer %s, want 2 and the key published by the first run %s", session.DefaultPublishFor, updates(cs), signer(), first.Added)
	}
}

func TestRotateKeyFileCreatesAndKeeps(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.pem")
	t0 := time.Now()
	r, err := rotateKeyFile(path, session.RotateOptions{Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	k, err := session.LoadKeys(path)
	if err != nil || k.KeyID() != r.Signer || len(k.Public()) != 2 {
		t.Fatalf("new file: %v, %v; want signer %s and a pending key", k, err, r.Signer)
	}
	if r, err = rotateKeyFile(path, session.RotateOptions{Now: t0.Add(time.Minute)}); err != nil || r.Changed() {
		t.Fatalf("second run: %+v, %v; want unchanged", r, err)
	}
}
