package transition

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/slurmbridge/slurmbridge/bridge/cliargs"
)

// Launcher is how a traced job's processes start, and so how its world changes size.
type Launcher int

const (
	// InPlace is the example as shipped: elastic_launch.py starts the processes, which stay
	// running through a grow or shrink (slurmbridge_elastic.torch).
	InPlace Launcher = iota
	// KeepAlive restarts every process at each change: torchrun's agent, through
	// torchrun_keepalive.py, which applies the rendezvous keep-alive settings on every torch
	// release (ELASTIC_TRANSITION=restart in the script).
	KeepAlive
	// PlainTorchrun is the torchrun command with KeepAlive's arguments: on torch releases that
	// ignore keep_alive_* in --rdzv_conf, a departed worker holds the next round ~15 s.
	PlainTorchrun
)

func (l Launcher) String() string {
	switch l {
	case KeepAlive:
		return "restart"
	case PlainTorchrun:
		return "restart-plain"
	}
	return "in-place"
}

// ParseLauncher reads a Launcher's String.
func ParseLauncher(s string) (Launcher, error) {
	for _, l := range []Launcher{InPlace, KeepAlive, PlainTorchrun} {
		if s == l.String() {
			return l, nil
		}
	}
	return 0, fmt.Errorf("%q is none of in-place, restart, restart-plain", s)
}

// Script renders examples/torchrun.sbatch (in examplesDir) as a traced job for one-process
// workers: the declaration elastic (MIN:MAX:GPUS) over pool, train.py running until cancelled
// with its traces and checkpoint in traceDir and trainArgs after them (--width 3200 for the
// 10 M-parameter model).
func Script(examplesDir, traceDir, elastic, pool string, l Launcher, trainArgs ...string) (string, error) {
	sbatch, err := os.ReadFile(filepath.Join(examplesDir, "torchrun.sbatch"))
	if err != nil {
		return "", err
	}
	return Render(string(sbatch), examplesDir, traceDir, elastic, pool, l, trainArgs...)
}

// Render is Script for a torchrun.sbatch read elsewhere (from an installed package on another
// host), with examplesDir where its helpers are on the hosts that run the job.
func Render(sbatch, examplesDir, traceDir, elastic, pool string, l Launcher, trainArgs ...string) (string, error) {
	var b strings.Builder
	b.WriteString("#!/bin/bash\n#SBATCH --elastic=" + elastic + "\n#SBATCH --elastic-pools=" + pool + "\n")
	mode := "in-place"
	if l != InPlace {
		mode = "restart"
	}
	extra := ""
	for _, a := range trainArgs {
		extra += " " + cliargs.ShellQuote(a)
	}
	for _, line := range strings.Split(sbatch, "\n") {
		if strings.HasPrefix(line, "#") {
			continue // the example's own #SBATCH lines and comments
		}
		line = strings.ReplaceAll(line, "$SLURM_SUBMIT_DIR/elasticd/examples", examplesDir)
		if strings.HasPrefix(line, "ELASTIC_TRANSITION=") {
			line = "ELASTIC_TRANSITION=" + mode // the script's own choice, as its user sets it
		}
		if l == PlainTorchrun {
			line = strings.Replace(line, `exec python3 "`+examplesDir+`/torchrun_keepalive.py"`, "exec torchrun", 1)
		}
		line = strings.Replace(line, `train.py"`, `train.py" --total-samples 1000000000 --report-interval 0.5 --trace-dir `+
			traceDir+" --checkpoint "+filepath.Join(traceDir, "ckpt")+extra, 1)
		b.WriteString(line + "\n")
	}
	s := b.String()
	launcher := map[Launcher]string{InPlace: "elastic_launch.py", KeepAlive: "torchrun_keepalive.py", PlainTorchrun: "exec torchrun"}[l]
	if strings.Count(s, "--trace-dir") != 2 || !strings.Contains(s, launcher) || !strings.Contains(s, "\nELASTIC_TRANSITION="+mode+"\n") {
		return "", fmt.Errorf("%s/torchrun.sbatch no longer starts its launchers and train.py the way this expects", examplesDir)
	}
	return s, nil
}
