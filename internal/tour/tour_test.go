package tour

import (
	"strings"
	"testing"
)

func TestStandinTourChecksCarolWithoutFlags(t *testing.T) {
	if !strings.Contains(Standin(), "\n  octogate doctor --context carol ") {
		t.Errorf("the tour's doctor line is not octogate doctor --context carol:\n%s", Standin())
	}
}
