package elevation

import (
	"testing"
	"time"
)

// FuzzDecodeAccessRequest: any object either fails to decode or decodes to a request that
// every decision takes without panicking.
func FuzzDecodeAccessRequest(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"octogate.dev/v1alpha1","kind":"AccessRequest","metadata":{"name":"prod-debug-x"},"spec":{"elevation":"prod-debug","reason":"INC-1","duration":"1h","namespace":"prod"}}`))
	f.Add([]byte(`{"spec":{"elevation":"two-keys","duration":"10m"},"status":{"phase":"Pending","requester":{"username":"github:bob:1002","uid":"1002"},"requestedAt":"2026-12-06T08:00:00Z","approvals":[{"by":"github:alice:1001","at":"2026-12-06T08:01:00Z"}]}}`))
	f.Add([]byte(`{"spec":{"duration":5}}`))
	f.Add([]byte(`{"spec":{"duration":"-1h"},"status":{"phase":"Active"}}`))
	p := mustPolicy(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		ar, err := Decode(data)
		if err != nil {
			return
		}
		now := t0.Add(time.Minute)
		ar.EffectivePhase(now)
		_, _ = Admit(p, ar.Spec, bob, 0, 0, now)
		_ = CheckCreate(p, ar, bob, 0, 0, now)
		for _, a := range []Action{ActionApprove, ActionDeny, ActionRevoke} {
			_, _ = Act(p, ar, a, "", alice, now)
		}
		_ = CheckUpdate(p, ar, ar, alice, now)
	})
}
