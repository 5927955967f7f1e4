package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/slurmbridge/slurmbridge/bridge/quotaapi"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/quotad/view"
)

// Where quotactl list and explain read from: quotad's read-only API, which needs no secret and
// is what ordinary users get, or the databases and slurmctld directly (a plan computed now),
// which needs the database password and is root's default.
const (
	viaAuto     = "auto"
	viaQuotad   = "quotad"
	viaDatabase = "database"
)

func viaFlag() ucli.Flag {
	return &ucli.StringFlag{Name: "via", Value: viaAuto,
		Usage: "where to read: quotad (its read-only API, no secret needed), database (compute the plan now; needs the database password), or auto: database for root when a password file is set, quotad otherwise"}
}

// quotadFlag is the API's address; quotad.env's QUOTAD_LISTEN serves when sourced.
func quotadFlag() ucli.Flag {
	return &ucli.StringFlag{Name: "quotad", Value: view.DefaultAddr, EnvVars: []string{"SLURMBRIDGE_QUOTAD_URL", "QUOTAD_LISTEN"},
		Usage: "quotad's API address, HOST:PORT or http://HOST:PORT, for list and explain without the database"}
}

// ChooseVia resolves --via: auto reads the database only for root with a password file set.
func ChooseVia(flag string, euid int, passwordFile string) (string, error) {
	switch flag {
	case viaQuotad, viaDatabase:
		return flag, nil
	case viaAuto, "":
		if euid == 0 && passwordFile != "" {
			return viaDatabase, nil
		}
		return viaQuotad, nil
	}
	return "", fmt.Errorf("--via %q: want auto, quotad or database", flag)
}

// readCommand runs fromDB with the databases opened read-only, or fromQuotad with an API
// client, as --via says.
func readCommand(fromDB func(c *ucli.Context, e *env) error, fromQuotad func(c *ucli.Context, q *view.Client) error) ucli.ActionFunc {
	return func(c *ucli.Context) error {
		via, err := ChooseVia(c.String("via"), os.Geteuid(), c.String("db-password-file"))
		if err != nil {
			return err
		}
		if via == viaDatabase {
			return withEnv(fromDB, readOnly)(c)
		}
		q, err := newViewClient(c)
		if err != nil {
			return err
		}
		return fromQuotad(c, q)
	}
}

func newViewClient(c *ucli.Context) (*view.Client, error) {
	base, err := quotaapi.BaseURL(c.String("quotad"))
	if err != nil {
		return nil, err
	}
	socket := c.String("munge-socket")
	munge := slurm.NewClient(slurm.ExecRunner{Timeout: 10 * time.Second})
	return &view.Client{BaseURL: base, Credential: func(ctx context.Context, payload string) (string, error) {
		return munge.MungeEncode(ctx, socket, payload)
	}}, nil
}

// warnStatus says on w when the numbers are stale, and passes on the last cycle's notes.
func warnStatus(w io.Writer, st view.Status) {
	if st.LastCycle != nil {
		for _, n := range st.LastCycle.Notes {
			fmt.Fprintln(w, "note:", n)
		}
	}
	if st.Plan != nil && st.Plan.Stale {
		outcome := "none"
		if st.LastCycle != nil {
			outcome = st.LastCycle.Outcome
		}
		fmt.Fprintf(w, "warning: quotad's plan is stale: built from a snapshot of %s (%s old, no fresh one since; last cycle: %s); these numbers are not current\n",
			st.Plan.SnapshotTakenAt.Local().Format(time.RFC3339), (time.Duration(st.Plan.SnapshotAgeSeconds) * time.Second).String(), outcome)
	}
}

// ListRowsFromAPI turns the API's projects into quotactl list's rows.
func ListRowsFromAPI(projects []view.Project) []ListRow {
	var rows []ListRow
	for _, p := range projects {
		for _, g := range p.GPUs {
			rows = append(rows, ListRow{Account: p.Account, GPUType: g.GPUType, Quota: g.Guaranteed, InUse: g.InUse, Borrowed: g.Borrowed, Lent: g.Lent, Pending: g.Pending})
		}
	}
	return rows
}

func listFromQuotad(c *ucli.Context, q *view.Client) error {
	resp, err := q.Projects(c.Context)
	if err != nil {
		return err
	}
	warnStatus(c.App.ErrWriter, resp.Status)
	return WriteList(c.App.Writer, ListRowsFromAPI(resp.Projects), c.Bool("parsable2"), c.Bool("json"))
}

// explainFromQuotad explains a job the caller may read (quotad checks who asks with a MUNGE
// credential), or an account: its position, then those of its jobs the caller may read.
func explainFromQuotad(c *ucli.Context, q *view.Client) error {
	if c.NArg() != 1 {
		return errors.New("usage: quotactl explain JOBID|ACCOUNT")
	}
	arg, asJSON := c.Args().First(), c.Bool("json")
	out, status := c.App.Writer, c.App.Writer
	if asJSON {
		status = c.App.ErrWriter // stdout is the JSON alone
	}
	if _, _, _, err := view.ParseJobName(arg); err == nil {
		resp, err := q.Job(c.Context, arg)
		if err != nil {
			return err
		}
		warnStatus(status, resp.Status)
		if asJSON {
			return writeJSON(out, resp.Job)
		}
		fmt.Fprintln(out, resp.Job.Explanation)
		return nil
	}
	resp, err := q.Project(c.Context, arg)
	if err != nil {
		return err
	}
	warnStatus(status, resp.Status)
	jobs, err := q.Jobs(c.Context)
	if err != nil {
		return fmt.Errorf("the account's jobs: %w", err)
	}
	account := AccountExplanation{Project: &resp.Project, Jobs: []view.Job{}}
	for _, j := range jobs.Jobs {
		if j.Account == arg {
			account.Jobs = append(account.Jobs, j)
		}
	}
	if asJSON {
		return writeJSON(out, account)
	}
	fmt.Fprintln(out, resp.Project.Summary)
	for _, j := range account.Jobs {
		fmt.Fprintln(out, j.Explanation)
	}
	return nil
}
