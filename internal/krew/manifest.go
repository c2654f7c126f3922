package krew

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

const (
	// APIVersion and Kind of krew's plugin manifest.
	APIVersion = "krew.googlecontainertools.github.com/v1alpha2"
	Kind       = "Plugin"
	// Name is the plugin's name: `kubectl krew install octogate`, run as `kubectl octogate`.
	Name = "octogate"
	// Homepage is the project's page the manifest links to.
	Homepage = "https://github.com/octogate/octogate"
	// binName is the executable in every archive: kubectl runs kubectl-NAME as `kubectl NAME`.
	binName = "kubectl-octogate"
)

// Manifest is krew's Plugin: the documented fields of
// https://krew.sigs.k8s.io/docs/developer-guide/plugin-manifest/.
type Manifest struct {
	APIVersion string   `yaml:"apiVersion"`
	Kind       string   `yaml:"kind"`
	Metadata   Metadata `yaml:"metadata"`
	Spec       Spec     `yaml:"spec"`
}

// Metadata names the plugin; krew wants the manifest file named NAME.yaml.
type Metadata struct {
	Name string `yaml:"name"`
}

// Spec is what krew shows and installs.
type Spec struct {
	// Version is a semantic version with the v prefix, e.g. v0.1.0.
	Version          string     `yaml:"version"`
	Homepage         string     `yaml:"homepage,omitempty"`
	ShortDescription string     `yaml:"shortDescription"`
	Description      string     `yaml:"description,omitempty"`
	Caveats          string     `yaml:"caveats,omitempty"`
	Platforms        []Platform `yaml:"platforms"`
}

// Platform is one archive and the machines it installs on.
type Platform struct {
	Selector Selector `yaml:"selector"`
	// URI is the .tar.gz or .zip archive; Sha256 its lower-case hex SHA-256.
	URI    string `yaml:"uri"`
	Sha256 string `yaml:"sha256"`
	// Files are copied out of the archive (all of it when empty); Bin is the executable
	// among them that krew links as kubectl-NAME.
	Files []File `yaml:"files,omitempty"`
	Bin   string `yaml:"bin"`
}

// Selector picks machines by krew's labels os and arch (GOOS and GOARCH values).
type Selector struct {
	MatchLabels map[string]string `yaml:"matchLabels"`
}

// File copies the archive paths matching From (a glob) to To in the install directory.
type File struct {
	From string `yaml:"from"`
	To   string `yaml:"to"`
}

// Release is what the manifest is rendered from.
type Release struct {
	// Version is octogate's version without the v, e.g. 0.1.0.
	Version string
	// DownloadURL is where the release's files are, e.g.
	// https://github.com/octogate/octogate/releases/download/v0.1.0.
	DownloadURL string
	// Platforms are GOOS/GOARCH pairs, e.g. linux/amd64.
	Platforms []string
	// Checksums maps a file name to its SHA-256 in hex (ParseChecksums).
	Checksums map[string]string
}

// ArchiveName is the krew archive of a platform: kubectl-octogate_0.1.0_linux_amd64.tar.gz.
func ArchiveName(version, goos, goarch string) string {
	return binName + "_" + version + "_" + goos + "_" + goarch + ".tar.gz"
}

// BinName is the executable inside the archive of goos: kubectl-octogate, with .exe on windows.
func BinName(goos string) string {
	if goos == "windows" {
		return binName + ".exe"
	}
	return binName
}

var (
	sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)
	// semver with the v prefix krew requires (https://semver.org).
	semver     = regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)
	pluginName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
)

// ParseChecksums reads sha256sum's output ("HEX  NAME" or "HEX *NAME" per line) into a map from
// file name to hex digest. A malformed line or a name listed twice is an error naming the line.
func ParseChecksums(r io.Reader) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		sum, name, ok := strings.Cut(line, " ")
		name = strings.TrimPrefix(strings.TrimPrefix(name, " "), "*")
		if !ok || !sha256Hex.MatchString(sum) || name == "" || strings.ContainsAny(name, "/\\") {
			return nil, fmt.Errorf("checksums line %d: want a lower-case hex SHA-256, two spaces and a file name", n)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("checksums line %d: %s is listed twice", n, name)
		}
		out[name] = sum
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// Render builds the manifest of rel: one platform per rel.Platforms, in that order, each the
// archive ArchiveName with its checksum from rel.Checksums. krew extracts the whole archive
// (no files list): the binary, and LICENSE when the release has one. It fails naming the platform whose
// archive has no checksum, and returns only manifests that pass Validate.
func Render(rel Release) (Manifest, error) {
	m := Manifest{
		APIVersion: APIVersion,
		Kind:       Kind,
		Metadata:   Metadata{Name: Name},
		Spec: Spec{
			Version:          "v" + rel.Version,
			Homepage:         Homepage,
			ShortDescription: "Log in to Kubernetes with your GitHub identity",
			Description: "octogate gives Kubernetes GitHub identity: kube-apiserver authenticates and\n" +
				"authorizes GitHub users through octogate's webhooks. The plugin logs you in\n" +
				"(kubectl octogate credential, run by your kubeconfig), writes kubeconfigs,\n" +
				"explains refusals (kubectl octogate doctor) and checks policies.\n",
			Caveats: "The kubeconfig `kubectl octogate kubeconfig user` writes runs `octogate credential`\n" +
				"from PATH. krew installs the plugin as kubectl-octogate only: pass\n" +
				"`--command kubectl-octogate` to `kubectl octogate kubeconfig user`, or link\n" +
				"~/.krew/bin/kubectl-octogate as octogate on your PATH.\n",
		},
	}
	base := strings.TrimSuffix(rel.DownloadURL, "/")
	for _, p := range rel.Platforms {
		goos, goarch, ok := strings.Cut(p, "/")
		if !ok || goos == "" || goarch == "" {
			return Manifest{}, fmt.Errorf("platform %q: want GOOS/GOARCH", p)
		}
		archive := ArchiveName(rel.Version, goos, goarch)
		sum, ok := rel.Checksums[archive]
		if !ok {
			return Manifest{}, fmt.Errorf("platform %s: no checksum for %s", p, archive)
		}
		bin := BinName(goos)
		m.Spec.Platforms = append(m.Spec.Platforms, Platform{
			Selector: Selector{MatchLabels: map[string]string{"os": goos, "arch": goarch}},
			URI:      base + "/" + archive,
			Sha256:   sum,
			Bin:      bin,
		})
	}
	if err := m.Validate(); err != nil {
		return Manifest{}, err
	}
	return m, nil
}

// Validate checks what krew checks before installing (its pkg/index/validation): the apiVersion
// and kind, a plugin name of lower-case letters, digits and dashes, a v-prefixed semantic
// version, a short description, and at least one platform, each with an os/arch selector no
// other platform has, an https .tar.gz or .zip URI, a hex SHA-256 and a bin.
func (m Manifest) Validate() error {
	var errs []error
	if m.APIVersion != APIVersion || m.Kind != Kind {
		errs = append(errs, fmt.Errorf("apiVersion %q, kind %q: want %s, %s", m.APIVersion, m.Kind, APIVersion, Kind))
	}
	if !pluginName.MatchString(m.Metadata.Name) {
		errs = append(errs, fmt.Errorf("metadata.name %q: want lower-case letters, digits and dashes", m.Metadata.Name))
	}
	if !semver.MatchString(m.Spec.Version) {
		errs = append(errs, fmt.Errorf("spec.version %q: want a semantic version with the v prefix", m.Spec.Version))
	}
	if m.Spec.ShortDescription == "" {
		errs = append(errs, errors.New("spec.shortDescription is empty"))
	}
	if len(m.Spec.Platforms) == 0 {
		errs = append(errs, errors.New("spec.platforms is empty"))
	}
	var seen []string
	for i, p := range m.Spec.Platforms {
		at := fmt.Sprintf("spec.platforms[%d]", i)
		goos, goarch := p.Selector.MatchLabels["os"], p.Selector.MatchLabels["arch"]
		if goos == "" || goarch == "" {
			errs = append(errs, fmt.Errorf("%s.selector.matchLabels: want os and arch", at))
		} else if slices.Contains(seen, goos+"/"+goarch) {
			errs = append(errs, fmt.Errorf("%s: a second platform for %s/%s", at, goos, goarch))
		}
		seen = append(seen, goos+"/"+goarch)
		if !strings.HasPrefix(p.URI, "https://") || !(strings.HasSuffix(p.URI, ".tar.gz") || strings.HasSuffix(p.URI, ".zip")) {
			errs = append(errs, fmt.Errorf("%s.uri %q: want an https .tar.gz or .zip archive", at, p.URI))
		}
		if !sha256Hex.MatchString(p.Sha256) {
			errs = append(errs, fmt.Errorf("%s.sha256 %q: want 64 lower-case hex digits", at, p.Sha256))
		}
		if p.Bin == "" {
			errs = append(errs, fmt.Errorf("%s.bin is empty", at))
		}
	}
	return errors.Join(errs...)
}

// Marshal is the manifest as YAML, fields in the order of krew's documentation.
func Marshal(m Manifest) ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Decode parses a manifest strictly (an unknown or repeated field is an error) and validates it.
func Decode(b []byte) (Manifest, error) {
	var m Manifest
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&m); err != nil {
		return Manifest{}, fmt.Errorf("krew manifest: %w", err)
	}
	if err := m.Validate(); err != nil {
		return Manifest{}, fmt.Errorf("krew manifest: %w", err)
	}
	return m, nil
}
