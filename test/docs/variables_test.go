package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// module is the import path of this repository's module.
const module = "github.com/octogate/octogate"

var variableName = regexp.MustCompile(`^OCTOGATE_[A-Z0-9_]+$`)

// commandVariables are the OCTOGATE_* variables the commands read, each with where it was
// found. The rule: every string literal that is exactly such a name (an os.Getenv argument, a
// constant passed to one, an exec env entry) and every `env:"OCTOGATE_..."` struct tag
// (caarlos0/env), in the non-test Go files of this module's packages that the commands
// (./cmd/...) build from, as `go list -deps` lists them. Test files and the packages only tests
// import (test/..., bench) are not commands and are left out.
func commandVariables(t *testing.T) map[string]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}}|{{.Dir}}|{{join .GoFiles ","}}`, "./cmd/...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/...: %v", err)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]string{}
	fset := token.NewFileSet()
	add := func(name string, pos token.Pos) {
		if variableName.MatchString(name) {
			if _, ok := found[name]; !ok {
				p := fset.Position(pos)
				rel, _ := filepath.Rel(abs, p.Filename)
				found[name] = rel + ":" + strconv.Itoa(p.Line)
			}
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		parts := strings.SplitN(line, "|", 3)
		if len(parts) != 3 || parts[0] != module && !strings.HasPrefix(parts[0], module+"/") || parts[2] == "" {
			continue
		}
		for _, name := range strings.Split(parts[2], ",") {
			f, err := parser.ParseFile(fset, filepath.Join(parts[1], name), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.Field:
					if n.Tag != nil {
						if tag, err := strconv.Unquote(n.Tag.Value); err == nil {
							env, _, _ := strings.Cut(reflect.StructTag(tag).Get("env"), ",")
							add(env, n.Tag.Pos())
						}
						return false // the tag is no name of its own
					}
				case *ast.BasicLit:
					if n.Kind == token.STRING {
						if s, err := strconv.Unquote(n.Value); err == nil {
							add(s, n.Pos())
						}
					}
				}
				return true
			})
		}
	}
	return found
}

// TestEveryCommandVariableIsDocumented checks that docs/configuration.md has a table row for
// every OCTOGATE_* variable a command reads (commandVariables): `octogate serve`'s, those of
// `octogate credential`, `doctor` and `kubeconfig`, and the demo's.
func TestEveryCommandVariableIsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(root, "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{}
	for _, line := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(line, "| ") {
			continue
		}
		cell, _, _ := strings.Cut(strings.TrimPrefix(line, "| "), " |")
		for _, m := range regexp.MustCompile("`(OCTOGATE_[A-Z0-9_]+)`").FindAllStringSubmatch(cell, -1) {
			rows[m[1]] = true
		}
	}
	vars := commandVariables(t)
	if len(vars) < 10 {
		t.Fatalf("found %d variables in the commands: the scan is broken", len(vars))
	}
	var missing []string
	for name, where := range vars {
		if !rows[name] {
			missing = append(missing, name+" (read at "+where+")")
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("docs/configuration.md has no row whose first cell names %s", m)
	}
}
