// Command testbed-render renders the testbed's configuration from its facts
// (slurm-conf/testbed/facts.yaml) for testbed/testbed.sh and docker/slurm-testbed/entrypoint.sh:
//
//	testbed-render files -facts FILE -out DIR [site flags] FILE...   slurm.conf, gres.conf, plugstack.conf, slurmdbd.conf, quotas.yaml
//	testbed-render shell -facts FILE                                 the facts as bash assignments, for eval
//	testbed-render db-setup -facts FILE -db-password-file F CLIENT...  the databases' SQL, once per MariaDB client host
//
// Each file is written by rename, so a daemon never reads half of one; slurmdbd.conf (the
// database password) with mode 0600, the others 0644. db-setup prints its SQL (the password in
// it) for a pipe to MariaDB, never to a file.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/slurmbridge/slurmbridge/bridge/testbed/facts"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "testbed-render: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: testbed-render files|shell|db-setup -facts FILE ...")
	}
	fs := flag.NewFlagSet("testbed-render "+args[0], flag.ContinueOnError)
	factsFile := fs.String("facts", facts.File, "the facts file; the templates NAME.in are beside it")
	switch args[0] {
	case "shell":
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		f, err := facts.Load(*factsFile)
		if err != nil {
			return err
		}
		return f.WriteShell(os.Stdout)
	case "db-setup":
		passwordFile := fs.String("db-password-file", "", "the file holding the database password")
		templates := fs.String("templates", "", "the templates' directory (default: the facts file's)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		pw, err := readPassword(*passwordFile)
		if err != nil {
			return err
		}
		dir := *templates
		if dir == "" {
			dir = filepath.Dir(*factsFile)
		}
		sql, err := facts.DBSetup(dir, pw, fs.Args())
		if err != nil {
			return err
		}
		_, err = os.Stdout.Write(sql)
		return err
	case "files":
		var site facts.Site
		var passwordFile string
		out := fs.String("out", "", "the directory to write the files to")
		fs.BoolVar(&site.Container, "container", false, "the container testbed (else the local one)")
		fs.BoolVar(&site.SiteCluster, "site", false, "the site cluster (site/)")
		templates := fs.String("templates", "", "the templates' directory (default: the facts file's)")
		fs.StringVar(&site.Dir, "dir", "", "TESTBED_DIR")
		fs.StringVar(&site.Host, "host", "", "local: this host's short name")
		fs.StringVar(&site.CommParams, "comm-params", "", "local: slurm.conf's CommunicationParameters")
		fs.StringVar(&site.JobSubmitLine, "job-submit-line", "", "slurm.conf's JobSubmitPlugins line")
		fs.StringVar(&site.PluginDir, "plugin-dir", "", "the testbed's own plugin directory")
		fs.StringVar(&site.SlurmPluginDir, "slurm-plugin-dir", "", "Slurm's plugin directory")
		fs.StringVar(&site.SpankElasticSO, "spank-elastic-so", "", "the elastic SPANK plugin plugstack.conf names")
		fs.IntVar(&site.Ports.DB, "db-port", 0, "local: MariaDB's port (0: the facts')")
		fs.IntVar(&site.Ports.Ctld, "ctld-port", 0, "local: slurmctld's port (0: the facts')")
		fs.IntVar(&site.Ports.Dbd, "dbd-port", 0, "local: slurmdbd's port (0: the facts')")
		fs.IntVar(&site.Ports.SlurmdBase, "slurmd-port-base", 0, "local: the first node's slurmd port (0: the facts')")
		fs.IntVar(&site.Ports.RdzvBase, "rdzv-port-base", 0, "local: the elastic rendezvous ports' base (0: the facts')")
		fs.StringVar(&passwordFile, "db-password-file", "", "slurmdbd.conf: the file holding the database password")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *out == "" || fs.NArg() == 0 {
			return fmt.Errorf("files: -out DIR and at least one file are needed")
		}
		if passwordFile != "" {
			pw, err := readPassword(passwordFile)
			if err != nil {
				return err
			}
			site.DBPassword = pw
		}
		f, err := facts.Load(*factsFile)
		if err != nil {
			return err
		}
		dir := *templates
		if dir == "" {
			dir = filepath.Dir(*factsFile)
		}
		for _, name := range fs.Args() {
			text, err := f.Render(dir, name, site)
			if err != nil {
				return err
			}
			mode := os.FileMode(0o644)
			if name == "slurmdbd.conf" {
				mode = 0o600
			}
			if err := writeByRename(filepath.Join(*out, name), text, mode); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("unknown command %q: files, shell or db-setup", args[0])
}

// readPassword reads a password file as $(cat FILE) would: trailing newlines go.
func readPassword(path string) (string, error) {
	if path == "" {
		return "", fmt.Errorf("no -db-password-file")
	}
	pw, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimRight(string(pw), "\n"), nil
}

func writeByRename(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	// WriteFile keeps the mode of a file left over from an earlier, failed run.
	if err := os.Chmod(tmp, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
