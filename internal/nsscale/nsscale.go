// Package nsscale measures the ownership controller of a real `octogate serve` holding many
// owned namespaces on a real kube-apiserver and etcd (bin/k8s): its first convergence, a
// restart (which must write nothing), a template edit rolled out at the client's configured
// QPS (OCTOGATE_KUBE_API_QPS), and the process's resident memory. `make bench` runs it with
// 10,000 namespaces; its test runs it small and asserts the same properties.
package nsscale

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/octogate/octogate/admission"
	"github.com/octogate/octogate/internal/cluster"
	"github.com/octogate/octogate/namespacetemplate"
	"github.com/octogate/octogate/ownership"
)

// controllerName is the workqueue and controller label of the ownership controller's metrics.
const controllerName = ownership.ControllerName

// The shipped example templates and the edit `make bench` and the test roll out: the compute
// quota of template "members" allows 21 pods instead of 20.
const (
	ExampleTemplatesFile = "examples/namespace-templates.yaml"
	ExampleTemplate      = "members"
)

// ExampleEdit is the edit of ExampleTemplatesFile that Run rolls out; it returns doc unchanged
// when the example no longer has the line it edits (Run then refuses to start).
func ExampleEdit(doc []byte) []byte {
	return bytes.Replace(doc, []byte(`limits.memory: 16Gi, pods: "20"}`), []byte(`limits.memory: 16Gi, pods: "21"}`), 1)
}

// Options configures Run.
type Options struct {
	// BinDir holds etcd and kube-apiserver (bin/k8s); Octogate is a built octogate binary.
	BinDir, Octogate string
	// WorkDir receives certificates, kubeconfigs, templates and the logs of every process.
	WorkDir string
	// Namespaces is how many owned namespaces exist; Creators how many distinct creators
	// (uids) they are spread over (0: one per three namespaces).
	Namespaces, Creators int
	// QPS and Burst are OCTOGATE_KUBE_API_QPS and OCTOGATE_KUBE_API_BURST of the controller.
	QPS   float64
	Burst int
	// Templates is the NamespaceTemplates YAML; every namespace is created with template
	// Template, as the mutating webhook would record it.
	Templates []byte
	Template  string
	// Edit returns the templates after the edit that is rolled out; it must change the spec of
	// at least one ResourceQuota of Template.
	Edit func([]byte) []byte
	// Env is added to octogate's environment, e.g. GOMEMLIMIT=230MiB as the chart sets it.
	Env []string
	// PhaseTimeout bounds each phase (0: 30 minutes).
	PhaseTimeout time.Duration
	// Progress, when not nil, receives one line per phase step.
	Progress io.Writer
}

// Phase is what one phase of Run measured in the controller process.
type Phase struct {
	Name string
	// Duration is from the start of the phase (process start, or the templates file written)
	// until the controller was idle with every namespace in the desired state.
	Duration time.Duration
	// Writes counts the controller process's POST, PUT, PATCH and DELETE requests to
	// kube-apiserver (rest_client_requests_total), Events included; WriteErrors those answered
	// with a status of 400 or more; ReconcileErrors the controller's failed reconciles.
	Writes, WriteErrors, ReconcileErrors int
	// Reconciles counts the controller's reconciles.
	Reconciles int
}

// Report is the outcome of Run.
type Report struct {
	Namespaces int
	// ObjectsPerNamespace is what the controller keeps in each namespace (owner RoleBinding and
	// the template's objects).
	ObjectsPerNamespace int
	QPS                 float64
	Burst               int
	First, Restart      Phase
	Edit                Phase
	// EditUpdates is how many objects the edit changed (one per namespace and edited object).
	EditUpdates int
	// RSSMiB and HWMMiB are the controller process's VmRSS after the restart converged and its
	// VmHWM (peak) at the end of the run, in MiB.
	RSSMiB, HWMMiB float64
}

// Run starts etcd and kube-apiserver, creates o.Namespaces owned namespaces, then runs
// `octogate serve` with the controller three times over: first start, restart, and template
// edit. It returns an error when a phase does not converge within the phase timeout; the
// properties (zero writes on restart, no errors) are for the caller to judge.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Namespaces <= 0 || o.QPS <= 0 || o.Burst <= 0 || o.Edit == nil || o.Template == "" {
		return nil, errors.New("nsscale: Namespaces, QPS, Burst, Template and Edit are required")
	}
	if o.Creators <= 0 {
		o.Creators = o.Namespaces/3 + 1
	}
	if o.PhaseTimeout <= 0 {
		o.PhaseTimeout = 30 * time.Minute
	}
	templates, err := namespacetemplate.Parse(o.Templates)
	if err != nil {
		return nil, fmt.Errorf("nsscale: templates: %w", err)
	}
	t, ok := templates.Get(o.Template)
	if !ok {
		return nil, fmt.Errorf("nsscale: no template %q", o.Template)
	}
	edited, err := namespacetemplate.Parse(o.Edit(o.Templates))
	if err != nil {
		return nil, fmt.Errorf("nsscale: edited templates: %w", err)
	}
	et, ok := edited.Get(o.Template)
	if !ok {
		return nil, fmt.Errorf("nsscale: edited templates have no template %q", o.Template)
	}
	changed := changedQuotas(t, et)
	if len(changed) == 0 {
		return nil, errors.New("nsscale: the edit changes no ResourceQuota of the template")
	}

	r := &run{o: o, report: &Report{Namespaces: o.Namespaces, ObjectsPerNamespace: len(t.Render("x")) + 1, QPS: o.QPS, Burst: o.Burst, EditUpdates: len(changed) * o.Namespaces}}
	api, err := cluster.StartAPIServer(cluster.APIServerConfig{BinDir: o.BinDir, WorkDir: filepath.Join(o.WorkDir, "apiserver")})
	if err != nil {
		return nil, err
	}
	defer func() { _ = api.Stop() }()
	r.admin, err = client.New(api.Admin, client.Options{})
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(o.WorkDir, "admin.kubeconfig")
	if err := api.WriteKubeconfig(kubeconfig, "nsscale-admin", nil); err != nil {
		return nil, err
	}
	start := time.Now()
	if err := r.createNamespaces(ctx, api.Admin); err != nil {
		return nil, err
	}
	r.logf("created %d namespaces (%d creators) in %v", o.Namespaces, o.Creators, time.Since(start).Round(time.Millisecond))

	templatesFile := filepath.Join(o.WorkDir, "templates.yaml")
	if err := os.WriteFile(templatesFile, o.Templates, 0o600); err != nil {
		return nil, err
	}
	certsDir := filepath.Join(o.WorkDir, "certs")
	if err := cluster.InitCerts(ctx, o.Octogate, certsDir, []string{"127.0.0.1"}); err != nil {
		return nil, err
	}
	port, err := cluster.FreePort()
	if err != nil {
		return nil, err
	}
	r.server = &cluster.Octogate{
		Binary:   o.Octogate,
		CertsDir: certsDir,
		Addr:     "127.0.0.1:" + strconv.Itoa(port),
		LogPath:  filepath.Join(o.WorkDir, "octogate.log"),
		Env: []string{
			"OCTOGATE_LISTEN=127.0.0.1:" + strconv.Itoa(port),
			"OCTOGATE_TLS_CERT_FILE=" + filepath.Join(certsDir, "tls.crt"),
			"OCTOGATE_TLS_KEY_FILE=" + filepath.Join(certsDir, "tls.key"),
			"OCTOGATE_GITHUB_API_URL=http://127.0.0.1:1/",
			"OCTOGATE_GITHUB_ORGS=acme",
			"OCTOGATE_LOG_FORMAT=json",
			"OCTOGATE_NAMESPACE_TEMPLATES_FILE=" + templatesFile,
			"OCTOGATE_KUBE_API_QPS=" + strconv.FormatFloat(o.QPS, 'f', -1, 64),
			"OCTOGATE_KUBE_API_BURST=" + strconv.Itoa(o.Burst),
			"KUBECONFIG=" + kubeconfig,
		},
	}
	r.server.Env = append(r.server.Env, o.Env...)
	if err := r.metricsClient(certsDir); err != nil {
		return nil, err
	}
	defer func() { _ = r.server.Stop() }()

	want := func(ctx context.Context) error { return r.verify(ctx, t) }
	if r.report.First, err = r.phase(ctx, "first start", r.server.Start, want, counters{}, 0); err != nil {
		return r.report, err
	}
	if err := r.server.Stop(); err != nil {
		return r.report, fmt.Errorf("nsscale: stop octogate: %w", err)
	}
	if r.report.Restart, err = r.phase(ctx, "restart", r.server.Start, want, counters{}, 0); err != nil {
		return r.report, err
	}
	r.report.RSSMiB, _ = procStatusMiB(r.server.Pid(), "VmRSS")
	before, err := r.scrape(ctx)
	if err != nil {
		return r.report, err
	}
	edit := func(context.Context) error { return os.WriteFile(templatesFile, o.Edit(o.Templates), 0o600) }
	wantEdited := func(ctx context.Context) error { return r.verify(ctx, et) }
	if r.report.Edit, err = r.phase(ctx, "template edit", edit, wantEdited, before, r.report.EditUpdates); err != nil {
		return r.report, err
	}
	r.report.HWMMiB, _ = procStatusMiB(r.server.Pid(), "VmHWM")
	return r.report, nil
}

type run struct {
	o       Options
	report  *Report
	admin   client.Client
	server  *cluster.Octogate
	metrics *http.Client
}

func (r *run) logf(format string, args ...any) {
	if r.o.Progress != nil {
		_, _ = fmt.Fprintf(r.o.Progress, "nsscale: "+format+"\n", args...)
	}
}

// createNamespaces creates the namespaces as the mutating webhook would have recorded them:
// creator, creator uid (annotation and label) and template, from 16 unthrottled clients.
func (r *run) createNamespaces(ctx context.Context, admin *rest.Config) error {
	cfg := rest.CopyConfig(admin)
	cfg.QPS, cfg.Burst = -1, 0 // no client-side rate limit
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	next := make(chan int)
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range next {
				uid := strconv.Itoa(100000 + i%r.o.Creators)
				ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
					Name:   fmt.Sprintf("scale-%05d", i),
					Labels: map[string]string{namespacetemplate.LabelCreatorUID: uid},
					Annotations: map[string]string{
						admission.AnnotationCreator:          fmt.Sprintf("github:user%s:%s", uid, uid),
						admission.AnnotationCreatorUID:       uid,
						admission.AnnotationCreatorGroups:    `["github:acme"]`,
						namespacetemplate.AnnotationTemplate: r.o.Template,
					},
				}}
				if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
					select {
					case errs <- fmt.Errorf("create namespace %s: %w", ns.Name, err):
					default:
					}
				}
			}
		})
	}
	for i := range r.o.Namespaces {
		select {
		case next <- i:
		case err := <-errs:
			close(next)
			wg.Wait()
			return err
		}
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// phase runs begin and waits until the controller is idle (empty workqueue, no active
// worker, at least minWrites writes since base, unchanged counters over two scrapes) and done
// reports the cluster in the desired state. The Phase counts what happened since base, the
// counters of the same process before the phase (zero for a process started by begin).
func (r *run) phase(ctx context.Context, name string, begin, done func(context.Context) error, base counters, minWrites int) (Phase, error) {
	ctx, cancel := context.WithTimeout(ctx, r.o.PhaseTimeout)
	defer cancel()
	start := time.Now()
	if err := begin(ctx); err != nil {
		return Phase{Name: name}, fmt.Errorf("nsscale: %s: %w", name, err)
	}
	var last counters
	var lastErr error
	for tick := time.NewTicker(250 * time.Millisecond); ; {
		select {
		case <-ctx.Done():
			return last.phase(name, time.Since(start)).minus(base), fmt.Errorf("nsscale: %s: not converged after %v (last: %w; writes %d, reconciles %d)", name, r.o.PhaseTimeout, lastErr, last.writes, last.reconciles)
		case <-tick.C:
		}
		c, err := r.scrape(ctx)
		if err != nil {
			lastErr = err
			continue
		}
		idle := c.depth == 0 && c.active == 0 && c.reconciles-base.reconciles >= r.o.Namespaces && c.writes-base.writes >= minWrites && c == last
		last = c
		if !idle {
			lastErr = fmt.Errorf("busy: depth %d, active %d", c.depth, c.active)
			continue
		}
		if lastErr = done(ctx); lastErr != nil {
			continue
		}
		p := c.phase(name, time.Since(start)).minus(base)
		r.logf("%s: converged in %v: %d writes (%d errors), %d reconciles (%d errors)", name, p.Duration.Round(time.Millisecond), p.Writes, p.WriteErrors, p.Reconciles, p.ReconcileErrors)
		return p, nil
	}
}

// verify checks that every namespace has the owner RoleBinding and the objects of t, each
// ResourceQuota with t's spec.
func (r *run) verify(ctx context.Context, t *namespacetemplate.Template) error {
	var bindings metav1.PartialObjectMetadataList
	bindings.SetGroupVersionKind(rbacList)
	if err := r.admin.List(ctx, &bindings, client.MatchingLabels{ownership.LabelManagedBy: ownership.ManagedByValue}); err != nil {
		return err
	}
	owners := 0
	for _, b := range bindings.Items {
		if b.Name == ownership.RoleBindingName {
			owners++
		}
	}
	if owners != r.o.Namespaces {
		return fmt.Errorf("%d of %d owner RoleBindings", owners, r.o.Namespaces)
	}
	want := map[string]*corev1.ResourceQuota{}
	for _, obj := range t.Render("x") {
		if q, ok := obj.(*corev1.ResourceQuota); ok {
			want[q.Name] = q
		}
	}
	var quotas corev1.ResourceQuotaList
	if err := r.admin.List(ctx, &quotas, client.MatchingLabels{namespacetemplate.LabelTemplate: t.Name}); err != nil {
		return err
	}
	good := 0
	for _, q := range quotas.Items {
		if w, ok := want[q.Name]; ok && equality.Semantic.DeepDerivative(w.Spec, q.Spec) {
			good++
		}
	}
	if good != len(want)*r.o.Namespaces {
		return fmt.Errorf("%d of %d ResourceQuotas as the template says", good, len(want)*r.o.Namespaces)
	}
	return nil
}

var rbacList = rbacv1.SchemeGroupVersion.WithKind("RoleBindingList")

// changedQuotas names the ResourceQuotas of a whose spec differs in b.
func changedQuotas(a, b *namespacetemplate.Template) []string {
	after := map[string]*corev1.ResourceQuota{}
	for _, obj := range b.Render("x") {
		if q, ok := obj.(*corev1.ResourceQuota); ok {
			after[q.Name] = q
		}
	}
	var names []string
	for _, obj := range a.Render("x") {
		if q, ok := obj.(*corev1.ResourceQuota); ok {
			if n, ok := after[q.Name]; ok && !equality.Semantic.DeepEqual(q.Spec, n.Spec) {
				names = append(names, q.Name)
			}
		}
	}
	return names
}

// counters are the controller process's metrics that phase compares between scrapes.
type counters struct {
	writes, writeErrors, reconciles, reconcileErrors, depth, active int
}

func (c counters) phase(name string, d time.Duration) Phase {
	return Phase{Name: name, Duration: d, Writes: c.writes, WriteErrors: c.writeErrors, Reconciles: c.reconciles, ReconcileErrors: c.reconcileErrors}
}

// minus removes the counts of before (the same process) from p.
func (p Phase) minus(before counters) Phase {
	p.Writes -= before.writes
	p.WriteErrors -= before.writeErrors
	p.Reconciles -= before.reconciles
	p.ReconcileErrors -= before.reconcileErrors
	return p
}

func (r *run) metricsClient(certsDir string) error {
	caPEM, err := os.ReadFile(filepath.Join(certsDir, "ca.crt"))
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return fmt.Errorf("no certificate in %s/ca.crt", certsDir)
	}
	r.metrics = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	return nil
}

// scrape reads the counters from the server's /metrics: client-go's
// rest_client_requests_total{code,method} and controller-runtime's reconcile and workqueue
// series of the ownership controller.
func (r *run) scrape(ctx context.Context) (counters, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.server.URL()+"/metrics", nil)
	if err != nil {
		return counters{}, err
	}
	resp, err := r.metrics.Do(req)
	if err != nil {
		return counters{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return counters{}, fmt.Errorf("/metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return counters{}, fmt.Errorf("/metrics: %w", err)
	}
	var c counters
	for _, m := range families["rest_client_requests_total"].GetMetric() {
		switch label(m, "method") {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
			n := int(m.GetCounter().GetValue())
			c.writes += n
			if code, _ := strconv.Atoi(label(m, "code")); code >= 400 || code == 0 {
				c.writeErrors += n
			}
		}
	}
	sum := func(family, key, value string) int {
		total := 0.0
		for _, m := range families[family].GetMetric() {
			if label(m, key) == value {
				total += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
		return int(total)
	}
	c.reconciles = sum("controller_runtime_reconcile_total", "controller", controllerName)
	c.reconcileErrors = sum("controller_runtime_reconcile_errors_total", "controller", controllerName)
	c.active = sum("controller_runtime_active_workers", "controller", controllerName)
	c.depth = sum("workqueue_depth", "name", controllerName)
	return c, nil
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// procStatusMiB reads one kB field of /proc/PID/status (VmRSS, VmHWM) in MiB.
func procStatusMiB(pid int, field string) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no %s", pid, field)
}
