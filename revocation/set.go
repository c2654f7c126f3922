package revocation

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Security Event Tokens of the feed (RFC 8417, https://www.rfc-editor.org/rfc/rfc8417).
const (
	// EventSessionRevoked is CAEP's session-revoked event
	// (https://openid.net/specs/openid-caep-1_0.html#name-session-revoked): a user's or a
	// team's sessions issued at or before event_timestamp are refused. An octogate extension,
	// "clusters", limits it to the sessions of those clusters (audiences); a receiver that
	// ignores it revokes more, never less.
	EventSessionRevoked = "https://schemas.openid.net/secevent/caep/event-type/session-revoked"
	// EventOrgMemberRemoved is octogate's event for a user who left an organization, as the
	// issuer confirmed: {subject (iss_sub), org, event_timestamp}.
	EventOrgMemberRemoved = "https://octogate.dev/secevent/org-member-removed"
	// PollDeliveryMethod is poll delivery (RFC 8936) as SSF 1.0 names it.
	PollDeliveryMethod = "urn:ietf:rfc:8936"
	// MaxEventBytes bounds one SET a receiver accepts (a few hundred bytes in practice).
	MaxEventBytes = 8 << 10
)

// subjectID is an SSF subject identifier (RFC 9493): {"format":"iss_sub","iss","sub"} for a
// user, or the complex subject {"group": {"format":"opaque","id":"org/slug"}} for a team.
type subjectID struct {
	Format string     `json:"format,omitempty"`
	Iss    string     `json:"iss,omitempty"`
	Sub    string     `json:"sub,omitempty"`
	ID     string     `json:"id,omitempty"`
	Group  *subjectID `json:"group,omitempty"`
}

type eventBody struct {
	Subject        subjectID `json:"subject"`
	EventTimestamp int64     `json:"event_timestamp"`
	Clusters       []string  `json:"clusters,omitempty"`
	Org            string    `json:"org,omitempty"`
}

// eventClaims are a SET's claims (RFC 8417 section 2.2): no sub and no exp, so that a SET is
// never taken for a session (a session verifier refuses it: wrong aud, no exp).
type eventClaims struct {
	Issuer   string               `json:"iss"`
	IssuedAt int64                `json:"iat"`
	ID       string               `json:"jti"`
	Audience string               `json:"aud"`
	Events   map[string]eventBody `json:"events"`
}

// eventClaimsOf is the claims of r's SET from issuer to the stream's audience, signed at iat.
func eventClaimsOf(issuer, aud string, r Revocation, iat time.Time) ([]byte, error) {
	user := subjectID{Format: "iss_sub", Iss: issuer, Sub: r.UserID}
	body := eventBody{Subject: user, EventTimestamp: r.At.Unix()}
	typ := EventSessionRevoked
	switch r.Kind() {
	case KindTeam:
		body.Subject = subjectID{Group: &subjectID{Format: "opaque", ID: r.Team}}
	case KindSessions:
		body.Clusters = []string{r.Cluster}
	case KindLeaver:
		typ, body.Org = EventOrgMemberRemoved, r.LeftOrg
	case KindInvalid:
		return nil, errors.New("revocation: not a valid revocation")
	}
	return json.Marshal(eventClaims{Issuer: issuer, IssuedAt: iat.Unix(), ID: r.ID(), Audience: aud,
		Events: map[string]eventBody{typ: body}})
}

// decodeEventClaims reads the verified claims of a SET of issuer for aud (the stream's), as the
// receiver of cluster (its audience, which a "clusters" limit is matched with): one event of a
// known type about a valid subject. known is false for a well-formed SET of an event type this
// version does not know (to acknowledge and skip). Errors say what is wrong, never quoting more
// than a clipped value.
func decodeEventClaims(issuer, aud, cluster string, payload []byte) (r Revocation, jti string, known bool, err error) {
	if len(payload) > MaxEventBytes {
		return Revocation{}, "", false, fmt.Errorf("claims of %d bytes, above %d", len(payload), MaxEventBytes)
	}
	var c eventClaims
	d := json.NewDecoder(bytes.NewReader(payload))
	if err := d.Decode(&c); err != nil {
		return Revocation{}, "", false, fmt.Errorf("claims do not decode: %w", err)
	}
	switch {
	case c.Issuer != issuer:
		return Revocation{}, "", false, fmt.Errorf("iss %q is not %q", clip(c.Issuer), issuer)
	case c.Audience != aud:
		return Revocation{}, "", false, fmt.Errorf("aud %q is not %q", clip(c.Audience), aud)
	case c.ID == "" || len(c.ID) > maxIDBytes:
		return Revocation{}, "", false, errors.New("jti is missing or too long")
	case len(c.Events) != 1:
		return Revocation{}, c.ID, false, fmt.Errorf("%d events, want 1", len(c.Events))
	}
	for typ, e := range c.Events {
		at := time.Unix(e.EventTimestamp, 0).UTC()
		if e.EventTimestamp <= 0 {
			return Revocation{}, c.ID, false, errors.New("event_timestamp is missing")
		}
		switch typ {
		case EventSessionRevoked:
			switch {
			case e.Subject.Group != nil && e.Subject.Format == "":
				g := e.Subject.Group
				if g.Format != "opaque" {
					return Revocation{}, c.ID, false, fmt.Errorf("group subject format %q, want opaque", clip(g.Format))
				}
				r = Revocation{Team: strings.ToLower(g.ID), At: at}
			case e.Subject.Format == "iss_sub" && e.Subject.Iss == issuer && e.Subject.Group == nil:
				r = Revocation{UserID: e.Subject.Sub, At: at}
			default:
				return Revocation{}, c.ID, false, errors.New("subject is neither iss_sub of the issuer nor a group")
			}
			if len(e.Clusters) > 0 {
				if r.Kind() != KindUser {
					return Revocation{}, c.ID, false, errors.New("clusters limit a user's sessions only")
				}
				// A receiver needs only whether its own cluster is named: the first valid
				// name that is, or the first otherwise.
				r.Cluster = e.Clusters[0]
				for _, name := range e.Clusters {
					if name == cluster {
						r.Cluster = name
					}
				}
			}
		case EventOrgMemberRemoved:
			if e.Subject.Format != "iss_sub" || e.Subject.Iss != issuer || e.Subject.Group != nil {
				return Revocation{}, c.ID, false, errors.New("subject is not iss_sub of the issuer")
			}
			r = Revocation{UserID: e.Subject.Sub, LeftOrg: strings.ToLower(e.Org), At: at}
		default:
			return Revocation{}, c.ID, false, nil
		}
	}
	if !r.valid() {
		return Revocation{}, c.ID, false, errors.New("subject, team, cluster or org is not a valid name")
	}
	return r, c.ID, true, nil
}

// maxIDBytes bounds a jti a receiver keeps.
const maxIDBytes = 64

// clip shortens s for a message.
func clip(s string) string {
	const n = 64
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
