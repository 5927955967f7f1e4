package cliargs

import "testing"

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"--width":      "--width",
		"proj-a:alice": "proj-a:alice",
		"/tmp/a,b:c_d": "/tmp/a,b:c_d",
		"":             "''",
		"a b":          "'a b'",
		"it's":         `'it'\''s'`,
		"$(id)":        "'$(id)'",
		"a=b":          "'a=b'",
	} {
		if got := ShellQuote(in); got != want {
			t.Errorf("ShellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}
