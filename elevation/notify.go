package elevation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/octogate/octogate/audit"
)

// NotifierConfig configures NewNotifier.
type NotifierConfig struct {
	// URL receives a JSON POST per step: an incoming webhook of Slack
	// (https://api.slack.com/messaging/webhooks) or Microsoft Teams, which both accept
	// {"text": "..."}. It is a secret of its own (whoever has it may post) and is never
	// logged.
	URL string
	// Client sends the POSTs (nil: a client with Timeout).
	Client *http.Client
	// Timeout bounds each POST (default 5 s).
	Timeout time.Duration
	// Logger; nil discards.
	Logger *slog.Logger
}

// Notifier posts every step of every AccessRequest to a URL, one at a time, in order, from
// a bounded queue: a step that finds the queue full is dropped and logged, never blocking
// the informer. The message holds names, the elevation, times and the people's reasons; an
// AccessRequest holds no token, so no message does.
type Notifier struct {
	url    string
	client *http.Client
	log    *slog.Logger
	queue  chan audit.Event
}

// notifyQueue bounds the steps waiting to be posted.
const notifyQueue = 256

// NewNotifier checks cfg.URL (http or https, with a host) and returns a Notifier; Run posts.
func NewNotifier(cfg NotifierConfig) (*Notifier, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		// The URL itself is not repeated: it is a secret.
		return nil, errors.New("OCTOGATE_ELEVATION_NOTIFY_URL: must be an http or https URL with a host")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	client := cfg.Client
	if client == nil {
		client = &http.Client{Timeout: cfg.Timeout}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Notifier{url: cfg.URL, client: client, log: log, queue: make(chan audit.Event, notifyQueue)}, nil
}

// Notify queues e and returns at once.
func (n *Notifier) Notify(e audit.Event) {
	select {
	case n.queue <- e:
	default:
		n.log.Warn("elevation notification dropped: queue full", "event", e.Event, "request", e.Request)
	}
}

// Run posts queued steps until ctx is done.
func (n *Notifier) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case e := <-n.queue:
			if err := n.post(ctx, e); err != nil {
				n.log.Warn("elevation notification failed", "event", e.Event, "request", e.Request, "err", err)
			}
		}
	}
}

func (n *Notifier) post(ctx context.Context, e audit.Event) error {
	body, err := json.Marshal(map[string]string{"text": Text(e)})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.url, bytes.NewReader(body))
	if err != nil {
		return errors.New("building the request failed")
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := n.client.Do(req)
	if err != nil {
		// url.Error repeats the URL, a secret: only the cause is kept.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return nil
}

// Text is the one-line message of a step, as people read it in a chat channel; the
// requester's reason is quoted, with & < > escaped.
func Text(e audit.Event) string {
	var b strings.Builder
	scope := ""
	if e.Namespace != "" {
		scope = " in namespace " + e.Namespace
	}
	switch e.Event {
	case audit.ElevationRequested:
		fmt.Fprintf(&b, "%s requests elevation %s%s (%s)", e.Requester, e.Elevation, scope, e.Request)
	case audit.ElevationApproved:
		fmt.Fprintf(&b, "%s approved %s: elevation %s of %s", e.User, e.Request, e.Elevation, e.Requester)
	case audit.ElevationDenied:
		fmt.Fprintf(&b, "%s denied %s: elevation %s of %s", e.User, e.Request, e.Elevation, e.Requester)
	case audit.ElevationRevoked:
		fmt.Fprintf(&b, "%s revoked %s: elevation %s of %s", e.User, e.Request, e.Elevation, e.Requester)
	case audit.ElevationStarted:
		if e.Reason == "break_glass" {
			b.WriteString("BREAK-GLASS: ")
		}
		fmt.Fprintf(&b, "%s holds elevation %s%s until %s (%s)", e.Requester, e.Elevation, scope, e.Expiry.UTC().Format(time.RFC3339), e.Request)
	case audit.ElevationEnded:
		fmt.Fprintf(&b, "elevation %s of %s ended (%s): %s", e.Elevation, e.Requester, e.Request, strings.ReplaceAll(e.Reason, "_", " "))
	default:
		fmt.Fprintf(&b, "%s: %s", e.Event, e.Request)
	}
	if e.Why != "" {
		// The reason is the only free text (names are DNS labels, usernames have no < > &):
		// escaped as Slack asks, so "<!channel>" pings no one and "<https://x|INC-1>" is no
		// link (https://api.slack.com/reference/surfaces/formatting#escaping).
		fmt.Fprintf(&b, ", reason: %s", chatEscaper.Replace(strconv.Quote(e.Why)))
	}
	return b.String()
}

var chatEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")
