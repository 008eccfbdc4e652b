package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
)

// profiles writes the profiles asked for by flag when stop is called; a
// server writes them when its stdin ends, a client at the end of its run.
type profiles struct {
	cpu, allocs, block, mutex string
	cpuFile                   *os.File
}

func (p *profiles) start() error {
	if p.block != "" {
		runtime.SetBlockProfileRate(1000) // one sample per µs blocked
	}
	if p.mutex != "" {
		runtime.SetMutexProfileFraction(10)
	}
	if p.cpu == "" {
		return nil
	}
	f, err := os.Create(p.cpu)
	if err != nil {
		return err
	}
	p.cpuFile = f
	return pprof.StartCPUProfile(f)
}

func (p *profiles) stop() error {
	if p.cpuFile != nil {
		pprof.StopCPUProfile()
		if err := p.cpuFile.Close(); err != nil {
			return err
		}
	}
	for name, file := range map[string]string{"allocs": p.allocs, "block": p.block, "mutex": p.mutex} {
		if file == "" {
			continue
		}
		f, err := os.Create(file)
		if err != nil {
			return err
		}
		err = pprof.Lookup(name).WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("%s profile: %w", name, err)
		}
	}
	return nil
}
