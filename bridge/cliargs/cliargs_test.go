package cliargs

import (
	"slices"
	"testing"

	ucli "github.com/urfave/cli/v2"
)

func TestFlagsFirst(t *testing.T) {
	app := &ucli.App{
		Flags: []ucli.Flag{&ucli.StringFlag{Name: "cluster"}},
		Commands: []*ucli.Command{
			{Name: "set", Flags: []ucli.Flag{&ucli.StringFlag{Name: "gpus"}, &ucli.Float64Flag{Name: "weight"}}},
			{Name: "sync", Flags: []ucli.Flag{&ucli.BoolFlag{Name: "dry-run"}}},
			{Name: "lend-limit"},
			{Name: "explain"},
			{Name: "profile", Subcommands: []*ucli.Command{
				{Name: "learn", Flags: []ucli.Flag{&ucli.DurationFlag{Name: "since"}, &ucli.BoolFlag{Name: "write"}}},
			}},
		},
	}
	cases := []struct{ in, want []string }{
		{
			[]string{"quotactl", "set", "proj-a", "--gpus", "a100=4", "--weight", "2"},
			[]string{"quotactl", "set", "--gpus", "a100=4", "--weight", "2", "proj-a"},
		},
		{ // already in urfave's order: unchanged
			[]string{"quotactl", "set", "--gpus=a100=4", "proj-a"},
			[]string{"quotactl", "set", "--gpus=a100=4", "proj-a"},
		},
		{ // global flags before the command stay where they are
			[]string{"quotactl", "--cluster", "testbed", "explain", "42"},
			[]string{"quotactl", "--cluster", "testbed", "explain", "42"},
		},
		{ // a bool flag takes no value
			[]string{"quotactl", "sync", "extra", "--dry-run"},
			[]string{"quotactl", "sync", "--dry-run", "extra"},
		},
		{ // a negative number is an argument
			[]string{"quotactl", "lend-limit", "a100", "-1"},
			[]string{"quotactl", "lend-limit", "a100", "-1"},
		},
		{ // subcommands: the flags are the subcommand's
			[]string{"poolctl", "profile", "learn", "extra", "--since", "720h", "--write"},
			[]string{"poolctl", "profile", "learn", "--since", "720h", "--write", "extra"},
		},
		{ // after "--" nothing moves
			[]string{"quotactl", "set", "proj-a", "--", "--gpus"},
			[]string{"quotactl", "set", "proj-a", "--", "--gpus"},
		},
	}
	for _, tc := range cases {
		if got := FlagsFirst(app, tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("FlagsFirst(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
