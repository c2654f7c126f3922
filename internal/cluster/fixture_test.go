package cluster

import (
	"strconv"
	"testing"
)

func TestUsernamesAreLoginColonID(t *testing.T) {
	for _, c := range []struct {
		user, login string
		id          int
	}{{AliceUser, "alice", AliceID}, {BobUser, "bob", BobID}, {CarolUser, "carol", CarolID}, {DaveUser, "dave", DaveID}} {
		if want := "github:" + c.login + ":" + strconv.Itoa(c.id); c.user != want {
			t.Errorf("%s: username constant %q, want %q", c.login, c.user, want)
		}
	}
}
