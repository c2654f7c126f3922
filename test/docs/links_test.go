package docs

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// root is the repository root, relative to this package.
const root = "../.."

// pages are the Markdown files a reader follows links through.
func pages(t *testing.T) []string {
	t.Helper()
	out := []string{filepath.Join(root, "README.md")}
	for _, pattern := range []string{"docs/*.md", "charts/octogate/README.md", "examples/*.md", "CHANGELOG.md"} {
		m, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m...)
	}
	return out
}

var (
	// [text](target) and [text](target "title"); images too.
	inlineLink = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	heading    = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	anchorTag  = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
)

// slug is GitHub's heading anchor: lower case, punctuation other than '-' and '_' removed,
// spaces turned into '-'.
func slug(h string) string {
	h = strings.ToLower(strings.TrimSpace(h))
	// Inline code and links keep only their text.
	h = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(h, "$1")
	var b strings.Builder
	for _, r := range h {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_':
			b.WriteRune(r)
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors lists the anchors a Markdown file defines (headings, with GitHub's -1, -2 suffixes
// for repeats, and explicit <a name|id>), skipping fenced code.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	out := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range anchorTag.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
		if m := heading.FindStringSubmatch(line); m != nil {
			s := slug(m[2])
			if n := seen[s]; n > 0 {
				out[s+"-"+strconv.Itoa(n)] = true
			} else {
				out[s] = true
			}
			seen[s]++
		}
	}
	return out
}

// links lists the link targets of a Markdown file outside fenced code, with line numbers.
func links(t *testing.T, path string) map[string]int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	fenced := false
	for i, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		// Inline code spans are not links.
		line = regexp.MustCompile("`[^`]*`").ReplaceAllString(line, "")
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			if _, ok := out[m[1]]; !ok {
				out[m[1]] = i + 1
			}
		}
	}
	return out
}

func TestRelativeLinksAndAnchorsResolve(t *testing.T) {
	cache := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := cache[path]; ok {
			return a
		}
		cache[path] = anchors(t, path)
		return cache[path]
	}
	checked := 0
	for _, page := range pages(t) {
		for target, line := range links(t, page) {
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue // external: not checked offline
			}
			checked++
			file, frag, _ := strings.Cut(target, "#")
			dest := page
			if file != "" {
				dest = filepath.Join(filepath.Dir(page), file)
				info, err := os.Stat(dest)
				if err != nil {
					t.Errorf("%s:%d: link %q: %s does not exist", page, line, target, dest)
					continue
				}
				if info.IsDir() || !strings.HasSuffix(dest, ".md") {
					if frag != "" && !info.IsDir() {
						continue // an anchor into a non-Markdown file (a line of code) is not checked
					}
					continue
				}
			}
			if frag != "" && !anchorsOf(dest)[frag] {
				t.Errorf("%s:%d: link %q: no heading or anchor #%s in %s", page, line, target, frag, dest)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative link found: the extraction is broken")
	}
}

func TestSlugFollowsGitHub(t *testing.T) {
	for h, want := range map[string]string{
		"Wire it into your cluster":        "wire-it-into-your-cluster",
		"`octogate doctor`: why am I 401?": "octogate-doctor-why-am-i-401",
		"Usernames and renamed accounts":   "usernames-and-renamed-accounts",
		"Log in with kubectl (GitHub App)": "log-in-with-kubectl-github-app",
		"TTLs, end to end":                 "ttls-end-to-end",
	} {
		if got := slug(h); got != want {
			t.Errorf("slug(%q) = %q, want %q", h, got, want)
		}
	}
}
