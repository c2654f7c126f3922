package tokenreview

import (
	"os"
	"strings"
	"testing"
)

// TestReasonTableInDocsListsEveryCode keeps docs/identity.md's table in step with Reasons.
func TestReasonTableInDocsListsEveryCode(t *testing.T) {
	b, err := os.ReadFile("../docs/identity.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, r := range Reasons {
		if !strings.Contains(doc, "| `"+r.Code+"` | "+r.Result+" | "+r.Meaning+" | "+r.Fix+" |") {
			t.Errorf("docs/identity.md has no up-to-date table row for %s", r.Code)
		}
	}
}
