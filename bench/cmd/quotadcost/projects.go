package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/quotad/policy"
)

// extraPrefix names the accounts this tool adds to reach -projects: qcb001, qcb002, ...
const extraPrefix = "qcb"

// widen gives the quota table o.projects projects: the testbed's own and extraPrefix ones for
// the rest, each guaranteed none of the GPU project's type (every GPU job of theirs would
// borrow) and with an account under root in slurmdbd, so quotad manages a QOS set per project
// as at a site of that size. restore puts the testbed's table back and removes the accounts
// and the QOS quotad made for them.
func (b *bench) widen(ctx context.Context) (restore func(), err error) {
	restore = func() {}
	exported, err := command(b.env, b.o.quotactl, "export").Output()
	if err != nil {
		return restore, fmt.Errorf("quotactl export: %w", err)
	}
	cfg, err := policy.ParseConfig(exported)
	if err != nil {
		return restore, fmt.Errorf("reading the exported quota table: %w", err)
	}
	if len(cfg.Projects) >= b.o.projects {
		fmt.Printf("projects: the table has %d, at least -projects %d: left as it is\n", len(cfg.Projects), b.o.projects)
		return restore, nil
	}
	dir, err := os.MkdirTemp("", "quotadcost-")
	if err != nil {
		return restore, err
	}
	original := filepath.Join(dir, "quotas-original.yaml")
	if err := os.WriteFile(original, exported, 0o644); err != nil {
		return restore, err
	}
	var extra []string
	for i := len(cfg.Projects); i < b.o.projects; i++ {
		acct := fmt.Sprintf("%s%03d", extraPrefix, i+1)
		extra = append(extra, acct)
		cfg.Projects = append(cfg.Projects, policy.Project{Account: acct, GPUs: map[string]int{b.sh.gpuProject.GPUType: 0}})
	}
	cluster := b.c.Vars["SLURMBRIDGE_CLUSTER"]
	restore = func() {
		ctx := context.Background()
		if out, err := command(b.env, b.o.quotactl, "import", original).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "quotadcost: putting the quota table back (%s): %v: %s\n", original, err, tail(out))
			return
		}
		if _, err := b.c.Run(ctx, "sacctmgr", "-i", "delete", "account", "where", "name="+strings.Join(extra, ","), "cluster="+cluster); err != nil {
			fmt.Fprintf(os.Stderr, "quotadcost: removing accounts %s...: %v\n", extra[0], err)
		}
		qos, err := b.admin.QOS(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, "quotadcost: listing the QOS to remove:", err)
			return
		}
		var names []string
		for _, q := range qos {
			if slices.ContainsFunc(extra, func(acct string) bool { return strings.Contains(q.Name, acct) }) {
				names = append(names, q.Name)
			}
		}
		for batch := range slurm.QOSRuns(names, func(n string) string { return n }) {
			if _, err := b.c.Run(ctx, "sacctmgr", "-i", "delete", "qos", "where", "name="+strings.Join(batch, ",")); err != nil {
				fmt.Fprintf(os.Stderr, "quotadcost: removing QOS %s...: %v\n", batch[0], err)
			}
		}
		os.RemoveAll(dir)
	}
	if out, err := b.c.Run(ctx, "sacctmgr", "-i", "add", "account", strings.Join(extra, ","), "cluster="+cluster, "parent=root"); err != nil {
		return restore, fmt.Errorf("adding accounts %s to %s: %w (%s)", strings.Join(extra[:min(3, len(extra))], ","), extra[len(extra)-1], err, tail(out))
	}
	widened := filepath.Join(dir, "quotas.yaml")
	data, err := cfg.Marshal()
	if err != nil {
		return restore, err
	}
	if err := os.WriteFile(widened, data, 0o644); err != nil {
		return restore, err
	}
	if out, err := command(b.env, b.o.quotactl, "import", widened).CombinedOutput(); err != nil {
		return restore, fmt.Errorf("quotactl import of %d projects: %w: %s", b.o.projects, err, tail(out))
	}
	fmt.Printf("projects: %d (%d of the testbed's, %d added: %s%03d to %s)\n", b.o.projects, b.o.projects-len(extra), len(extra), extraPrefix, len(cfg.Projects)-len(extra)+1, extra[len(extra)-1])
	return restore, nil
}
