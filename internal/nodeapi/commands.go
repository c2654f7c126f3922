package nodeapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ExitNotFound is the exit code of a command that is not in Commands, as a shell reports
// one it cannot find.
const ExitNotFound = 127

// Commands lists the programs a stand-in container can exec; anything else exits
// ExitNotFound with `exec: "NAME": executable file not found in $PATH` on stderr. There is no
// shell: arguments arrive as kubectl sends them.
var Commands = []string{"cat", "echo", "env", "exit", "false", "hostname", "ls", "sleep", "tar", "test", "true", "whoami"}

// proc is one command run in a container.
type proc struct {
	ctx    context.Context
	c      *container
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

type program func(p *proc, args []string) int

func programs() map[string]program {
	return map[string]program{
		"cat":      cat,
		"echo":     echo,
		"env":      env,
		"exit":     exit,
		"false":    func(*proc, []string) int { return 1 },
		"hostname": func(p *proc, _ []string) int { return p.printf("%s\n", p.c.pod) },
		"ls":       ls,
		"sleep":    sleep,
		"tar":      tarCmd,
		"test":     test,
		"true":     func(*proc, []string) int { return 0 },
		"whoami":   func(p *proc, _ []string) int { return p.printf("root\n") },
	}
}

// run runs argv in c and returns its exit code. stdin may be nil (no input); stdout and
// stderr may be nil (discarded).
func run(ctx context.Context, c *container, argv []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if stdin == nil {
		stdin = eofReader{}
	}
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	p := &proc{ctx: ctx, c: c, stdin: stdin, stdout: stdout, stderr: stderr}
	if len(argv) == 0 {
		p.errorf("exec: no command given\n")
		return ExitNotFound
	}
	prog, ok := programs()[argv[0]]
	if !ok {
		p.errorf("exec: %q: executable file not found in $PATH\n", argv[0])
		return ExitNotFound
	}
	return prog(p, argv[1:])
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// printf writes to stdout; a failed write (the client went away) exits 141 as SIGPIPE would.
func (p *proc) printf(format string, args ...any) int {
	if _, err := fmt.Fprintf(p.stdout, format, args...); err != nil {
		return 141
	}
	return 0
}

func (p *proc) errorf(format string, args ...any) {
	_, _ = fmt.Fprintf(p.stderr, format, args...)
}

func echo(p *proc, args []string) int {
	end := "\n"
	if len(args) > 0 && args[0] == "-n" {
		args, end = args[1:], ""
	}
	return p.printf("%s%s", strings.Join(args, " "), end)
}

// cat copies stdin (no arguments, or "-") or files to stdout.
func cat(p *proc, args []string) int {
	if len(args) == 0 {
		args = []string{"-"}
	}
	code := 0
	for _, a := range args {
		if a == "-" {
			if _, err := io.Copy(p.stdout, p.stdin); err != nil {
				return 1
			}
			continue
		}
		data, err := p.c.fs.readFile(a)
		if err != nil {
			p.errorf("cat: %s: %v\n", a, err)
			code = 1
			continue
		}
		if _, err := p.stdout.Write(data); err != nil {
			return 1
		}
	}
	return code
}

// env prints the container's fixed environment.
func env(p *proc, _ []string) int {
	return p.printf("%s", strings.Join(p.c.environ(), "\n")+"\n")
}

func exit(_ *proc, args []string) int {
	if len(args) == 0 {
		return 0
	}
	n, err := strconv.Atoi(args[0])
	if err != nil {
		return 2
	}
	return n & 0xff
}

func ls(p *proc, args []string) int {
	if len(args) == 0 {
		args = []string{"/"}
	}
	code := 0
	for _, a := range args {
		names, err := p.c.fs.list(a)
		if err != nil {
			p.errorf("ls: cannot access '%s': %v\n", a, err)
			code = 2
			continue
		}
		for _, n := range names {
			if c := p.printf("%s\n", n); c != 0 {
				return c
			}
		}
	}
	return code
}

// sleep waits the given seconds (a decimal number) or until the exec ends.
func sleep(p *proc, args []string) int {
	if len(args) != 1 {
		p.errorf("sleep: missing operand\n")
		return 1
	}
	secs, err := strconv.ParseFloat(args[0], 64)
	if err != nil || secs < 0 {
		p.errorf("sleep: invalid time interval '%s'\n", args[0])
		return 1
	}
	t := time.NewTimer(time.Duration(secs * float64(time.Second)))
	defer t.Stop()
	select {
	case <-t.C:
		return 0
	case <-p.ctx.Done():
		return 137
	}
}

// test answers -e (exists), -f (regular file) and -d (directory), as kubectl cp asks
// `test -d DEST` before copying into a pod.
func test(p *proc, args []string) int {
	if len(args) != 2 {
		p.errorf("test: only -e, -f and -d PATH are supported\n")
		return 2
	}
	e, ok := p.c.fs.stat(args[1])
	var yes bool
	switch args[0] {
	case "-e":
		yes = ok
	case "-f":
		yes = ok && e.mode.IsRegular()
	case "-d":
		yes = ok && e.mode.IsDir()
	default:
		p.errorf("test: %s: unary operator expected\n", args[0])
		return 2
	}
	if yes {
		return 0
	}
	return 1
}

// tarArgs is what tarCmd understood of its arguments.
type tarArgs struct {
	create, extract, touch bool
	file, dir              string
	paths                  []string
}

// parseTar reads GNU tar's option forms that kubectl cp and people use: a first argument of
// bundled letters without a dash ("cf", "xf"), bundled short options ("-xmf"), "-f FILE",
// "-C DIR" (also "-CDIR", "--file=FILE" and "--directory=DIR"), the ignored "-v", "-p", "-o",
// "--no-same-owner" and "--no-same-permissions", and paths.
func parseTar(args []string) (tarArgs, error) {
	var t tarArgs
	var pending []*string // arguments owed to letters f and C, in order
	letters := func(s string, dashed bool) error {
		for i, r := range s {
			switch r {
			case 'c':
				t.create = true
			case 'x':
				t.extract = true
			case 'm':
				t.touch = true
			case 'v', 'p', 'o':
			case 'f', 'C':
				dst := &t.file
				if r == 'C' {
					dst = &t.dir
				}
				if rest := s[i+1:]; dashed && rest != "" {
					*dst = rest
					return nil
				}
				pending = append(pending, dst)
			default:
				return fmt.Errorf("invalid option -- '%c'", r)
			}
		}
		return nil
	}
	for i, a := range args {
		var err error
		switch {
		case len(pending) > 0:
			*pending[0] = a
			pending = pending[1:]
		case i == 0 && a != "" && !strings.HasPrefix(a, "-"):
			err = letters(a, false)
		case a == "--no-same-owner" || a == "--no-same-permissions":
		case a == "--touch":
			t.touch = true
		case strings.HasPrefix(a, "--directory="):
			t.dir = strings.TrimPrefix(a, "--directory=")
		case strings.HasPrefix(a, "--file="):
			t.file = strings.TrimPrefix(a, "--file=")
		case strings.HasPrefix(a, "--"):
			err = fmt.Errorf("unrecognized option '%s'", a)
		case strings.HasPrefix(a, "-") && len(a) > 1:
			err = letters(a[1:], true)
		default:
			t.paths = append(t.paths, a)
		}
		if err != nil {
			return t, err
		}
	}
	switch {
	case len(pending) > 0:
		return t, errors.New("option requires an argument")
	case t.create == t.extract:
		return t, errors.New("you must specify one of the '-c' or '-x' options")
	case t.file != "-":
		return t, errors.New("only -f - (standard input or output) is supported")
	case t.create && len(t.paths) == 0:
		return t, errors.New("cowardly refusing to create an empty archive")
	}
	return t, nil
}

// tarCmd is `tar cf - PATH...` and `tar xf - [-C DIR]` over the container's filesystem;
// exit 2 on a fatal error, as GNU tar.
func tarCmd(p *proc, args []string) int {
	t, err := parseTar(args)
	if err != nil {
		p.errorf("tar: %v\n", err)
		return 2
	}
	if t.extract {
		dir := t.dir
		if dir == "" {
			dir = "/"
		}
		if err := p.c.fs.extractTar(p.stdin, dir, t.touch, p.stderr); err != nil {
			p.errorf("tar: %v\ntar: Exiting with failure status due to previous errors\n", err)
			return 2
		}
		return 0
	}
	base := t.dir
	if base == "" {
		base = "/"
	}
	var roots []tarRoot
	stripped := false
	for _, name := range t.paths {
		full := name
		if !strings.HasPrefix(name, "/") {
			full = strings.TrimSuffix(base, "/") + "/" + name
		} else if !stripped {
			p.errorf("tar: Removing leading `/' from member names\n")
			stripped = true
		}
		if _, ok := p.c.fs.stat(full); !ok {
			p.errorf("tar: %s: Cannot stat: %v\ntar: Exiting with failure status due to previous errors\n", name, errNotExist)
			return 2
		}
		roots = append(roots, tarRoot{path: full, name: name})
	}
	if err := p.c.fs.writeTar(p.stdout, roots); err != nil {
		p.errorf("tar: %v\n", err)
		return 2
	}
	return 0
}

// environ is the container's fixed environment, sorted.
func (c *container) environ() []string {
	env := []string{
		"HOME=/root",
		"HOSTNAME=" + c.pod,
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"POD_CONTAINER=" + c.name,
		"POD_NAME=" + c.pod,
		"POD_NAMESPACE=" + c.namespace,
	}
	sort.Strings(env)
	return env
}
