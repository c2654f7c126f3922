package release

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// maxTrackedBytes is the largest file the repository may track: build outputs (binaries,
// images, archives) belong in .gitignore, never in every clone.
const maxTrackedBytes = 1 << 20

// executableMagic lists the first bytes of the executable formats Go builds for the release
// platforms: ELF (linux), Mach-O 32/64-bit and fat (darwin), PE (windows, "MZ").
var executableMagic = [][]byte{
	{0x7f, 'E', 'L', 'F'},
	{0xfe, 0xed, 0xfa, 0xce}, {0xce, 0xfa, 0xed, 0xfe},
	{0xfe, 0xed, 0xfa, 0xcf}, {0xcf, 0xfa, 0xed, 0xfe},
	{0xca, 0xfe, 0xba, 0xbe},
	{'M', 'Z'},
}

// isExecutableBinary reports whether head (a file's first bytes) starts like a built program.
func isExecutableBinary(head []byte) bool {
	for _, m := range executableMagic {
		if bytes.HasPrefix(head, m) {
			return true
		}
	}
	return false
}

func TestExecutableMagicIsRecognised(t *testing.T) {
	for name, head := range map[string][]byte{
		"elf": {0x7f, 'E', 'L', 'F', 2, 1}, "mach-o 64": {0xcf, 0xfa, 0xed, 0xfe, 7, 0}, "pe": []byte("MZ\x90\x00"),
	} {
		if !isExecutableBinary(head) {
			t.Errorf("%s header not recognised as an executable", name)
		}
	}
	for _, text := range []string{"package main\n", "#!/usr/bin/env bash\n", "MIT License"} {
		if isExecutableBinary([]byte(text)) {
			t.Errorf("text %q taken for an executable", text)
		}
	}
}

// TestNoBinariesAreTracked fails on any tracked file over 1 MiB or any tracked executable
// binary, as they are in the working tree.
func TestNoBinariesAreTracked(t *testing.T) {
	out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	files := strings.Split(strings.TrimRight(string(out), "\x00"), "\x00")
	if len(files) < 10 {
		t.Fatalf("git ls-files listed %d files; expected the repository's", len(files))
	}
	for _, name := range files {
		path := filepath.Join(root, name)
		fi, err := os.Lstat(path)
		if err != nil || !fi.Mode().IsRegular() {
			continue // deleted in the working tree, or a symlink
		}
		if fi.Size() > maxTrackedBytes {
			t.Errorf("%s is tracked and %d bytes (over 1 MiB): build outputs belong in .gitignore", name, fi.Size())
			continue
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		head := make([]byte, 4)
		n, _ := f.Read(head)
		_ = f.Close()
		if isExecutableBinary(head[:n]) {
			t.Errorf("%s is a tracked executable binary: build outputs belong in .gitignore", name)
		}
	}
}
