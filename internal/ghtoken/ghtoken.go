// Package ghtoken checks and mints the checksum GitHub puts in its tokens: the last six
// characters of a ghp_, gho_, ghu_, ghs_ or ghr_ token are the CRC32 (IEEE) of the characters
// between the prefix and them, in base62 (0-9A-Za-z), left-padded with "0" to six characters.
// Source: GitHub's "Behind GitHub's new authentication token formats"
// (https://github.blog/engineering/platform-security/behind-githubs-new-authentication-token-formats/),
// checked against public verifiers (Samsung/CredSweeper credsweeper/filters/value_github_check.py
// computes binascii.crc32 of token[4:-6] and compares it with the base62 decoding of
// token[-6:]) and against the example token of that post. The tests pin it with CRC32's
// standard check value (the CRC32 of "123456789" is 0xCBF43926, base62 "3jZRME").
//
// Fine-grained tokens (github_pat_<22>_<59>) are not covered: GitHub has not published
// whether, or how, they carry a checksum.
package ghtoken

import (
	"hash/crc32"
	"strings"
)

// ChecksumLen is the length of the checksum at a token's end.
const ChecksumLen = 6

const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// Prefixes are the token prefixes whose tokens carry the checksum.
var Prefixes = []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_"}

// Prefix is the checksummed prefix token starts with, or "".
func Prefix(token string) string {
	for _, p := range Prefixes {
		if strings.HasPrefix(token, p) {
			return p
		}
	}
	return ""
}

// Checksum is the six base62 characters of the CRC32 of body (the part between the prefix and
// the checksum).
func Checksum(body string) string {
	n := crc(body)
	var b [ChecksumLen]byte
	for i := ChecksumLen - 1; i >= 0; i-- {
		b[i] = alphabet[n%62]
		n /= 62
	}
	return string(b[:])
}

// Valid reports whether token, which starts with one of Prefixes, ends with the checksum of the
// characters between that prefix and it. A token too short to hold a checksum is not valid. It
// allocates nothing.
func Valid(token string) bool {
	p := Prefix(token)
	if p == "" || len(token) <= len(p)+ChecksumLen {
		return false
	}
	body, sum := token[len(p):len(token)-ChecksumLen], token[len(token)-ChecksumLen:]
	n := crc(body)
	for i := ChecksumLen - 1; i >= 0; i-- {
		if sum[i] != alphabet[n%62] {
			return false
		}
		n /= 62
	}
	return true
}

// Mint is prefixed (a token's prefix and body, e.g. "gho_" + 30 random characters) with its
// checksum appended: a token of GitHub's format, for the GitHub stand-in, tests and demos.
// prefixed must start with one of Prefixes.
func Mint(prefixed string) string {
	p := Prefix(prefixed)
	return prefixed + Checksum(prefixed[len(p):])
}

// crc is crc32.ChecksumIEEE of s without converting s to a byte slice (which allocates).
func crc(s string) uint32 {
	c := ^uint32(0)
	for i := 0; i < len(s); i++ {
		c = crc32.IEEETable[byte(c)^s[i]] ^ c>>8
	}
	return ^c
}
