package krew

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/octogate.yaml")

var allPlatforms = []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64", "windows/amd64", "windows/arm64"}

// sums gives every archive of allPlatforms a distinct fake checksum.
func sums(version string) map[string]string {
	out := map[string]string{}
	for i, p := range allPlatforms {
		goos, goarch, _ := strings.Cut(p, "/")
		out[ArchiveName(version, goos, goarch)] = strings.Repeat(string(rune('a'+i)), 64)
		out["octogate_"+version+"_"+goos+"_"+goarch] = strings.Repeat("0", 64)
	}
	return out
}

func release() Release {
	return Release{
		Version:     "0.1.0",
		DownloadURL: "https://github.com/octogate/octogate/releases/download/v0.1.0",
		Platforms:   allPlatforms,
		Checksums:   sums("0.1.0"),
	}
}

// TestRenderGolden: the manifest of a release of every platform, byte for byte
// (go test -run TestRenderGolden -update rewrites it).
func TestRenderGolden(t *testing.T) {
	m, err := Render(release())
	if err != nil {
		t.Fatal(err)
	}
	got, err := Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "octogate.yaml")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("manifest differs from %s:\n%s", golden, got)
	}
	back, err := Decode(got)
	if err != nil {
		t.Fatalf("the rendered manifest does not decode: %v", err)
	}
	if len(back.Spec.Platforms) != len(allPlatforms) {
		t.Errorf("%d platforms, want %d", len(back.Spec.Platforms), len(allPlatforms))
	}
}

func TestRenderEachPlatformPointsAtItsArchive(t *testing.T) {
	rel := release()
	m, err := Render(rel)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range m.Spec.Platforms {
		goos, goarch, _ := strings.Cut(allPlatforms[i], "/")
		archive := ArchiveName("0.1.0", goos, goarch)
		if p.Selector.MatchLabels["os"] != goos || p.Selector.MatchLabels["arch"] != goarch {
			t.Errorf("platform %d selects %v, want os=%s arch=%s", i, p.Selector.MatchLabels, goos, goarch)
		}
		if want := rel.DownloadURL + "/" + archive; p.URI != want {
			t.Errorf("%s: uri %s, want %s", allPlatforms[i], p.URI, want)
		}
		if p.Sha256 != rel.Checksums[archive] {
			t.Errorf("%s: sha256 %s is not the archive's %s", allPlatforms[i], p.Sha256, rel.Checksums[archive])
		}
		want := "kubectl-octogate"
		if goos == "windows" {
			want += ".exe"
		}
		if p.Bin != want {
			t.Errorf("%s: bin %q, want %q", allPlatforms[i], p.Bin, want)
		}
	}
}

func TestRenderRefuses(t *testing.T) {
	for name, edit := range map[string]func(*Release){
		"a platform whose archive has no checksum": func(r *Release) {
			delete(r.Checksums, ArchiveName("0.1.0", "darwin", "arm64"))
		},
		"a platform that is not GOOS/GOARCH": func(r *Release) { r.Platforms = []string{"linux"} },
		"no platform":                        func(r *Release) { r.Platforms = nil },
		"a version that is not semver":       func(r *Release) { r.Version = "1.0" },
		"a download URL that is not https":   func(r *Release) { r.DownloadURL = "http://example.com" },
		"the same platform twice":            func(r *Release) { r.Platforms = []string{"linux/amd64", "linux/amd64"} },
	} {
		t.Run(name, func(t *testing.T) {
			rel := release()
			rel.Checksums = sums("0.1.0")
			edit(&rel)
			if m, err := Render(rel); err == nil {
				t.Errorf("rendered %+v", m)
			}
		})
	}
}

func TestDecodeIsStrict(t *testing.T) {
	good, err := os.ReadFile(filepath.Join("testdata", "octogate.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for name, doc := range map[string]string{
		"an unknown field":           strings.Replace(string(good), "  homepage:", "  homepag: x\n  homepage:", 1),
		"a field repeated":           strings.Replace(string(good), "  homepage:", "  version: v0.2.0\n  homepage:", 1),
		"another apiVersion":         strings.Replace(string(good), "v1alpha2", "v1alpha1", 1),
		"a sha256 that is not hex":   strings.Replace(string(good), strings.Repeat("a", 64), strings.Repeat("z", 64), 1),
		"a selector without arch":    strings.Replace(string(good), "arch: amd64", "cpu: amd64", 1),
		"a version without v":        strings.Replace(string(good), "version: v0.1.0", "version: 0.1.0", 1),
		"not YAML":                   "{",
		"a platform without its bin": strings.Replace(string(good), "bin: kubectl-octogate\n", "", 1),
	} {
		t.Run(name, func(t *testing.T) {
			if doc == string(good) {
				t.Fatal("the edit changed nothing")
			}
			if _, err := Decode([]byte(doc)); err == nil {
				t.Error("decoded")
			}
		})
	}
}

func TestParseChecksums(t *testing.T) {
	a, b := strings.Repeat("a", 64), strings.Repeat("b", 64)
	got, err := ParseChecksums(strings.NewReader(a + "  octogate_0.1.0_linux_amd64\n" + b + " *kubectl-octogate_0.1.0_linux_amd64.tar.gz\n\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["octogate_0.1.0_linux_amd64"] != a || got["kubectl-octogate_0.1.0_linux_amd64.tar.gz"] != b {
		t.Errorf("got %v", got)
	}
	for name, in := range map[string]string{
		"a short digest":     "abc  octogate\n",
		"upper-case hex":     strings.Repeat("A", 64) + "  octogate\n",
		"no name":            a + "  \n",
		"a name with a path": a + "  ../octogate\n",
		"a name twice":       a + "  octogate\n" + b + "  octogate\n",
	} {
		t.Run(name, func(t *testing.T) {
			if got, err := ParseChecksums(strings.NewReader(in)); err == nil {
				t.Errorf("parsed %v", got)
			}
		})
	}
}

func TestArchiveIsReproducibleAndHoldsTheBinary(t *testing.T) {
	files := []ArchiveFile{{Name: "kubectl-octogate", Mode: 0o755, Data: []byte("binary")}, {Name: "LICENSE", Mode: 0o644, Data: []byte("license")}}
	var one, two bytes.Buffer
	if err := WriteArchive(&one, files, time.Unix(1700000000, 0)); err != nil {
		t.Fatal(err)
	}
	if err := WriteArchive(&two, files, time.Unix(1700000000, 0)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(one.Bytes(), two.Bytes()) {
		t.Error("the same files gave different archives")
	}
	got, err := readArchive(bytes.NewReader(one.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if g := got[f.Name]; g.Mode != f.Mode || string(g.Data) != string(f.Data) {
			t.Errorf("%s: mode %o data %q, want %o %q", f.Name, g.Mode, g.Data, f.Mode, f.Data)
		}
	}
}

func FuzzDecode(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join("testdata", "octogate.yaml")); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			return
		}
		if err := m.Validate(); err != nil {
			t.Errorf("Decode returned a manifest that does not validate: %v", err)
		}
	})
}

func FuzzParseChecksums(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		sums, err := ParseChecksums(strings.NewReader(s))
		if err != nil {
			return
		}
		for name, sum := range sums {
			if name == "" || !sha256Hex.MatchString(sum) {
				t.Errorf("parsed %q: %q", name, sum)
			}
		}
	})
}

// readArchive lists the regular files of a gzip-compressed tar by name.
func readArchive(r io.Reader) (map[string]ArchiveFile, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("archive: %w", err)
	}
	tr := tar.NewReader(zr)
	out := map[string]ArchiveFile{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("archive: %w", err)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, fmt.Errorf("archive %s: %w", hdr.Name, err)
		}
		out[hdr.Name] = ArchiveFile{Name: hdr.Name, Mode: hdr.Mode, Data: data}
	}
}
