package doctor

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
)

// PluginInfo is what slurmctld's plugin loader reads from a plugin's data symbols, read here
// from the file without loading it: a .so built for another Slurm must not run in doctor either.
type PluginInfo struct {
	Type    string // plugin_type, e.g. "job_submit/pools"
	Version uint32 // plugin_version: SLURM_VERSION_NUMBER of the headers it was built against
	// VersionOffset is where the 4 bytes of plugin_version lie in the file, in ByteOrder.
	VersionOffset int64
	ByteOrder     binary.ByteOrder
	// LayoutReleases are the releases whose job record job_modify's checks can read
	// (pools_job_layout_releases, job_record_layout.h); HasLayoutTable is false for a plugin
	// that exports no such table (another plugin, or an older slurmbridge's).
	LayoutReleases []slurm.Version
	HasLayoutTable bool
}

// ReadsJobRecordOf reports whether job_modify's checks can read the job record of Slurm v.
func (i PluginInfo) ReadsJobRecordOf(v slurm.Version) bool {
	return slices.Contains(i.LayoutReleases, v)
}

// BuiltFor is the Slurm version the plugin was built for, the only one whose slurmctld loads it.
func (i PluginInfo) BuiltFor() slurm.Version { return slurm.VersionOfNumber(i.Version) }

// ErrNotPlugin is an ELF file without the symbols every Slurm plugin defines.
var ErrNotPlugin = errors.New("not a Slurm plugin")

// PluginInfoOf reads plugin_type and plugin_version from the dynamic symbols of a Slurm
// plugin; path names it in errors (ReadPluginInfo opens the file).
func PluginInfoOf(r io.ReaderAt, path string) (PluginInfo, error) {
	f, err := elf.NewFile(r)
	if err != nil {
		return PluginInfo{}, fmt.Errorf("%s: %w", path, err)
	}
	syms, err := f.DynamicSymbols()
	if err != nil {
		return PluginInfo{}, fmt.Errorf("%s: %w", path, err)
	}
	var info PluginInfo
	var haveType, haveVersion bool
	for _, s := range syms {
		switch s.Name {
		case "plugin_type":
			b, _, err := symbolBytes(f, s)
			if err != nil {
				return PluginInfo{}, fmt.Errorf("%s: plugin_type: %w", path, err)
			}
			info.Type, _, _ = strings.Cut(string(b), "\x00")
			haveType = true
		case "plugin_version":
			b, off, err := symbolBytes(f, s)
			if err != nil {
				return PluginInfo{}, fmt.Errorf("%s: plugin_version: %w", path, err)
			}
			if len(b) != 4 {
				return PluginInfo{}, fmt.Errorf("%s: plugin_version is %d bytes, not a uint32", path, len(b))
			}
			info.Version, info.VersionOffset, info.ByteOrder = f.ByteOrder.Uint32(b), off, f.ByteOrder
			haveVersion = true
		case "pools_job_layout_releases":
			b, _, err := symbolBytes(f, s)
			if err != nil || len(b)%4 != 0 {
				return PluginInfo{}, fmt.Errorf("%s: pools_job_layout_releases: not an array of uint32 (%v)", path, err)
			}
			for k := 0; k < len(b); k += 4 {
				info.LayoutReleases = append(info.LayoutReleases, slurm.VersionOfNumber(f.ByteOrder.Uint32(b[k:])))
			}
			info.HasLayoutTable = true
		}
	}
	if !haveType || !haveVersion {
		return PluginInfo{}, fmt.Errorf("%s: no plugin_type or plugin_version symbol: %w", path, ErrNotPlugin)
	}
	return info, nil
}

// symbolBytes returns a defined data symbol's bytes and their offset in the file.
func symbolBytes(f *elf.File, s elf.Symbol) ([]byte, int64, error) {
	if s.Section == elf.SHN_UNDEF || s.Section >= elf.SHN_LORESERVE || int(s.Section) >= len(f.Sections) {
		return nil, 0, fmt.Errorf("not defined in the file")
	}
	sec := f.Sections[s.Section]
	if sec.Type == elf.SHT_NOBITS || s.Value < sec.Addr || s.Value+s.Size > sec.Addr+sec.Size || s.Size > 4096 {
		return nil, 0, fmt.Errorf("no initialised data in section %s", sec.Name)
	}
	b := make([]byte, s.Size)
	if _, err := sec.ReadAt(b, int64(s.Value-sec.Addr)); err != nil {
		return nil, 0, err
	}
	return b, int64(sec.Offset + s.Value - sec.Addr), nil
}

// RunPath is the RUNPATH (or RPATH) an ELF binary finds its own libraries in.
func RunPath(path string) (string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	for _, tag := range []elf.DynTag{elf.DT_RUNPATH, elf.DT_RPATH} {
		if v, err := f.DynString(tag); err == nil && len(v) > 0 && v[0] != "" {
			return v[0], nil
		}
	}
	return "", fmt.Errorf("%s has no RUNPATH", path)
}
