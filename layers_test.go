package minidubbo_test

import (
	"os/exec"
	"strings"
	"testing"
)

// rank orders the framework packages from the bottom (service) to the top
// (config), as in DESIGN.md. A package may import only packages of lower rank.
var rank = map[string]int{
	"status":    0,
	"service":   0,
	"serialize": 1,
	"transport": 2,
	"exchange":  3,
	"protocol":  4,
	"monitor":   5,
	"cluster":   6,
	"registry":  7,
	"proxy":     8,
	"config":    9,
}

const modulePath = "github.com/minidubbo/minidubbo/"

// layerOf returns the layer of a framework import path, or "" when the path
// is not in a layer package (examples, cmd, internal, the root).
func layerOf(path string) string {
	rest, ok := strings.CutPrefix(path, modulePath)
	if !ok {
		return ""
	}
	top, _, _ := strings.Cut(rest, "/")
	if _, ok := rank[top]; ok {
		return top
	}
	return ""
}

func TestLayerImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	checked := 0
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		from := layerOf(fields[0])
		if from == "" {
			continue
		}
		checked++
		for _, imp := range fields[1:] {
			to := layerOf(imp)
			if to == "" || to == from {
				continue
			}
			if rank[to] > rank[from] {
				t.Errorf("%s imports %s: layer %q (rank %d) may not import layer %q (rank %d)",
					fields[0], imp, from, rank[from], to, rank[to])
			}
		}
	}
	if checked < len(rank) {
		t.Errorf("checked %d layer packages, want at least %d", checked, len(rank))
	}
}

func TestLayerOf(t *testing.T) {
	for path, want := range map[string]string{
		modulePath + "cluster/loadbalance": "cluster",
		modulePath + "config":              "config",
		modulePath + "examples/direct":     "",
		"github.com/go-zookeeper/zk":       "",
	} {
		if got := layerOf(path); got != want {
			t.Errorf("layerOf(%q) = %q, want %q", path, got, want)
		}
	}
}
