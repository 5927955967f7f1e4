package daemon

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/slurmbridge/slurmbridge/elasticd/policy"
	"github.com/slurmbridge/slurmbridge/elasticd/reconcile"
)

// savedJob is what elasticd keeps of a job in its state directory, so that a restart of
// elasticd forgets nothing that matters: the sizes measured (and so the cooldowns of the sizes
// left), the workers submitted, being stopped, replacing a straggler or waiting for one to
// leave, and a pinned size.
type savedJob struct {
	Version int    `json:"version"`
	JobID   uint32 `json:"job_id"`
	// MainStart is when the main job's current run started: another start time means it
	// was requeued and restarted meanwhile.
	MainStart time.Time `json:"main_start"`
	// Recorded is the declaration's time of recording, to tell its restarts' declarations
	// apart.
	Recorded  int64                `json:"declaration_recorded"`
	History   []policy.Measurement `json:"history"`
	Submitted map[uint32]time.Time `json:"submitted,omitempty"`
	Stopping  map[uint32]time.Time `json:"stopping,omitempty"`
	Replacing map[uint32]uint32    `json:"replacing,omitempty"`
	// Leaving are stragglers sent TERM whose successors join once they are gone.
	Leaving  map[uint32]reconcile.Leave `json:"leaving,omitempty"`
	Pin      int                        `json:"pin,omitempty"`
	PinnedBy string                     `json:"pinned_by,omitempty"`
}

const savedVersion = 1

// stateOwner is the uid a state file must belong to: elasticd's own.
func stateOwner() uint32 { return uint32(os.Geteuid()) }

// restore loads what an earlier elasticd saved of j. A file that is not elasticd's, does not
// parse or describes another job is set aside (elasticd.json.corrupt) with an error in the log
// that names it, and the job is followed from scratch: its workers are still found by name, and
// the policy measures again.
func (d *Daemon) restore(j *job, log zerolog.Logger) {
	data, err := d.cfg.Dir.ReadState(j.id, stateOwner())
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	var s savedJob
	if err == nil {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		err = dec.Decode(&s)
	}
	if err == nil && (s.Version != savedVersion || s.JobID != j.id) {
		err = fmt.Errorf("version %d of job %d, want version %d of job %d", s.Version, s.JobID, savedVersion, j.id)
	}
	if err == nil && s.Pin != 0 {
		if max, _ := j.decl.EffectiveMax(); s.Pin < j.decl.MinWorkers || s.Pin > max {
			err = fmt.Errorf("pinned size %d is outside %d to %d workers", s.Pin, j.decl.MinWorkers, max)
		}
	}
	if err != nil {
		to, mvErr := d.cfg.Dir.SetStateAside(j.id)
		log.Error().Err(err).Str("file", d.cfg.Dir.StateFile(j.id)).Str("set_aside_as", to).AnErr("set_aside_error", mvErr).
			Msg("saved state unusable; following the job from scratch (its workers are found by name, its sizes measured again)")
		d.metrics.cycleErrors.Inc()
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	j.mainStart, j.history, j.pin, j.pinnedBy = s.MainStart, s.History, s.Pin, s.PinnedBy
	maps.Copy(j.submitted, s.Submitted)
	maps.Copy(j.stopping, s.Stopping)
	maps.Copy(j.replacing, s.Replacing)
	maps.Copy(j.leaving, s.Leaving)
	j.saved = data
	log.Info().Int("measurements", len(s.History)).Int("stopping", len(s.Stopping)).Int("pin", s.Pin).
		Msg("state restored from the last run of elasticd")
}

// save writes j's state when it changed since the last write.
func (d *Daemon) save(j *job, log zerolog.Logger) {
	d.saveMu.Lock()
	defer d.saveMu.Unlock()
	d.mu.Lock()
	s := savedJob{Version: savedVersion, JobID: j.id, MainStart: j.mainStart, Recorded: j.decl.Recorded,
		History: j.history, Submitted: j.submitted, Stopping: j.stopping, Replacing: j.replacing, Leaving: j.leaving,
		Pin: j.pin, PinnedBy: j.pinnedBy}
	data, err := json.Marshal(s)
	d.mu.Unlock()
	if err != nil {
		log.Error().Err(err).Msg("cannot encode the job's state")
		return
	}
	if bytes.Equal(data, j.saved) {
		return
	}
	if err := d.cfg.Dir.WriteState(j.id, data); err != nil {
		if _, gone := os.Stat(d.cfg.Dir.JobDir(j.id)); gone == nil {
			log.Error().Err(err).Msg("cannot save the job's state")
		}
		return
	}
	j.saved = data
}
