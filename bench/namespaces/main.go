// Command namespaces measures the ownership controller with many owned namespaces on a real
// kube-apiserver (internal/nsscale): first start, restart (zero writes), a template edit
// rolled out at the configured QPS, and resident memory. `make bench` runs it; it needs the
// binaries of `make tools`.
//
//	go run ./bench/namespaces -n 10000 -qps 100
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"time"

	"github.com/octogate/octogate/internal/cluster"
	"github.com/octogate/octogate/internal/nsscale"
)

// rssLimitMiB is the bound the controller must stay under with 10,000 namespaces.
const rssLimitMiB = 300

func main() {
	n := flag.Int("n", 10000, "owned namespaces")
	qps := flag.Float64("qps", 100, "OCTOGATE_KUBE_API_QPS of the controller")
	burst := flag.Int("burst", 100, "OCTOGATE_KUBE_API_BURST of the controller")
	keep := flag.Bool("keep", false, "keep the work directory (logs of etcd, kube-apiserver and octogate)")
	memLimit := flag.String("gomemlimit", "230MiB", "GOMEMLIMIT of octogate, as the chart sets it (90% of resources.limits.memory, 256Mi by default); empty: none")
	flag.Parse()
	var env []string
	if *memLimit != "" {
		env = append(env, "GOMEMLIMIT="+*memLimit)
	}
	if err := bench(*n, *qps, *burst, *keep, env); err != nil {
		fmt.Fprintln(os.Stderr, "bench/namespaces: FAIL:", err)
		os.Exit(1)
	}
}

func bench(n int, qps float64, burst int, keep bool, env []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	root, err := cluster.RepoRoot(".")
	if err != nil {
		return err
	}
	bin := cluster.BinDir(root)
	if missing := cluster.MissingBinaries(bin, "etcd", "kube-apiserver"); len(missing) > 0 {
		return fmt.Errorf("missing %v in %s: run make tools", missing, bin)
	}
	dir, err := os.MkdirTemp("", "octogate-nsscale-")
	if err != nil {
		return err
	}
	if keep {
		fmt.Println("work directory:", dir)
	} else {
		defer func() { _ = os.RemoveAll(dir) }()
	}
	templates, err := os.ReadFile(filepath.Join(root, nsscale.ExampleTemplatesFile))
	if err != nil {
		return err
	}
	octogate, err := cluster.BuildOctogate(ctx, root, dir)
	if err != nil {
		return err
	}
	fmt.Printf("namespace controller benchmark: %s %s/%s, GOMAXPROCS=%d; %d namespaces of template %q (%s), controller QPS %g burst %d, %v\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), n, nsscale.ExampleTemplate, nsscale.ExampleTemplatesFile, qps, burst, env)
	rep, err := nsscale.Run(ctx, nsscale.Options{
		BinDir: bin, Octogate: octogate, WorkDir: dir,
		Namespaces: n, QPS: qps, Burst: burst,
		Templates: templates, Template: nsscale.ExampleTemplate, Edit: nsscale.ExampleEdit,
		Env:      env,
		Progress: os.Stdout,
	})
	if err != nil {
		return err
	}
	fmt.Printf("%d objects per namespace (owner RoleBinding + template)\n", rep.ObjectsPerNamespace)
	for _, p := range []nsscale.Phase{rep.First, rep.Restart, rep.Edit} {
		fmt.Printf("RESULT %-14s %9v  writes %6d (failed %d)  reconciles %6d (failed %d)\n",
			p.Name, p.Duration.Round(time.Millisecond), p.Writes, p.WriteErrors, p.Reconciles, p.ReconcileErrors)
	}
	rate := float64(rep.EditUpdates) / rep.Edit.Duration.Seconds()
	fmt.Printf("RESULT edit rollout: %d objects updated in %v = %.1f updates/s at QPS %g\n", rep.EditUpdates, rep.Edit.Duration.Round(time.Millisecond), rate, qps)
	fmt.Printf("RESULT memory: VmRSS %.1f MiB after the restart converged, VmHWM %.1f MiB (limit %d MiB)\n", rep.RSSMiB, rep.HWMMiB, rssLimitMiB)
	var failed []string
	if rep.Restart.Writes != 0 {
		failed = append(failed, fmt.Sprintf("restart wrote %d times", rep.Restart.Writes))
	}
	for _, p := range []nsscale.Phase{rep.First, rep.Restart, rep.Edit} {
		if p.WriteErrors+p.ReconcileErrors > 0 {
			failed = append(failed, fmt.Sprintf("%s: %d failed writes, %d failed reconciles", p.Name, p.WriteErrors, p.ReconcileErrors))
		}
	}
	if rep.HWMMiB > rssLimitMiB {
		failed = append(failed, fmt.Sprintf("VmHWM %.1f MiB > %d MiB", rep.HWMMiB, rssLimitMiB))
	}
	if len(failed) > 0 {
		return fmt.Errorf("%v", failed)
	}
	return nil
}
