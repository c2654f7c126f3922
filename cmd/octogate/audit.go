package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/octogate/octogate/audit"
)

// openAudit is the audit writer of OCTOGATE_AUDIT_FILE, its runner (writes until ctx is done,
// then closes the file), or nil and a no-op runner when the variable is unset.
func openAudit(cfg serveConfig, reg prometheus.Registerer, log *slog.Logger) (*audit.Writer, func(context.Context) error, error) {
	if cfg.AuditFile == "" {
		return nil, nil, nil
	}
	out, closeFn, err := audit.Open(cfg.AuditFile)
	if err != nil {
		return nil, nil, fmt.Errorf("OCTOGATE_AUDIT_FILE=%q: %w", cfg.AuditFile, err)
	}
	w, err := audit.New(audit.Config{Out: out, Registerer: reg})
	if err != nil {
		_ = closeFn()
		return nil, nil, err
	}
	log.Info("writing audit events", "file", cfg.AuditFile)
	return w, func(ctx context.Context) error {
		err := w.Run(ctx)
		if cerr := closeFn(); err == nil && cerr != nil {
			log.Warn("closing the audit file", "file", cfg.AuditFile, "err", cerr)
		}
		return err
	}, nil
}
