package nodeapi

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"testing"
	"time"
)

var testTime = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func testContainer(t *testing.T) *container {
	t.Helper()
	p := &pod{namespace: testNS, name: testPod, containers: map[string]*container{}}
	p.addContainer("app", func() time.Time { return testTime })
	return p.containers["app"]
}

func runCmd(t *testing.T, c *container, stdin string, argv ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), c, argv, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestCommands(t *testing.T) {
	for _, c := range []struct {
		name       string
		argv       []string
		stdin      string
		wantCode   int
		wantOut    string
		wantErrSub string
	}{
		{name: "echo -n leaves out the newline", argv: []string{"echo", "-n", "x"}, wantOut: "x"},
		{name: "echo with no arguments prints a newline", argv: []string{"echo"}, wantOut: "\n"},
		{name: "cat - reads stdin", argv: []string{"cat", "-"}, stdin: "in", wantOut: "in"},
		{name: "cat of a directory fails", argv: []string{"cat", "/tmp"}, wantCode: 1, wantErrSub: "cat: /tmp: Is a directory"},
		{name: "hostname is the pod name", argv: []string{"hostname"}, wantOut: "web\n"},
		{name: "whoami is root", argv: []string{"whoami"}, wantOut: "root\n"},
		{name: "true", argv: []string{"true"}},
		{name: "false", argv: []string{"false"}, wantCode: 1},
		{name: "exit without a code is 0", argv: []string{"exit"}},
		{name: "exit keeps the low 8 bits", argv: []string{"exit", "257"}, wantCode: 1},
		{name: "exit with a word is a usage error", argv: []string{"exit", "x"}, wantCode: 2},
		{name: "ls / lists the top directories", argv: []string{"ls", "/"}, wantOut: "etc\ntmp\n"},
		{name: "ls of a file names it", argv: []string{"ls", "/etc/hostname"}, wantOut: "hostname\n"},
		{name: "ls of a missing path exits 2", argv: []string{"ls", "/nope"}, wantCode: 2, wantErrSub: "ls: cannot access '/nope'"},
		{name: "test -e of /etc/hostname", argv: []string{"test", "-e", "/etc/hostname"}},
		{name: "test -f of a directory is false", argv: []string{"test", "-f", "/tmp"}, wantCode: 1},
		{name: "test -d of a relative path resolves from /", argv: []string{"test", "-d", "tmp"}},
		{name: "test with a binary operator is unsupported", argv: []string{"test", "a", "=", "a"}, wantCode: 2},
		{name: "sleep 0 returns at once", argv: []string{"sleep", "0"}},
		{name: "sleep without an operand fails", argv: []string{"sleep"}, wantCode: 1},
		{name: "no command", argv: nil, wantCode: ExitNotFound, wantErrSub: "no command"},
		{name: "a shell is not there", argv: []string{"/bin/sh"}, wantCode: ExitNotFound, wantErrSub: `exec: "/bin/sh": executable file not found in $PATH`},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runCmd(t, testContainer(t), c.stdin, c.argv...)
			if code != c.wantCode || out != c.wantOut || !strings.Contains(errOut, c.wantErrSub) {
				t.Errorf("%q = exit %d, stdout %q, stderr %q; want exit %d, stdout %q, stderr containing %q",
					c.argv, code, out, errOut, c.wantCode, c.wantOut, c.wantErrSub)
			}
		})
	}
}

func TestSleepEndsWithTheExec(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if code := run(ctx, testContainer(t), []string{"sleep", "3600"}, nil, nil, nil); code != 137 {
		t.Errorf("sleep after the exec ended: exit %d, want 137", code)
	}
}

func TestEveryListedCommandRuns(t *testing.T) {
	progs := programs()
	if len(progs) != len(Commands) {
		t.Errorf("Commands lists %d programs, there are %d", len(Commands), len(progs))
	}
	for _, name := range Commands {
		if _, ok := progs[name]; !ok {
			t.Errorf("Commands lists %q, which does not exist", name)
		}
	}
}

func TestParseTar(t *testing.T) {
	for _, c := range []struct {
		args    string
		want    string
		wantErr string
	}{
		{args: "cf - /tmp/foo", want: "c f=- dir= paths=[/tmp/foo]"},
		{args: "xf - -C /tmp/bar", want: "x f=- dir=/tmp/bar paths=[]"},
		{args: "-xmf - -C /dest", want: "x m f=- dir=/dest paths=[]"},
		{args: "--no-same-permissions --no-same-owner -xmf -", want: "x m f=- dir= paths=[]"},
		{args: "-c -f - -C/srv a b", want: "c f=- dir=/srv paths=[a b]"},
		{args: "cfC - /srv a", want: "c f=- dir=/srv paths=[a]"},
		{args: "--directory=/d --file=- -x", want: "x f=- dir=/d paths=[]"},
		{args: "-xvpf -", want: "x f=- dir= paths=[]"},
		{args: "xf", wantErr: "option requires an argument"},
		{args: "cf - ", wantErr: "cowardly refusing"},
		{args: "cxf - a", wantErr: "one of the '-c' or '-x'"},
		{args: "xf archive.tar", wantErr: "only -f -"},
		{args: "xzf -", wantErr: "invalid option -- 'z'"},
		{args: "--gzip xf -", wantErr: "unrecognized option '--gzip'"},
	} {
		t.Run(c.args, func(t *testing.T) {
			got, err := parseTar(strings.Fields(c.args))
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Errorf("err %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s := describeTar(got); s != c.want {
				t.Errorf("got %s, want %s", s, c.want)
			}
		})
	}
}

func describeTar(t tarArgs) string {
	var b strings.Builder
	if t.create {
		b.WriteString("c ")
	}
	if t.extract {
		b.WriteString("x ")
	}
	if t.touch {
		b.WriteString("m ")
	}
	fmt.Fprintf(&b, "f=%s dir=%s paths=%v", t.file, t.dir, t.paths)
	return b.String()
}

func tarOf(t *testing.T, members ...*tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range members {
		body := h.Linkname
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(h.Uname))
			body = h.Uname
			h.Uname = ""
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			_, _ = tw.Write([]byte(body))
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// file is a regular-file member whose body rides in Uname (tarOf moves it).
func file(name, body string) *tar.Header {
	return &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o600, Uname: body, ModTime: testTime.Add(-time.Hour)}
}

func TestTarExtract(t *testing.T) {
	c := testContainer(t)
	archive := tarOf(t,
		file("/abs/leading-slash.txt", "a"),
		file("../escape.txt", "no"),
		file("tmp/../../escape2.txt", "no"),
		&tar.Header{Name: "dir/", Typeflag: tar.TypeDir, Mode: 0o750},
		file("dir/nested/deep.txt", "deep"),
		&tar.Header{Name: "dir/link", Typeflag: tar.TypeSymlink, Linkname: "nested/deep.txt"},
		&tar.Header{Name: "dir/fifo", Typeflag: tar.TypeFifo},
	)
	code, _, errOut := runCmd(t, c, string(archive), "tar", "xf", "-", "-C", "/tmp")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"'..'", "fifo"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr %q does not report the skipped %s member", errOut, want)
		}
	}
	for p, want := range map[string]string{"/tmp/abs/leading-slash.txt": "a", "/tmp/dir/nested/deep.txt": "deep"} {
		if got, err := c.fs.readFile(p); err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", p, got, err, want)
		}
	}
	if e, ok := c.fs.stat("/tmp/dir"); !ok || e.mode != fs.ModeDir|0o750 {
		t.Errorf("/tmp/dir mode = %v, want drwxr-x---", e)
	}
	if e, ok := c.fs.stat("/tmp/dir/link"); !ok || e.link != "nested/deep.txt" {
		t.Errorf("symlink not kept: %+v", e)
	}
	for _, p := range []string{"/escape.txt", "/tmp/escape.txt", "/escape2.txt", "/tmp/dir/fifo"} {
		if _, ok := c.fs.stat(p); ok {
			t.Errorf("%s was created", p)
		}
	}
	if e, _ := c.fs.stat("/tmp/dir/nested/deep.txt"); !e.modTime.Equal(testTime.Add(-time.Hour)) {
		t.Errorf("without -m the archive's time is kept: %v", e.modTime)
	}

	if code, _, _ := runCmd(t, c, string(tarOf(t, file("touched.txt", "t"))), "tar", "-xmf", "-", "-C", "/tmp"); code != 0 {
		t.Fatal("tar -xmf failed")
	}
	if e, _ := c.fs.stat("/tmp/touched.txt"); !e.modTime.Equal(testTime) {
		t.Errorf("with -m the file gets the current time: %v", e.modTime)
	}
}

func TestTarExtractFailures(t *testing.T) {
	for _, c := range []struct {
		name, stdin, dir, wantErr string
	}{
		{"missing directory", "", "/nope", "/nope: Cannot open: No such file or directory"},
		{"directory is a file", "", "/etc/hostname", "Cannot open: Not a directory"},
		{"not a tar archive", strings.Repeat("garbage!", 100), "/tmp", "does not look like a tar archive"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, errOut := runCmd(t, testContainer(t), c.stdin, "tar", "xf", "-", "-C", c.dir)
			if code != 2 || !strings.Contains(errOut, c.wantErr) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, errOut, c.wantErr)
			}
		})
	}
}

func TestTarCreate(t *testing.T) {
	c := testContainer(t)
	if err := c.fs.writeFile("/srv/www/index.html", []byte("<p>hi</p>"), 0o644, testTime); err != nil {
		t.Fatal(err)
	}
	t.Run("relative paths with -C keep their names", func(t *testing.T) {
		code, out, errOut := runCmd(t, c, "", "tar", "-C", "/srv", "-cf", "-", "www")
		if code != 0 || errOut != "" {
			t.Fatalf("exit %d, stderr %q", code, errOut)
		}
		if got := members(t, out); got != "www/ www/index.html" {
			t.Errorf("members %s", got)
		}
	})
	t.Run("a missing path fails", func(t *testing.T) {
		code, _, errOut := runCmd(t, c, "", "tar", "cf", "-", "/srv/nope")
		if code != 2 || !strings.Contains(errOut, "/srv/nope: Cannot stat: No such file or directory") {
			t.Errorf("exit %d, stderr %q", code, errOut)
		}
	})
	t.Run("what tar c writes, tar x reads back", func(t *testing.T) {
		_, out, _ := runCmd(t, c, "", "tar", "cf", "-", "/srv")
		other := testContainer(t)
		if code, _, errOut := runCmd(t, other, out, "tar", "xf", "-", "-C", "/"); code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		if got, _ := other.fs.readFile("/srv/www/index.html"); string(got) != "<p>hi</p>" {
			t.Errorf("round trip gave %q", got)
		}
	})
}

func members(t *testing.T, archive string) string {
	t.Helper()
	tr := tar.NewReader(strings.NewReader(archive))
	var names []string
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		names = append(names, h.Name)
	}
	return strings.Join(names, " ")
}

func TestFilesystemIsBounded(t *testing.T) {
	c := testContainer(t)
	if err := c.fs.writeFile("/big", make([]byte, MaxFSBytes-c.fs.size), 0o644, testTime); err != nil {
		t.Fatalf("filling up to MaxFSBytes: %v", err)
	}
	if err := c.fs.writeFile("/one-more", []byte("x"), 0o644, testTime); err == nil {
		t.Error("writing past MaxFSBytes succeeded")
	}
	if err := c.fs.writeFile("/big", nil, 0o644, testTime); err != nil {
		t.Fatalf("truncating: %v", err)
	}
	if err := c.fs.writeFile("/one-more", []byte("x"), 0o644, testTime); err != nil {
		t.Errorf("space was not given back: %v", err)
	}
}

// FuzzTarExtract feeds arbitrary bytes to `tar xf -`: it must not panic, and the filesystem
// must stay well formed (absolute clean paths, every parent a directory, within /tmp).
func FuzzTarExtract(f *testing.F) {
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		c := testContainer(t)
		c.fs.limit = 1 << 20 // a sparse member can claim the whole limit in zeros
		var stderr bytes.Buffer
		_ = c.fs.extractTar(bytes.NewReader(data), "/tmp", false, &stderr)
		c.fs.mu.Lock()
		defer c.fs.mu.Unlock()
		for p := range c.fs.entries {
			if p != path.Clean(p) || !strings.HasPrefix(p, "/") {
				t.Fatalf("entry %q is not an absolute clean path", p)
			}
			if p == "/" {
				continue
			}
			if parent, ok := c.fs.entries[path.Dir(p)]; !ok || !parent.mode.IsDir() {
				t.Fatalf("entry %q has no parent directory", p)
			}
			if p != "/etc" && p != "/etc/hostname" && p != "/tmp" && !strings.HasPrefix(p, "/tmp/") {
				t.Fatalf("entry %q is outside /tmp", p)
			}
		}
		if c.fs.size > c.fs.limit {
			t.Fatalf("size %d over the bound", c.fs.size)
		}
	})
}

// FuzzParseTar feeds arbitrary argument lists to tar's option parser.
func FuzzParseTar(f *testing.F) {
	f.Add("cf - /tmp/foo")
	f.Fuzz(func(t *testing.T, args string) {
		got, err := parseTar(strings.Fields(args))
		if err == nil && (got.create == got.extract || got.file != "-") {
			t.Fatalf("%q accepted as %+v", args, got)
		}
	})
}
