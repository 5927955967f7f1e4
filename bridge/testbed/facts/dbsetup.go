package facts

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"text/template"
)

var (
	// The password goes inside SQL quotes: the testbeds make it of hex digits, and nothing
	// else is accepted.
	sqlPassword = regexp.MustCompile(`^[A-Za-z0-9]+$`)
	sqlClient   = regexp.MustCompile(`^[A-Za-z0-9.%-]+$`)
)

// DBSetup renders db-setup.sql.in in templateDir once per MariaDB client host: the databases
// and the user slurm with password, which the testbeds pipe into their MariaDB.
func DBSetup(templateDir, password string, clients []string) ([]byte, error) {
	if !sqlPassword.MatchString(password) {
		return nil, fmt.Errorf("db-setup: the database password must be letters and digits only")
	}
	if len(clients) == 0 {
		return nil, fmt.Errorf("db-setup: no client host")
	}
	path := filepath.Join(templateDir, "db-setup.sql.in")
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	t, err := template.New(filepath.Base(path)).Option("missingkey=error").Parse(string(text))
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	for _, c := range clients {
		if !sqlClient.MatchString(c) {
			return nil, fmt.Errorf("db-setup: not a MariaDB client host: %q", c)
		}
		var one bytes.Buffer
		if err := t.Execute(&one, struct{ Client, Password string }{c, password}); err != nil {
			return nil, err
		}
		// One block per host, each ending in exactly one newline.
		out.Write(bytes.TrimRight(one.Bytes(), "\n"))
		out.WriteByte('\n')
	}
	return out.Bytes(), nil
}
