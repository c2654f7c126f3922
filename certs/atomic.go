package certs

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// DataLink is the symlink of a certificate directory whose target holds the current files;
// each file name is a symlink to DataLink/NAME. It is the layout kubelet's AtomicWriter gives
// Secret and projected volumes (k8s.io/kubernetes/pkg/volume/util/atomic_writer.go): a writer
// fills a new timestamped directory and renames a DataLink+"_tmp" symlink onto DataLink, so a
// reader that resolves DataLink once reads every file from one version.
const DataLink = "..data"

// dirFiles are the names a certificate directory holds, in the order WriteDir writes them.
var dirFiles = []string{CACertFile, CAKeyFile, ServingCertFile, ServingKeyFile, ClientCACertFile, ClientCAKeyFile, ClientCertFile, ClientKeyFile}

// dirFile is one file to write: its name in the directory, contents and mode.
type dirFile struct {
	name string
	data []byte
	mode os.FileMode
}

// writeFiles replaces files in dir as one version: a new directory ..YYYY_MM_DD_hh_mm_ss.N
// gets them and the current contents of the other names of dirFiles, then DataLink is
// switched to it with one rename, and each name is made a symlink to DataLink/NAME. A
// directory of plain files (written before this layout) is migrated: its files are copied into
// the first version and each is replaced by its symlink with a rename, so no name is ever
// missing. The previous version's directory is removed last.
func writeFiles(dir string, files []dirFile) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	old, _ := os.Readlink(filepath.Join(dir, DataLink))
	version, err := os.MkdirTemp(dir, ".."+time.Now().UTC().Format("2006_01_02_15_04_05.")) // ".." hides it from globs
	if err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			_ = os.RemoveAll(version)
		}
	}()
	if err := os.Chmod(version, 0o755); err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	given := map[string]dirFile{}
	for _, f := range files {
		given[f.name] = f
	}
	var names []string
	for _, name := range dirFiles {
		f, ok := given[name]
		if !ok {
			// Not written now: keep the current contents (through the symlink, or a plain file).
			data, err := os.ReadFile(filepath.Join(dir, name))
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return fmt.Errorf("certs: %w", err)
			}
			f = dirFile{name: name, data: data, mode: 0o644}
			if strings.HasSuffix(name, ".key") {
				f.mode = 0o600
			}
		}
		if err := writeNew(filepath.Join(version, name), f.data, f.mode); err != nil {
			return err
		}
		names = append(names, name)
	}
	if err := replaceSymlink(filepath.Base(version), filepath.Join(dir, DataLink)); err != nil {
		return err
	}
	committed = true
	for _, name := range names {
		target := filepath.Join(DataLink, name)
		if t, err := os.Readlink(filepath.Join(dir, name)); err == nil && t == target {
			continue
		}
		if err := replaceSymlink(target, filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	if old != "" && old != filepath.Base(version) && strings.HasPrefix(old, "..") && !strings.ContainsRune(old, os.PathSeparator) {
		_ = os.RemoveAll(filepath.Join(dir, old))
	}
	return nil
}

// writeNew creates path with data and mode, synced to disk.
func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("certs: write %s: %w", path, errors.Join(err, f.Close()))
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("certs: write %s: %w", path, errors.Join(err, f.Close()))
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("certs: write %s: %w", path, err)
	}
	return nil
}

// replaceSymlink makes path a symlink to target with one rename (of path+"_tmp"), replacing a
// symlink or a plain file.
func replaceSymlink(target, path string) error {
	tmp := path + "_tmp"
	_ = os.Remove(tmp) // left by a writer that died
	if err := os.Symlink(target, tmp); err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("certs: %w", err)
	}
	return nil
}

// ReadPair reads a certificate and its key as one version: when either is a symlink into
// DataLink of their directory (the layout writeFiles and kubelet write), DataLink is resolved
// once and both files are read from that directory, again from the new one if a writer
// removed it meanwhile; otherwise (plain files) each path is read. It returns the PEM bytes
// and the parsed pair; a key that does not match its certificate is an error
// (tls.X509KeyPair's).
func ReadPair(certFile, keyFile string) (certPEM, keyPEM []byte, pair tls.Certificate, err error) {
	for attempt := 0; ; attempt++ {
		certPath, keyPath, version := certFile, keyFile, ""
		// Either being a symlink is enough: while writeFiles migrates plain files, DataLink
		// already holds both.
		if dir := filepath.Dir(certFile); dir == filepath.Dir(keyFile) && (viaDataLink(certFile) || viaDataLink(keyFile)) {
			if version, err = os.Readlink(filepath.Join(dir, DataLink)); err == nil {
				v := version
				if !filepath.IsAbs(v) {
					v = filepath.Join(dir, v)
				}
				certPath, keyPath = filepath.Join(v, linkedName(certFile)), filepath.Join(v, linkedName(keyFile))
			}
		}
		certPEM, err = os.ReadFile(certPath)
		if err == nil {
			keyPEM, err = os.ReadFile(keyPath)
		}
		if err == nil {
			pair, err = tls.X509KeyPair(certPEM, keyPEM)
			// Plain files read while writeFiles migrates them: one of the two may already be
			// the new version's symlink. Read again, through DataLink this time.
			if err != nil && version == "" && attempt < 3 && (viaDataLink(certFile) || viaDataLink(keyFile)) {
				continue
			}
			return certPEM, keyPEM, pair, err
		}
		// A writer switched DataLink and removed the version being read: read the new one.
		if now, lerr := os.Readlink(filepath.Join(filepath.Dir(certFile), DataLink)); version == "" || lerr != nil || now == version || attempt == 3 {
			return nil, nil, tls.Certificate{}, err
		}
	}
}

// viaDataLink tells whether path is a symlink to DataLink/NAME.
func viaDataLink(path string) bool {
	t, err := os.Readlink(path)
	return err == nil && filepath.Dir(t) == DataLink
}

// linkedName is the name path stands for in a version directory: its symlink's, else its own.
func linkedName(path string) string {
	if t, err := os.Readlink(path); err == nil && filepath.Dir(t) == DataLink {
		return filepath.Base(t)
	}
	return filepath.Base(path)
}
