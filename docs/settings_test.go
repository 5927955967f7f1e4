// Package docs holds no code: its test keeps docs/operations.md's settings reference true to
// the code (every setting there, none that is not, and the defaults the code has).
package docs

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
	elasticapp "github.com/slurmbridge/slurmbridge/elasticd/app"
	quotadcli "github.com/slurmbridge/slurmbridge/quotad/cli"
	"github.com/slurmbridge/slurmbridge/quotad/policy"
)

// documented is one row of the reference: its names and its default cell.
type documented struct {
	names   []string
	deflt   string
	section string
}

var (
	rowName  = regexp.MustCompile("`([^`]+)`")
	literal  = regexp.MustCompile("^`([^`]*)`$")
	sections = map[string]string{"The quota table": "quota", "pools.yaml": "pools", "quotad": "quotad", "elasticd": "elasticd"}
)

// reference reads the tables under "## Settings reference", by section.
func reference(t *testing.T) map[string]map[string]documented {
	t.Helper()
	raw, err := os.ReadFile("operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, body, ok := strings.Cut(string(raw), "\n## Settings reference\n")
	if !ok {
		t.Fatal("operations.md has no section \"## Settings reference\"")
	}
	body, _, _ = strings.Cut(body, "\n## ")
	out := map[string]map[string]documented{}
	section := ""
	for _, line := range strings.Split(body, "\n") {
		if h, ok := strings.CutPrefix(line, "### "); ok {
			section = ""
			for prefix, name := range sections {
				if strings.HasPrefix(h, prefix) {
					section = name
				}
			}
			if section == "" {
				t.Fatalf("operations.md: settings section %q is not one this test knows", h)
			}
			out[section] = map[string]documented{}
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if section == "" || !strings.HasPrefix(line, "| `") || len(cells) < 4 {
			continue
		}
		row := documented{deflt: strings.TrimSpace(cells[1]), section: section}
		for _, m := range rowName.FindAllStringSubmatch(cells[0], -1) {
			row.names = append(row.names, m[1])
		}
		for _, n := range row.names {
			if _, dup := out[section][n]; dup {
				t.Errorf("operations.md: %s is in the %s table twice", n, section)
			}
			out[section][n] = row
		}
	}
	return out
}

// yamlKeys are the keys of a YAML-tagged struct type, as paths under prefix.
func yamlKeys(typ reflect.Type, prefix string) []string {
	var keys []string
	for f := range typ.Fields() {
		tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if tag == "" || tag == "-" {
			continue
		}
		ft := f.Type
		switch {
		case ft.Kind() == reflect.Struct && ft != reflect.TypeFor[time.Duration]():
			keys = append(keys, yamlKeys(ft, prefix+tag+".")...)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			keys = append(keys, yamlKeys(ft.Elem(), prefix+tag+"[].")...)
		default:
			keys = append(keys, prefix+tag)
		}
	}
	return keys
}

// flagDefaults are a command line's visible flags, as the reference names them, with their
// defaults as the help shows them.
func flagDefaults(prefix string, flags []ucli.Flag) map[string]string {
	out := map[string]string{}
	for _, f := range flags {
		if v, ok := f.(ucli.VisibleFlag); ok && !v.IsVisible() {
			continue
		}
		d := ""
		if g, ok := f.(ucli.DocGenerationFlag); ok {
			d = g.GetDefaultText()
		}
		out[prefix+"--"+f.Names()[0]] = d
	}
	return out
}

// hostDefault is how the reference writes a default that is the machine's own name.
const hostDefault = "the host name"

// sameDefault says whether the reference's cell states the code's default: a literal in
// backticks equal to it (durations by value), or words where the code has none.
func sameDefault(cell, code string) bool {
	m := literal.FindStringSubmatch(cell)
	code = strings.Trim(code, `"`) // a list's default text quotes its items
	if code == "" || code == "0" || code == "0s" || code == "false" || code == "[]" {
		// No default in the code: the cell is words ("none", "required", "3 intervals"),
		// or the zero it is.
		return m == nil || m[1] == code || m[1] == "0" && code == "0s"
	}
	if h, _ := os.Hostname(); code == h {
		return cell == hostDefault
	}
	if m == nil {
		return false
	}
	if a, err := time.ParseDuration(m[1]); err == nil {
		b, err := time.ParseDuration(code)
		return err == nil && a == b
	}
	return m[1] == code
}

func TestSettingsReferenceMatchesTheCode(t *testing.T) {
	ref := reference(t)
	check := func(section string, code map[string]string) {
		t.Helper()
		for name, d := range code {
			row, ok := ref[section][name]
			if !ok {
				t.Errorf("operations.md, settings reference (%s): %s is missing", section, name)
				continue
			}
			if d != "" && !sameDefault(row.deflt, d) {
				t.Errorf("operations.md, settings reference: %s's default is %q there, %q in the code", name, row.deflt, d)
			}
		}
		for name := range ref[section] {
			if _, ok := code[name]; !ok {
				t.Errorf("operations.md, settings reference (%s) names %s, which the code does not have", section, name)
			}
		}
	}

	// The quota table: every YAML key of policy.Config, with the defaults its accessors give.
	quota := map[string]string{}
	for _, k := range yamlKeys(reflect.TypeFor[policy.Config](), "") {
		quota[k] = "" // no default checked, unless named below
	}
	var none policy.Settings
	for k, v := range map[string]string{
		"settings.guaranteedQOS":       policy.DefaultGuaranteedQOS,
		"settings.borrowQOS":           policy.DefaultBorrowQOS,
		"settings.elasticQOS":          policy.DefaultElasticQOS,
		"settings.borrowSizeTiers":     strings.ReplaceAll(fmt.Sprint(policy.DefaultBorrowSizeTiers), " ", ", "),
		"settings.reclaimBackoffReset": none.BackoffReset().String(),
		"settings.maxSnapshotAge":      none.SnapshotMaxAge().String(),
		"settings.lendReasons":         fmt.Sprint(none.Reasons()),
		"settings.lendOrder":           policy.LendByHoldings,
		"projects[].weight":            fmt.Sprint(policy.Project{}.ShareWeight()),
	} {
		if _, ok := quota[k]; !ok {
			t.Errorf("the quota table has no setting %s (this test's defaults name it)", k)
		}
		quota[k] = v
	}
	check("quota", quota)

	// pools.yaml: the keys its decoder knows, with the defaults Load gives.
	poolKeys := map[string]string{}
	for _, k := range pools.SettingKeys() {
		poolKeys[k] = ""
	}
	poolKeys["policy"] = string(pools.DefaultFirst)
	poolKeys["borrow_qos"] = pools.DefaultBorrowQOS
	poolKeys["elastic_qos"] = pools.DefaultElasticQOS
	check("pools", poolKeys)

	// quotad's flags, and elasticd's (its daemon and node agent).
	check("quotad", flagDefaults("", quotadcli.QuotadApp().Flags))
	app := elasticapp.New()
	elastic := flagDefaults("", app.Flags)
	for _, c := range app.Commands {
		if slices.Contains([]string{"run", "agent"}, c.Name) {
			maps.Copy(elastic, flagDefaults(c.Name+" ", c.Flags))
		}
	}
	check("elasticd", elastic)
}

func TestSameDefault(t *testing.T) {
	for _, c := range []struct {
		cell, code string
		want       bool
	}{
		{"`5s`", "5s", true},
		{"`30m0s`", "30m", true},
		{"`10s`", "5s", false},
		{"none", "", true},
		{"`json`", "json", true},
		{"`json`", "console", false},
		{"words", "40", false},
		{"`0`", "0s", true},
	} {
		if got := sameDefault(c.cell, c.code); got != c.want {
			t.Errorf("sameDefault(%q, %q) = %v, want %v", c.cell, c.code, got, c.want)
		}
	}
}

// commandUse is a command line in a doc: `quotactl explain`, `elasticd pin` (in backticks or
// in an indented example).
var commandUse = regexp.MustCompile("(?m)(?:`|^    (?:\\$ )?(?:bin/)?)(quotactl|elasticd) ([a-z][a-z-]*)")

// TestDocsNameRealCommands: every quotactl and elasticd subcommand the README and the docs
// show exists.
func TestDocsNameRealCommands(t *testing.T) {
	commands := map[string][]string{}
	for tool, app := range map[string]*ucli.App{"quotactl": quotadcli.QuotactlApp(), "elasticd": elasticapp.New()} {
		for _, c := range app.Commands {
			commands[tool] = append(commands[tool], c.Names()...)
		}
	}
	files := []string{"../README.md", "../elasticd/README.md"}
	more, _ := filepath.Glob("*.md")
	files = append(files, more...)
	seen := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range commandUse.FindAllStringSubmatch(string(raw), -1) {
			seen++
			if !slices.Contains(commands[m[1]], m[2]) {
				t.Errorf("%s shows `%s %s`, but %s has no command %q (it has %s)", f, m[1], m[2], m[1], m[2], strings.Join(commands[m[1]], ", "))
			}
		}
	}
	if seen < 10 {
		t.Fatalf("found only %d command lines in the docs: the pattern no longer matches how they are written", seen)
	}
}
