package tokenreview

import (
	"slices"
	"testing"
)

func TestOrgLoginsDropThePins(t *testing.T) {
	got := OrgLogins([]string{"acme=2001", " Umbrella ", "*"})
	if want := []string{"acme", "Umbrella", "*"}; !slices.Equal(got, want) {
		t.Errorf("OrgLogins = %q, want %q", got, want)
	}
}
