// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Command leastprivilege proves each pattern's generated RBAC is least privilege: for every
// permission of its ClusterRole (config/rbac/role.yaml, and its features' in features.yaml), it runs the pattern's integration tests —
// the manager impersonating its ServiceAccount — with that one permission removed
// (testenv.WithoutRuleEnv), and reports the first test that fails without it. A permission no test
// needs is either one to drop from the markers or a missing test: the command fails on it, unless
// it is listed in untestable with the reason no bounded test can need it.
//
//	go run ./e2e/cmd/leastprivilege [-out docs/least-privilege.md] [-parallel 2] [-only TEXT] [pattern ...]
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kpatterns/kpatterns/shared/app"
	"github.com/kpatterns/kpatterns/shared/testenv"
)

// untestable are permissions that the pattern needs but that no test of bounded time can show.
var untestable = map[testenv.Rule]string{
	"patch events.k8s.io/events": "client-go's events recorder patches an event only to extend its series, on a 30-minute refresh",
}

// patterns are those with an RBAC file of their own (multi's is the union of its members';
// sharding's holds the rule it adds to mirror's).
var patterns = []string{"mirror", "widget", "conditional", "reloader", "summary", "childset", "finalizers", "lifespan", "deploypolicy", "podpolicy", "sharding"}

type result struct {
	pattern string
	rule    testenv.Rule
	with    testenv.Rule // removed together with rule: needed as a pair, not alone
	failed  string       // the first failing test, "" if every test passed
	hung    bool         // failed stays running until go test's timeout: a wait not bounded
	detail  string       // the first error line of that test
	took    time.Duration
}

func main() {
	out := flag.String("out", "", "write the results page here (default: print only)")
	parallel := flag.Int("parallel", 2, "test runs at once")
	only := flag.String("only", "", "remove only the permissions whose text contains this (\"argoproj.io\"): to prove rules just added")
	flag.Parse()
	list := flag.Args()
	if len(list) == 0 {
		list = patterns
	}
	if err := run(list, *out, *only, *parallel); err != nil {
		fmt.Fprintln(os.Stderr, "leastprivilege:", err)
		os.Exit(1)
	}
}

func run(list []string, out, only string, parallel int) error {
	tmp, err := os.MkdirTemp("", "leastprivilege-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	type job struct {
		pattern, bin string
		rule         testenv.Rule
		all          []testenv.Rule // the pattern's permissions
	}
	var jobs []job
	for _, p := range list {
		rules, err := roleRules(p)
		if err != nil {
			return err
		}
		bin := filepath.Join(tmp, p+".test")
		fmt.Printf("%s: building its integration tests; %d permissions to remove in turn\n", p, len(rules))
		if b, err := exec.Command("go", "test", "-c", "-o", bin, "./"+p).CombinedOutput(); err != nil {
			return fmt.Errorf("building %s's tests: %v\n%s", p, err, b)
		}
		for _, r := range rules {
			if strings.Contains(string(r), only) {
				jobs = append(jobs, job{p, bin, r, rules})
			}
		}
	}
	results := make([]result, len(jobs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, parallel)
	began := time.Now()
	for i, j := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			results[i] = without(j.pattern, j.bin, j.rule)
			// client-go's reflector needs list or watch, not both, to pass a test: with the
			// watch-list feature it streams its initial state through a watch, and with watch
			// forbidden it relists. So each alone can look unneeded; they are needed as a pair.
			if partner := pairOf(j.rule); results[i].failed == "" && slices.Contains(j.all, partner) {
				results[i] = without(j.pattern, j.bin, j.rule+","+partner)
				results[i].rule, results[i].with = j.rule, partner
			}
			r := results[i]
			verdict := "needed by " + r.failed
			if r.with != "" {
				verdict += " (together with " + string(r.with) + ")"
			}
			if r.failed == "" {
				verdict = "NO TEST NEEDS IT"
			}
			if r.hung {
				verdict = "HUNG in " + r.failed
			}
			fmt.Printf("[%d/%d] %s without %q: %s (%s)\n", i+1, len(jobs), r.pattern, r.rule, verdict, r.took.Round(time.Second))
		}()
	}
	wg.Wait()
	var unneeded, hung []string
	for _, r := range results {
		if _, ok := untestable[r.rule]; r.failed == "" && !ok {
			unneeded = append(unneeded, r.pattern+": "+string(r.rule))
		}
		if r.hung {
			hung = append(hung, fmt.Sprintf("%s: %s without %s", r.pattern, r.failed, r.rule))
		}
	}
	page := render(results, time.Since(began), parallel)
	fmt.Print(page)
	if out != "" {
		if err := os.WriteFile(out, []byte(page), 0o644); err != nil {
			return err
		}
		fmt.Println("wrote", out)
	}
	if len(unneeded) > 0 {
		return fmt.Errorf("permissions no test needs (drop them from the markers, or add the test that needs them):\n  %s", strings.Join(unneeded, "\n  "))
	}
	if len(hung) > 0 { // needed, but a test must fail, not hang (bound its wait with testenv.Bounded)
		return fmt.Errorf("tests that hung until the timeout instead of failing:\n  %s", strings.Join(hung, "\n  "))
	}
	return nil
}

// roleRules are the permissions of the pattern's ClusterRole as its integration tests install it:
// with every feature's (testenv enables them all).
func roleRules(pattern string) ([]testenv.Rule, error) {
	r, err := app.ReadRules(os.DirFS(filepath.Join(pattern, "config")))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", pattern, err)
	}
	rules := r.Cluster
	for _, name := range slices.Sorted(maps.Keys(r.Features)) {
		rules = append(rules, r.Features[name]...)
	}
	out := testenv.Rules(rules)
	for _, op := range testenv.Rules(r.Operator) {
		out = append(out, testenv.OperatorRule+op)
	}
	return out, nil
}

// pairOf is the list permission of a watch one and the other way round ("" otherwise).
func pairOf(r testenv.Rule) testenv.Rule {
	rule, operator := strings.CutPrefix(string(r), testenv.OperatorRule)
	prefix := ""
	if operator {
		prefix = testenv.OperatorRule
	}
	verb, rest, _ := strings.Cut(rule, " ")
	switch verb {
	case "list":
		return testenv.Rule(prefix + "watch " + rest)
	case "watch":
		return testenv.Rule(prefix + "list " + rest)
	}
	return ""
}

var (
	failLine = regexp.MustCompile(`(?m)^\s*--- FAIL: (\S+)`)
	// go test's timeout panic names the tests still running: "running tests:\n\t\tTestX (5m0s)".
	hungLine = regexp.MustCompile(`(?m)^panic: test timed out after .*\n\s*running tests:\n\s*(\S+) \(`)
)

// testTimeout bounds one run of a pattern's suite; a whole suite passes in about a minute.
const testTimeout = 5 * time.Minute

// without runs the pattern's test binary (in its package directory, as go test does) with one
// permission removed; -failfast ends it at the first failing test.
func without(pattern, bin string, rule testenv.Rule) result {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout+2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-test.count=1", "-test.failfast", "-test.timeout="+testTimeout.String())
	cmd.Dir = pattern
	cmd.Env = append(os.Environ(), testenv.WithoutRuleEnv+"="+string(rule), testenv.EventuallyEnv+"=10s")
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	began := time.Now()
	err := cmd.Run()
	r := result{pattern: pattern, rule: rule, took: time.Since(began)}
	if err == nil {
		return r
	}
	if m := hungLine.FindStringSubmatch(buf.String()); m != nil {
		r.failed, r.hung, r.detail = m[1], true, "hung until go test's "+testTimeout.String()+" timeout"
		if f, err := os.CreateTemp("", "leastprivilege-hung-"+pattern+"-*.log"); err == nil { // its goroutines, to find the wait
			_, _ = f.Write(buf.Bytes())
			_ = f.Close()
			r.detail += "; its goroutines: " + f.Name()
		}
		return r
	}
	fails := failLine.FindAllStringSubmatch(buf.String(), -1)
	if len(fails) == 0 { // failed outside a test: TestMain, a panic
		r.failed, r.detail = "the suite's start", lastLines(buf.String(), 1)
		return r
	}
	r.failed = fails[len(fails)-1][1] // the innermost subtest is printed first; its parent last
	for _, f := range fails {
		if strings.Contains(f[1], "/") {
			r.failed = f[1]
			break
		}
	}
	r.detail = firstError(buf.String())
	return r
}

// firstError is the first line of a test's failure message (file.go:N: ...).
func firstError(out string) string {
	re := regexp.MustCompile(`(?m)^\s+\S+_test\.go:\d+: (.*)$`)
	if m := re.FindStringSubmatch(out); m != nil {
		return m[1]
	}
	return lastLines(out, 1)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], " ")
}

func render(results []result, took time.Duration, parallel int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `# Least privilege, proven

Written by `+"`go tool task chaos`"+` (%s; %s with %d runs at once): for each permission of each
pattern's generated ClusterRole, the pattern's integration tests ran — its manager impersonating
its ServiceAccount, against a real kube-apiserver with OwnerReferencesPermissionEnforcement on —
with that one permission removed (`+"`"+testenv.WithoutRuleEnv+"`"+`). "needed by" names the
first test that failed without it. list and watch on one resource are removed together when one
alone fails no test: client-go's reflector gets by with either (a watch-list streams the initial
state; a forbidden watch turns into relisting), so only the pair is provably needed. A permission no test needs fails the run, except where the
reason no bounded test can need it is given.

| pattern | permission | needed by | how it failed |
|---|---|---|---|
`, time.Now().UTC().Format("2006-01-02"), took.Round(time.Second), parallel)
	slices.SortStableFunc(results, func(a, b result) int { return strings.Compare(a.pattern, b.pattern) })
	for _, r := range results {
		needed, how := "`"+r.failed+"`", strings.ReplaceAll(trim(r.detail, 140), "|", `\|`)
		if r.with != "" {
			needed += " with `" + string(r.with) + "` removed too"
			how = "alone, client-go's reflector falls back to the other (watch-list streams the initial list; a forbidden watch relists); " + how
		}
		if r.failed == "" {
			needed, how = "**no test**", untestable[r.rule]
			if how == "" {
				how = "**to drop, or a test is missing**"
			}
		}
		fmt.Fprintf(&b, "| %s | `%s` | %s | %s |\n", r.pattern, r.rule, needed, how)
	}
	return b.String()
}

func trim(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
