package main

import (
	"fmt"
	"io"
	"strings"
)

// table is one result table, printed as markdown.
type table struct {
	title string
	head  []string
	rows  [][]string
	notes []string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) print(w io.Writer) {
	width := make([]int, len(t.head))
	for i, h := range t.head {
		width[i] = len([]rune(h))
	}
	for _, r := range t.rows {
		for i, c := range r {
			if i < len(width) {
				width[i] = max(width[i], len([]rune(c)))
			}
		}
	}
	line := func(cells []string) {
		var b strings.Builder
		b.WriteString("|")
		for i := range width {
			c := ""
			if i < len(cells) {
				c = cells[i]
			}
			b.WriteString(" " + c + strings.Repeat(" ", width[i]-len([]rune(c))) + " |")
		}
		fmt.Fprintln(w, b.String())
	}
	fmt.Fprintf(w, "### %s\n\n", t.title)
	line(t.head)
	sep := make([]string, len(width))
	for i := range sep {
		sep[i] = strings.Repeat("-", width[i])
	}
	line(sep)
	for _, r := range t.rows {
		line(r)
	}
	fmt.Fprintln(w)
	for _, n := range t.notes {
		fmt.Fprintln(w, n)
	}
	if len(t.notes) > 0 {
		fmt.Fprintln(w)
	}
}

// target is one goal of the benchmark issue and what this run measured for it.
type target struct {
	name     string
	goal     string
	measured string
	met      bool
}

func (e *env) check(name, goal, measured string, met bool) {
	e.targets = append(e.targets, target{name, goal, measured, met})
}

func (e *env) printTargets(w io.Writer) {
	if len(e.targets) == 0 {
		return
	}
	t := &table{title: "Targets of the benchmark issue (this run)", head: []string{"target", "goal", "measured", "met"}}
	for _, g := range e.targets {
		met := "yes"
		if !g.met {
			met = "**no**"
		}
		t.add(g.name, g.goal, g.measured, met)
	}
	t.print(w)
}
