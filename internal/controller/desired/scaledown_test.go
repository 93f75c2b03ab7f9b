package desired_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/example/memcached-operator/internal/controller/desired"
)

// placed builds pods named p0, p1, … from "node/zone" strings, the later
// ones created later.
func placed(where ...string) []desired.Placement {
	var out []desired.Placement
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, w := range where {
		var node, zone string
		fmt.Sscanf(w, "%1s/%s", &node, &zone) //nolint:errcheck // test input is well formed
		out = append(out, desired.Placement{
			Name: fmt.Sprintf("p%d", i), Node: node, Domains: []string{zone}, Created: t0.Add(time.Duration(i) * time.Minute),
		})
	}
	return out
}

func perDomain(pods []desired.Placement, victims []string, key int) map[string]int {
	out := map[string]int{}
	for _, p := range pods {
		if _, ok := out[p.Domains[key]]; !ok {
			out[p.Domains[key]] = 0
		}
		if !slices.Contains(victims, p.Name) {
			out[p.Domains[key]]++
		}
	}
	return out
}

func TestSpreadVictims(t *testing.T) {
	g := NewWithT(t)
	// The testbed's three nodes: 1 and 3 in zone a, 2 alone in zone b. The
	// ReplicaSet alone would take the three pods of node 2 first.
	seven := placed("1/a", "1/a", "3/a", "3/a", "2/b", "2/b", "2/b")
	victims := desired.SpreadVictims(seven, 4)
	g.Expect(victims).To(HaveLen(4))
	g.Expect(perDomain(seven, victims, 0)).To(SatisfyAny(Equal(map[string]int{"a": 2, "b": 1}), Equal(map[string]int{"a": 1, "b": 2})))

	// Equal zones: the crowded node goes, then the newest pod.
	even := placed("1/a", "1/a", "3/a", "2/b", "2/b", "4/b")
	g.Expect(desired.SpreadVictims(even, 1)).To(Equal([]string{"p4"}), "node 2 holds two of zone b's pods; p4 is newer than p3")
	g.Expect(desired.SpreadVictims(even, 2)).To(ConsistOf("p1", "p4"))

	// A pod already marked is kept as the choice among equals: no writes.
	marked := placed("1/a", "2/a", "3/a")
	marked[0].Marked = true
	g.Expect(desired.SpreadVictims(marked, 1)).To(Equal([]string{"p0"}))

	g.Expect(desired.SpreadVictims(seven, 0)).To(BeEmpty())
	g.Expect(desired.SpreadVictims(seven, -1)).To(BeEmpty())
	g.Expect(desired.SpreadVictims(seven, 9)).To(HaveLen(7), "never more than there are")
	g.Expect(desired.SpreadVictims(nil, 2)).To(BeEmpty())
}

// FuzzSpreadVictims: for any placement of pods over nodes and two keys of
// domains, SpreadVictims removes exactly what it is asked (or every pod),
// each once; leaves the first key's most crowded domain as small as any
// choice could; and does not depend on the order the pods were listed in.
func FuzzSpreadVictims(f *testing.F) {
	f.Add([]byte{0x00, 0x10, 0x21, 0x32, 0x43, 0x04, 0x15}, uint8(3))
	f.Add([]byte{0x00, 0x00, 0x00, 0x11}, uint8(1))
	f.Add([]byte{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x01}, uint8(5))
	f.Fuzz(func(t *testing.T, layout []byte, remove uint8) {
		if len(layout) > 64 {
			layout = layout[:64]
		}
		var pods []desired.Placement
		for i, b := range layout {
			pods = append(pods, desired.Placement{
				Name:    fmt.Sprintf("p%02d", i),
				Node:    fmt.Sprint("n", b&0x07),
				Domains: []string{fmt.Sprint("z", (b>>3)&0x03), fmt.Sprint("r", b>>5)},
				Created: time.Unix(int64(b), 0),
				Marked:  b&0x01 == 1,
			})
		}
		k := int(remove % 70)
		victims := desired.SpreadVictims(pods, k)
		if want := min(k, len(pods)); len(victims) != want {
			t.Fatalf("asked for %d of %d pods, got %d", k, len(pods), len(victims))
		}
		seen := map[string]bool{}
		for _, v := range victims {
			if seen[v] || !slices.ContainsFunc(pods, func(p desired.Placement) bool { return p.Name == v }) {
				t.Fatalf("victim %s repeated or unknown: %v", v, victims)
			}
			seen[v] = true
		}
		if len(pods) == 0 {
			return
		}
		// The least most-crowded domain reachable: the lowest level m whose
		// excess over all domains fits in what is removed.
		before := perDomain(pods, nil, 0)
		best := 0
		for m := 0; ; m++ {
			excess := 0
			for _, c := range before {
				excess += max(0, c-m)
			}
			if excess <= k {
				best = m
				break
			}
		}
		most := 0
		for _, c := range perDomain(pods, victims, 0) {
			most = max(most, c)
		}
		if most != best {
			t.Fatalf("first key's fullest domain holds %d after removing %v, %d was reachable (before: %v)", most, victims, best, before)
		}
		reversed := slices.Clone(pods)
		slices.Reverse(reversed)
		if again := desired.SpreadVictims(reversed, k); !slices.Equal(again, victims) {
			t.Fatalf("listing order changed the choice: %v vs %v", again, victims)
		}
	})
}
