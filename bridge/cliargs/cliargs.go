// Package cliargs adapts command lines for urfave/cli v2, shared by slurmbridge's CLIs.
package cliargs

import (
	"slices"
	"strings"

	ucli "github.com/urfave/cli/v2"
)

// FlagsFirst returns args with each subcommand's flags moved before its positional arguments,
// so that `quotactl set proj-a --gpus a100=4` or `poolctl validate pools.yaml --no-cluster` work
// as documented: urfave/cli v2 stops reading
// flags at the first positional argument. A flag's value stays with it; "--" ends the
// reordering.
func FlagsFirst(app *ucli.App, args []string) []string {
	out := slices.Clone(args)
	commands := app.Commands
	for i := 1; i < len(out); i++ {
		cmd := findCommand(commands, out[i])
		if cmd == nil {
			continue
		}
		// A command with subcommands (poolctl profile learn): reorder at the subcommand.
		if len(cmd.Subcommands) > 0 {
			commands = cmd.Subcommands
			continue
		}
		takesValue := map[string]bool{}
		for _, f := range cmd.Flags {
			_, isBool := f.(*ucli.BoolFlag)
			for _, name := range f.Names() {
				takesValue[name] = !isBool
			}
		}
		var flags, positional []string
		rest := out[i+1:]
		for j := 0; j < len(rest); j++ {
			tok := rest[j]
			if tok == "--" {
				positional = append(positional, rest[j:]...)
				break
			}
			if !strings.HasPrefix(tok, "-") || tok == "-" || isNumber(tok) {
				positional = append(positional, tok)
				continue
			}
			flags = append(flags, tok)
			name := strings.TrimLeft(tok, "-")
			if !strings.Contains(name, "=") && takesValue[name] && j+1 < len(rest) {
				j++
				flags = append(flags, rest[j])
			}
		}
		return append(append(out[:i+1:i+1], flags...), positional...)
	}
	return out
}

func findCommand(commands []*ucli.Command, name string) *ucli.Command {
	for _, c := range commands {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}

// isNumber tells a negative number argument (lend-limit a100 -1) from a flag.
func isNumber(s string) bool {
	s = strings.TrimPrefix(s, "-")
	if s == "" {
		return false
	}
	for _, r := range s {
		if (r < '0' || r > '9') && r != '.' {
			return false
		}
	}
	return true
}
