package main

import (
	"fmt"
	"html"
	"strings"
	"time"
)

// chart returns an SVG with one horizontal bar per algorithm, split into
// each provider's share of the calls (slow providers in red), and the p50
// and p99 latencies beside it.
func chart(c config, reports []report) string {
	provs := c.provs()
	const (
		left, barW, barH, gap, top = 150, 500, 26, 14, 60
		right                      = 230
	)
	height := top + len(reports)*(barH+gap) + 60
	width := left + barW + right
	fast := []string{"#4e79a7", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#9c755f", "#bab0ac", "#86bcb6"}
	slow := []string{"#e15759", "#ff9d9a", "#d37295", "#f28e2b"}
	colour := func(i int) string {
		if provs[i].delay == c.delay && i >= len(provs)-c.slow {
			return slow[(i-(len(provs)-c.slow))%len(slow)]
		}
		return fast[i%len(fast)]
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="13">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="16" font-weight="bold">Share of calls per provider, %d calls per algorithm, %d at a time</text>`+"\n", 10, c.calls, c.concurrency)
	fmt.Fprintf(&b, `<text x="%d" y="44" fill="#555">%s</text>`+"\n", 10, html.EscapeString(legendText(provs)))
	fmt.Fprintf(&b, `<text x="%d" y="44" fill="#555">p50 / p99</text>`+"\n", left+barW+12)
	for row, r := range reports {
		y := top + row*(barH+gap)
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", left-10, y+barH/2+5, html.EscapeString(r.algo))
		total := 0
		for _, n := range r.counts {
			total += n
		}
		x := float64(left)
		for i, p := range provs {
			n := r.counts[p.name]
			if total == 0 || n == 0 {
				continue
			}
			w := float64(barW) * float64(n) / float64(total)
			fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>%s: %d calls (%.1f%%)</title></rect>`+"\n",
				x, y, w, barH, colour(i), p.name, n, 100*float64(n)/float64(total))
			if w > 34 {
				fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="white" font-size="11">%s %.0f%%</text>`+"\n",
					x+w/2, y+barH/2+4, p.name, 100*float64(n)/float64(total))
			}
			x += w
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s / %s</text>`+"\n", left+barW+12, y+barH/2+5, dur(r.p50), dur(r.p99))
	}
	ly := top + len(reports)*(barH+gap) + 16
	lx := left
	for i, p := range provs {
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/>`+"\n", lx, ly, colour(i))
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s (%s)</text>`+"\n", lx+16, ly+11, p.name, dur(p.delay))
		lx += 110
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func legendText(provs []providerInfo) string {
	parts := make([]string, len(provs))
	for i, p := range provs {
		parts[i] = p.name + " " + dur(p.delay)
	}
	return "per-call delay: " + strings.Join(parts, ", ")
}

func dur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2fs", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%dµs", d.Microseconds())
	}
}
