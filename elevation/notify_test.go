package elevation

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/octogate/octogate/audit"
)

func TestNotifierPostsSlackText(t *testing.T) {
	got := make(chan map[string]string, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m map[string]string
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" || json.Unmarshal(body, &m) != nil {
			t.Errorf("%s %s %q", r.Method, r.Header.Get("Content-Type"), body)
		}
		got <- m
	}))
	defer srv.Close()
	n, err := NewNotifier(NotifierConfig{URL: srv.URL + "/services/T000/B000/secret"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = n.Run(ctx) }()
	end := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	n.Notify(audit.Event{Event: audit.ElevationStarted, Request: "break-glass-x", Elevation: "break-glass", Requester: "github:bob:1002", User: "github:bob:1002", Reason: "break_glass", Why: "INC-9 db down", Expiry: end})
	select {
	case m := <-got:
		want := `BREAK-GLASS: github:bob:1002 holds elevation break-glass until 2026-12-06T09:00:00Z (break-glass-x), reason: "INC-9 db down"`
		if len(m) != 1 || m["text"] != want {
			t.Fatalf("posted %v, want text %q", m, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("nothing posted")
	}
}

func TestNotifierURLIsNeverRepeated(t *testing.T) {
	const secret = "ftp://hooks.example/services/T000/B000/XXXXsecret"
	_, err := NewNotifier(NotifierConfig{URL: secret})
	if err == nil || strings.Contains(err.Error(), "XXXXsecret") {
		t.Fatalf("err = %v", err)
	}
	n, err := NewNotifier(NotifierConfig{URL: "http://127.0.0.1:1/services/XXXXsecret", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.post(context.Background(), audit.Event{Event: audit.ElevationRequested}); err == nil || strings.Contains(err.Error(), "XXXXsecret") {
		t.Fatalf("post error %v repeats the URL", err)
	}
}

// TestNotifyTextEscapesTheReason: the reason is the requester's free text; in a Slack
// message "<!channel>" would ping the channel and "<URL|text>" show a link under any text.
func TestNotifyTextEscapesTheReason(t *testing.T) {
	got := Text(audit.Event{Event: audit.ElevationRequested, Request: "prod-debug-x", Elevation: "prod-debug", Requester: "github:bob:1002",
		Why: "<!channel> urgent, see <https://evil.example/login|INC-123 runbook> & approve"})
	want := `github:bob:1002 requests elevation prod-debug (prod-debug-x), reason: "&lt;!channel&gt; urgent, see &lt;https://evil.example/login|INC-123 runbook&gt; &amp; approve"`
	if got != want {
		t.Fatalf("text %s\nwant %s", got, want)
	}
}
