package cluster

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A kubectl that times out is killed with the exec credential plugin it started: once Run
// returns, nothing writes into the test's directories any more, so their removal cannot fail
// with "directory not empty".
func TestRunLeavesNoChildOfKubectlRunning(t *testing.T) {
	dir := t.TempDir()
	cache := filepath.Join(dir, "cache")
	// A kubectl stand-in whose "plugin" (a child in the background) writes into the cache
	// directory every 10 ms (for at most about 10 s), as a plugin still caching its session
	// would, and that itself waits past its timeout.
	fake := filepath.Join(dir, "kubectl")
	script := "#!/bin/sh\nmkdir -p '" + cache + "'\n(i=0; while [ $i -lt 1000 ]; do i=$((i+1)); : > '" + cache + "'/f$i; sleep 0.01; done) &\nsleep 20\n"
	if err := os.WriteFile(fake, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	k := Kubectl{Path: fake, Kubeconfig: filepath.Join(dir, "kubeconfig"), Home: dir, Timeout: 500 * time.Millisecond}
	start := time.Now()
	if _, err := k.Run(context.Background(), nil, "version"); err == nil {
		t.Fatal("the stand-in kubectl did not time out")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("Run took %s after a 500ms timeout", took)
	}
	count := func() int {
		entries, err := os.ReadDir(cache)
		if err != nil {
			t.Fatal(err)
		}
		return len(entries)
	}
	before := count()
	if before == 0 {
		t.Fatal("the stand-in's child never wrote")
	}
	time.Sleep(200 * time.Millisecond)
	if after := count(); after != before {
		t.Fatalf("a child of kubectl still writes after Run returned: %d files, then %d", before, after)
	}
	if err := os.RemoveAll(cache); err != nil {
		t.Fatal(err)
	}
}
