package credential

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// IssuerCluster is one cluster of an issuer's GET <issuer>/clusters answer (a
// SessionClusterList, docs/sessions.md): name (the audience), server, certificateAuthorityData
// (base64 PEM), accepts (webhook, apiserver or proxy), labels, and how a revocation at the
// issuer reaches it: revocation "feed" (within seconds) or "expiry" (at the session's exp, at
// most SessionTTL, the list's sessionTTL).
type IssuerCluster struct {
	Name                     string            `json:"name"`
	Server                   string            `json:"server"`
	CertificateAuthorityData string            `json:"certificateAuthorityData"`
	Accepts                  string            `json:"accepts"`
	Labels                   map[string]string `json:"labels"`
	Revocation               string            `json:"revocation"`
	// SessionTTL is the list's sessionTTL (a Go duration), copied to each cluster.
	SessionTTL string `json:"-"`
}

// IssuerClusters is the list GET <issuer>/clusters answers for githubToken: the username it
// stands for and the clusters that person may have sessions for. caFile (PEM, optional) is
// trusted for the issuer. An answer the issuer sheds (429 or 503 with Retry-After) is retried
// as shedRetry says. Errors quote the issuer's error description, never the token.
func IssuerClusters(ctx context.Context, issuer, caFile, githubToken string) (user string, clusters []IssuerCluster, err error) {
	return issuerClusters(ctx, defaultShedRetry(), issuer, caFile, githubToken)
}

func issuerClusters(ctx context.Context, retry shedRetry, issuer, caFile, githubToken string) (user string, clusters []IssuerCluster, err error) {
	issuer = strings.TrimRight(issuer, "/")
	if u, err := url.Parse(issuer); err != nil || u.Scheme != "https" || u.Host == "" {
		return "", nil, fmt.Errorf("issuer %q: want an https URL", issuer)
	}
	client, err := newHTTPClient(caFile)
	if err != nil {
		return "", nil, fmt.Errorf("issuer CA: %w", err)
	}
	status, body, err := retry.do(ctx, client, 4<<20, func(ctx context.Context) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, issuer+"/clusters", nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+githubToken)
		req.Header.Set("Accept", "application/json")
		return req, nil
	})
	if err != nil {
		return "", nil, fmt.Errorf("GET %s/clusters: %w", issuer, err)
	}
	if status != http.StatusOK {
		var e struct {
			Code        string `json:"error"`
			Description string `json:"error_description"`
		}
		if json.Unmarshal(body, &e) == nil && e.Code != "" {
			return "", nil, fmt.Errorf("GET %s/clusters: HTTP %d: %s: %s", issuer, status, e.Code, e.Description)
		}
		return "", nil, fmt.Errorf("GET %s/clusters: HTTP %d (is %s an octogate issuer with the cluster list?)", issuer, status, issuer)
	}
	var list struct {
		Kind       string          `json:"kind"`
		User       string          `json:"user"`
		SessionTTL string          `json:"sessionTTL"`
		Clusters   []IssuerCluster `json:"clusters"`
	}
	if err := json.Unmarshal(body, &list); err != nil || list.Kind != "SessionClusterList" {
		return "", nil, fmt.Errorf("GET %s/clusters: the answer is not a SessionClusterList", issuer)
	}
	for i := range list.Clusters {
		list.Clusters[i].SessionTTL = list.SessionTTL
	}
	return list.User, list.Clusters, nil
}
