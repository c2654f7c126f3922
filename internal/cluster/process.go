package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Process is a child process in its own process group, with stdout and stderr appended to a
// log file. Stop signals the whole group, so helpers it started go too.
type Process struct {
	Name    string
	LogPath string

	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// StartProcess starts path with args and env (nil env = inherit) and returns once it is running.
func StartProcess(name, path string, args, env []string, logPath string) (*Process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%s: log file: %w", name, err)
	}
	cmd := exec.Command(path, args...)
	cmd.Env = env
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{Name: name, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// ExitErr is the process's exit error once Done is closed.
func (p *Process) ExitErr() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// Stop sends SIGTERM to the process group, waits up to grace, then kills it (Kill). Stopping
// an exited process is a no-op.
func (p *Process) Stop(grace time.Duration) error {
	if p.exited() {
		return nil
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	if err := p.Kill(); err != nil {
		return err
	}
	return fmt.Errorf("%s did not stop within %s; killed", p.Name, grace)
}

// exited reports whether p is nil or its process has exited.
func (p *Process) exited() bool {
	if p == nil {
		return true
	}
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Kill sends SIGKILL to the process group at once, as a crash would (nothing drains, its
// connections are reset), and waits up to 5 s for it to exit. Killing an exited process is a
// no-op.
func (p *Process) Kill() error {
	if p.exited() {
		return nil
	}
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	select {
	case <-p.done:
		return nil
	case <-time.After(5 * time.Second):
		return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", p.Name, pgid)
	}
}

// LogTail returns up to the last n bytes of the process's log.
func (p *Process) LogTail(n int) string {
	if p == nil {
		return ""
	}
	return tailFile(p.LogPath, n)
}

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	if len(b) > n {
		b = b[len(b)-n:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b)
}

// run runs a short command and returns its stdout; stderr is part of the error.
func run(ctx context.Context, env []string, path string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.WaitDelay = 5 * time.Second
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return stdout.Bytes(), fmt.Errorf("%s %v: %w: %s", path, args, err, bytes.TrimSpace(stderr.Bytes()))
		}
		return stdout.Bytes(), fmt.Errorf("%s %v: %w", path, args, err)
	}
	return stdout.Bytes(), nil
}

// runIn is run with a working directory and the inherited environment.
func runIn(ctx context.Context, dir, path string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = dir
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%s %v: %w: %s", path, args, err, bytes.TrimSpace(out))
	}
	return out, nil
}
