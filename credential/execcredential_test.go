package credential

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run go test -update once): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden file:\n got: %s\nwant: %s", name, got, want)
	}
}

func TestParseExecInfo(t *testing.T) {
	tests := []struct {
		name    string
		value   string
		want    ExecInfo
		wantErr string
	}{
		{name: "unset means v1, as when run by hand", value: "", want: ExecInfo{APIVersion: ExecAPIVersionV1}},
		{name: "v1 interactive", value: `{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1","spec":{"interactive":true}}`,
			want: ExecInfo{APIVersion: ExecAPIVersionV1, Interactive: true}},
		{name: "v1beta1 is still accepted", value: `{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1beta1","spec":{}}`,
			want: ExecInfo{APIVersion: ExecAPIVersionV1beta1}},
		{name: "v1alpha1 is refused naming the versions spoken", value: `{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1alpha1"}`,
			wantErr: `asks for apiVersion "client.authentication.k8s.io/v1alpha1"; octogate credential speaks client.authentication.k8s.io/v1 and client.authentication.k8s.io/v1beta1`},
		{name: "missing apiVersion is refused", value: `{"kind":"ExecCredential"}`, wantErr: `asks for apiVersion ""`},
		{name: "wrong kind is refused", value: `{"kind":"Pod","apiVersion":"client.authentication.k8s.io/v1"}`, wantErr: `has kind "Pod"`},
		{name: "not JSON is refused", value: `apiVersion: v1`, wantErr: "is not a JSON ExecCredential"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseExecInfo(tt.value)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrExecInfo) {
					t.Fatalf("err = %v, want ErrExecInfo containing %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("error is not one line: %q", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseExecInfo = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestWriteExecCredentialGolden(t *testing.T) {
	expiry := time.Date(2026, 1, 2, 4, 4, 5, 999, time.FixedZone("CET", 3600))
	tests := []struct {
		name   string
		info   ExecInfo
		golden string
	}{
		{name: "v1", info: ExecInfo{APIVersion: ExecAPIVersionV1}, golden: "execcredential-v1.json"},
		{name: "v1beta1 interactive", info: ExecInfo{APIVersion: ExecAPIVersionV1beta1, Interactive: true}, golden: "execcredential-v1beta1.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := WriteExecCredential(&out, tt.info, Token{Value: "golden-test-token", Expiry: expiry}); err != nil {
				t.Fatal(err)
			}
			golden(t, tt.golden, out.Bytes())
		})
	}
}

func TestWriteExecCredentialRefusesEmptyToken(t *testing.T) {
	if err := WriteExecCredential(&bytes.Buffer{}, ExecInfo{APIVersion: ExecAPIVersionV1}, Token{}); err == nil {
		t.Fatal("an ExecCredential without a token was written")
	}
}

func TestTokenStringHidesValue(t *testing.T) {
	tok := Token{Value: "ghp_secret", Source: SourceEnv, Expiry: time.Unix(0, 0)}
	for _, s := range []string{tok.String(), tok.GoString()} {
		if strings.Contains(s, "ghp_secret") {
			t.Errorf("%q shows the token", s)
		}
	}
}

func FuzzParseExecInfo(f *testing.F) {
	f.Add(`{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1","spec":{"interactive":true}}`)
	f.Fuzz(func(t *testing.T, value string) {
		info, err := ParseExecInfo(value)
		if err != nil {
			if !errors.Is(err, ErrExecInfo) {
				t.Fatalf("error does not wrap ErrExecInfo: %v", err)
			}
			return
		}
		if info.APIVersion != ExecAPIVersionV1 && info.APIVersion != ExecAPIVersionV1beta1 {
			t.Fatalf("accepted apiVersion %q", info.APIVersion)
		}
	})
}
