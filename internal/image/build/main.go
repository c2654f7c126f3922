// Command build makes octogate's container image (see package image) and writes it as an OCI
// image layout, or pushes it to a registry. `make image` runs it:
//
//	go run ./internal/image/build -version 0.1.0 -revision $(git rev-parse HEAD) \
//	  -ref ghcr.io/octogate/octogate:0.1.0 -out bin/image [-push]
//
// The time recorded in the image is SOURCE_DATE_EPOCH (seconds since the Unix epoch), or the
// epoch itself when unset. -push uses the credentials of ~/.docker/config.json (e.g. written
// by `docker login` or the docker/login-action of GitHub Actions).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/octogate/octogate/internal/image"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run() error {
	var c image.Config
	var ref, out, platforms string
	var push bool
	flag.StringVar(&c.Version, "version", "", "version label and `octogate version` (required)")
	flag.StringVar(&c.Revision, "revision", "", "git commit: revision label and `octogate version` (required)")
	flag.StringVar(&c.Source, "source", image.SourceURL, "source label")
	flag.StringVar(&ref, "ref", "", "image reference, REGISTRY/REPOSITORY:TAG (required)")
	flag.StringVar(&out, "out", "bin/image", "directory of the OCI image layout written")
	flag.StringVar(&platforms, "platforms", "linux/amd64,linux/arm64", "comma list of OS/ARCH")
	flag.BoolVar(&push, "push", false, "also push the index to -ref")
	flag.Parse()

	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("-ref %q: %w", ref, err)
	}
	if epoch := os.Getenv("SOURCE_DATE_EPOCH"); epoch != "" {
		sec, err := strconv.ParseInt(epoch, 10, 64)
		if err != nil {
			return fmt.Errorf("SOURCE_DATE_EPOCH %q: want seconds since the Unix epoch", epoch)
		}
		c.Created = time.Unix(sec, 0)
	}
	var plats []v1.Platform
	for _, s := range strings.Split(platforms, ",") {
		p, err := v1.ParsePlatform(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("-platforms: %w", err)
		}
		plats = append(plats, *p)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	idx, err := image.Build(ctx, c, plats, func(ctx context.Context, p v1.Platform) ([]byte, error) {
		fmt.Fprintf(os.Stderr, "building %s for %s\n", image.Package, p)
		return image.GoBuild(ctx, wd, p, c.Version, c.Revision)
	})
	if err != nil {
		return err
	}
	if err := image.WriteLayout(out, idx, tag.Name(), tag.TagStr()); err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s@%s\n", tag.Name(), digest)
	fmt.Fprintf(os.Stderr, "wrote the OCI image layout %s\n", out)
	if push {
		if err := remote.WriteIndex(tag, idx, remote.WithAuthFromKeychain(authn.DefaultKeychain), remote.WithContext(ctx)); err != nil {
			return fmt.Errorf("push %s: %w", tag, err)
		}
		fmt.Fprintf(os.Stderr, "pushed %s\n", tag)
	}
	return nil
}
