package image

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// BinaryPath is where the image holds the octogate binary; it is the entrypoint.
	BinaryPath = "/usr/local/bin/octogate"
	// User is the numeric uid:gid the image runs as: "nonroot" of distroless images, so a
	// Pod's runAsNonRoot check passes without naming a user.
	User = "65532:65532"
	// SourceURL is the default org.opencontainers.image.source label.
	SourceURL = "https://github.com/octogate/octogate"
	// Package is the main package built into the image.
	Package = "./cmd/octogate"

	// OCI label and annotation keys.
	// Source: https://github.com/opencontainers/image-spec/blob/main/annotations.md
	LabelSource   = "org.opencontainers.image.source"
	LabelVersion  = "org.opencontainers.image.version"
	LabelRevision = "org.opencontainers.image.revision"
	LabelCreated  = "org.opencontainers.image.created"
	LabelTitle    = "org.opencontainers.image.title"
	// AnnotationRefName names an image in an OCI layout's index.json (the tag).
	AnnotationRefName = "org.opencontainers.image.ref.name"
	// AnnotationContainerdName is the full reference containerd (`ctr image import`) reads.
	AnnotationContainerdName = "io.containerd.image.name"
)

// Platforms are the platforms `make image` builds.
var Platforms = []v1.Platform{
	{OS: "linux", Architecture: "amd64"},
	{OS: "linux", Architecture: "arm64"},
}

// Config is what goes into the image's labels and timestamps.
type Config struct {
	// Version (e.g. "0.1.0") and Revision (the git commit) become the version and revision
	// labels and are linked into the binary (`octogate version`). Both required.
	Version, Revision string
	// Source is the source label; default SourceURL.
	Source string
	// Created is the one time written everywhere a time is recorded (tar entries, the config's
	// created field, the created label). The zero value means the Unix epoch.
	Created time.Time
}

func (c Config) validate() (Config, error) {
	if c.Version == "" {
		return c, errors.New("image: version is empty")
	}
	if c.Revision == "" {
		return c, errors.New("image: revision is empty")
	}
	if c.Source == "" {
		c.Source = SourceURL
	}
	if c.Created.IsZero() {
		c.Created = time.Unix(0, 0)
	}
	c.Created = c.Created.UTC().Truncate(time.Second)
	return c, nil
}

func (c Config) labels() map[string]string {
	return map[string]string{
		LabelSource:   c.Source,
		LabelVersion:  c.Version,
		LabelRevision: c.Revision,
		LabelCreated:  c.Created.Format(time.RFC3339),
		LabelTitle:    "octogate",
	}
}

// BinaryFunc returns the octogate binary for one platform.
type BinaryFunc func(ctx context.Context, p v1.Platform) ([]byte, error)

// Build returns an OCI image index with one image per platform, in the order given, each
// made by Image from binary(ctx, platform).
func Build(ctx context.Context, c Config, platforms []v1.Platform, binary BinaryFunc) (v1.ImageIndex, error) {
	c, err := c.validate()
	if err != nil {
		return nil, err
	}
	if len(platforms) == 0 {
		return nil, errors.New("image: no platforms")
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	idx = mutate.Annotations(idx, c.labels()).(v1.ImageIndex)
	adds := make([]mutate.IndexAddendum, 0, len(platforms))
	for _, p := range platforms {
		bin, err := binary(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("image: %s: %w", p, err)
		}
		img, err := Image(bin, p, c)
		if err != nil {
			return nil, fmt.Errorf("image: %s: %w", p, err)
		}
		p := p
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	return mutate.AppendManifests(idx, adds...), nil
}

// Image returns the image of one platform: an empty base plus one layer holding binary at
// BinaryPath (mode 0755) and /etc/passwd and /etc/group naming User, so tools that look the
// user up find it. The config runs BinaryPath as User; there is no shell.
func Image(binary []byte, p v1.Platform, c Config) (v1.Image, error) {
	c, err := c.validate()
	if err != nil {
		return nil, err
	}
	if len(binary) == 0 {
		return nil, errors.New("image: empty binary")
	}
	layerTar, err := layerTar(binary, c.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("image: layer: %w", err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: p.Architecture,
		OS:           p.OS,
		Variant:      p.Variant,
		Created:      v1.Time{Time: c.Created},
		Config: v1.Config{
			User:       User,
			Entrypoint: []string{BinaryPath},
			Env:        []string{"PATH=/usr/local/bin", "HOME=/home/nonroot"},
			WorkingDir: "/",
			Labels:     c.labels(),
		},
		RootFS: v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return nil, fmt.Errorf("image: config: %w", err)
	}
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History: v1.History{
			Created:   v1.Time{Time: c.Created},
			CreatedBy: "octogate internal/image: " + BinaryPath,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("image: append layer: %w", err)
	}
	return img, nil
}

// layerTar is the layer's uncompressed tar: entries sorted by name, owned by root, all with
// modification time mtime, directories before their contents.
func layerTar(binary []byte, mtime time.Time) ([]byte, error) {
	uid, gid, _ := strings.Cut(User, ":")
	files := map[string]struct {
		data []byte
		mode int64
	}{
		"etc/":           {mode: 0o755},
		"etc/passwd":     {data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:" + uid + ":" + gid + ":nonroot:/home/nonroot:/sbin/nologin\n"), mode: 0o644},
		"etc/group":      {data: []byte("root:x:0:\nnonroot:x:" + gid + ":\n"), mode: 0o644},
		"home/":          {mode: 0o755},
		"home/nonroot/":  {mode: 0o700},
		"usr/":           {mode: 0o755},
		"usr/local/":     {mode: 0o755},
		"usr/local/bin/": {mode: 0o755},
		BinaryPath[1:]:   {data: binary, mode: 0o755},
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		f := files[n]
		hdr := &tar.Header{Name: n, Mode: f.mode, ModTime: mtime, Format: tar.FormatPAX, Typeflag: tar.TypeReg, Size: int64(len(f.data))}
		if strings.HasSuffix(n, "/") {
			hdr.Typeflag = tar.TypeDir
			hdr.Size = 0
		}
		if n == "home/nonroot/" {
			var err error
			if hdr.Uid, err = strconv.Atoi(uid); err != nil {
				return nil, fmt.Errorf("image: uid of User %q: %w", User, err)
			}
			if hdr.Gid, err = strconv.Atoi(gid); err != nil {
				return nil, fmt.Errorf("image: gid of User %q: %w", User, err)
			}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("image: tar %s: %w", n, err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, fmt.Errorf("image: tar %s: %w", n, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("image: tar: %w", err)
	}
	return buf.Bytes(), nil
}

// GoBuild builds Package in moduleDir for p as a static binary (CGO_ENABLED=0) with
// -trimpath, no VCS stamping and no build id, linking version and revision into main.version
// and main.commit, and returns its bytes. The Go toolchain on PATH is used.
func GoBuild(ctx context.Context, moduleDir string, p v1.Platform, version, revision string) ([]byte, error) {
	tmp, err := os.MkdirTemp("", "octogate-image-*")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	out := filepath.Join(tmp, "octogate")
	ldflags := fmt.Sprintf("-s -w -buildid= -X main.version=%s -X main.commit=%s", version, revision)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", out, Package)
	cmd.Dir = moduleDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture)
	if p.Variant != "" && p.Architecture == "arm" {
		cmd.Env = append(cmd.Env, "GOARM="+strings.TrimPrefix(p.Variant, "v"))
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go build %s for %s: %w\n%s", Package, p, err, stderr.String())
	}
	return os.ReadFile(out)
}

// WriteLayout writes idx as an OCI image layout in dir, replacing whatever dir held, with
// index.json naming it by tag (AnnotationRefName) and full reference
// (AnnotationContainerdName), e.g. tag "0.1.0" and ref "ghcr.io/octogate/octogate:0.1.0".
// Source: https://github.com/opencontainers/image-spec/blob/main/image-layout.md
func WriteLayout(dir string, idx v1.ImageIndex, ref, tag string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("image: layout %s: %w", dir, err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		AnnotationRefName:        tag,
		AnnotationContainerdName: ref,
	})); err != nil {
		return fmt.Errorf("image: layout %s: %w", dir, err)
	}
	return nil
}
