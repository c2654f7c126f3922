package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/octogate/octogate/admission"
	"github.com/octogate/octogate/audit"
	"github.com/octogate/octogate/elevation"
	"github.com/octogate/octogate/subjectaccessreview"
	"github.com/octogate/octogate/webhooks"
)

// crdRetry is how often serve looks for the AccessRequest CRD until it is installed.
const crdRetry = 5 * time.Second

// elevations is the AccessRequest machinery of serve: the store the authorizer and the
// admission webhooks read, fed by the manager's cache.
type elevations struct {
	store  *elevation.Store
	notify *elevation.Notifier // nil without OCTOGATE_ELEVATION_NOTIFY_URL
	mgr    manager.Manager
}

// newElevations returns the elevations of serve, or nil without a manager (OCTOGATE_CONTROLLER
// =false: nothing watches AccessRequests, so no elevation is ever active). policy is the
// policy in force; auditLog may be nil.
func newElevations(cfg serveConfig, mgr manager.Manager, policy func() *subjectaccessreview.Policy, auditLog *audit.Writer, log *slog.Logger) (*elevations, error) {
	if mgr == nil {
		return nil, nil
	}
	storeCfg := elevation.StoreConfig{Policy: policy, Logger: log.With("component", "elevation")}
	if auditLog != nil {
		storeCfg.Audit = auditLog
	}
	e := &elevations{mgr: mgr}
	if cfg.ElevationNotifyURL != "" {
		n, err := elevation.NewNotifier(elevation.NotifierConfig{URL: cfg.ElevationNotifyURL, Logger: log})
		if err != nil {
			return nil, err
		}
		e.notify, storeCfg.Notify = n, n
	}
	store, err := elevation.NewStore(storeCfg)
	if err != nil {
		return nil, err
	}
	e.store = store
	if cfg.ElevationRBAC {
		if err := mgr.Add(&elevation.RBAC{Client: mgr.GetClient(), Store: store, Log: log.With("component", "elevation-rbac")}); err != nil {
			return nil, fmt.Errorf("OCTOGATE_ELEVATION_RBAC: %w", err)
		}
	}
	return e, nil
}

// mount serves /mutate/accessrequests and /validate/accessrequests.
func (e *elevations) mount(server *webhooks.Server, log *slog.Logger) error {
	cfg := admission.AccessRequestConfig{Source: e.store, Logger: log}
	m, err := admission.NewAccessRequestMutator(cfg)
	if err != nil {
		return err
	}
	v, err := admission.NewAccessRequestValidator(cfg)
	if err != nil {
		return err
	}
	server.Handle("/mutate/accessrequests", "mutate-accessrequests", m)
	server.Handle("/validate/accessrequests", "validate-accessrequests", v)
	return nil
}

// run watches AccessRequests and records ends until ctx is done.
func (e *elevations) run(ctx context.Context) error {
	go func() { _ = e.store.Run(ctx) }()
	if e.notify != nil {
		go func() { _ = e.notify.Run(ctx) }()
	}
	return e.store.Watch(ctx, e.mgr.GetCache(), crdRetry)
}
