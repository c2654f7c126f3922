// Command build makes the krew side of a release (see package krew). `make dist` runs
//
//	go run ./internal/krew/build archives -dist dist -version 0.1.0 -platforms "linux/amd64 ..."
//
// which packs each dist/octogate_0.1.0_OS_ARCH[.exe] (and LICENSE, when the repository has one)
// into dist/kubectl-octogate_0.1.0_OS_ARCH.tar.gz, dated SOURCE_DATE_EPOCH (seconds since the
// Unix epoch; the epoch itself when unset). `make krew-manifest` runs
//
//	go run ./internal/krew/build manifest -dist dist -version 0.1.0 -platforms "linux/amd64 ..." \
//	  -download-url https://github.com/octogate/octogate/releases/download/v0.1.0
//
// which writes dist/octogate.yaml from dist/checksums.txt.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/octogate/octogate/internal/krew"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "krew:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: build archives|manifest -dist DIR -version V -platforms \"OS/ARCH ...\" [flags]")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	dist := fs.String("dist", "dist", "directory of the release files")
	version := fs.String("version", "", "octogate version without the v, e.g. 0.1.0")
	platforms := fs.String("platforms", "", "space-separated GOOS/GOARCH pairs")
	license := fs.String("license", "LICENSE", "file added to every archive when it exists")
	downloadURL := fs.String("download-url", "", "where the release's files are downloaded from (manifest)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *version == "" || strings.TrimSpace(*platforms) == "" {
		return errors.New("-version and -platforms are required")
	}
	switch args[0] {
	case "archives":
		return archives(*dist, *version, strings.Fields(*platforms), *license)
	case "manifest":
		if *downloadURL == "" {
			return errors.New("-download-url is required")
		}
		return manifest(*dist, *version, strings.Fields(*platforms), *downloadURL)
	}
	return fmt.Errorf("unknown command %q: want archives or manifest", args[0])
}

func archives(dist, version string, platforms []string, license string) error {
	mtime, err := sourceDate()
	if err != nil {
		return err
	}
	var extra []krew.ArchiveFile
	if b, err := os.ReadFile(license); err == nil {
		extra = append(extra, krew.ArchiveFile{Name: "LICENSE", Mode: 0o644, Data: b})
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, p := range platforms {
		goos, goarch, ok := strings.Cut(p, "/")
		if !ok {
			return fmt.Errorf("platform %q: want GOOS/GOARCH", p)
		}
		ext := ""
		if goos == "windows" {
			ext = ".exe"
		}
		bin, err := os.ReadFile(filepath.Join(dist, "octogate_"+version+"_"+goos+"_"+goarch+ext))
		if err != nil {
			return err
		}
		files := append([]krew.ArchiveFile{{Name: krew.BinName(goos), Mode: 0o755, Data: bin}}, extra...)
		var buf bytes.Buffer
		if err := krew.WriteArchive(&buf, files, mtime); err != nil {
			return err
		}
		name := filepath.Join(dist, krew.ArchiveName(version, goos, goarch))
		if err := os.WriteFile(name, buf.Bytes(), 0o644); err != nil {
			return err
		}
		fmt.Println("archived", name)
	}
	return nil
}

func manifest(dist, version string, platforms []string, downloadURL string) error {
	f, err := os.Open(filepath.Join(dist, "checksums.txt"))
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	sums, err := krew.ParseChecksums(f)
	if err != nil {
		return err
	}
	m, err := krew.Render(krew.Release{Version: version, DownloadURL: downloadURL, Platforms: platforms, Checksums: sums})
	if err != nil {
		return err
	}
	b, err := krew.Marshal(m)
	if err != nil {
		return err
	}
	out := filepath.Join(dist, krew.Name+".yaml")
	if err := os.WriteFile(out, b, 0o644); err != nil {
		return err
	}
	fmt.Println("wrote", out)
	return nil
}

// sourceDate is SOURCE_DATE_EPOCH (https://reproducible-builds.org/specs/source-date-epoch/).
func sourceDate() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0), nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: want seconds since the Unix epoch", s)
	}
	return time.Unix(n, 0), nil
}
