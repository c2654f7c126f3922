package image

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

var testConfig = Config{
	Version:  "9.8.7",
	Revision: "0123456789abcdef0123456789abcdef01234567",
	Created:  time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC),
}

var hostPlatform = v1.Platform{OS: "linux", Architecture: runtime.GOARCH}

// hostBinary builds cmd/octogate once per test binary for the host's architecture: linking
// it is the expensive part of these tests.
var hostBinary = sync.OnceValues(func() ([]byte, error) {
	return GoBuild(context.Background(), moduleRoot(), hostPlatform, testConfig.Version, testConfig.Revision)
})

func moduleRoot() string {
	wd, _ := os.Getwd()
	return filepath.Join(wd, "..", "..")
}

func requireLinux(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skipf("the image is a linux image; running its binary needs linux, not %s", runtime.GOOS)
	}
}

// TestImageFromLayout builds the image for the host's architecture into an OCI layout, reads
// it back as a container runtime would, and runs the binary it holds.
func TestImageFromLayout(t *testing.T) {
	requireLinux(t)
	bin, err := hostBinary()
	if err != nil {
		t.Fatal(err)
	}
	idx, err := Build(context.Background(), testConfig, []v1.Platform{hostPlatform}, func(context.Context, v1.Platform) ([]byte, error) { return bin, nil })
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "layout")
	ref := "ghcr.io/octogate/octogate:9.8.7"
	if err := WriteLayout(dir, idx, ref, "9.8.7"); err != nil {
		t.Fatal(err)
	}

	lp, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	topManifest, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(topManifest.Manifests) != 1 {
		t.Fatalf("index.json lists %d entries, want 1", len(topManifest.Manifests))
	}
	named := topManifest.Manifests[0]
	if named.MediaType != types.OCIImageIndex || named.Annotations[AnnotationRefName] != "9.8.7" || named.Annotations[AnnotationContainerdName] != ref {
		t.Errorf("index.json entry = %s %v, want an OCI image index named 9.8.7 / %s", named.MediaType, named.Annotations, ref)
	}
	multi, err := top.ImageIndex(named.Digest)
	if err != nil {
		t.Fatal(err)
	}
	mm, err := multi.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	img, err := multi.Image(mm.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}

	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("user = %q, want the numeric non-root 65532:65532", cf.Config.User)
	}
	if !slices.Equal(cf.Config.Entrypoint, []string{"/usr/local/bin/octogate"}) || len(cf.Config.Cmd) != 0 {
		t.Errorf("entrypoint, cmd = %q, %q; want [/usr/local/bin/octogate], none", cf.Config.Entrypoint, cf.Config.Cmd)
	}
	wantLabels := map[string]string{
		"org.opencontainers.image.source":   "https://github.com/octogate/octogate",
		"org.opencontainers.image.version":  "9.8.7",
		"org.opencontainers.image.revision": testConfig.Revision,
		"org.opencontainers.image.created":  "2026-11-30T12:00:00Z",
	}
	for k, v := range wantLabels {
		if cf.Config.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, cf.Config.Labels[k], v)
		}
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH || !cf.Created.Equal(testConfig.Created) {
		t.Errorf("config os/arch/created = %s/%s/%s", cf.OS, cf.Architecture, cf.Created.Time)
	}

	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%d layers, want 1 (the binary on an empty base)", len(layers))
	}
	if mt, _ := layers[0].MediaType(); mt != types.OCILayer {
		t.Errorf("layer media type %s, want %s", mt, types.OCILayer)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	var names []string
	var extracted []byte
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, hdr.Name)
		if !hdr.ModTime.Equal(testConfig.Created) {
			t.Errorf("%s mtime %s, want %s", hdr.Name, hdr.ModTime, testConfig.Created)
		}
		if hdr.Name == "usr/local/bin/octogate" {
			if hdr.Mode != 0o755 {
				t.Errorf("binary mode %o, want 755", hdr.Mode)
			}
			if extracted, err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !slices.IsSorted(names) {
		t.Errorf("tar entries not sorted: %q", names)
	}
	for _, n := range names {
		if strings.HasPrefix(n, "bin/") || strings.HasSuffix(n, "/sh") {
			t.Errorf("the image has %s; want no shell", n)
		}
	}
	if extracted == nil {
		t.Fatalf("no usr/local/bin/octogate in the layer: %q", names)
	}

	exe := filepath.Join(t.TempDir(), "octogate")
	if err := os.WriteFile(exe, extracted, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(exe, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("octogate version from the image: %v\n%s", err, out)
	}
	if want := "octogate 9.8.7 (commit " + testConfig.Revision; !strings.HasPrefix(string(out), want) {
		t.Errorf("octogate version = %q, want it to start with %q", out, want)
	}
}

// TestBuildIsReproducible builds the binary twice and the index twice: same source, same
// bytes, same digest.
func TestBuildIsReproducible(t *testing.T) {
	requireLinux(t)
	first, err := hostBinary()
	if err != nil {
		t.Fatal(err)
	}
	second, err := GoBuild(context.Background(), moduleRoot(), hostPlatform, testConfig.Version, testConfig.Revision)
	if err != nil {
		t.Fatal(err)
	}
	if sha256.Sum256(first) != sha256.Sum256(second) {
		t.Fatal("two builds of cmd/octogate from the same source differ")
	}
	digest := func(bin []byte, c Config) v1.Hash {
		t.Helper()
		idx, err := Build(context.Background(), c, []v1.Platform{hostPlatform}, func(context.Context, v1.Platform) ([]byte, error) { return bin, nil })
		if err != nil {
			t.Fatal(err)
		}
		d, err := idx.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	a, b := digest(first, testConfig), digest(second, testConfig)
	if a != b {
		t.Errorf("index digests differ: %s, %s", a, b)
	}
	later := testConfig
	later.Created = later.Created.Add(time.Second)
	if c := digest(first, later); c == a {
		t.Errorf("a different SOURCE_DATE_EPOCH gave the same digest %s; the time is not recorded", c)
	}
	t.Logf("index digest %s", a)
}

// TestIndexListsBothArchitectures checks the multi-arch index with stand-in binaries (cross
// compiling for real is `make image`'s job).
func TestIndexListsBothArchitectures(t *testing.T) {
	idx, err := Build(context.Background(), testConfig, Platforms, func(_ context.Context, p v1.Platform) ([]byte, error) {
		return []byte("binary for " + p.Architecture), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if mt, _ := idx.MediaType(); mt != types.OCIImageIndex {
		t.Errorf("index media type %s, want %s", mt, types.OCIImageIndex)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range im.Manifests {
		if d.MediaType != types.OCIManifestSchema1 {
			t.Errorf("%s: media type %s, want %s", d.Platform, d.MediaType, types.OCIManifestSchema1)
		}
		got = append(got, d.Platform.String())
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.Architecture != d.Platform.Architecture || cf.OS != "linux" {
			t.Errorf("%s: config says %s/%s", d.Platform, cf.OS, cf.Architecture)
		}
	}
	if want := []string{"linux/amd64", "linux/arm64"}; !slices.Equal(got, want) {
		t.Errorf("index platforms %q, want %q", got, want)
	}
	if im.Annotations[LabelVersion] != "9.8.7" || im.Annotations[LabelRevision] != testConfig.Revision {
		t.Errorf("index annotations %v, want version and revision", im.Annotations)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no version", Config{Revision: "abc"}, "version is empty"},
		{"no revision", Config{Version: "1.0.0"}, "revision is empty"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Build(context.Background(), c.cfg, Platforms, func(context.Context, v1.Platform) ([]byte, error) { return []byte("x"), nil })
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want %q", err, c.want)
			}
		})
	}
	if _, err := Image(nil, hostPlatform, testConfig); err == nil || !bytes.Contains([]byte(err.Error()), []byte("empty binary")) {
		t.Errorf("Image(nil) err = %v, want empty binary", err)
	}
}
