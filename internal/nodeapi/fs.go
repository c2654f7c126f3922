package nodeapi

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"sync"
	"time"
)

// MaxFSBytes bounds the file contents one container's filesystem holds; writing past it
// fails as a full disk does (ENOSPC).
const MaxFSBytes = 64 << 20

// The strerror(3) words coreutils and GNU tar print, capitalized as they are.
var (
	errNotExist = errors.New("No such file or directory") //nolint:staticcheck // strerror(ENOENT)
	errNotDir   = errors.New("Not a directory")           //nolint:staticcheck // strerror(ENOTDIR)
	errIsDir    = errors.New("Is a directory")            //nolint:staticcheck // strerror(EISDIR)
	errNoSpace  = errors.New("No space left on device")   //nolint:staticcheck // strerror(ENOSPC)
)

// entry is one file, directory or symbolic link.
type entry struct {
	mode    fs.FileMode // type bits and permissions
	data    []byte
	link    string
	modTime time.Time
}

// memFS is a container's filesystem: absolute, cleaned slash paths to entries. Every
// entry's parent directory exists; "/" always does.
type memFS struct {
	mu      sync.Mutex
	entries map[string]*entry
	size    int
	limit   int // MaxFSBytes but in tests
	now     func() time.Time
}

func newMemFS(now func() time.Time) *memFS {
	m := &memFS{entries: map[string]*entry{}, limit: MaxFSBytes, now: now}
	m.entries["/"] = &entry{mode: fs.ModeDir | 0o755, modTime: now()}
	return m
}

// abs resolves p against the working directory "/".
func abs(p string) string {
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	return path.Clean(p)
}

func (m *memFS) stat(p string) (*entry, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[abs(p)]
	return e, ok
}

// readFile returns a copy of a regular file's contents.
func (m *memFS) readFile(p string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[abs(p)]
	switch {
	case !ok:
		return nil, errNotExist
	case e.mode.IsDir():
		return nil, errIsDir
	}
	return append([]byte(nil), e.data...), nil
}

// mkdirAll creates p and its missing parents (mkdir -p).
func (m *memFS) mkdirAll(p string, perm fs.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mkdirAllLocked(abs(p), perm)
}

func (m *memFS) mkdirAllLocked(p string, perm fs.FileMode) error {
	if e, ok := m.entries[p]; ok {
		if !e.mode.IsDir() {
			return errNotDir
		}
		return nil
	}
	if err := m.mkdirAllLocked(path.Dir(p), 0o755); err != nil {
		return err
	}
	m.entries[p] = &entry{mode: fs.ModeDir | perm.Perm(), modTime: m.now()}
	return nil
}

// writeFile creates or replaces the regular file p, creating missing parent directories.
func (m *memFS) writeFile(p string, data []byte, perm fs.FileMode, modTime time.Time) error {
	return m.put(abs(p), &entry{mode: perm.Perm(), data: data, modTime: modTime})
}

func (m *memFS) put(p string, e *entry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p == "/" {
		return errIsDir
	}
	if err := m.mkdirAllLocked(path.Dir(p), 0o755); err != nil {
		return err
	}
	old, exists := m.entries[p]
	if exists && old.mode.IsDir() && !e.mode.IsDir() {
		return errIsDir
	}
	if exists && old.mode.IsDir() && e.mode.IsDir() {
		old.mode, old.modTime = e.mode, e.modTime
		return nil
	}
	grow := len(e.data)
	if exists {
		grow -= len(old.data)
	}
	if m.size+grow > m.limit {
		return errNoSpace
	}
	m.size += grow
	m.entries[p] = e
	return nil
}

// list returns the names in directory p, sorted.
func (m *memFS) list(p string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p = abs(p)
	e, ok := m.entries[p]
	if !ok {
		return nil, errNotExist
	}
	if !e.mode.IsDir() {
		return []string{path.Base(p)}, nil
	}
	return m.childrenLocked(p), nil
}

func (m *memFS) childrenLocked(dir string) []string {
	prefix := strings.TrimSuffix(dir, "/") + "/"
	var names []string
	for k := range m.entries {
		if k != dir && strings.HasPrefix(k, prefix) && !strings.Contains(k[len(prefix):], "/") {
			names = append(names, k[len(prefix):])
		}
	}
	sort.Strings(names)
	return names
}

// tarRoot is one path given to `tar c` and the member name it is archived under.
type tarRoot struct{ path, name string }

// writeTar writes each root (recursively, directories first, names sorted) as one tar
// stream. A member name is the root's name with any leading "/" dropped, as GNU tar writes
// `tar cf - /p`.
func (m *memFS) writeTar(w io.Writer, roots []tarRoot) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	tw := tar.NewWriter(w)
	for _, r := range roots {
		p := abs(r.path)
		if _, ok := m.entries[p]; !ok {
			return fmt.Errorf("%s: Cannot stat: %w", r.name, errNotExist)
		}
		name := strings.TrimLeft(path.Clean(r.name), "/")
		if name == "" {
			name = "."
		}
		if err := m.tarLocked(tw, p, name); err != nil {
			return err
		}
	}
	return tw.Close()
}

func (m *memFS) tarLocked(tw *tar.Writer, p, name string) error {
	e := m.entries[p]
	hdr := &tar.Header{Name: name, Mode: int64(e.mode.Perm()), ModTime: e.modTime.Truncate(time.Second), Uname: "root", Gname: "root"}
	switch {
	case e.mode.IsDir():
		hdr.Typeflag, hdr.Name = tar.TypeDir, name+"/"
	case e.mode&fs.ModeSymlink != 0:
		hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, e.link
	default:
		hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(e.data))
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if hdr.Typeflag == tar.TypeReg {
		if _, err := tw.Write(e.data); err != nil {
			return err
		}
	}
	if !e.mode.IsDir() {
		return nil
	}
	for _, c := range m.childrenLocked(p) {
		if err := m.tarLocked(tw, path.Join(p, c), name+"/"+c); err != nil {
			return err
		}
	}
	return nil
}

// extractTar reads a tar stream into directory dir, as `tar xf - -C dir` does: regular
// files, directories and symbolic links are created (with missing parents), a leading "/"
// is dropped from member names, members with a ".." element are skipped, and other member
// types are skipped. Each skipped member is reported on warn. dir must exist. With
// touch (tar -m) files get the current time instead of the archive's.
func (m *memFS) extractTar(r io.Reader, dir string, touch bool, warn io.Writer) error {
	dir = abs(dir)
	if e, ok := m.stat(dir); !ok {
		return fmt.Errorf("%s: Cannot open: %w", dir, errNotExist)
	} else if !e.mode.IsDir() {
		return fmt.Errorf("%s: Cannot open: %w", dir, errNotDir)
	}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("this does not look like a tar archive: %w", err)
		}
		name := strings.TrimLeft(hdr.Name, "/")
		if hasDotDot(name) {
			_, _ = fmt.Fprintf(warn, "tar: %s: Member name contains '..'\n", hdr.Name)
			continue
		}
		target := path.Join(dir, name)
		if target == dir {
			continue
		}
		modTime := hdr.ModTime
		if touch {
			modTime = m.now()
		}
		perm := fs.FileMode(hdr.Mode).Perm()
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = m.put(target, &entry{mode: fs.ModeDir | perm, modTime: modTime})
		case tar.TypeReg, tar.TypeRegA: //nolint:staticcheck // old archives still use TypeRegA
			if hdr.Size > int64(m.limit) {
				return fmt.Errorf("%s: Cannot write: %w", hdr.Name, errNoSpace)
			}
			data, rerr := io.ReadAll(io.LimitReader(tr, int64(m.limit)+1))
			if rerr != nil {
				return fmt.Errorf("%s: %w", hdr.Name, rerr)
			}
			if len(data) > m.limit {
				return fmt.Errorf("%s: Cannot write: %w", hdr.Name, errNoSpace)
			}
			err = m.put(target, &entry{mode: perm, data: data, modTime: modTime})
		case tar.TypeSymlink:
			err = m.put(target, &entry{mode: fs.ModeSymlink | 0o777, link: hdr.Linkname, modTime: modTime})
		default:
			_, _ = fmt.Fprintf(warn, "tar: %s: member type %q not supported, skipped\n", hdr.Name, hdr.Typeflag)
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: Cannot create: %w", hdr.Name, err)
		}
	}
}

func hasDotDot(name string) bool {
	for _, el := range strings.Split(name, "/") {
		if el == ".." {
			return true
		}
	}
	return false
}
