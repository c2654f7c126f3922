package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Kubectl runs the real kubectl binary against a kubeconfig.
type Kubectl struct {
	// Path is the kubectl binary.
	Path string
	// Kubeconfig is passed as --kubeconfig.
	Kubeconfig string
	// Home is kubectl's HOME (its discovery cache lives under it), so runs never touch the
	// invoking user's ~/.kube.
	Home string
	// Timeout bounds each run (default 30 s); kubectl's own --request-timeout is set to it too.
	Timeout time.Duration
	// Env is added to kubectl's environment, e.g. KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false.
	Env []string
}

// Result is what one kubectl run printed and how it exited.
type Result struct {
	Args     []string
	Stdout   string
	Stderr   string
	ExitCode int
}

// String is the command line and its output, for test failure messages.
func (r Result) String() string {
	return fmt.Sprintf("kubectl %s\nexit %d\nstdout: %s\nstderr: %s", strings.Join(r.Args, " "), r.ExitCode, r.Stdout, r.Stderr)
}

// Run runs kubectl args with stdin (may be nil). The error is only for a kubectl that could
// not run or timed out; a non-zero exit is reported in Result.ExitCode.
func (k Kubectl) Run(ctx context.Context, stdin []byte, args ...string) (Result, error) {
	timeout := k.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	full := append([]string{"--kubeconfig=" + k.Kubeconfig, "--request-timeout=" + timeout.String()}, args...)
	cmd := exec.CommandContext(ctx, k.Path, full...)
	killGroup(cmd)
	cmd.WaitDelay = 2 * time.Second
	cmd.Env = append(kubectlEnv(k.Home), k.Env...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := Result{Args: args, Stdout: stdout.String(), Stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return res, fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), ctx.Err())
	case errors.As(err, &ee):
		res.ExitCode = ee.ExitCode()
	default:
		return res, fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), err)
	}
	return res, nil
}

// Command returns kubectl with args, the kubeconfig, HOME and Env of k, for a command that
// runs until stopped (port-forward, logs -f): no --request-timeout is added and Timeout does
// not apply. The caller starts and waits for it; ctx ending kills it.
func (k Kubectl) Command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, k.Path, append([]string{"--kubeconfig=" + k.Kubeconfig}, args...)...)
	killGroup(cmd)
	cmd.WaitDelay = 2 * time.Second
	cmd.Env = append(kubectlEnv(k.Home), k.Env...)
	return cmd
}

// killGroup makes cmd (a kubectl) the leader of a process group of its own, and its context's
// end kill the whole group: kubectl runs its exec credential plugin as a child, which a kill
// of kubectl alone leaves running, writing its cache into a directory that the test that ran
// kubectl is about to remove. Wait then returns once kubectl has exited, its plugin killed too.
// kubectl never reads a terminal here (stdin is a buffer or nothing), so a group of its own
// costs no job control.
func killGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
			return cmd.Process.Kill()
		}
		return nil
	}
}

func kubectlEnv(home string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "KUBECONFIG=") || strings.HasPrefix(kv, "HOME=") || strings.HasPrefix(kv, "KUBECACHEDIR=") {
			continue
		}
		env = append(env, kv)
	}
	if home != "" {
		env = append(env, "HOME="+home)
	}
	return env
}
