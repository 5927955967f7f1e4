package facts

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/cliargs"
	"github.com/slurmbridge/slurmbridge/bridge/pools"
)

// WriteShell writes the facts the testbeds' shell scripts need as bash assignments, for eval:
// CLUSTER, NODES, GPU_NODES (and GPU_NODE_GPUS, each one's GPU count), POOLS, GPU_POOLS (sorted), PROJECTS (account:user), GPUS_PER_NODE,
// the local and container ports as FACT_LOCAL_*_PORT and FACT_CONTAINER_*_PORT, the containers'
// database host and their users' first uid, and the quotas' PreemptExemptTime in seconds as
// FACT_QUOTA_PREEMPT_EXEMPT_SECONDS, and each project's QOS by account, named by bridge/pools'
// rule (pools.QOSName) so that no script spells one: QOS_GUARANTEED[proj-a]=guar-proj-a,
// QOS_BORROW[proj-a]=borrow-proj-a (associative arrays, global where a function evals them).
func (f *Facts) WriteShell(w io.Writer) error {
	var projects, poolNames, guaranteed, borrow []string
	for _, p := range f.Projects {
		projects = append(projects, p.Account+":"+p.User)
		guaranteed = append(guaranteed, "["+cliargs.ShellQuote(p.Account)+"]="+cliargs.ShellQuote(pools.QOSName(f.Quotas.GuaranteedQOS(), p.Account)))
		borrow = append(borrow, "["+cliargs.ShellQuote(p.Account)+"]="+cliargs.ShellQuote(pools.QOSName(f.Quotas.BorrowQOS(), p.Account)))
	}
	for _, p := range f.Pools {
		poolNames = append(poolNames, p.Name)
	}
	exempt, err := time.ParseDuration(f.Quotas.PreemptExemptTime)
	if err != nil {
		return fmt.Errorf("quotas.preemptExemptTime: %w", err)
	}
	l, c := f.Local.Ports, f.Container.Ports
	lines := []string{
		"CLUSTER=" + cliargs.ShellQuote(f.Cluster),
		"NODES=(" + shellWords(f.NodeNames()) + ")",
		"GPU_NODES=(" + shellWords(f.GPUNodeNames()) + ")",
		"GPU_NODE_GPUS=(" + shellWords(itoa(f.GPUNodeCounts())) + ")",
		"POOLS=(" + shellWords(poolNames) + ")",
		"GPU_POOLS=(" + shellWords(f.GPUPools()) + ")",
		"PROJECTS=(" + shellWords(projects) + ")",
		fmt.Sprintf("GPUS_PER_NODE=%d", f.GPUsPerNode),
		fmt.Sprintf("FACT_LOCAL_DB_PORT=%d FACT_LOCAL_CTLD_PORT=%d FACT_LOCAL_DBD_PORT=%d FACT_LOCAL_SLURMD_PORT_BASE=%d FACT_LOCAL_RDZV_PORT_BASE=%d",
			l.DB, l.Ctld, l.Dbd, l.SlurmdBase, l.RdzvBase),
		fmt.Sprintf("FACT_LOCAL_QUOTAD_PORT=%d FACT_LOCAL_ELASTICD_PORT=%d", l.Quotad, l.Elasticd),
		fmt.Sprintf("FACT_CONTAINER_DB_PORT=%d FACT_CONTAINER_CTLD_PORT=%d FACT_CONTAINER_DBD_PORT=%d FACT_CONTAINER_SLURMD_PORT=%d",
			c.DB, c.Ctld, c.Dbd, c.Slurmd),
		fmt.Sprintf("FACT_CONTAINER_QUOTAD_PORT=%d FACT_CONTAINER_ELASTICD_PORT=%d", c.Quotad, c.Elasticd),
		"FACT_CONTAINER_DB_HOST=" + cliargs.ShellQuote(f.Container.Hosts.DB),
		fmt.Sprintf("FACT_CONTAINER_FIRST_UID=%d", f.Container.FirstUID),
		"SITE_CONTROLLERS=(" + shellWords(f.Site.Controllers) + ")",
		"SITE_DB=" + cliargs.ShellQuote(f.Site.DB) + " SITE_LOGIN=" + cliargs.ShellQuote(f.Site.Login),
		fmt.Sprintf("FACT_QUOTA_PREEMPT_EXEMPT_SECONDS=%d", int64(exempt/time.Second)),
		"declare -gA QOS_GUARANTEED=(" + strings.Join(guaranteed, " ") + ") QOS_BORROW=(" + strings.Join(borrow, " ") + ")",
	}
	_, err = io.WriteString(w, strings.Join(lines, "\n")+"\n")
	return err
}

func itoa(ns []int) []string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return s
}

func shellWords(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = cliargs.ShellQuote(w)
	}
	return strings.Join(q, " ")
}
