package transition

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Launcher is what starts the torchrun agent in a traced job.
type Launcher int

const (
	// KeepAlive is the example as shipped: torchrun_keepalive.py, which applies the
	// rendezvous keep-alive settings on every torch release.
	KeepAlive Launcher = iota
	// PlainTorchrun is the torchrun command with the same arguments: on torch releases that
	// ignore keep_alive_* in --rdzv_conf, a departed worker holds the next round ~15 s.
	PlainTorchrun
)

func (l Launcher) String() string {
	if l == PlainTorchrun {
		return "torchrun"
	}
	return "torchrun_keepalive.py"
}

// Script renders examples/torchrun.sbatch (in examplesDir) as a traced job for one-process
// workers: the declaration elastic (MIN:MAX:GPUS) over pool, train.py running until cancelled
// with its traces and checkpoint in traceDir.
func Script(examplesDir, traceDir, elastic, pool string, l Launcher) (string, error) {
	sbatch, err := os.ReadFile(filepath.Join(examplesDir, "torchrun.sbatch"))
	if err != nil {
		return "", err
	}
	return Render(string(sbatch), examplesDir, traceDir, elastic, pool, l)
}

// Render is Script for a torchrun.sbatch read elsewhere (from an installed package on another
// host), with examplesDir where its helpers are on the hosts that run the job.
func Render(sbatch, examplesDir, traceDir, elastic, pool string, l Launcher) (string, error) {
	var b strings.Builder
	b.WriteString("#!/bin/bash\n#SBATCH --elastic=" + elastic + "\n#SBATCH --elastic-pools=" + pool + "\n")
	for _, line := range strings.Split(sbatch, "\n") {
		if strings.HasPrefix(line, "#") {
			continue // the example's own #SBATCH lines and comments
		}
		line = strings.ReplaceAll(line, "$SLURM_SUBMIT_DIR/elasticd/examples", examplesDir)
		if l == PlainTorchrun {
			line = strings.Replace(line, `exec python3 "`+examplesDir+`/torchrun_keepalive.py"`, "exec torchrun", 1)
		}
		line = strings.Replace(line, `train.py"`, `train.py" --total-samples 1000000000 --report-interval 0.5 --trace-dir `+
			traceDir+" --checkpoint "+filepath.Join(traceDir, "ckpt"), 1)
		b.WriteString(line + "\n")
	}
	s := b.String()
	if !strings.Contains(s, "--trace-dir") || (l == PlainTorchrun) == strings.Contains(s, "torchrun_keepalive.py") {
		return "", fmt.Errorf("%s/torchrun.sbatch no longer starts its launcher and train.py the way this expects", examplesDir)
	}
	return s, nil
}
