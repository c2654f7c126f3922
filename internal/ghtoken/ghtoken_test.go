package ghtoken

import (
	"hash/crc32"
	"testing"
)

func TestValid(t *testing.T) {
	for _, tc := range []struct {
		name  string
		token string
		want  bool
	}{
		// CRC32 (IEEE)'s standard check value: crc32("123456789") = 0xCBF43926 = 3421780262,
		// which is "3jZRME" in base62 over 0-9A-Za-z; computed apart from this package.
		{"the CRC32 check value", "ghp_123456789" + "3jZRME", true},
		{"one body character changed", "ghp_123456780" + "3jZRME", false},
		{"one checksum character changed", "ghp_123456789" + "3jZRMF", false},
		{"the same body under another prefix", "gho_123456789" + "3jZRME", true},
		{"minted", Mint("gho_alice"), true},
		{"minted ghu_", Mint("ghu_" + "0123456789abcdefghijABCDEFGHIJ"), true},
		{"checksum only", "gho_000000", false},
		{"prefix only", "gho_", false},
		{"no checksummed prefix", "github_pat_11AAAAAAA0abcdefghij_" + "x", false},
		{"non-base62 checksum", "gho_alice!!!!!!", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Valid(tc.token); got != tc.want {
				t.Errorf("Valid = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestChecksumPadsToSix(t *testing.T) {
	// An empty body's CRC32 is 0.
	if got := Checksum(""); got != "000000" {
		t.Errorf("Checksum(\"\") = %q, want 000000", got)
	}
}

func TestValidAllocatesNothing(t *testing.T) {
	tok := Mint("gho_" + "0123456789abcdefghijABCDEFGHIJ")
	if n := testing.AllocsPerRun(100, func() { Valid(tok) }); n != 0 {
		t.Errorf("Valid allocates %v times", n)
	}
}

func TestCRCIsIEEE(t *testing.T) {
	for _, s := range []string{"", "a", "0123456789abcdefghijABCDEFGHIJ", "demo_octocat"} {
		if got, want := crc(s), crc32.ChecksumIEEE([]byte(s)); got != want {
			t.Errorf("crc(%q) = %x, want %x", s, got, want)
		}
	}
}

// FuzzValid: Valid never panics, a minted token is valid, and changing its last character
// makes it invalid.
func FuzzValid(f *testing.F) {
	for _, s := range []string{"ghp_1234567893jZRME", "gho_", "gho_x", "ghs_1_a.b.c", "github_pat_x", "", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		Valid(s)
		if s == "" {
			return // a token needs a body before its checksum
		}
		tok := Mint("gho_" + s)
		if !Valid(tok) {
			t.Fatalf("Mint(%q) = %q is not valid", "gho_"+s, tok)
		}
		last := tok[len(tok)-1]
		if Valid(tok[:len(tok)-1] + string(last^1)) {
			t.Fatalf("%q with its last character changed is valid", tok)
		}
	})
}
