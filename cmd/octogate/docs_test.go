package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/octogate/octogate/internal/tour"
)

// docCommand is one octogate invocation shown in the documentation.
type docCommand struct {
	where string   // file:line
	args  []string // after the program name
}

// docFiles are the pages whose commands must match the binary: README.md and docs/*.md.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"../../README.md", "../../charts/octogate/README.md"}
	more, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, more...)
	var present []string
	for _, f := range files {
		if _, err := os.Stat(f); err == nil {
			present = append(present, f)
		}
	}
	return present
}

// shellBlocks are the fence info strings whose content is a shell session or script.
var shellBlocks = map[string]bool{"sh": true, "shell": true, "bash": true, "console": true}

// octogateCommands extracts every octogate invocation from the fenced sh/console blocks of a
// Markdown file: continuation lines joined, `$ ` prompts stripped (console blocks: only prompt
// lines are commands), each command cut at the first shell operator or comment.
func octogateCommands(t *testing.T, path string) []docCommand {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var (
		out              []docCommand
		inBlock, console bool
		pending          string
		pendingLine      int
	)
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			if inBlock {
				inBlock = false
				continue
			}
			info := strings.TrimSpace(strings.TrimPrefix(trimmed, "```"))
			inBlock = true
			console = info == "console"
			if !shellBlocks[info] {
				inBlock = false
				// A fenced block of another language: skip to its end.
				for sc.Scan() {
					n++
					if strings.HasPrefix(strings.TrimSpace(sc.Text()), "```") {
						break
					}
				}
			}
			continue
		}
		if !inBlock {
			continue
		}
		if pending == "" {
			if console {
				if !strings.HasPrefix(trimmed, "$ ") {
					continue
				}
				trimmed = strings.TrimPrefix(trimmed, "$ ")
			}
			pendingLine = n
		}
		if cont, ok := strings.CutSuffix(trimmed, `\`); ok {
			pending += cont + " "
			continue
		}
		pending += trimmed
		for _, args := range invocations(pending) {
			out = append(out, docCommand{where: path + ":" + strconv.Itoa(pendingLine), args: args})
		}
		pending = ""
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// invocations splits a shell line into words and returns the arguments of each octogate
// program it runs (octogate, bin/octogate, /usr/local/bin/octogate, kubectl octogate,
// kubectl-octogate) in command position, up to the next shell operator.
func invocations(line string) [][]string {
	if i := strings.Index(line, " #"); i >= 0 {
		line = line[:i]
	}
	words := strings.Fields(line)
	var out [][]string
	atCommand := true // the next word is a program name
	for i := 0; i < len(words); i++ {
		w := words[i]
		if j := strings.LastIndex(w, "$("); j >= 0 {
			w, atCommand = w[j+2:], true // command substitution
		}
		switch {
		case isOperator(w):
			atCommand = true
			continue
		case !atCommand:
			continue
		case w == "sudo" || w == "exec" || w == "env" || w == "time" || w == "do" || w == "then" || strings.Contains(w, "=") && !strings.HasPrefix(w, "-"):
			continue // a prefix of the command, or a variable assignment
		}
		atCommand = false
		isProgram := w == "octogate" || strings.HasSuffix(w, "/octogate") || w == "kubectl-octogate" ||
			(w == "kubectl" && i+1 < len(words) && words[i+1] == "octogate")
		if !isProgram {
			continue
		}
		if w == "kubectl" {
			i++
		}
		args := []string{}
		for i+1 < len(words) && !isOperator(words[i+1]) {
			a := words[i+1]
			i++
			if a, closed := strings.CutSuffix(a, ")"); closed {
				args = append(args, strings.Trim(a, `"'`))
				break
			}
			args = append(args, strings.Trim(a, `"'`))
		}
		out = append(out, args)
	}
	return out
}

func isOperator(w string) bool {
	switch w {
	case "|", "||", "&&", ";", "&", "(", ")", "{", "}":
		return true
	}
	return strings.HasPrefix(w, ">") || strings.HasPrefix(w, "2>") || strings.HasPrefix(w, "<")
}

// TestDocumentedCommandsMatchTheCLI checks every octogate command in README.md and docs/:
// its subcommand exists and every flag it passes is one that subcommand accepts, so the docs
// cannot drift from the binary.
func TestDocumentedCommandsMatchTheCLI(t *testing.T) {
	files := docFiles(t)
	if len(files) == 0 {
		t.Fatal("no README.md or docs/*.md found")
	}
	total := 0
	for _, file := range files {
		total += checkCommands(t, file)
	}
	if total == 0 {
		t.Fatal("found no octogate command in the docs: the extraction is broken")
	}
	t.Logf("%d documented octogate commands checked in %d files", total, len(files))
}

// TestDemoTourCommandsMatchTheCLI checks the octogate commands the demo prints (internal/tour)
// as TestDocumentedCommandsMatchTheCLI checks the docs'.
func TestDemoTourCommandsMatchTheCLI(t *testing.T) {
	const bin, dir = "/repo/bin/octogate", "/tmp/octogate-demo-1"
	text := tour.Start("/repo/demo/kubeconfig", "/repo/bin/k8s:/repo/bin") + tour.Standin() + tour.RealGitHub() +
		tour.Hardening(bin, dir) + tour.Certs(bin, dir+"/certs", "https://127.0.0.1:8443")
	// The commands are the indented lines; the others are prose.
	var block []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "  ") {
			block = append(block, l)
		}
	}
	path := filepath.Join(t.TempDir(), "tour.md")
	if err := os.WriteFile(path, []byte("```sh\n"+strings.Join(block, "\n")+"\n```\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if n := checkCommands(t, path); n < 5 {
		t.Fatalf("found %d octogate commands in the demo's tour: the extraction is broken", n)
	}
}

// checkCommands checks the octogate commands of one Markdown file and returns their number.
func checkCommands(t *testing.T, file string) int {
	t.Helper()
	total := 0
	for _, c := range octogateCommands(t, file) {
		total++
		if len(c.args) > 0 && (c.args[0] == "..." || strings.HasPrefix(c.args[0], "<")) {
			continue // "octogate ..." stands for any subcommand
		}
		cmd, rest, err := newRootCmd().Find(c.args)
		if err != nil {
			t.Errorf("%s: octogate %s: %v", c.where, strings.Join(c.args, " "), err)
			continue
		}
		if cmd.HasSubCommands() && !cmd.Runnable() {
			t.Errorf("%s: octogate %s: %q needs a subcommand", c.where, strings.Join(c.args, " "), cmd.CommandPath())
			continue
		}
		for _, a := range rest {
			if err := checkFlag(cmd, a); err != nil {
				t.Errorf("%s: octogate %s: %v", c.where, strings.Join(c.args, " "), err)
			}
		}
	}
	return total
}

// checkFlag reports an argument that looks like a flag the command does not define.
func checkFlag(cmd *cobra.Command, arg string) error {
	var fl *pflag.Flag
	switch {
	case arg == "--" || arg == "-" || !strings.HasPrefix(arg, "-"):
		return nil
	case strings.HasPrefix(arg, "--"):
		name, _, _ := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
		fl = cmd.Flags().Lookup(name)
		if fl == nil {
			fl = cmd.InheritedFlags().Lookup(name)
		}
		if fl == nil && name == "help" {
			return nil
		}
	default:
		short := strings.TrimPrefix(arg, "-")[:1]
		fl = cmd.Flags().ShorthandLookup(short)
		if fl == nil {
			fl = cmd.InheritedFlags().ShorthandLookup(short)
		}
		if fl == nil && short == "h" {
			return nil
		}
	}
	if fl == nil {
		return &unknownFlagError{cmd: cmd.CommandPath(), flag: arg}
	}
	return nil
}

type unknownFlagError struct{ cmd, flag string }

func (e *unknownFlagError) Error() string {
	return e.cmd + " has no flag " + e.flag + " (see " + e.cmd + " --help)"
}

func TestInvocationsExtraction(t *testing.T) {
	for _, tc := range []struct {
		line string
		want [][]string
	}{
		{"octogate policy check --file p.yaml --verb get | tee out", [][]string{{"policy", "check", "--file", "p.yaml", "--verb", "get"}}},
		{"bin/octogate certs init --dir certs && kubectl get ns", [][]string{{"certs", "init", "--dir", "certs"}}},
		{"kubectl octogate namespaces # mine", [][]string{{"namespaces"}}},
		{"kubectl get pods", nil},
		{"helm install octogate ./charts/octogate --set x=y", nil},
		{"git clone <this repository> octogate && cd octogate", nil},
		{"sudo OCTOGATE_GITHUB_ORGS=acme /usr/local/bin/octogate serve --listen :8443", [][]string{{"serve", "--listen", ":8443"}}},
		{`export X=$(octogate version)`, [][]string{{"version"}}},
	} {
		got := invocations(tc.line)
		if len(got) != len(tc.want) {
			t.Errorf("%q: %q, want %q", tc.line, got, tc.want)
			continue
		}
		for i := range got {
			if strings.Join(got[i], " ") != strings.Join(tc.want[i], " ") {
				t.Errorf("%q: %q, want %q", tc.line, got[i], tc.want[i])
			}
		}
	}
	cmd, _, _ := newRootCmd().Find([]string{"policy", "check"})
	if checkFlag(cmd, "--no-such-flag") == nil {
		t.Error("an unknown flag passed the check")
	}
	if err := checkFlag(cmd, "--file=x"); err != nil {
		t.Error(err)
	}
}

// TestEveryVariableIsDocumented checks that docs/configuration.md has a row for every
// OCTOGATE_* variable `octogate serve` reads.
func TestEveryVariableIsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range configFields() {
		if name := envName(f); !strings.Contains(string(doc), "| `"+name+"`") && !strings.Contains(string(doc), "`"+name+"`, `") && !strings.Contains(string(doc), ", `"+name+"` |") {
			t.Errorf("docs/configuration.md has no row for %s (%s)", name, f.Tag.Get("help"))
		}
	}
}
